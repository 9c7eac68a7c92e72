"""The driver's side of a tracked RDD run: chains created while the job runs, stamped or
failed after its sink (:meth:`RDDTracking.passes`), replayed by :mod:`..attempts`."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any

from ...errors import InvalidConfig
from ..attempts import Driver, Plan
from ..chains import Owners, Started
from ..heartbeat import HeartbeatPolicy
from ..outcomes import Attempt, RunObserver, RunReport
from ..output import RestagedApart
from .executor import AfterFlush, RunSpec
from .tracked import Acker, PartitionWriter, Pass, TrackedRDD

if TYPE_CHECKING:
    from pyspark import SparkContext

    from ...config import AckConfig
    from ...interfaces import AckTracker

__all__ = ["RDDTracking", "Tracking"]


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

    def passes(
        self,
        spec: RunSpec,
        records: Sequence[tuple[Any, str]],
        stamps: Mapping[str, int],
        job: Callable[[TrackedRDD[Any], int], Any],
        acker: Acker,
        *,
        slices: int,
        starting: Future[Started] | None = None,
    ) -> Any:
        """Run ``job`` over ``records`` (``(root, tag)``) and ack what its sink wrote
        (:class:`Pass`). While roots failed and the output holds records of theirs, the
        output is discarded (each partition written again, empty, by the same writer)
        and the job runs again over the other roots, before any stamp; when a stamp did
        not ack and the output holds records of several roots, the job runs again over
        the roots that acked, and writes only. Returns the last run's result. Raises
        :class:`~xor_ack_dynamodb.spark.output.RestagedApart` when an acked root fails
        in such a run (its output discarded: the acks stand)."""
        failed: dict[str, str] = {}
        notes: dict[str, str] = {}
        going = list(records)
        acked = False
        while True:
            owed = {t: stamps[t] for _, t in going}
            run = Pass(owed, acker, starting, failed, notes, known=self._known, acked=acked)
            result = job(TrackedRDD(self.sc.parallelize(going, slices), spec, self._steps, run), spec.attempt)
            if run.again is None:
                if run.sunk is None and failed and not acked:  # no sink this time: still fail the failed
                    acker("rerun", {}, dict(failed), dict(notes))
                return result
            left_out, writer, partitions = run.again
            self._discard(writer, partitions)
            if acked:
                raise RestagedApart(
                    f"{len(left_out)} acked root(s) failed when their records were written again without "
                    f"the roots that did not ack (their input changed during the run?), e.g. "
                    f"{min(left_out)!r}: nothing of the write is kept"
                )
            self.counts["reruns"] += 1
            acked = run.after_ack
            going = [(root, tag) for root, tag in going if tag not in left_out]
            if not going:
                if not acked:
                    acker("rerun", {}, dict(failed), dict(notes))
                return result

    def _discard(self, writer: PartitionWriter, partitions: int) -> None:
        """Write each of a sink's ``partitions`` again, empty, on the executors."""
        if partitions:
            indices = self.sc.parallelize(
                range(partitions), max(1, min(partitions, self.sc.defaultParallelism))
            )
            indices.foreach(partial(_write_empty, writer))

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
                acker = self.acker(spec, starting, known=self._known, notes=notes)
                records = list(zip(todo, tags, strict=True))
                return self.passes(spec, records, stamps, job, acker, slices=slices, starting=starting)

            return self.own_plan(number, edges, run, notes=lambda: notes, known=self._known, raises=())

        return self.run_attempts(
            roots, key, plan, max_attempts=max_attempts, observer=observer, progress=progress
        )


def _write_empty(writer: PartitionWriter, index: int) -> None:
    writer(index, [])


#: The name this class had before DataFrames came (kept: public).
Tracking = RDDTracking
