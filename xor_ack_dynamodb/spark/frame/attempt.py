"""Tracked DataFrame runs: :class:`FrameTracking` runs a job attempt after attempt (the
loop of :mod:`~xor_ack_dynamodb.spark.attempts`); the job gets a :class:`FrameAttempt`:
its roots, their sources, and the one tracked write whose commit acks them
(:mod:`.commit`). When roots failed and the write holds rows of several roots (a
``group_by`` across roots), the write is discarded and the job run again over the other
roots before any stamp.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import InvalidConfig
from ..attempts import Driver, Plan
from ..chains import Owners, Started
from ..context import is_connect
from ..heartbeat import HeartbeatPolicy
from ..outcomes import Attempt, RunObserver, RunReport
from ..output import Location, RestagedApart
from ..tags import Group
from . import commit as protocol
from .columns import TRACKING, Seen, with_tags
from .driver_read import driver_read_limit
from .sources import TextRoot, read_text, start
from .tracked import Probes, TrackedFrame, WriteResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ...config import AckConfig
    from ...interfaces import AckTracker

__all__ = ["FrameAttempt", "FrameTracking", "Commit", "FrameJob", "RestagedApart"]


@dataclass
class Commit:
    """How an attempt stamps its chains once its write committed: by default as a run's
    own; a stream's batch and handed chains name, own and stamp theirs otherwise."""

    #: Op ids ``<op_prefix>/<tag>`` (default: ``<run owner>.<attempt>/<write id>``).
    op_prefix: str | None = None
    #: Who each chain belongs to, and its group (default: the run's).
    owner: Owners | None = None
    group: Group | Mapping[str, Group] | None = None
    write_id: str | None = None
    #: Keep the staged rows of chains others may ack later (handed chains, open stream
    #: roots), for a later publish round (:func:`.commit.recover`).
    keep_unacked: bool = False
    #: Told what the write saw and the stamps, before they go out.
    before: Callable[[Seen, dict[str, int]], None] | None = None
    #: Receives the outcomes the stamps decided (None: not kept), for the settle.
    known: dict[str, Attempt] | None = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)


class FrameAttempt:
    """One attempt of a tracked DataFrame run, handed to the job (module doc).

    :param starting: resolves to the chains started (only those are stamped).
    :param job: what :meth:`_again` runs again over some roots; None where roots may end
        at different times (handed chains, streams): there ``group_by`` groups per root.
    :param failed: roots failed by an earlier run of the job in this attempt.
    :param acked: the roots are acked already: the write stages and publishes only.
    """

    def __init__(
        self,
        tracking: FrameTracking,
        number: int,
        roots: Sequence[Any],
        keys: Sequence[Any],
        tags: Sequence[str],
        edges: dict[str, int],
        starting: Future[Started],
        commit: Commit | None = None,
        run_keys: Sequence[Any] | None = None,
        *,
        job: FrameJob | None = None,
        failed: Mapping[str, str] | None = None,
        acked: bool = False,
    ) -> None:
        self.tracking = tracking
        self.spark = tracking.spark
        self.number = number
        self.roots = list(roots)
        self.keys = list(keys)
        self.tags = list(tags)
        self.root_edges = edges
        self._starting = starting
        self.commit = commit or Commit()
        self.run_keys = list(run_keys) if run_keys is not None else None
        self.job = job
        self.per_root = job is None
        self.failed = dict(failed or {})
        self.acked = acked
        self.write_result: WriteResult | None = None
        self._lock = threading.Lock()

    def read_text(
        self,
        path: Callable[[Any], str | bytes | os.PathLike[str]] | None = None,
        *,
        bad_bytes: str = "replace",
        normalize: str = "NFC",
    ) -> TrackedFrame:
        """The lines of each root's file (``path(root)``, default the root: a local path
        or a URI Spark reads), or of the files under a directory; columns ``path`` (the
        line's file) and ``line`` (:mod:`.sources`)."""
        locate = path or (lambda root: root)
        roots = [TextRoot(chain, os.fspath(locate(root))) for chain, root in enumerate(self.roots)]
        build, missing = read_text(
            self.spark,
            roots,
            bad_bytes=bad_bytes,
            normalize=normalize,
            partitions=2 * self.tracking.parallelism,
        )
        for chain, reason in missing.items():
            self.failed.setdefault(self.tags[chain], reason)
        return TrackedFrame(build, self)

    def start(self, df: DataFrame, key: str, *, others: str | None = None) -> TrackedFrame:
        """Track the rows of ``df`` whose column ``key`` (as a string, by
        :func:`.keys.match_key`) is one of this attempt's roots' (``str``) keys. Rows of
        the run's other roots are left out; a row whose key is no root of the run raises
        :class:`.keys.UnknownRootKey` before the job (``others="error"``, the default in
        a run) or is left out (``"skip"``, the default for handed chains)."""
        others = others or ("error" if self.run_keys is not None else "skip")
        if others not in ("error", "skip"):
            raise InvalidConfig(f"others must be 'error' or 'skip', got {others!r}")
        if any(not isinstance(k, str) for k in self.keys):
            raise InvalidConfig("start() matches str keys; read files with read_text()")
        chains = [(k, i) for i, k in enumerate(self.keys)]
        known = [str(k) for k in self.run_keys or self.keys] if others == "error" else None
        rows = start(df, key, chains, known=known)
        return TrackedFrame(lambda probes: rows, self)

    def write(
        self,
        frame: TrackedFrame,
        location: str | os.PathLike[str] | Location,
        *,
        format: str,
        tag_column: str,
        publish: bool = True,
    ) -> WriteResult:
        """The attempt's one tracked write (:meth:`TrackedFrame.write`): stage, ledger,
        stamps, publish (:mod:`.commit`), or a rerun (module doc). Raises
        :class:`~xor_ack_dynamodb.spark.output.OutputRefused` before any task,
        :class:`InvalidConfig` for a second write, :class:`RestagedApart`."""
        with self._lock:
            if self.write_result is not None:
                raise InvalidConfig("one tracked write per attempt: its commit acks the chains")
            store = Location.of(location)
            probes = Probes()
            df = frame.build(probes)  # once: each build is dozens of calls into the JVM
            columns = tuple(c for c in df.columns if c not in TRACKING)
            protocol.check_write(self.spark, columns, store, format, tag_column)
            if publish:
                protocol.recover(self.spark, store, self.tracking.tracker)
            owner = self.tracking.tags.owner
            # A write id given is the first write's; a rerun's is its own.
            write_id = self.commit.write_id or protocol.new_write_id(owner, self.number)
            self.commit.write_id = None
            staged = protocol.Staged(store, write_id, tag_column, columns, format)
            seen = protocol.stage(df, staged, self.tags, probes)
            started = self._starting.result()[0]
            seen.errors = {**seen.errors, **self.failed}
            left = [t for t in self.tags if t not in seen.errors and t in started]
            if seen.cross and self.acked and seen.errors:
                staged.staging.remove()
                raise RestagedApart.of(seen.errors, "rows were staged")
            if seen.cross and len(left) < len(self.tags) and not self.acked:
                return self._again(staged, left, seen.errors, False)
            stamps = {t: self.tracking.group.finished(self.root_edges[t]) for t in left}
            if self.commit.before is not None:
                self.commit.before(seen, stamps)
            sender = self._sender(write_id)
            protocol.write_ledger(staged, self.tags, stamps, seen, sender, publish=publish)
            known: dict[str, Attempt] = {t: Attempt(t, "acked") for t in self.tags} if self.acked else {}
            counts = Counter[str]() if self.acked else self._stamp(stamps, seen, sender, known)
            acked = {t for t, a in known.items() if a.state == "acked"}
            if seen.cross and acked != set(left):
                staged.meta.child(f"{write_id}.json").remove()
                return self._again(staged, sorted(acked), {}, True, counts)
            if publish:
                keep = self.commit.keep_unacked and acked != set(self.tags) & started
                protocol.publish(self.spark, staged, acked, whole=acked == set(self.tags), keep_staging=keep)
            self.write_result = WriteResult(seen.rows, write_id, counts, staged.staging.url)
            return self.write_result

    def fail_the_rest(self) -> WriteResult:
        """No root is left to run the job over: fail the failed ones; nothing is written
        and the job does not run (``runs`` 0: a run that discarded its write counts it)."""
        write_id = protocol.new_write_id(self.tracking.tags.owner, self.number)
        sender = self._sender(write_id)
        counts = self._stamp({}, Seen(errors=dict(self.failed)), sender, {})
        self.write_result = WriteResult(0, write_id, counts, runs=0)
        return self.write_result

    def _sender(self, write_id: str) -> protocol.Sender:
        """How write ``write_id`` stamps: as :attr:`commit` says, else as the run's own."""
        owner = self.tracking.tags.owner
        return protocol.Sender(
            self.commit.op_prefix or f"{owner}.{self.number}/{write_id}",
            self.commit.owner or owner,
            self.commit.group or self.tracking.group,
        )

    def _again(
        self,
        staged: protocol.Staged,
        tags: list[str],
        failed: dict[str, str],
        acked: bool,
        counts: Counter[str] | None = None,
    ) -> WriteResult:
        """Discard a write of rows of several roots and make it again: the job run over
        ``tags`` (``failed`` are failed by this write; ``acked``: they are acked already,
        the write only publishes)."""
        staged.staging.remove()
        if self.job is None:
            raise InvalidConfig(
                "rows of several roots (a group_by across roots) where roots may end at different "
                "times: group per root (group_by(..., per_root=True))"
            )
        of = dict(zip(self.tags, zip(self.roots, self.keys, strict=True), strict=True))
        again = FrameAttempt(
            self.tracking,
            self.number,
            [of[t][0] for t in tags],
            [of[t][1] for t in tags],
            tags,
            self.root_edges,
            self._starting,
            self.commit,
            self.run_keys,
            job=self.job,
            failed=failed,
            acked=acked,
        )
        if tags:
            self.job(again)
        else:
            again.fail_the_rest()
        result = again.write_result
        if result is None:
            raise InvalidConfig("the job, run again over the roots that did not fail, did not write")
        result.runs += 1
        result.counts.update(counts or {})
        self.write_result = result
        return result

    def _stamp(
        self, stamps: dict[str, int], seen: Seen, sender: protocol.Sender, acked: dict[str, Attempt]
    ) -> Counter[str]:
        """Stamp each started chain once and fail the failed ones (:meth:`Driver.commit`);
        ``acked`` receives the outcomes the stamps decided."""
        counts = self.tracking.commit(
            stamps,
            seen.errors,
            seen.notes,
            sender.op_prefix,
            starting=self._starting,
            noted=self.commit.notes,
            owner=sender.owner,
            group=sender.group,
            known=acked,
        )
        if self.commit.known is not None:
            self.commit.known.update(acked)
        return counts


FrameJob = Callable[[FrameAttempt], Any]


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
        self.spark = spark
        if not is_connect(spark):
            driver_read_limit(spark)  # a bad spark.xorack.driverReadBytes fails here, before any request
            self.parallelism = int(spark.sparkContext.defaultParallelism)
        else:  # a Connect client cannot ask the cluster: spark.default.parallelism if set, else 4
            try:
                self.parallelism = int(spark.conf.get("spark.default.parallelism", "4") or 4)
            except Exception:
                self.parallelism = 4

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

            def run(starting: Future[Started]) -> None:
                job(FrameAttempt(self, number, todo, keys, tags, edges, starting, commit, run_keys, job=job))

            return self.own_plan(number, edges, run, notes=lambda: commit.notes, known=commit.known)

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
