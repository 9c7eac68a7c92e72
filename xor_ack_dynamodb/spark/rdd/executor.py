"""What runs inside a Spark task (docs/spark.md, "RDDs": failures and notes travel per
partition in a carrier record, as sets). A record is ``(value, tag)``, ``None`` for a
record of several roots; what a :class:`Ledger` holds under ``None`` is every root's.
The step functions take their :class:`RunSpec`, name and user function first (bound with
``functools.partial``: no closure captures a SparkContext or a client). Executors send
no request.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..outcomes import failure_reason

if TYPE_CHECKING:
    from ...config import AckConfig
    from ...stores.dynamodb.tracker import XorAckDynamoDB

__all__ = [
    "RunSpec",
    "Ledger",
    "executor_tracker",
    "Noted",
    "Carry",
    "DieOnFirstAttempt",
    "TaskKilled",
    "map_partition",
    "key_partition",
    "combine",
    "unpack_partition",
    "sink_partition",
    "Sunk",
]

Record = tuple[Any, str | None]


def keep_first(into: dict[Any, str], found: Mapping[Any, str]) -> None:
    """Add ``found`` to ``into``, keeping the first text per root."""
    for tag, text in found.items():
        into.setdefault(tag, text)


@dataclass(frozen=True, eq=True)
class Carry:
    """A carrier record's value (module doc); also its own shuffle key, never equal to a
    user's, hashed alike in every process (a recomputed map task sends it to the same
    reduce partition)."""

    step: str
    partition: int
    failed: Mapping[str | None, str] = field(default_factory=dict, compare=False)
    notes: Mapping[str | None, str] = field(default_factory=dict, compare=False)

    def __hash__(self) -> int:
        return zlib.crc32(f"{self.step}/{self.partition}".encode())


#: A test hook called with the step and partition after a step's carrier (and a sink's
#: write): make a task die after its work.
AfterFlush = Callable[[str, int], None]

# One tracker per AckConfig per worker process, for user code in tasks.
_TRACKERS: dict[AckConfig, XorAckDynamoDB] = {}
_TRACKERS_LOCK = threading.Lock()


def executor_tracker(config: AckConfig) -> XorAckDynamoDB:
    """This worker process's tracker for ``config``, built on first use."""
    from ...stores.dynamodb.tracker import XorAckDynamoDB

    with _TRACKERS_LOCK:
        tracker = _TRACKERS.get(config)
        if tracker is None:
            tracker = XorAckDynamoDB.from_config(config)
            _TRACKERS[config] = tracker
        return tracker


@dataclass(frozen=True)
class Noted:
    """What a ``fan_out`` function may return: the children, and a note for their root
    (shown in the report, :attr:`Attempt.note`; the root is not failed)."""

    items: Iterable[Any]
    note: str


@dataclass(frozen=True)
class RunSpec:
    """What every tracked step of one attempt carries to the executors (picklable)."""

    attempt: int
    after_flush: AfterFlush | None = None


class Ledger:
    """The failed and noted roots of one partition of one step; see the module doc."""

    def __init__(self, spec: RunSpec, step: str, partition: int) -> None:
        self.spec = spec
        self.step = step
        self.partition = partition
        self.failed: dict[str | None, str] = {}
        self.notes: dict[str | None, str] = {}

    def note(self, tag: str | None, text: str) -> None:
        self.notes.setdefault(tag, text)

    def fail(self, tag: str | None, error: BaseException | str) -> None:
        self.failed.setdefault(tag, failure_reason(error))

    def flush(self) -> list[Record]:
        """The step's carrier, to emit after its records (none if it has nothing)."""
        if self.spec.after_flush is not None:
            self.spec.after_flush(self.step, self.partition)
        if not (self.failed or self.notes):
            return []
        return [(Carry(self.step, self.partition, self.failed, self.notes), None)]


class TaskKilled(RuntimeError):
    """Raised by :class:`DieOnFirstAttempt` to make Spark retry the task."""


@dataclass(frozen=True)
class DieOnFirstAttempt:
    """An ``after_flush`` hook (:class:`~xor_ack_dynamodb.spark.RDDTracking`) that kills
    a task's first attempt right after a step's work, so Spark runs it again. Needs
    ``spark.task.maxFailures`` > 1 (``local[N,4]`` in local mode).

    :param steps: step-name suffixes to kill after (e.g. ``("fan_out", "sink")``).
    :param every: kill only in partitions whose index modulo ``every`` is 0.
    :param exit_process: end the worker with ``os._exit`` (a crash) instead of raising.
    """

    steps: tuple[str, ...]
    every: int = 1
    exit_process: bool = False

    def __call__(self, step: str, partition: int) -> None:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None or context.attemptNumber() != 0 or partition % self.every:
            return
        if not any(step.endswith(s) for s in self.steps):
            return
        if self.exit_process:
            os._exit(17)
        raise TaskKilled(f"killed after flushing {step} in partition {partition} (first attempt)")


#: A reduce value through the shuffle: (value or :class:`Raised`, tag).
Combined = tuple[Any, str | None]
@dataclass
class Sunk:
    """What a sink partition returned (:func:`sink_partition`), or the driver's merge of
    them (one per partition); ``failed`` and ``notes`` per root, under ``None``: every
    root of the pass."""

    partitions: int = 0
    written: int = 0
    tags: set[str] = field(default_factory=set)
    cross: bool = False
    failed: dict[str | None, str] = field(default_factory=dict)
    notes: dict[str | None, str] = field(default_factory=dict)

    def add(self, other: Sunk) -> None:
        self.partitions += other.partitions
        self.written += other.written
        self.tags |= other.tags
        self.cross = self.cross or other.cross
        keep_first(self.failed, other.failed)
        keep_first(self.notes, other.notes)

    @staticmethod
    def per_root(found: Mapping[str | None, str], roots: Iterable[str]) -> dict[str, str]:
        """``found`` per root of ``roots``, what is under ``None`` to each without its own."""
        out = {t: v for t, v in found.items() if t is not None}
        if None in found:
            for tag in roots:
                out.setdefault(tag, found[None])
        return out


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
) -> Iterator[Sunk]:
    """Write the partition's values with ``writer`` (durably, replacing an earlier call's
    for ``index``), then return a :class:`Sunk`: what it wrote, the roots with a written
    record, whether one stood for several roots, the failed and noted roots; if the
    writer raises, the partition's roots fail instead."""
    ledger = Ledger(spec, step, index)
    values: list[Any] = []
    tags: set[str] = set()
    cross = False
    for value, tag in records:
        if type(value) is Carry:
            keep_first(ledger.failed, value.failed)
            keep_first(ledger.notes, value.notes)
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
    yield Sunk(1, len(values), tags, cross, ledger.failed, ledger.notes)
