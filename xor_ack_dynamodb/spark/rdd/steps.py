"""The per-partition functions of tracked steps (what Spark ships to executors).

Each takes the step's :class:`RunSpec`, name and user function first (bound with
``functools.partial`` on the driver, so a closure never captures a SparkContext or a
client), then the partition index and its iterator, as ``mapPartitionsWithIndex`` wants.
Records are ``(value, tag)`` pairs; see :data:`~.executor.Record`.

Every step passes carrier records (:class:`~.executor.Carry`: what earlier steps found,
on its way to the driver) through untouched, and ends by emitting its own ledger's
carrier, if any. No step sends a request. An exception raised by a user function fails
the record's root (every root of the job for a record of several roots) and the
partition goes on without the record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..outcomes import failure_reason
from .executor import Carry, Ledger, Noted, Record, RunSpec

__all__ = [
    "fan_out_partition",
    "map_partition",
    "key_partition",
    "combine",
    "unpack_partition",
    "sink_partition",
    "SinkResult",
    "Raised",
]

#: A reduce value on its way through the shuffle: (value, tag); the value is a
#: :class:`Raised` once ``fn`` raised on it.
Combined = tuple[Any, str | None]
#: What a sink partition returns to the driver: (values written, the roots with a
#: written record, whether a written record stood for several roots, failure reason per
#: root, note per root; ``None``: every root's).
SinkResult = tuple[int, set[str], bool, dict[str | None, str], dict[str | None, str]]


@dataclass(frozen=True)
class Raised:
    """A reduced value whose ``fn`` raised: its root fails after the shuffle."""

    reason: str


def fan_out_partition(
    spec: RunSpec,
    step: str,
    fn: Callable[[Any], Iterable[Any] | Noted],
    index: int,
    records: Iterable[Record],
) -> Iterator[Record]:
    """Replace each record by its children (``fn(value)``'s items), of the same root."""
    ledger = Ledger(spec, step, index)
    for value, tag in records:
        if type(value) is Carry:
            yield value, tag
            continue
        try:
            result = fn(value)
            if isinstance(result, Noted):
                ledger.note(tag, result.note)
                result = result.items
            children = list(result)
        except Exception as exc:
            ledger.fail(tag, exc)
            continue
        for child in children:
            yield child, tag
    yield from ledger.flush()


def map_partition(
    spec: RunSpec,
    step: str,
    fn: Callable[[Any], Any],
    index: int,
    records: Iterable[Record],
    *,
    keep: bool = False,
) -> Iterator[Record]:
    """Replace each value by ``fn(value)``; with ``keep`` (a filter), keep the records
    whose value passes ``fn`` instead."""
    ledger = Ledger(spec, step, index)
    for value, tag in records:
        if type(value) is Carry:
            yield value, tag
            continue
        try:
            result = fn(value)
        except Exception as exc:
            ledger.fail(tag, exc)
            continue
        if not keep:
            yield result, tag
        elif result:
            yield value, tag
    yield from ledger.flush()


def key_partition(
    spec: RunSpec, step: str, index: int, records: Iterable[Record]
) -> Iterator[tuple[Any, Combined]]:
    """Turn ``((k, v), tag)`` records into shuffle pairs ``(k, (v, tag))``; a value that
    is not a pair fails its root."""
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
    """Merge two shuffle values as ``reduceByKey`` would, across roots: ``fn`` on the
    values; the result keeps a tag only when both sides have the same one (``None``:
    a record of several roots). If ``fn`` raises, the result is :class:`Raised` (its
    root fails after the shuffle)."""
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
    """Back from the shuffle to ``((k, v), tag)`` records; a value whose combining
    raised fails its root here."""
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
    """Write the partition's values with ``writer``, then return to the driver what it
    wrote (how many values, of which roots, whether of several roots at once) and what
    the carriers brought (see :data:`SinkResult`).

    ``writer(index, values)`` must return only once the output is durable, and must
    write partition ``index`` whole, replacing what an earlier call for ``index`` wrote
    (a retried or speculative task writes the same values again; Spark hands the driver
    the result of one successful attempt per partition). If it raises, the roots of the
    partition's records fail instead (they will be replayed).
    """
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
