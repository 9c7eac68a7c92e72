"""The driver's side of a tracked RDD run: creating chains, stamping what the sinks
wrote, replaying.

:meth:`RDDTracking.run` runs a job over a list of roots (files, messages): one chain per
root, created by the driver while the job runs (as on the DataFrame path); after the
sink the driver stamps each chain once and fails the chains whose records raised, then
reads every chain and replays the roots whose chains failed (unless permanently),
expired, never started, or were still pending when the job ended, as new chains, up to
``max_attempts`` (the attempt loop of :mod:`..attempts`). Chains belong to the
:class:`RDDTracking` object that made them: no other run meets them, whatever its run id
and keys (:mod:`..tags`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any

from ...errors import InvalidConfig
from ..attempts import DRIVER_THREADS, Driver, Plan
from ..chains import Owners, Started
from ..heartbeat import HeartbeatPolicy
from ..outcomes import Attempt, RunObserver, RunReport
from .executor import AfterFlush, RunSpec
from .steps import start_partition
from .tracked import Acker, TrackedRDD

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext

    from ...config import AckConfig
    from ...interfaces import AckTracker

__all__ = ["RDDTracking", "Tracking"]


class RDDTracking(Driver):
    """Tracked RDD pipelines on one SparkContext, with chains in the table ``config``
    names. Parameters as for
    :class:`~xor_ack_dynamodb.spark.attempts.Driver`, and:

    :param edge_size: bytes per edge: 8 (default, Storm's 64-bit ids: a false ack is a
        2**-64 event) or, for xor chains, a multiple of 8 up to 64.
    :param after_flush: a test hook called on the executors after each step's flush.
    :param tracker: the driver's tracker; its mode must be ``config.mode``.
    :param transactions: the driver sends its creates as ``create_many`` and its stamps
        as ``stamp_many`` (TransactWriteItems of up to 100: one request per 100 chains
        instead of one or two per chain, at twice the write units on DynamoDB).

    Chains of either mode work (``config.mode``; xor by default). Executors send no
    request: the driver creates each chain, stamps it once per attempt and fails it if
    a record of it raised (:mod:`.executor`); its counts are the run's. See
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
        return RunSpec(self.edges, self.tags, attempt, self.after_flush, self.group)

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
        """The driver's side of a sink: :meth:`commit` of the merged amounts, failures
        and notes of every partition (op ids ``<run>.<attempt>/<step>/driver/<tag>``)."""
        noted = notes if notes is not None else {}

        def ack(step: str, stamps: dict[str, int], failures: dict[str, str], notes: dict[str, str]) -> Any:
            op_prefix = f"{self.tags.owner}.{spec.attempt}/{step}/driver"
            return self.commit(
                stamps, failures, notes, op_prefix, starting=starting, noted=noted, owner=owner, known=known
            )

        return ack

    def start(
        self,
        rdd: RDD[Any],
        key: Callable[[Any], Any],
        *,
        attempt: int = 1,
        starting: Future[Started] | None = None,
        notes: dict[str, str] | None = None,
    ) -> TrackedRDD[Any]:
        """The records of ``rdd``, each anchored to the chain tagged
        ``self.tag(key(record), attempt)``, which :meth:`run` creates on the driver
        (``starting`` resolves to the chains created; their sink stamps wait for it).
        ``key`` must give distinct keys (:meth:`run` checks this on the driver before
        anything is written): ``str``, ``bytes`` or a path; anything that is not valid
        UTF-8 is escaped (see :func:`~xor_ack_dynamodb.spark.tags.escape_key`)."""
        spec = self.spec(attempt)
        started = rdd.mapPartitionsWithIndex(partial(start_partition, spec, key))
        acker = self.acker(spec, starting, known=self._known, notes=notes)
        return TrackedRDD(started, spec, self._steps, acker)

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

        ``job`` builds the pipeline on the started records and must end in a sink. A job
        that raises (Spark gave up on a task) ends its attempt: its chains are read like
        any others. A chain still pending once its attempt's job has returned can no
        longer complete (every task is done); it is failed here, so that no late write
        can ack it, and replayed.

        Raises :class:`InvalidConfig` before anything is written if ``key`` gives two
        roots the same key, and :class:`~xor_ack_dynamodb.errors.InvalidTag` if a tag
        would be too long. Progress is shown as for
        :meth:`~xor_ack_dynamodb.spark.frame.FrameTracking.run` (``progress=False``: not).
        """

        def plan(number: int, todo: list[Any], keys: list[Any], tags: list[str]) -> Plan:
            slices = max(1, min(len(todo), num_slices or self.sc.defaultParallelism))
            rdd = self.sc.parallelize(todo, slices)
            notes: dict[str, str] = {}
            return Plan(
                tags,
                lambda starting: job(
                    self.start(rdd, key, attempt=number, starting=starting, notes=notes), number
                ),
                f"attempt {number}",
                self.tags.owner,
                beat_owner=self.tags.owner,
                start=partial(self._create, {t: self.edges.root(t) for t in tags}, number),
                notes=lambda: notes,
                known=self._known,
                raises=(),
            )

        return self.run_attempts(
            roots, key, plan, max_attempts=max_attempts, observer=observer, progress=progress
        )


#: The name this class had before DataFrames came (kept: public).
Tracking = RDDTracking
