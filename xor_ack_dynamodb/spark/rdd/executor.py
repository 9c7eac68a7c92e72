"""What runs inside a Spark task: a step's per-partition ledger and its carrier record.

A record of a tracked RDD is ``(value, tag)``: the tag of its root's chain, or ``None``
for a record that stands for several roots (a value ``reduce_by_key`` combined across
roots). No record carries an edge: a root is acked because the job that wrote its
output committed and none of its records failed (see :mod:`.tracked`).

What a step learns about roots travels with the data: a :class:`Ledger` collects, for
one partition of one step, the roots whose records raised (with the first reason) and
the notes of its records, and at the partition's end emits them as one carrier record
(a :class:`Carry`) that the later steps pass on untouched, through shuffles, to the
sink, which returns them to the driver. These are sets, not counts: a task retried,
recomputed or speculated emits the same carrier, and Spark hands the driver one result
per partition of the sink's job. A failure or note of a record of several roots is kept
under ``None``: it is every root's of the job (no record says which roots it stands
for). Executors send no request.

See docs/spark.md, "RDDs".
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..outcomes import failure_reason
from ..tags import TagScheme

if TYPE_CHECKING:
    from ...config import AckConfig
    from ...stores.dynamodb.tracker import XorAckDynamoDB

__all__ = ["RunSpec", "Ledger", "executor_tracker", "Record", "Noted", "Carry"]

#: ``(value, tag)``; see the module doc.
Record = tuple[Any, str | None]


@dataclass(frozen=True, eq=True)
class Carry:
    """The value of a carrier record: the roots one partition of one step failed (with
    the first reason) and noted, on their way to the driver; key ``None``: every root of
    the job (see the module doc). Its own shuffle key (one per step and partition, never
    equal to a user's key), with a hash that is the same in every process, so a
    recomputed map task sends it to the same reduce partition."""

    step: str
    partition: int
    failed: Mapping[str | None, str] = field(default_factory=dict, compare=False)
    notes: Mapping[str | None, str] = field(default_factory=dict, compare=False)

    def __hash__(self) -> int:
        return zlib.crc32(f"{self.step}/{self.partition}".encode())


#: Called after a step's partition emitted its carrier (and after a sink wrote), with
#: the step name and the partition index (a test hook: make a task die after its work).
AfterFlush = Callable[[str, int], None]

# One tracker per AckConfig per Python worker process, built lazily from the picklable
# config, for code of yours that runs in tasks (the library's own tasks send nothing).
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
    """What a ``fan_out`` function may return instead of a plain iterable: the children,
    and a note for the root of the record it split (e.g. "bad bytes replaced"). The
    note shows in the run's report (:attr:`Attempt.note`); the root is not failed."""

    items: Iterable[Any]
    note: str


@dataclass(frozen=True)
class RunSpec:
    """What every tracked step of one attempt needs on the executors. Picklable.

    ``tags`` and ``attempt`` make chain tags; ``after_flush`` is the test hook.
    """

    tags: TagScheme
    attempt: int
    after_flush: AfterFlush | None = None

    def tag(self, key: Any) -> str:
        return self.tags.tag(key, self.attempt)


class Ledger:
    """The failed and noted roots of one partition of one step; see the module doc."""

    def __init__(self, spec: RunSpec, step: str, partition: int) -> None:
        self.spec = spec
        self.step = step
        self.partition = partition
        self.failed: dict[str | None, str] = {}
        self.notes: dict[str | None, str] = {}

    def note(self, tag: str | None, text: str) -> None:
        """Note ``text`` for a record's root (the first note per root is kept)."""
        self.notes.setdefault(tag, text)

    def fail(self, tag: str | None, error: BaseException | str) -> None:
        """Fail a record's root (the first reason per root is kept)."""
        self.failed.setdefault(tag, failure_reason(error))

    def owe(self, failed: Mapping[str | None, str], notes: Mapping[str | None, str]) -> None:
        """Take in what a carrier of an earlier step brought (first reason and note per
        root kept)."""
        for tag, reason in failed.items():
            self.failed.setdefault(tag, reason)
        for tag, text in notes.items():
            self.notes.setdefault(tag, text)

    def flush(self) -> list[Record]:
        """What the step must emit after its records: its carrier (a list of one record,
        or empty when it has nothing to say)."""
        if self.spec.after_flush is not None:
            self.spec.after_flush(self.step, self.partition)
        if not (self.failed or self.notes):
            return []
        return [(Carry(self.step, self.partition, self.failed, self.notes), None)]
