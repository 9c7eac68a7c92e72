"""The driver's side of a tracked RDD run: starting chains, stamping what the sinks
wrote, replaying.

:meth:`RDDTracking.run` runs a job over a list of roots (files, messages): one chain per
root, created on the executors; after the job it reads every chain (BatchGetItem) and
replays the roots whose chains failed (unless permanently), expired, never started, or
were still pending when the job ended, as new chains, up to ``max_attempts`` (the
attempt loop of :mod:`..attempts`). Chains belong to the :class:`RDDTracking` object
that made them: no other run meets them, whatever its run id and keys (:mod:`..tags`).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ...errors import InvalidConfig
from ..attempts import DRIVER_THREADS, Driver, Plan
from ..chains import Owners
from ..heartbeat import HeartbeatPolicy
from ..outcomes import CONFLICT, Attempt, RunObserver, RunReport
from .executor import CONFLICT_NOTE, AfterFlush, CounterParam, RunSpec
from .steps import create_root, start_partition
from .tracked import Acker, TrackedRDD

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext

    from ...config import AckConfig
    from ...interfaces import AckTracker

__all__ = ["RDDTracking", "Tracking"]


class RDDTracking(Driver):
    """Tracked RDD pipelines on one SparkContext, with chains in the table ``config``
    names (executors reach it with ``config`` too). Parameters as for
    :class:`~xor_ack_dynamodb.spark.attempts.Driver`, and:

    :param edge_size: bytes per edge: 8 (default, Storm's 64-bit ids: a false ack is a
        2**-64 event) or, for xor chains, a multiple of 8 up to 64.
    :param after_flush: a test hook called on the executors after each step's flush.
    :param tracker: its mode must be ``config.mode`` (the executors build theirs from
        ``config``).
    :param transactions: executors send a partition's creates as ``create_many`` and
        the driver its stamps as ``stamp_many`` (TransactWriteItems of up to 100: one
        request per 100 chains instead of one or two per chain, at twice the write units
        on DynamoDB).

    Chains of either mode work (``config.mode``; xor by default). Executors never stamp:
    the driver stamps each chain once per attempt (:mod:`.executor`). See docs/spark.md,
    "Chain modes and requests".

    Requests are counted per task and summed on the driver (:attr:`counters`), with the
    driver's own (sink stamps, reads, fails of stuck chains) added by :meth:`requests`.
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
        self.counters = sc.accumulator(Counter(), CounterParam())
        self.notes = sc.accumulator(Counter(), CounterParam())
        self._steps = itertools.count()
        # Outcomes the sink's stamps and fails returned (read again by nobody).
        self._known: dict[str, Attempt] = {}

    def spec(self, attempt: int) -> RunSpec:
        """The picklable description of ``attempt`` that every step carries."""
        return RunSpec(
            config=self.config,
            op_run=f"{self.tags.owner}.{attempt}",
            edges=self.edges,
            tags=self.tags,
            attempt=attempt,
            counters=self.counters,
            notes=self.notes,
            after_flush=self.after_flush,
            group=self.group,
            transactions=self.transactions,
        )

    def tag(self, key: Any, attempt: int = 1) -> str:
        """The tag of root ``key``'s chain on ``attempt``."""
        return self.tags.tag(key, attempt)

    def acker(
        self, spec: RunSpec, *, owner: Owners | None = None, known: dict[str, Attempt] | None = None
    ) -> Acker:
        """The driver's side of a sink: stamps each chain once with the merged amounts
        of every partition (op ids ``<run>.<attempt>/<step>/driver/<tag>``), fails the
        chains that failed; chains whose create met another writer's are left alone."""

        def ack(step: str, stamps: dict[str, int], failures: dict[str, str]) -> Counter[str]:
            conflicts = self.conflicts()
            return self.stamp(
                {t: v for t, v in stamps.items() if t not in conflicts},
                {t: r for t, r in failures.items() if t not in conflicts},
                f"{spec.op_run}/{step}/driver",
                owner=owner,
                known=known,
                transactions=self.transactions,
            )

        return ack

    def start(self, rdd: RDD[Any], key: Callable[[Any], Any], *, attempt: int = 1) -> TrackedRDD[Any]:
        """One chain per record of ``rdd``, tagged ``self.tag(key(record), attempt)``,
        created on the executors when the job runs. ``key`` must give distinct keys
        (:meth:`run` checks this on the driver before anything is written): ``str``,
        ``bytes`` or a path; anything that is not valid UTF-8 is escaped (see
        :func:`~xor_ack_dynamodb.spark.tags.escape_key`)."""
        spec = self.spec(attempt)
        step = f"{next(self._steps)}-start"
        started = rdd.mapPartitionsWithIndex(
            partial(start_partition, spec, step, partial(create_root, step, key))
        )
        return TrackedRDD(started, spec, self._steps, self.acker(spec, known=self._known), roots=(rdd, key))

    def _notes(self) -> dict[str, str]:
        notes: dict[str, str] = {}
        for item in sorted(self.notes.value):
            tag, _, text = item.partition("\x00")
            if text != CONFLICT_NOTE:
                notes.setdefault(tag, text)
        return notes

    def conflicts(self) -> set[str]:
        """Tags whose create (or handed stamp) on an executor met a chain that was not
        this run's to touch."""
        suffix = "\x00" + CONFLICT_NOTE
        return {item[: -len(suffix)] for item in self.notes.value if item.endswith(suffix)}

    def refused(self, why: str) -> Callable[[], Mapping[str, str]]:
        """After a job: the :meth:`conflicts`, each refused with ``why``."""
        return lambda: dict.fromkeys(self.conflicts(), why)

    def requests(self) -> Counter[str]:
        """Every counter the executors reported, the driver's sink counts, and the driver
        tracker's requests."""
        total = Counter(self.counters.value)
        total.update(super().requests())
        return total

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
            return Plan(
                tags,
                lambda _: job(self.start(rdd, key, attempt=number), number),
                f"attempt {number}",
                self.tags.owner,
                beat_owner=self.tags.owner,
                refused=self.refused(CONFLICT),
                notes=self._notes,
                known=self._known,
                raises=(),
            )

        return self.run_attempts(
            roots, key, plan, max_attempts=max_attempts, observer=observer, progress=progress
        )


#: The name this class had before DataFrames came (kept: public).
Tracking = RDDTracking
