"""What runs inside a Spark task. A record is ``(value, tag)``: its root's tag, or
``None`` for a record of several roots. A :class:`Ledger` collects one partition's
failed roots (first reason) and notes and emits them as a carrier record (:class:`Carry`)
that later steps pass on to the sink. Sets, not counts: a retried task emits the same.
What is under ``None`` is every root's. Executors send no request.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..outcomes import failure_reason

if TYPE_CHECKING:
    from ...config import AckConfig
    from ...stores.dynamodb.tracker import XorAckDynamoDB

__all__ = ["RunSpec", "Ledger", "executor_tracker", "Noted", "Carry", "DieOnFirstAttempt", "TaskKilled"]

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

    def owe(self, failed: Mapping[str | None, str], notes: Mapping[str | None, str]) -> None:
        """Take in an earlier step's carrier."""
        keep_first(self.failed, failed)
        keep_first(self.notes, notes)

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
