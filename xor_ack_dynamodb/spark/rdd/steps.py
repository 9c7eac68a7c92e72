"""The per-partition functions of tracked steps (what Spark ships to executors).

Each takes the step's :class:`RunSpec`, name and user function first (bound with
``functools.partial``, so no closure captures a SparkContext or a client), then the
partition index and its records (``(value, tag)``), as ``mapPartitionsWithIndex`` wants.
Every step passes carriers (:class:`~.executor.Carry`) through untouched and ends with
its own. A user function that raises fails the record's root (every root of the job for
a record of several roots); the partition goes on without the record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..outcomes import failure_reason
from .executor import Carry, Ledger, Noted, Record, RunSpec

__all__ = ["map_partition", "key_partition", "combine", "unpack_partition", "sink_partition", "SinkResult"]

#: A reduce value through the shuffle: (value or :class:`Raised`, tag).
Combined = tuple[Any, str | None]
#: What a sink partition returns: (values written, the roots with a written record,
#: whether one stood for several roots, failure reason and note per root; ``None``:
#: every root's).
SinkResult = tuple[int, set[str], bool, dict[str | None, str], dict[str | None, str]]


@dataclass(frozen=True)
class Raised:
    """A reduced value whose ``fn`` raised: its root fails after the shuffle."""

    reason: str


def map_partition(
    spec: RunSpec, step: str, fn: Callable[[Any], Any], index: int, records: Iterable[Record], *, kind: str
) -> Iterator[Record]:
    """Each record's ``fn(value)``, of the same root: the items it returns (``kind``
    ``"fan_out"``; a :class:`Noted` notes the root), itself (``"map"``), or the record
    if true (``"filter"``)."""
    ledger = Ledger(spec, step, index)
    fan, keep = kind == "fan_out", kind == "filter"
    for value, tag in records:
        if type(value) is Carry:
            yield value, tag
            continue
        try:
            result = fn(value)
            if fan:
                if isinstance(result, Noted):
                    ledger.note(tag, result.note)
                    result = result.items
                result = list(result)
        except Exception as exc:
            ledger.fail(tag, exc)
            continue
        if fan:
            for child in result:
                yield child, tag
        elif not keep:
            yield result, tag
        elif result:
            yield value, tag
    yield from ledger.flush()


def key_partition(
    spec: RunSpec, step: str, index: int, records: Iterable[Record]
) -> Iterator[tuple[Any, Combined]]:
    """``((k, v), tag)`` records as shuffle pairs ``(k, (v, tag))``; a value that is not
    a pair fails its root."""
    ledger = Ledger(spec, step, index)
    for value, tag in records:
        if type(value) is Carry:
            # Its own key: it meets no user value in the shuffle.
            yield value, (value, tag)
            continue
        try:
            k, v = value
        except (TypeError, ValueError) as exc:
            ledger.fail(tag, exc)
            continue
        yield k, (v, tag)
    for carry, tag in ledger.flush():
        yield carry, (carry, tag)


def combine(fn: Callable[[Any, Any], Any], a: Combined, b: Combined) -> Combined:
    """``fn`` on two shuffle values, across roots; the result keeps a tag only when both
    sides have it (else ``None``), and is :class:`Raised` if ``fn`` raised."""
    value_a, tag_a = a
    value_b, tag_b = b
    tag = tag_a if tag_a == tag_b else None
    if type(value_a) is Carry:  # never met (one carrier per key); merged if it were
        failed = {**value_b.failed, **value_a.failed}
        notes = {**value_b.notes, **value_a.notes}
        return Carry(value_a.step, value_a.partition, failed, notes), None
    if type(value_a) is Raised:
        return value_a, tag
    if type(value_b) is Raised:
        return value_b, tag
    try:
        return fn(value_a, value_b), tag
    except Exception as exc:
        return Raised(failure_reason(exc)), tag


def unpack_partition(
    spec: RunSpec, step: str, index: int, pairs: Iterable[tuple[Any, Combined]]
) -> Iterator[Record]:
    """Back from the shuffle to ``((k, v), tag)`` records; a :class:`Raised` fails its root."""
    ledger = Ledger(spec, step, index)
    for k, (value, tag) in pairs:
        if type(value) is Carry:
            yield value, tag
        elif type(value) is Raised:
            ledger.fail(tag, value.reason)
        else:
            yield (k, value), tag
    yield from ledger.flush()


def sink_partition(
    spec: RunSpec, step: str, writer: Callable[[int, list[Any]], None], index: int, records: Iterable[Record]
) -> Iterator[SinkResult]:
    """Write the partition's values with ``writer`` (durably, replacing an earlier call's
    for ``index``), then return :data:`SinkResult`; if it raises, the partition's roots
    fail instead."""
    ledger = Ledger(spec, step, index)
    values: list[Any] = []
    tags: set[str] = set()
    cross = False
    for value, tag in records:
        if type(value) is Carry:
            ledger.owe(value.failed, value.notes)
            continue
        values.append(value)
        if tag is None:
            cross = True
        else:
            tags.add(tag)
    try:
        writer(index, values)
    except Exception as exc:
        for tag in tags:
            ledger.fail(tag, exc)
        if cross:
            ledger.fail(None, exc)
        values, tags, cross = [], set(), False
    if spec.after_flush is not None:
        spec.after_flush(step, index)
    yield len(values), tags, cross, ledger.failed, ledger.notes
