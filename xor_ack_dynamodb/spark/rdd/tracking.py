"""The driver's side of a tracked RDD run: creating chains, stamping what the sinks
wrote, replaying.

:meth:`RDDTracking.run` runs a job over a list of roots (files, messages): one chain per
root, created by the driver while the job runs (as on the DataFrame path); after the
sink's job the driver stamps each root that did not fail once (with its root edge: the
job committed) and fails the roots whose records raised, first running the job again
over the other roots when its output holds records of failed ones (:meth:`passes`);
then it reads every chain and replays the roots whose chains failed (unless permanently),
expired, never started, or were still pending when the job ended, as new chains, up to
``max_attempts`` (the attempt loop of :mod:`..attempts`). Chains belong to the
:class:`RDDTracking` object that made them: no other run meets them, whatever its run id
and keys (:mod:`..tags`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any

from ...errors import InvalidConfig
from ..attempts import DRIVER_THREADS, Driver, Plan
from ..chains import Owners, Started
from ..heartbeat import HeartbeatPolicy
from ..outcomes import Attempt, RunObserver, RunReport
from .executor import AfterFlush, RunSpec
from .tracked import Acker, PartitionWriter, Pass, TrackedRDD

if TYPE_CHECKING:
    from pyspark import SparkContext

    from ...config import AckConfig
    from ...interfaces import AckTracker

__all__ = ["RDDTracking", "Tracking"]


class RDDTracking(Driver):
    """Tracked RDD pipelines on one SparkContext, with chains in the table ``config``
    names. Parameters as for
    :class:`~xor_ack_dynamodb.spark.attempts.Driver`, and:

    :param edge_size: bytes of a chain's root edge: 8 (default) or, for xor chains, a
        multiple of 8 up to 64.
    :param after_flush: a test hook called on the executors after each step's partition.
    :param tracker: the driver's tracker; its mode must be ``config.mode``.
    :param transactions: the driver sends its creates as ``create_many`` and its stamps
        as ``stamp_many`` (TransactWriteItems of up to 100: one request per 100 chains
        instead of one or two per chain, at twice the write units on DynamoDB).

    Chains of either mode work (``config.mode``; xor by default). Executors send no
    request: the driver creates each chain, stamps it once per attempt and fails it if
    a record of it raised (:mod:`.tracked`); its counts are the run's (``reruns``: the
    times a job ran again without failed roots). See
    docs/spark.md, "Chain modes and requests".
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
            threads=DRIVER_THREADS,
            edge_size=edge_size,
            mode=config.mode,
        )
        if self.tracker.mode != config.mode:
            raise InvalidConfig(
                f"the driver's tracker is in {self.tracker.mode} mode and the config in {config.mode} mode"
            )
        self.sc = sc
        self.after_flush = after_flush
        self.transactions = transactions
        self._steps = itertools.count()
        # Outcomes the sink's stamps and fails returned (read again by nobody).
        self._known: dict[str, Attempt] = {}

    def spec(self, attempt: int) -> RunSpec:
        """The picklable description of ``attempt`` that every step carries."""
        return RunSpec(self.tags, attempt, self.after_flush)

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
        """The driver's side of a sink: :meth:`commit` of the stamps, failures and notes
        of a pass (op ids ``<run>.<attempt>/<step>/driver/<tag>``)."""
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
        """Run ``job`` over ``records`` (``(root, tag)``; ``stamps``: what acks each
        tag's chain) and ack what its sink wrote (:class:`Pass`). When roots failed and
        the output holds records of theirs, the output is discarded (every partition the
        sink wrote is written again, empty, by the same writer) and the job runs again
        over the other roots only, in the same attempt and before any stamp, until a
        pass's output holds no record of a failed root (at worst: no root left). Returns
        the last run's result."""
        failed: dict[str, str] = {}
        notes: dict[str, str] = {}
        going = list(records)
        while True:
            run = Pass({t: stamps[t] for _, t in going}, acker, starting, failed, notes)
            result = job(TrackedRDD(self.sc.parallelize(going, slices), spec, self._steps, run), spec.attempt)
            if run.again is None:
                if run.sunk is None and failed:  # no sink this time: still fail the failed
                    acker("rerun", {}, dict(failed), dict(notes))
                return result
            left_out, writer, partitions = run.again
            self._discard(writer, partitions)
            self.counts["reruns"] += 1
            going = [(root, tag) for root, tag in going if tag not in left_out]
            if not going:
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
        """Run ``job(started, attempt)`` over ``roots`` until every root's chain is
        acked, failed permanently (:class:`PermanentFailure`), or ``max_attempts``
        attempts were made.

        ``job`` builds the pipeline on the started records (each root's record tagged
        with its chain, ``self.tag(key(root), attempt)``) and must end in a sink (one per
        job). The driver creates the attempt's chains while the job runs; after the sink
        it stamps each root that did not fail once and fails the others; if the output
        holds records of failed roots, it first runs ``job`` again over the other roots
        (:meth:`passes`). A job that raises (Spark gave up on a task) ends its attempt:
        its chains are read like any others. A chain still pending once its attempt's
        job has returned can no longer complete (every task is done); it is failed here,
        so that no late write can ack it, and replayed.

        Raises :class:`InvalidConfig` before anything is written if ``key`` gives two
        roots the same key, and :class:`~xor_ack_dynamodb.errors.InvalidTag` if a tag
        would be too long. Progress is shown as for
        :meth:`~xor_ack_dynamodb.spark.frame.FrameTracking.run` (``progress=False``: not).
        """

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

            return Plan(
                tags,
                run,
                f"attempt {number}",
                self.tags.owner,
                beat_owner=self.tags.owner,
                start=partial(self._create, edges, number),
                notes=lambda: notes,
                known=self._known,
                raises=(),
            )

        return self.run_attempts(
            roots, key, plan, max_attempts=max_attempts, observer=observer, progress=progress
        )


def _write_empty(writer: PartitionWriter, index: int) -> None:
    writer(index, [])


#: The name this class had before DataFrames came (kept: public).
Tracking = RDDTracking
