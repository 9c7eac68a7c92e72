"""Tracked DataFrame runs: :class:`FrameTracking` runs a job attempt after attempt
(the loop every path shares, :mod:`~xor_ack_dynamodb.spark.attempts`), creating each
attempt's chains from the driver while the job runs; the job gets a
:class:`~.attempt.FrameAttempt`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ...errors import InvalidConfig
from ..attempts import DRIVER_THREADS, Driver, Plan
from ..context import is_connect
from ..heartbeat import HeartbeatPolicy
from ..outcomes import RunObserver, RunReport
from ..output import Location
from . import commit as protocol
from .attempt import Commit, FrameAttempt, FrameJob
from .columns import with_tags
from .driver_read import driver_read_limit
from .tracked import TrackedFrame, WriteResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ...config import AckConfig
    from ...interfaces import AckTracker

__all__ = ["FrameTracking", "is_connect", "default_parallelism"]


def default_parallelism(spark: SparkSession) -> int:
    """Spark's default parallelism (classic), else ``spark.default.parallelism`` if set,
    else 4 (a Connect client cannot ask the cluster)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    try:
        return int(spark.conf.get("spark.default.parallelism", "4") or 4)
    except Exception:
        return 4


class FrameTracking(Driver):
    """Tracked DataFrame runs on one SparkSession (classic or Spark Connect), with
    chains in the table ``config`` names.

    Chains are created and stamped by this process (the driver, or the Connect client),
    never by executors: creates go out concurrently while the attempt's job runs (a
    thread pool of ``threads``), and once the write committed each chain whose rows did
    not fail is stamped once with its root edge. Executors only compute.

    Chains of either mode work (the tracker's ``mode``; xor by default): a sum chain is
    stamped once with ``-r``, ``r`` its root edge. See docs/spark.md, "Chain modes and
    requests".
    Parameters as for :class:`~xor_ack_dynamodb.spark.attempts.Driver`, and:

    :param parallelism: how many read partitions to aim at (twice this); default
        Spark's default parallelism (4 under Connect unless
        ``spark.default.parallelism`` is set).
    :param tracker: your own tracker (or client: ``XorAckDynamoDB.from_config(config,
        client)``); on this path only the driver talks to it, so any tracker with the
        same methods works (a ``MemoryAck`` measures what tracking costs Spark itself,
        with no backend).
    :param edge_key: the 32-byte key edges derive from (default: random per object).
    :param transactions: send the creates and the stamps as ``create_many`` /
        ``stamp_many`` (TransactWriteItems of up to 100 chains: one request per 100
        roots each way instead of one per root, at twice the write units on DynamoDB;
        the tracker must have those methods). Off by default; see docs/spark.md,
        "Chain modes and requests" (measure on your backend:
        ``benchmarks/driver_requests.py``).
    """

    def __init__(
        self,
        spark: SparkSession,
        config: AckConfig,
        *,
        run_id: str | None = None,
        tracker: AckTracker | None = None,
        nonce: str | None = None,
        threads: int = DRIVER_THREADS,
        parallelism: int | None = None,
        heartbeat: bool | HeartbeatPolicy = True,
        edge_key: bytes | None = None,
        transactions: bool = False,
    ) -> None:
        # A given key (32 bytes) makes root edges reproducible: a re-run streaming
        # micro-batch must send the very values its first run sent (see :mod:`..streaming`).
        super().__init__(
            config,
            run_id=run_id,
            nonce=nonce,
            tracker=tracker,
            heartbeat=heartbeat,
            threads=threads,
            edge_key=edge_key,
        )
        if not is_connect(spark):
            driver_read_limit(spark)  # a bad spark.xorack.driverReadBytes fails here, before any request
        self.spark = spark
        self.transactions = transactions
        self.parallelism = parallelism or default_parallelism(spark)

    def run(
        self,
        roots: Sequence[Any],
        key: Callable[[Any], Any],
        job: FrameJob,
        *,
        max_attempts: int = 3,
        observer: RunObserver | None = None,
        progress: bool | None = None,
    ) -> RunReport:
        """Run ``job(attempt)`` (a :class:`FrameAttempt`) until every root's chain is
        acked, failed permanently, or ``max_attempts`` attempts were made; ``job`` reads
        the attempt's roots (:meth:`FrameAttempt.read_text` or :meth:`FrameAttempt.start`)
        and ends in one :meth:`TrackedFrame.write`.

        Each attempt's chains are created in the background while its job runs. A job
        that raises (Spark aborted it) ends its attempt: its chains are read like any
        others. Chains still pending then can no longer complete; they are failed, so
        that no late write can ack them, and replayed. Configuration errors of the
        library (:class:`~xor_ack_dynamodb.errors.XorAckError`) propagate, after the
        attempt's chains are failed.

        The run's progress is shown (a bar on a terminal, log lines at INFO otherwise)
        unless ``progress=False``, or an ``observer`` of yours shows it
        (:class:`~xor_ack_dynamodb.spark.progress.RunProgress`).
        """

        run_keys = [key(root) for root in roots]

        def plan(number: int, todo: list[Any], keys: list[Any], tags: list[str]) -> Plan:
            edges = {tag: self.edges.root(tag) for tag in tags}
            commit = Commit()
            of = {tag: (root, k) for root, k, tag in zip(todo, keys, tags, strict=True)}

            def run(starting: Any, chosen: list[str], failed: dict[str, str], acked: bool) -> FrameAttempt:
                attempt = FrameAttempt(
                    self,
                    number,
                    [of[t][0] for t in chosen],
                    [of[t][1] for t in chosen],
                    chosen,
                    edges,
                    starting,
                    commit,
                    run_keys,
                    rerun=lambda c, f, a: _written(run(starting, c, f, a)),
                    failed=failed,
                    acked=acked,
                )
                if chosen:
                    job(attempt)
                else:
                    attempt.fail_the_rest()
                return attempt

            return Plan(
                tags,
                lambda starting: run(starting, tags, {}, False),
                f"attempt {number}",
                self.tags.owner,
                beat_owner=self.tags.owner,
                start=partial(self._create, edges, number),
                notes=lambda: commit.notes,
                known=commit.known,
            )

        return self.run_attempts(
            roots, key, plan, max_attempts=max_attempts, observer=observer, progress=progress
        )

    def run_rows(
        self,
        df: DataFrame,
        key: str,
        job: Callable[[TrackedFrame], Any],
        *,
        max_attempts: int = 3,
        observer: RunObserver | None = None,
        progress: bool | None = None,
    ) -> RunReport:
        """Roots from the data: one root per distinct value of column ``key`` of ``df``
        (as a string; found by one small Spark job), tracked through ``job(frame)``,
        where ``frame`` holds the rows of the attempt's roots (an attempt after the
        first, only those of the roots it replays) and ``job`` ends in one
        :meth:`TrackedFrame.write`. Every attempt may write to the same location.
        :class:`InvalidConfig` before any request if a row has no key."""
        from pyspark.sql import functions as F

        found = df.select(F.col(key).cast("string").alias("k")).distinct().collect()
        keys = sorted(row[0] for row in found if row[0] is not None)
        if len(keys) != len(found):
            raise InvalidConfig(f"rows without a key in column {key!r}: every row needs a root")
        return self.run(
            keys,
            lambda k: k,
            lambda attempt: job(attempt.start(df, key, others="skip")),
            max_attempts=max_attempts,
            observer=observer,
            progress=progress,
        )

    def publish_pending(self, location: str | Location) -> int:
        """Publish the acked rows that earlier writes into ``location`` staged and did
        not publish (a run that died between its acks and its publish); see
        :func:`.commit.recover`, which every tracked write runs first. Returns how many
        writes were published."""
        return protocol.recover(self.spark, Location.of(location), self.tracker)

    def acked_rows(self, df: DataFrame, report: RunReport, tag_column: str = "xor_ack_tag") -> DataFrame:
        """The rows of ``df`` (written by this run's attempts) whose root ended acked,
        and the rows of several roots (tag NULL: their write stands only because every
        one of its roots acked): what an aggregate must be computed over to stay exact
        under replay. (A published location holds only such rows already: this is for
        rows read where they were staged, or written before.)"""
        from pyspark.sql import functions as F

        several = df.where(F.col(tag_column).isNull())
        return with_tags(df, tag_column, sorted(report.acked_tags())).unionByName(several)


def _written(attempt: FrameAttempt) -> WriteResult:
    """The write of a job run again over some roots (it must write, as its first run did)."""
    if attempt.write_result is None:
        raise InvalidConfig("the job, run again over the roots that did not fail, did not write")
    return attempt.write_result
