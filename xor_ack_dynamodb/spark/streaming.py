"""Structured Streaming (docs/spark.md, "Structured Streaming"): :class:`StreamTracking`,
a ``foreachBatch`` function, tracks each root (a key column's value) with a chain tagged
``<stream id>/<escaped key>``. A re-run batch is applied once (its op ids and edges derive
from the stream id, the batch id and the input); a key whose chain ended, expired or is
another owner's is refused, not created afresh.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.factory import MAX_OWNER
from ..errors import InvalidConfig, NotOwner, OpIdReused, XorAckError
from ..stores.dynamodb.tracker import XorAckDynamoDB
from .attempts import Plan
from .chains import CHAIN_ENDED, Started, create_chains, refuse_delete_on_ack, snapshot
from .frame import FrameAttempt, FrameTracking, TrackedFrame
from .frame.attempt import Commit
from .frame.columns import with_tags
from .frame.commit import SINK_FORMATS, STAGING
from .outcomes import CONFLICT, Attempt
from .output import Location
from .tags import Group, escape_key, escape_run

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..config import AckConfig
    from ..interfaces import AckTracker
    from ..status import ChainStatus

__all__ = ["StreamTracking", "BatchReport", "StreamJob"]

log = logging.getLogger("xor_ack_dynamodb.spark")

#: ``job(frame, batch_id)``: the batch's tracked rows in, the tracked rows to write out.
StreamJob = Callable[[TrackedFrame, int], TrackedFrame]
#: ``hook(batch_id, phase)``, a test hook on the driver: ``"written"`` (nothing stamped
#: yet), ``"stamped"`` (no report yet); raising there fails the micro-batch.
BatchHook = Callable[[int, str], None]

_KEY = "_xa_stream_key"
_CLOSES = "_xa_stream_closes"
ENDED = "the chain of this key already ended"
#: Why a re-run batch's root was refused: its first run sent another value under the
#: same op id (the source gave the batch other rows). Its chain is left to expire.
DIFFERS = "the re-run batch differs from its first run for this key (a non-deterministic source?)"


@dataclass
class BatchReport:
    """What one micro-batch did with its roots (keys): ``acked``, ``pending`` (open
    roots), ``failed`` (key -> reason: replayable), ``refused`` (key -> why nothing was
    sent to its chain), the rows written and the driver's request counts."""

    batch_id: int
    tags: dict[str, str] = field(default_factory=dict)
    acked: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    rows: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> BatchReport:
        return cls(**json.loads(text))


class StreamTracking:
    """The ``foreachBatch`` function of a tracked streaming query (module doc).

    :param config: the chains' table (under Spark Connect this object travels to the
        server, which builds its own tracker).
    :param stream_id: names the query's chains (owner ``stream/<stream_id>``) and op ids:
        the same for every run of the query over one checkpoint, unique per query.
    :param location: a directory every node sees (batches and reports).
    :param key: the column whose (string) value names a row's root; a row without one
        fails the batch with :class:`InvalidConfig` before any request.
    :param closes: a boolean column true on rows that close their root (``None``: all).

    Raises :class:`InvalidConfig` for a bad argument (nothing is sent).
    """

    def __init__(
        self,
        config: AckConfig,
        job: StreamJob,
        *,
        stream_id: str,
        location: str | Path,
        key: str,
        closes: str | None = None,
        format: str = "parquet",
        tracker: AckTracker | None = None,
        hook: BatchHook | None = None,
    ) -> None:
        if not isinstance(stream_id, str) or not stream_id:
            raise InvalidConfig("stream_id must be a non-empty str")
        self.owner = f"stream/{escape_run(stream_id)}"
        if len(self.owner) > MAX_OWNER:
            raise InvalidConfig(f"stream_id is too long (the owner would exceed {MAX_OWNER} characters)")
        if format not in SINK_FORMATS:
            raise InvalidConfig(f"format must be one of {SINK_FORMATS}, got {format!r}")
        text = str(location)
        if text.startswith("s3://"):
            raise InvalidConfig("a stream's location must be a directory (batches are replaced on re-run)")
        if not isinstance(key, str) or not key:
            raise InvalidConfig("key must be the name of a column")
        refuse_delete_on_ack(tracker, config)
        self.config = config
        self.job = job
        self.stream_id = stream_id
        self.location = Path(text).absolute()
        self.key = key
        self.closes = closes
        self.format = format
        self.hook = hook
        self._tracker = tracker
        digest = hashlib.blake2b(
            stream_id.encode("utf-8", "surrogatepass"), person=b"xor-ack-stream", digest_size=32
        )
        self.edge_key = digest.digest()

    # Under Spark Connect the function is pickled to the server.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_tracker"] = None
        return state

    @property
    def tracker(self) -> AckTracker:
        if self._tracker is None:
            self._tracker = XorAckDynamoDB.from_config(self.config)
        return self._tracker

    def tag(self, key: str) -> str:
        return f"{escape_run(self.stream_id)}/{escape_key(key)}"

    @property
    def _reports(self) -> Location:
        return Location(str(self.location / "_xor_ack"))

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Process micro-batch ``batch_id``; an error fails the query, whose restart runs
        the batch again."""
        from pyspark.sql import functions as F

        spark = df.sparkSession
        before = snapshot(self.tracker)
        key = F.col(self.key).cast("string")
        closes = F.coalesce(F.col(self.closes).cast("boolean"), F.lit(False)) if self.closes else F.lit(True)
        found = (
            df.select(key.alias(_KEY), closes.alias(_CLOSES))
            .groupBy(_KEY)
            .agg(F.max(_CLOSES).alias(_CLOSES))
            .collect()
        )
        if any(row[_KEY] is None for row in found):
            raise InvalidConfig(f"batch {batch_id}: rows without a key in column {self.key!r}")
        keys = sorted(row[_KEY] for row in found)
        report = BatchReport(batch_id, {k: self.tag(k) for k in keys})
        if not keys:  # nothing to track or write
            self._save(report)
            return
        tracking = FrameTracking(
            spark,
            self.config,
            run_id=self.stream_id,
            tracker=self.tracker,
            edge_key=self.edge_key,
        )
        if tracking.group.is_sum:
            raise InvalidConfig(
                "a tracked stream uses xor chains (its carries are XORed in): use an xor-mode tracker"
            )
        tags = [report.tags[k] for k in keys]
        edges = {tag: tracking.edges.root(f"{batch_id}/{tag}") for tag in tags}
        closing = {report.tags[row[_KEY]] for row in found if row[_CLOSES]}
        commit = Commit(
            op_prefix=f"{self.stream_id}/{batch_id}/sink",
            owner=self.owner,
            write_id="batch",
            keep_unacked=True,
            before=lambda seen, stamps: self.hook(batch_id, "written") if self.hook is not None else None,
            known=None,
        )

        def job(starting: Future[Started]) -> None:
            attempt = FrameAttempt(tracking, batch_id + 1, keys, keys, tags, edges, starting, commit)
            frame = self.job(attempt.start(df, self.key, others="skip"), batch_id)
            if not isinstance(frame, TrackedFrame):
                raise InvalidConfig(
                    f"the stream's job must return a TrackedFrame, not {type(frame).__name__}"
                )
            out = Location(str(self.location / f"batch-{batch_id:08d}"))
            out.remove()  # a re-run replaces what a failed run left
            report.rows = frame.write(out, format=self.format).rows

        # A failed batch leaves its chains pending for its re-run: nothing is settled.
        settled, _ = tracking.attempt(
            Plan(
                tags,
                job,
                f"stream {self.stream_id} batch {batch_id}",
                self.owner,
                start=partial(self._start, tracking, batch_id, edges, closing),
                refused_state="refused",
                pending=lambda tag: (
                    "still pending after its closing batch was written" if tag in closing else None
                ),
                raises=(Exception,),
                settle_raised=False,
            )
        )
        for key_, tag in report.tags.items():
            outcome = settled[tag]
            if outcome.state == "refused":
                report.refused[key_] = outcome.reason or CONFLICT
            elif outcome.state == "acked":
                report.acked.append(key_)
            elif outcome.state == "pending":
                report.pending.append(key_)
            else:
                report.failed[key_] = outcome.reason or outcome.state
        counts = tracking.requests()
        counts.subtract(before)
        report.counts = dict(+counts)
        if self.hook is not None:
            self.hook(batch_id, "stamped")
        self._save(report)
        log.info(
            "stream %s batch %d: %d acked, %d pending, %d failed, %d refused",
            self.stream_id,
            batch_id,
            len(report.acked),
            len(report.pending),
            len(report.failed),
            len(report.refused),
        )

    def _save(self, report: BatchReport) -> None:
        self._reports.put(f"batch-{report.batch_id:08d}.json", report.to_json().encode("utf-8"))

    def _start(
        self, tracking: FrameTracking, batch_id: int, edges: dict[str, int], closing: set[str]
    ) -> Started:
        """Create each chain, or continue one an earlier batch left open (an open root's
        chain also holds its carry edge until its closing batch). Returns the tags
        started and why the others were not."""
        tracker = self.tracker
        prefix = f"{self.stream_id}/{batch_id}"
        carries = {tag: tracking.edges.root(f"carry/{tag}") for tag in edges}
        # A chain that expired waiting for its key's next rows must not be revived by a
        # create (which overwrites an expired chain): it is refused and replayable.
        expired = {t for t, s in tracker.status_many(sorted(edges)).items() if s.state == "expired"}

        def exists(tag: str, error: XorAckError) -> str | None:
            """The create found the chain: continue it (or the re-run batch differs)."""
            if isinstance(error, OpIdReused):
                return DIFFERS
            more = edges[tag] ^ carries[tag] if tag in closing else edges[tag]
            try:
                tracker.stamp(tag, more.to_bytes(8, "big"), op_id=f"{prefix}/start/{tag}", owner=self.owner)
            except NotOwner:
                return CONFLICT
            except OpIdReused:
                return DIFFERS
            except CHAIN_ENDED as exc:
                return f"{ENDED} ({exc.code})"
            return None

        fresh = {
            t: e if t in closing else e ^ carries[t] for t, e in sorted(edges.items()) if t not in expired
        }
        created, refused = create_chains(
            tracker,
            fresh,
            Group("xor", 8),
            f"{prefix}/create",
            owner=self.owner,
            threads=tracking.threads,
            exists=exists,
            replace_expired=False,  # a chain that expires after the read above is kept, not overwritten
        )
        return created, {**refused, **dict.fromkeys(expired, f"{ENDED} (expired)")}

    def reports(self) -> list[BatchReport]:
        """Every batch's report, by batch id."""
        found = self._reports
        return [BatchReport.from_json((found.get(n) or b"").decode()) for n in found.names("batch-", ".json")]

    def _chains(self) -> dict[str, tuple[str, ChainStatus]]:
        """The stream's own chains of every reported key not refused: tag -> (key, status)."""
        tags = {t: k for b in self.reports() for k, t in b.tags.items() if k not in b.refused}
        found = self.tracker.status_many(sorted(tags)) if tags else {}
        return {t: (tags[t], s) for t, s in sorted(found.items()) if s.owner == self.owner}

    def replayable(self) -> list[Attempt]:
        """The roots whose chains failed or expired (read now), one :class:`Attempt` each
        (``note``: the key), for the caller to replay; refused roots are not listed."""
        chains = self._chains().items()
        return [Attempt(t, s.state, s.reason, k) for t, (k, s) in chains if s.state in ("failed", "expired")]

    def acked_rows(self, spark: SparkSession, tag_column: str = "xor_ack_tag") -> DataFrame:
        """The written rows of every chain that reads acked now: what each batch
        published and, for a root acked by a later batch, what earlier ones kept staged."""
        acked = {t for t, (_, s) in self._chains().items() if s.state == "acked"}
        reader = spark.read.format(self.format)
        if self.format == "csv":
            reader = reader.option("header", "true")
        batches = sorted(self.location.glob("batch-*"))
        published = [str(b) for b in batches if any(b.glob("part-*"))]
        written = reader.load(published) if published else None
        for batch in batches:
            staged = batch / STAGING / "batch"
            claim = Location(str(batch / STAGING)).get("batch.published")
            wanted = sorted(acked - set(json.loads(claim)["tags"] if claim else ()))
            if not staged.is_dir() or not wanted:
                continue
            rows = with_tags(spark.read.parquet(str(staged)), tag_column, wanted)
            users = [c for c in rows.columns if not c.startswith("_xa_")]
            rows = rows.select(*(written.columns if written is not None else users))
            written = rows if written is None else written.unionByName(rows)
        if written is None:
            return spark.createDataFrame([], f"{tag_column} string")
        return with_tags(written, tag_column, sorted(acked))
