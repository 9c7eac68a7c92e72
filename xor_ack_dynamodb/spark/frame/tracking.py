"""Tracked DataFrame runs: :class:`FrameTracking` runs a job attempt after attempt (the
loop of :mod:`~xor_ack_dynamodb.spark.attempts`); the job gets a
:class:`~.attempt.FrameAttempt`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ...errors import InvalidConfig
from ..attempts import Driver, Plan
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
    """Tracked DataFrame runs on one SparkSession (classic or Spark Connect), chains of
    the tracker's mode in the table ``config`` names. Only this process (the driver, or
    the Connect client) sends requests, so any tracker works. Parameters as for
    :class:`~xor_ack_dynamodb.spark.attempts.Driver`, and ``edge_key``: the 32-byte key
    root edges derive from (default: random per object; a stream's is its id's).
    """

    def __init__(
        self,
        spark: SparkSession,
        config: AckConfig,
        *,
        run_id: str | None = None,
        tracker: AckTracker | None = None,
        nonce: str | None = None,
        heartbeat: bool | HeartbeatPolicy = True,
        edge_key: bytes | None = None,
        transactions: bool = False,
    ) -> None:
        super().__init__(
            config,
            run_id=run_id,
            nonce=nonce,
            tracker=tracker,
            heartbeat=heartbeat,
            transactions=transactions,
            edge_key=edge_key,
        )
        if not is_connect(spark):
            driver_read_limit(spark)  # a bad spark.xorack.driverReadBytes fails here, before any request
        self.spark = spark
        self.parallelism = default_parallelism(spark)

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
        """Run ``job(attempt)`` (a :class:`FrameAttempt`, ending in one
        :meth:`TrackedFrame.write`) until every root's chain is acked, failed
        permanently, or ``max_attempts`` attempts were made. A job that raises ends its
        attempt: chains still pending are failed, so that no late write can ack them, and
        replayed (a library error, :class:`~xor_ack_dynamodb.errors.XorAckError`,
        propagates after). Progress is shown unless ``progress=False`` or an ``observer``
        is given."""

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

            first = partial(run, chosen=tags, failed={}, acked=False)
            return self.own_plan(number, edges, first, notes=lambda: commit.notes, known=commit.known)

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
        """One root per distinct value of column ``key`` of ``df`` (as a string),
        tracked through ``job(frame)``: the rows of the attempt's roots, ending in one
        :meth:`TrackedFrame.write`. :class:`InvalidConfig` before any request if a row
        has no key."""
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
        """:func:`.commit.recover` (which every tracked write runs first): finish what
        earlier writes into ``location`` did not. Returns how many rounds it published."""
        return protocol.recover(self.spark, Location.of(location), self.tracker)

    def acked_rows(self, df: DataFrame, report: RunReport, tag_column: str = "xor_ack_tag") -> DataFrame:
        """The rows of ``df`` (written by this run) whose root ended acked, and the rows
        of several roots (their write stood only if all its roots acked): what stays
        exact under replay, for rows read where they were staged."""
        from pyspark.sql import functions as F

        several = df.where(F.col(tag_column).isNull())
        return with_tags(df, tag_column, sorted(report.acked_tags())).unionByName(several)


def _written(attempt: FrameAttempt) -> WriteResult:
    """The write of a job run again over some roots (it must write, as its first run did)."""
    if attempt.write_result is None:
        raise InvalidConfig("the job, run again over the roots that did not fail, did not write")
    return attempt.write_result
