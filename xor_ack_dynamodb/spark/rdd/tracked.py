"""Tracked RDDs: Spark transformations that keep each record's root.

:class:`RDDTracking` runs a job attempt after attempt (the loop of
:mod:`~xor_ack_dynamodb.spark.attempts`): chains created while the job runs, stamped or
failed after its sink. A :class:`TrackedRDD` of ``(value, tag)`` records mirrors
``flatMap`` (``fan_out``), ``map``, ``filter`` and ``reduceByKey`` and ends in
:meth:`TrackedRDD.sink`. A root is acked because the job that wrote its output committed
(Spark hands the driver one result per partition, whatever was retried) and none of its
records failed (:class:`Pass`).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ...errors import InvalidConfig
from ..attempts import Driver, Plan
from ..chains import Owners, Started
from ..heartbeat import HeartbeatPolicy
from ..outcomes import Attempt, RunObserver, RunReport
from ..output import RestagedApart
from . import executor
from .executor import AfterFlush, Noted, RunSpec, Sunk, keep_first

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext

    from ...config import AckConfig
    from ...interfaces import AckTracker

__all__ = ["RDDTracking", "Tracking", "TrackedRDD", "Stream", "PartitionWriter", "Pass", "Sunk", "MIXED"]

T = TypeVar("T")
U = TypeVar("U")

#: ``writer(partition_index, values)``: writes one partition's output whole (replacing
#: an earlier call's for the index) and returns once it is durable.
PartitionWriter = Callable[[int, list[Any]], None]
#: ``acker(step, stamps, failures, notes)``: the driver's requests after a sink
#: (:meth:`RDDTracking.acker`); returns counts.
Acker = Callable[[str, dict[str, int], dict[str, str], dict[str, str]], Counter[str]]

MIXED = "the committed output also holds records of roots that failed, and this job cannot be run again"


class Stream(Protocol):
    """The methods of :class:`TrackedRDD` a job function may use (an untracked twin too)."""

    def fan_out(self, fn: Callable[[Any], Iterable[Any] | Noted], name: str = ...) -> Stream: ...
    def map(self, fn: Callable[[Any], Any], name: str = ...) -> Stream: ...
    def filter(self, pred: Callable[[Any], bool], name: str = ...) -> Stream: ...
    def reduce_by_key(
        self, fn: Callable[[Any, Any], Any], num_partitions: int | None = ..., name: str = ...
    ) -> Stream: ...
    def sink(self, writer: PartitionWriter, name: str = ...) -> int: ...


@dataclass
class Pass:
    """The driver's side of one run of a job over some roots (``stamps``: what acks each
    one's chain): once the sink committed, stamp the roots that did not fail and fail the
    others (with ``failed`` by earlier passes; a chain not started counts as failed).
    When the output holds records of failed roots, ask for a run without them
    (:attr:`again`), or, without ``rerun``, fail every root (:data:`MIXED`); when it
    holds records of a root whose stamp did not ack (``known``: what the stamps decided),
    ask for a run over the roots that acked, which writes only (:attr:`after_ack`, then
    ``acked``), so that the replay counts that root's records once.
    """

    stamps: Mapping[str, int]
    acker: Acker
    starting: Future[Started] | None = None
    failed: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    rerun: bool = True
    known: Mapping[str, Attempt] = field(default_factory=dict)
    acked: bool = False
    #: The roots to leave out, the writer, the partitions written.
    again: tuple[set[str], PartitionWriter, int] | None = None
    after_ack: bool = False
    sunk: Sunk | None = None

    def __call__(self, step: str, writer: PartitionWriter, sunk: Sunk) -> None:
        self.sunk = sunk
        roots = set(self.stamps)
        failures = Sunk.per_root(sunk.failed, roots)
        if self.acked:
            if failures:
                self.again = set(failures), writer, sunk.partitions
            return
        keep_first(self.notes, Sunk.per_root(sunk.notes, roots))
        refused = set(self.starting.result()[1]) if self.starting is not None else set()
        bad = (set(failures) | refused) & roots
        keep_first(self.failed, failures)
        if bad and (sunk.cross or not sunk.tags.isdisjoint(bad)):
            if self.rerun:
                self.again = bad, writer, sunk.partitions
                return
            for tag in roots:
                self.failed.setdefault(tag, MIXED)
        stamps = {t: v for t, v in self.stamps.items() if t not in self.failed and t not in refused}
        self.acker(step, stamps, dict(self.failed), dict(self.notes))
        if not self.rerun:
            return
        unacked = {t for t in stamps if (a := self.known.get(t)) is None or a.state != "acked"}
        if unacked and (sunk.cross or not sunk.tags.isdisjoint(unacked)):
            self.again, self.after_ack = (unacked, writer, sunk.partitions), True


class TrackedRDD(Generic[T]):
    """An RDD of ``(value, tag)`` records of one tracked pass; lazy: nothing runs, and
    nothing is stamped, until :meth:`sink`. A user function that raises fails the
    record's root (the exception's ``repr`` is the reason). ``sink``: the records'
    :class:`Pass`.
    """

    def __init__(
        self,
        rdd: RDD[Any],
        spec: RunSpec,
        steps_counter: itertools.count[int],
        sink: Pass,
    ) -> None:
        self.rdd = rdd
        self.spec = spec
        self._steps = steps_counter
        self._pass = sink

    def _step(self, name: str) -> str:
        return f"{next(self._steps)}-{name}"

    def _then(self, rdd: RDD[Any]) -> TrackedRDD[Any]:
        return TrackedRDD(rdd, self.spec, self._steps, self._pass)

    def _each(self, fn: Callable[[Any], Any], name: str, kind: str) -> TrackedRDD[Any]:
        each = partial(executor.map_partition, self.spec, self._step(name), fn, kind=kind)
        return self._then(self.rdd.mapPartitionsWithIndex(each))

    def fan_out(self, fn: Callable[[T], Iterable[U] | Noted], name: str = "fan_out") -> TrackedRDD[U]:
        """Like ``flatMap``, the children of the same root; ``fn`` may return
        :class:`Noted` items to note the root."""
        return self._each(fn, name, "fan_out")

    def map(self, fn: Callable[[T], U], name: str = "map") -> TrackedRDD[U]:
        return self._each(fn, name, "map")

    def filter(self, pred: Callable[[T], bool], name: str = "filter") -> TrackedRDD[T]:
        return self._each(pred, name, "filter")

    def reduce_by_key(
        self, fn: Callable[[Any, Any], Any], num_partitions: int | None = None, name: str = "reduce_by_key"
    ) -> TrackedRDD[tuple[Any, Any]]:
        """Like ``reduceByKey`` on ``(key, value)`` values, across roots; a combined
        record keeps its root only when all its values had it. A value that is not a
        pair, or a combination where ``fn`` raised, fails its root (or roots)."""
        step = self._step(name)
        keyed = self.rdd.mapPartitionsWithIndex(partial(executor.key_partition, self.spec, f"{step}.key"))
        reduced = keyed.reduceByKey(partial(executor.combine, fn), num_partitions)
        return self._then(
            reduced.mapPartitionsWithIndex(partial(executor.unpack_partition, self.spec, f"{step}.unpack"))
        )

    def sink(self, writer: PartitionWriter, name: str = "sink") -> int:
        """Run the job: write every partition's values with ``writer``, then ack what
        was written (:class:`Pass`). Returns the number of values written; a partition
        whose writer raised fails the roots of its records."""
        step = self._step(name)
        results = self.rdd.mapPartitionsWithIndex(
            partial(executor.sink_partition, self.spec, step, writer)
        ).collect()
        sunk = Sunk()
        for result in results:
            sunk.add(result)
        self._pass(step, writer, sunk)
        return sunk.written


class RDDTracking(Driver):
    """Tracked RDD pipelines on one SparkContext. Parameters as for
    :class:`~xor_ack_dynamodb.spark.attempts.Driver`, and ``edge_size`` (8, or for xor
    chains a multiple of 8 up to 64) and ``after_flush`` (a test hook run on the
    executors after each step's partition); the tracker's mode must be ``config.mode``.
    """

    def __init__(
        self,
        sc: SparkContext,
        config: AckConfig,
        *,
        run_id: str | None = None,
        edge_size: int = 8,
        after_flush: AfterFlush | None = None,
        tracker: AckTracker | None = None,
        nonce: str | None = None,
        heartbeat: bool | HeartbeatPolicy = True,
        transactions: bool = False,
    ) -> None:
        super().__init__(
            config,
            run_id=run_id,
            nonce=nonce,
            tracker=tracker,
            heartbeat=heartbeat,
            transactions=transactions,
            edge_size=edge_size,
        )
        if self.tracker.mode != config.mode:
            raise InvalidConfig(
                f"the driver's tracker is in {self.tracker.mode} mode and the config in {config.mode} mode"
            )
        self.sc = sc
        self.after_flush = after_flush
        self._steps = itertools.count()
        # Outcomes the sink's stamps and fails decided (not read again).
        self._known: dict[str, Attempt] = {}

    def spec(self, attempt: int) -> RunSpec:
        return RunSpec(attempt, self.after_flush)

    def tag(self, key: Any, attempt: int = 1) -> str:
        """The tag of root ``key``'s chain on ``attempt``."""
        return self.tags.tag(key, attempt)

    def acker(
        self,
        spec: RunSpec,
        starting: Future[Started] | None = None,
        *,
        owner: Owners | None = None,
        known: dict[str, Attempt] | None = None,
        notes: dict[str, str] | None = None,
    ) -> Acker:
        """The driver's side of a sink: :meth:`commit`, op ids
        ``<run>.<attempt>/<step>/driver/<tag>``."""
        noted = notes if notes is not None else {}

        def ack(step: str, stamps: dict[str, int], failures: dict[str, str], notes: dict[str, str]) -> Any:
            op_prefix = f"{self.tags.owner}.{spec.attempt}/{step}/driver"
            return self.commit(
                stamps, failures, notes, op_prefix, starting=starting, noted=noted, owner=owner, known=known
            )

        return ack

    def run(
        self,
        roots: Sequence[Any],
        key: Callable[[Any], Any],
        job: Callable[[TrackedRDD[Any], int], Any],
        *,
        max_attempts: int = 3,
        num_slices: int | None = None,
        observer: RunObserver | None = None,
        progress: bool | None = None,
    ) -> RunReport:
        """Run ``job(started, attempt)`` (ending in one sink) over ``roots``, as
        :meth:`~xor_ack_dynamodb.spark.frame.FrameTracking.run` runs its job."""

        def plan(number: int, todo: list[Any], keys: list[Any], tags: list[str]) -> Plan:
            slices = max(1, min(len(todo), num_slices or self.sc.defaultParallelism))
            edges = {t: self.edges.root(t) for t in tags}
            stamps = {t: self.group.finished(edge) for t, edge in edges.items()}
            notes: dict[str, str] = {}
            spec = self.spec(number)

            def run(starting: Future[Started]) -> Any:
                """Run the job and ack what its sink wrote (:class:`Pass`), running it
                again (its output discarded: each partition written again, empty, by the
                same writer) as the pass asks. :class:`RestagedApart` when an acked root
                fails in a run after the stamps (its output discarded; the acks stand)."""
                acker = self.acker(spec, starting, known=self._known, notes=notes)
                failed: dict[str, str] = {}
                seen: dict[str, str] = {}
                going = list(zip(todo, tags, strict=True))
                acked = False
                while True:
                    owed = {t: stamps[t] for _, t in going}
                    sink = Pass(owed, acker, starting, failed, seen, known=self._known, acked=acked)
                    rdd = self.sc.parallelize(going, slices)
                    result = job(TrackedRDD(rdd, spec, self._steps, sink), number)
                    if sink.again is None:
                        if sink.sunk is None and failed and not acked:  # no sink: still fail the failed
                            acker("rerun", {}, dict(failed), dict(seen))
                        return result
                    left_out, writer, partitions = sink.again
                    if partitions:
                        width = max(1, min(partitions, self.sc.defaultParallelism))
                        self.sc.parallelize(range(partitions), width).foreach(partial(_write_empty, writer))
                    if acked:
                        raise RestagedApart.of(left_out, "records were written")
                    self.counts["reruns"] += 1
                    acked = sink.after_ack
                    going = [(root, tag) for root, tag in going if tag not in left_out]
                    if not going:
                        if not acked:
                            acker("rerun", {}, dict(failed), dict(seen))
                        return result

            return self.own_plan(number, edges, run, notes=lambda: notes, known=self._known, raises=())

        return self.run_attempts(
            roots, key, plan, max_attempts=max_attempts, observer=observer, progress=progress
        )


#: The name this class had before DataFrames came (kept: public).
Tracking = RDDTracking


def _write_empty(writer: PartitionWriter, index: int) -> None:
    writer(index, [])
