"""Tracked DataFrames: per-record bookkeeping in the JVM, one stamp per chain per job.

A :class:`TrackedFrame` is a DataFrame with five hidden tracking columns (see
:mod:`.arrowxor`): the chain's tag, the row's 64-bit edge, a ghost flag, a failure
reason and a note. Its operations keep one invariant, per chain: **the XOR of the edges
of the chain's rows is the chain's outstanding root edge** (the value the chain was
created with). Nothing is stamped along the way; the sink writes the data and its commit
records, per chain, the XOR of everything written; the client of the run then stamps
each chain once with it. The chain reads zero exactly when every row the chain's root
became reached a committed write.

How each operation keeps the invariant, with Spark SQL expressions only (no Python per
record):

``select``, ``with_column``, ``drop``
    one row in, one row out, edge unchanged.
``explode(array, alias)``
    a row with edge ``e`` and an array of ``n`` elements becomes ``n`` rows (Spark's
    ``posexplode_outer``); child ``i`` gets ``h(i) ^ h(i+1)`` where ``h(0) = e``,
    ``h(n) = 0`` and otherwise ``h(i) = xxhash64(run key, e, i)``. The children's XOR
    telescopes to ``e``; a child lost or written twice leaves a nonzero difference
    (``h`` at the ends of the missing runs), like a lost tuple in Storm. A row with an
    empty or null array becomes a ghost and keeps ``e``.
``where(condition)``
    a row that fails the condition becomes a ghost (it is finished: its edge still
    reaches the sink and is acked there, but it is not written).
``fail_when(condition, reason)``
    the row becomes a ghost carrying the reason: its chain is failed instead of stamped
    (and replayed, unless ``permanent``), the other chains are untouched.
``group_by(*keys).agg(*exprs)``
    groups per chain: the grouping keys are the chain's tag, the ghost flag and the
    user's keys (ghosts of a chain collapse into one row); each group's edge is the
    ``bit_xor`` of its rows' edges, so the per-chain XOR is unchanged. Groups never mix
    chains: an aggregate across roots is made *after* the run, over the rows of the
    attempts that ended acked (see :meth:`FrameRun.acked_rows`), which is what keeps the
    output exact under replay (a failed attempt's partial rows are never counted).
``join(lookup, on, how)``
    with an untracked DataFrame that has at most one row per key (checked): a left join
    keeps every row once; an inner join turns rows without a match into ghosts. A join
    that could repeat a row (duplicate keys) would double its edge and is refused.
    Joining two tracked frames (rows of two chains in one) is not supported.
``write(location)``
    the ``xor_ack_sink`` data source (see :mod:`.frame_sink`).

The run's sources: :meth:`FrameAttempt.read_text` (files, read in splits by
:mod:`.frame_source`, every split accounted for) and :meth:`FrameAttempt.start` (any
DataFrame with a key column: rows get ``xxhash64(run key, tag, monotonically_increasing_id())``
and a ``mapInArrow`` step balances them per partition with one ghost row per chain, in
the same pass; each root also gets one ghost row holding its root edge, so a root with
no rows is acked empty).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InvalidConfig, XorAckError
from .arrowxor import CHAIN, EDGE, ERR, GHOST, NOTE, TRACKING, ChainSums, to_signed
from .driver import DRIVER_THREADS, check_roots, new_run_id
from .edges import EdgeKey
from .executor import snapshot
from .frame_sink import SINK_FORMATS, PartStore, TrackedSinkSource, read_ledger
from .frame_source import (
    CHUNK_BYTES,
    SPLIT_BYTES,
    TextRoot,
    TrackedTextSource,
    hook_option,
    path_bytes,
    roots_option,
)
from .group import Group, group_for
from .heartbeat import Heartbeat, HeartbeatPolicy, heartbeat_tracker
from .outcomes import (
    PERMANENT,
    Attempt,
    Chains,
    RootOutcome,
    RunObserver,
    RunReport,
    apply_acks,
    create_chains,
    record_attempt,
    refuse_delete_on_ack,
    settle,
)
from .tags import TagScheme

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

    from ..config import AckConfig

__all__ = [
    "FrameTracking",
    "FrameAttempt",
    "TrackedFrame",
    "TrackedGroups",
    "WriteResult",
    "UntrackedFrame",
    "UntrackedAttempt",
    "FrameJob",
    "is_connect",
    "register_sources",
]

log = logging.getLogger("xor_ack_dynamodb.spark")

_ARRAY = "_xa_arr"
_COUNT = "_xa_n"
_POS = "_xa_pos"
_MATCH = "_xa_match"
_KEY = "_xa_key"
_ROOT = "_xa_root"


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (no SparkContext, no RDDs)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def register_sources(spark: SparkSession) -> None:
    """Register the ``xor_ack_text`` and ``xor_ack_sink`` data sources in ``spark`` (a
    classic session that has them already is left alone: re-registering logs a warning)."""
    for source in (TrackedTextSource, TrackedSinkSource):
        if not is_connect(spark):
            try:
                manager = spark._jsparkSession.sessionState().dataSourceManager()
                if manager.dataSourceExists(source.name()):
                    continue
            except Exception:  # an internal API: register anyway
                pass
        spark.dataSource.register(source)


def default_parallelism(spark: SparkSession) -> int:
    """Spark's default parallelism (classic), else ``spark.default.parallelism`` if set,
    else 4 (a Connect client cannot ask the cluster)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    try:
        return int(spark.conf.get("spark.default.parallelism", "4") or 4)
    except Exception:
        return 4


def _s3_env() -> tuple[str | None, str | None]:
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return endpoint, region


def part_store(location: str | os.PathLike[str]) -> PartStore:
    """Where a write goes: ``s3://bucket/prefix`` (endpoint and region read here, from
    the environment) or a directory (made absolute)."""
    text = os.fspath(location)
    if text.startswith("s3://"):
        if not text[len("s3://") :].split("/")[0]:
            raise InvalidConfig(f"no bucket in {text!r}")
        return PartStore(text, *_s3_env())
    return PartStore(os.path.abspath(text))


@dataclass
class WriteResult:
    """What a tracked write did: rows written (ghosts not counted), chains stamped,
    acked and failed by the client, and the ledger's name in the location."""

    rows: int
    ledger: str
    counts: Counter[str] = field(default_factory=Counter)


class TrackedFrame:
    """A DataFrame whose rows carry their chains; see the module doc. Lazy: nothing runs
    until :meth:`write`."""

    def __init__(self, df: DataFrame, attempt: FrameAttempt) -> None:
        self._df = df
        self._attempt = attempt

    @property
    def df(self) -> DataFrame:
        """The DataFrame itself, tracking columns included (read-only use)."""
        return self._df

    @property
    def columns(self) -> list[str]:
        """The user's columns."""
        return [c for c in self._df.columns if c not in TRACKING]

    def _then(self, df: DataFrame) -> TrackedFrame:
        return TrackedFrame(df, self._attempt)

    def _run_key(self) -> Column:
        from pyspark.sql import functions as F

        return F.lit(self._attempt.run_key).cast("bigint")

    def select(self, *columns: str | Column) -> TrackedFrame:
        """Like ``select``; the tracking columns come along (``"*"`` is the user's
        columns)."""
        chosen: list[Any] = []
        for column in columns:
            if isinstance(column, str) and column == "*":
                chosen.extend(self.columns)
            elif isinstance(column, str) and column in TRACKING:
                raise InvalidConfig(f"{column} is a tracking column")
            else:
                chosen.append(column)
        return self._then(self._df.select(*chosen, *TRACKING))

    def with_column(self, name: str, column: Column) -> TrackedFrame:
        """Like ``withColumn``."""
        if name in TRACKING:
            raise InvalidConfig(f"{name} is a tracking column")
        return self._then(self._df.withColumn(name, column))

    def drop(self, *names: str) -> TrackedFrame:
        """Like ``drop`` (tracking columns cannot be dropped)."""
        if set(names) & set(TRACKING):
            raise InvalidConfig("tracking columns cannot be dropped")
        return self._then(self._df.drop(*names))

    def where(self, condition: Column) -> TrackedFrame:
        """Rows for which ``condition`` is not true become ghosts (finished, not
        written)."""
        from pyspark.sql import functions as F

        keep = F.coalesce(condition, F.lit(False))
        return self._then(self._df.withColumn(GHOST, F.col(GHOST) | ~keep))

    filter = where

    def fail_when(self, condition: Column, reason: str | Column, *, permanent: bool = False) -> TrackedFrame:
        """Rows for which ``condition`` is true fail their chain with ``reason`` (the
        first reason by sort order is kept per chain) and are not written. With
        ``permanent`` the root is not replayed."""
        from pyspark.sql import functions as F

        text = F.lit(reason) if isinstance(reason, str) else reason
        if permanent:
            text = F.concat(F.lit(PERMANENT), text)
        hit = F.coalesce(condition, F.lit(False))
        return self._then(
            self._df.withColumns(
                {
                    ERR: F.coalesce(F.col(ERR), F.when(hit, text)),
                    GHOST: F.col(GHOST) | hit,
                }
            )
        )

    def explode(self, array: str | Column, alias: str, *, position: str | None = None) -> TrackedFrame:
        """One row per element of ``array`` (named ``alias``; its index as ``position``
        if given); the other columns are kept. Edges telescope (module doc)."""
        from pyspark.sql import functions as F

        for name in (alias, position):
            if name in TRACKING:
                raise InvalidConfig(f"{name} is a tracking column")
        values = F.col(array) if isinstance(array, str) else array
        # The array's size is taken before the generator: referenced after it, it would
        # make Spark carry the whole array into every child row.
        base = self._df.withColumn(_ARRAY, F.when(~F.col(GHOST), values)).withColumn(_COUNT, F.size(_ARRAY))
        kept = [c for c in base.columns if c != _ARRAY and c != alias and c != position]
        exploded = base.select(*kept, F.posexplode_outer(_ARRAY).alias(_POS, alias))
        edge, pos, count = F.col(EDGE), F.col(_POS), F.col(_COUNT)
        run = self._run_key()
        head = F.when(pos == 0, edge).otherwise(F.xxhash64(run, edge, pos))
        tail = F.when(pos + 1 == count, F.lit(0).cast("bigint")).otherwise(F.xxhash64(run, edge, pos + 1))
        out = exploded.withColumns(
            {
                EDGE: F.when(pos.isNull(), edge).otherwise(head.bitwiseXOR(tail)),
                GHOST: F.col(GHOST) | pos.isNull(),
            }
        )
        out = out.withColumnRenamed(_POS, position) if position else out.drop(_POS)
        return self._then(out.drop(_COUNT))

    def group_by(self, *keys: str) -> TrackedGroups:
        """Group per chain and by ``keys`` (column names); see the module doc."""
        for key in keys:
            if not isinstance(key, str) or key in TRACKING:
                raise InvalidConfig(f"group_by takes the names of user columns, got {key!r}")
        return TrackedGroups(self, keys)

    def join(
        self, lookup: DataFrame, on: str | Sequence[str], how: str = "inner", *, check: bool = True
    ) -> TrackedFrame:
        """Join with an untracked ``lookup`` that has at most one row per ``on`` key.
        ``how`` is ``inner`` (rows without a match become ghosts) or ``left``. With
        ``check`` (default), a small job counts duplicate keys first and
        :class:`InvalidConfig` is raised if there are any."""
        from pyspark.sql import functions as F

        if isinstance(lookup, TrackedFrame):  # type: ignore[unreachable]
            raise InvalidConfig("joining two tracked frames would put two chains in one row; not supported")
        if how not in ("inner", "left"):
            raise InvalidConfig(f"how must be 'inner' or 'left', got {how!r}")
        keys = [on] if isinstance(on, str) else list(on)
        if set(lookup.columns) & set(TRACKING):
            raise InvalidConfig("the lookup has tracking columns")
        if check and lookup.groupBy(*keys).count().where(F.col("count") > 1).limit(1).count():
            raise InvalidConfig(f"the lookup has more than one row for some key of {keys}")
        joined = self._df.join(lookup.withColumn(_MATCH, F.lit(True)), on=keys, how="left")
        if how == "inner":
            joined = joined.withColumn(GHOST, F.col(GHOST) | F.col(_MATCH).isNull())
        return self._then(joined.drop(_MATCH))

    def transform(self, fn: Callable[[DataFrame], DataFrame]) -> TrackedFrame:
        """Apply ``fn`` to the DataFrame itself, for operations this class lacks. ``fn``
        must keep every row exactly once and the tracking columns unchanged (a map, not
        a filter: use :meth:`where`)."""
        out = fn(self._df)
        missing = [c for c in TRACKING if c not in out.columns]
        if missing:
            raise InvalidConfig(f"transform dropped tracking columns {missing}")
        return self._then(out)

    def write(
        self,
        location: str | os.PathLike[str],
        *,
        format: str = "parquet",
        tag_column: str = "xor_ack_tag",
    ) -> WriteResult:
        """Run the job: write the rows that are not ghosts (user columns and the chain's
        tag as ``tag_column``) to ``location`` (a directory or ``s3://bucket/prefix``),
        as Parquet or CSV; then ack. One tracked write per attempt."""
        return self._attempt.write(self, location, format=format, tag_column=tag_column)


class TrackedGroups:
    """``TrackedFrame.group_by(...)``: call :meth:`agg`."""

    def __init__(self, frame: TrackedFrame, keys: Sequence[str]) -> None:
        self.frame = frame
        self.keys = list(keys)

    def agg(self, *exprs: Column) -> TrackedFrame:
        """Aggregate per chain and key; the ghost rows of a chain collapse into one per
        failure reason and note. The reason and note are grouping keys (null on every
        row that is not failing or noted), not aggregates: a string aggregate (``max``)
        would force Spark's sort-based aggregation over every row."""
        from pyspark.sql import functions as F

        ghost = F.col(GHOST)
        grouping = [
            F.col(CHAIN),
            ghost,
            *(F.when(~ghost, F.col(k)).alias(k) for k in self.keys),
            F.col(ERR),
            F.col(NOTE),
        ]
        out = self.frame.df.groupBy(*grouping).agg(*exprs, F.bit_xor(EDGE).alias(EDGE))
        return self.frame._then(out)

    def count(self, name: str = "count") -> TrackedFrame:
        from pyspark.sql import functions as F

        return self.agg(F.count(F.lit(1)).alias(name))


def _balance(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` step of :meth:`FrameAttempt.start`: pass the rows through, then add
    one ghost row per chain seen in this partition whose edge cancels the XOR of that
    chain's rows here."""
    import pyarrow as pa

    sums = ChainSums()
    schema = None
    for batch in batches:
        schema = batch.schema
        sums.add_batch(batch)
        yield batch
    if schema is None or not sums.xors:
        return
    chains = sorted(sums.xors)
    columns = []
    for name, kind in zip(schema.names, schema.types, strict=True):
        if name == CHAIN:
            columns.append(pa.array(chains, kind))
        elif name == EDGE:
            columns.append(pa.array([to_signed(sums.xors[c]) for c in chains], kind))
        elif name == GHOST:
            columns.append(pa.array([True] * len(chains), kind))
        else:
            columns.append(pa.nulls(len(chains), kind))
    yield pa.RecordBatch.from_arrays(columns, schema=schema)


class FrameAttempt:
    """One attempt of a :class:`FrameTracking` run, handed to the job: its roots, and
    the sources that start their chains' records."""

    def __init__(
        self,
        tracking: FrameTracking,
        number: int,
        roots: Sequence[Any],
        keys: Sequence[Any],
        tags: Sequence[str],
        edges: dict[str, int],
        creating: Future[tuple[set[str], dict[str, str]]],
        *,
        ledger: str | None = None,
        on_commit: Callable[[ChainSums, str], Counter[str]] | None = None,
    ) -> None:
        """``ledger`` fixes the ledger's file name (default: a fresh random name) and
        ``on_commit(sums, ledger)`` replaces the default acking of the committed sums
        (hooks for :mod:`.streaming` and :mod:`.upstream`, whose chains are named,
        owned and stamped under op ids of their own)."""
        self._ledger = ledger
        self._on_commit = on_commit
        self.tracking = tracking
        self.number = number
        self.roots = list(roots)
        self.keys = list(keys)
        self.tags = list(tags)
        self.root_edges = edges
        self._creating = creating
        self.run_key = tracking.run_key
        self.notes: dict[str, str] = {}
        #: Outcomes the write's stamps and fails returned (see :func:`settle`).
        self.known: dict[str, Attempt] = {}
        self.write_result: WriteResult | None = None
        self._lock = threading.Lock()

    @property
    def spark(self) -> SparkSession:
        return self.tracking.spark

    def read_text(
        self,
        path: Callable[[Any], str | bytes | os.PathLike[str]] | None = None,
        *,
        split_bytes: int = SPLIT_BYTES,
        chunk_bytes: int = CHUNK_BYTES,
        partitions: int | None = None,
        bad_bytes: str = "replace",
        normalize: str = "NFC",
    ) -> TrackedFrame:
        """The lines of each root's file (``path(root)``, default the root itself), in
        splits; columns ``path``, ``offset``, ``line``. See :mod:`.frame_source`."""
        if bad_bytes not in ("replace", "fail"):
            raise InvalidConfig(f"bad_bytes must be 'replace' or 'fail', got {bad_bytes!r}")
        if normalize not in ("NFC", "none"):
            raise InvalidConfig(f"normalize must be 'NFC' or 'none', got {normalize!r}")
        if split_bytes < 1 or chunk_bytes < 1:
            raise InvalidConfig("split_bytes and chunk_bytes must be positive")
        locate = path or (lambda root: root)
        roots = [
            TextRoot(chain, path_bytes(locate(root)), self.root_edges[tag])
            for chain, (root, tag) in enumerate(zip(self.roots, self.tags, strict=True))
        ]
        df = (
            self.spark.read.format(TrackedTextSource.name())  # a reader, loaded below
            .option("roots", roots_option(roots))
            .option("edge_key", self.tracking.edges.key.hex())
            .option("split_bytes", str(split_bytes))
            .option("chunk_bytes", str(chunk_bytes))
            .option("partitions", str(partitions or 2 * self.tracking.parallelism))
            .option("bad_bytes", bad_bytes)
            .option("normalize", normalize)
        )
        if self.tracking.after_flush is not None:
            df = df.option("after_flush", hook_option(self.tracking.after_flush))
        return TrackedFrame(df.load(), self)

    def start(self, df: DataFrame, key: str) -> TrackedFrame:
        """Track the rows of ``df`` whose column ``key`` (cast to string) equals the key
        of one of this attempt's roots (the roots' keys must be ``str``); other rows are
        left out. See the module doc for how the rows are balanced."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructField, StructType

        if set(df.columns) & set(TRACKING):
            raise InvalidConfig("the DataFrame already has tracking columns")
        if any(not isinstance(k, str) for k in self.keys):
            raise InvalidConfig("start() matches str keys; read files with read_text()")
        rows = [
            (k, chain, to_signed(self.root_edges[t]))
            for chain, (k, t) in enumerate(zip(self.keys, self.tags, strict=True))
        ]
        roots = self.spark.createDataFrame(rows, f"{_KEY} string, {CHAIN} int, {_ROOT} bigint")
        match = F.col(key).cast("string") == F.col(_KEY)
        joined = df.join(F.broadcast(roots.select(_KEY, CHAIN)), match, "inner")
        run = F.lit(self.run_key).cast("bigint")
        tracked = joined.drop(_KEY).withColumns(
            {
                EDGE: F.xxhash64(run, F.col(CHAIN), F.monotonically_increasing_id()),
                GHOST: F.lit(False),
                ERR: F.lit(None).cast("string"),
                NOTE: F.lit(None).cast("string"),
            }
        )
        # The balancing ghosts have nulls in every user column: a column Spark knows to
        # be non-null (a streaming file source's ``_metadata.file_path``) must be
        # declared nullable, or the rows after ``mapInArrow`` break Spark's projections.
        nullable = StructType([StructField(f.name, f.dataType, True, f.metadata) for f in tracked.schema])
        balanced = tracked.mapInArrow(_balance, nullable)
        ghosts = roots.select(
            F.col(CHAIN),
            F.col(_ROOT).alias(EDGE),
            F.lit(True).alias(GHOST),
            F.lit(None).cast("string").alias(ERR),
            F.lit(None).cast("string").alias(NOTE),
        )
        return TrackedFrame(balanced.unionByName(ghosts, allowMissingColumns=True), self)

    def write(
        self, frame: TrackedFrame, location: str | os.PathLike[str], *, format: str, tag_column: str
    ) -> WriteResult:
        if format not in SINK_FORMATS:
            raise InvalidConfig(f"format must be one of {SINK_FORMATS}, got {format!r}")
        with self._lock:
            if self.write_result is not None:
                raise InvalidConfig("one tracked write per attempt: its commit acks the chains")
            store = part_store(location)
            ledger = self._ledger or f"_xor_ack_ledger-{self.number}-{secrets.token_hex(6)}.json"
            writer = (
                frame.df.write.format(TrackedSinkSource.name())
                .mode("append")
                .options(**store.options())
                .option("format", format)
                .option("tags", json.dumps(self.tags, ensure_ascii=False))
                .option("tag_column", tag_column)
                .option("ledger", ledger)
            )
            if self.tracking.after_flush is not None:
                writer = writer.option("after_flush", hook_option(self.tracking.after_flush))
            writer.save()
            sums = read_ledger(store, ledger)
            if sums is None:
                raise RuntimeError(f"the write returned but left no ledger {ledger} in {store.location}")
            counts = self._ack(sums, ledger)
            self.write_result = WriteResult(sums.rows, ledger, counts)
            return self.write_result

    def _ack(self, sums: ChainSums, ledger: str) -> Counter[str]:
        """Stamp or fail each chain this run created, once, with what the write
        committed. Chains it did not create are left alone."""
        if self._on_commit is not None:
            return self._on_commit(sums, ledger)
        clock = time.perf_counter()
        created, _refused = self._creating.result()
        self.tracking.counts["time_ms.create_wait"] += round(1000 * (time.perf_counter() - clock))
        mine = set(self.tags) & created
        # The rows keep the XOR invariant in both modes; for a sum chain (created holding
        # the root edge r) the stamp that finishes the committed XOR x is -x, which
        # brings the chain to zero exactly when x == r.
        finished = self.tracking.group.finished
        stamps = {tag: finished(value) for tag, value in sums.xors.items() if tag in mine}
        failures = {tag: reason for tag, reason in sums.errors.items() if tag in mine}
        self.notes.update({tag: note for tag, note in sums.notes.items() if tag in mine})
        clock = time.perf_counter()
        counts = apply_acks(
            self.tracking.tracker,
            stamps,
            failures,
            self.tracking.group,
            f"{self.tracking.tags.owner}.{self.number}/{ledger}",
            owner=self.tracking.tags.owner,
            threads=self.tracking.threads,
            known=self.known,
            transactions=self.tracking.transactions,
        )
        self.tracking.counts["time_ms.stamps"] += round(1000 * (time.perf_counter() - clock))
        self.tracking.counts.update(counts)
        return counts


FrameJob = Callable[[FrameAttempt], Any]


class FrameTracking:
    """Tracked DataFrame runs on one SparkSession (classic or Spark Connect), with
    chains in the table ``config`` names.

    Chains are created and stamped by this process (the driver, or the Connect client),
    never by executors: creates go out concurrently while the attempt's job runs (a
    thread pool of ``threads``), the commit's merged XORs are stamped once per chain
    after the write returned. Executors only compute.

    Chains of either mode work (the tracker's ``mode``). Inside Spark the rows keep the
    XOR invariant in both modes (bigint edges, ``bit_xor``: no overflow, no decimals);
    a sum chain is created holding the root edge ``r`` (an int in ``[1, 2**64)``) and
    stamped once with ``-x``, ``x`` the committed XOR, so it reads zero exactly when
    ``x == r``: the same test as an xor chain's. Xor is the default (one conditional
    ``PutItem`` per stamp: the driver created the chain, so it knows its value and
    needs no read); a sum chain's completing stamp costs an ``UpdateItem`` and the
    ``PutItem`` that stores ``acked``. See ``docs/spark.md``.

    :param run_id: a readable name for the run (tags also carry a random nonce, see
        :mod:`.tags`).
    :param parallelism: how many read partitions to aim at (twice this); default
        Spark's default parallelism (4 under Connect unless
        ``spark.default.parallelism`` is set).
    :param tracker: the driver's tracker (default ``XorAckDynamoDB.from_config(config)``); on this path
        only the driver talks to it, so any tracker with the same methods works (a
        ``MemoryAck`` measures what tracking costs Spark itself, with no backend).
    :param edge_key: the 32-byte key edges derive from (default: random per object).
    :param after_flush: a test hook (:class:`~xor_ack_dynamodb.spark.DieOnFirstAttempt`)
        called as ``hook("read", partition)`` after a read task produced its rows and
        ``hook("write", partition)`` after a sink task's part is durable.
    :param heartbeat: keep the attempt's pending chains from expiring while its job runs
        (``True``, default: every ``ttl / 3``), ``False``, or a
        :class:`~xor_ack_dynamodb.spark.heartbeat.HeartbeatPolicy`; see
        :mod:`.heartbeat`.
    :param transactions: send the creates and the stamps as ``create_many`` /
        ``stamp_many`` (TransactWriteItems of up to 100 chains: one request per 100
        roots each way instead of one per root, at twice the write units on DynamoDB;
        the tracker must have those methods). Off by default: on moto a transaction
        copies the table per item (slower than single writes); measure on your backend
        (``benchmarks/driver_requests.py``).
    """

    def __init__(
        self,
        spark: SparkSession,
        config: AckConfig,
        *,
        run_id: str | None = None,
        tracker: Chains | None = None,
        nonce: str | None = None,
        threads: int = DRIVER_THREADS,
        parallelism: int | None = None,
        after_flush: Callable[[str, int], None] | None = None,
        heartbeat: bool | HeartbeatPolicy = True,
        edge_key: bytes | None = None,
        transactions: bool = False,
    ) -> None:
        self.heartbeat = HeartbeatPolicy.of(heartbeat)
        self.spark = spark
        self.transactions = transactions
        self.after_flush = after_flush
        self.config = config
        self.tags = TagScheme(run_id or new_run_id(), *([nonce] if nonce else []))
        self.run_id = self.tags.run_id
        from ..stores.dynamodb.tracker import XorAckDynamoDB

        self.tracker: Chains = tracker if tracker is not None else XorAckDynamoDB.from_config(config)
        refuse_delete_on_ack(self.tracker, config)
        self.group: Group = group_for(self.tracker.mode, 8)
        # A given key (32 bytes) makes edges reproducible: a re-run streaming micro-batch
        # must send the very values its first run sent (see :mod:`.streaming`).
        self.edges = EdgeKey(edge_key if edge_key is not None else secrets.token_bytes(32), 8)
        self.run_key = to_signed(int.from_bytes(self.edges.key[:8], "big"))
        self.threads = threads
        self.parallelism = parallelism or default_parallelism(spark)
        self.counts: Counter[str] = Counter()
        register_sources(spark)

    def requests(self) -> Counter[str]:
        """What the driver did: creates, stamps, fails, reads (by operation), events
        (a tracker without request statistics, such as ``MemoryAck``, adds none)."""
        total = Counter(self.counts)
        total.update(snapshot(self.tracker))
        return total

    def run(
        self,
        roots: Sequence[Any],
        key: Callable[[Any], Any],
        job: FrameJob,
        *,
        max_attempts: int = 3,
        observer: RunObserver | None = None,
    ) -> RunReport:
        """Run ``job(attempt)`` (a :class:`FrameAttempt`) until every root's chain is
        acked, failed permanently, or ``max_attempts`` attempts were made; ``job`` reads
        the attempt's roots (:meth:`FrameAttempt.read_text` or :meth:`FrameAttempt.start`)
        and ends in one :meth:`TrackedFrame.write`.

        A job that raises (Spark aborted it) ends its attempt: its chains are read like
        any others. Chains still pending then can no longer complete; they are failed,
        so that no late write can ack them, and replayed. Configuration errors of the
        library (:class:`~xor_ack_dynamodb.errors.XorAckError`) propagate.
        """
        raw_keys = [key(root) for root in roots]
        keys = check_roots(self.tags, raw_keys, max_attempts)
        outcomes = [RootOutcome(root, k) for root, k in zip(roots, keys, strict=True)]
        errors: list[str] = []
        todo = list(range(len(roots)))
        with ThreadPoolExecutor(1, thread_name_prefix="xor-ack-create") as background:
            for attempt in range(1, max_attempts + 1):
                if not todo:
                    break
                if observer is not None:
                    observer.attempt_started(attempt, len(todo), self)
                tags = [self.tags.escaped(keys[i], attempt) for i in todo]
                edges = {tag: self.edges.root(tag) for tag in tags}
                creating = background.submit(self._create, edges, attempt)
                handle = FrameAttempt(
                    self,
                    attempt,
                    [roots[i] for i in todo],
                    [raw_keys[i] for i in todo],
                    tags,
                    edges,
                    creating,
                )
                beat = self._heartbeat(tags)
                try:
                    with beat:
                        job(handle)
                except XorAckError:
                    # A caller's mistake (a lookup with duplicate keys...): fail this
                    # attempt's chains so that nothing can ack them, and say so.
                    created, refused = creating.result()
                    settle(self.tracker, tags, owner=self.tags.owner, refused=refused)
                    raise
                except Exception as exc:  # the Spark job was aborted
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                    log.warning("attempt %d: the job failed: %s", attempt, first)
                    errors.append(f"attempt {attempt}: {type(exc).__name__}: {first}")
                self._add_heartbeat(beat)
                created, refused = creating.result()
                self.counts["chains_created"] += len(created)
                self.counts["chains_refused"] += len(refused)
                clock = time.perf_counter()
                settled = settle(
                    self.tracker,
                    tags,
                    owner=self.tags.owner,
                    refused=refused,
                    notes=handle.notes,
                    known=handle.known,
                )
                self.counts["time_ms.settle"] += round(1000 * (time.perf_counter() - clock))
                retry = record_attempt(outcomes, todo, tags, settled)
                if observer is not None:
                    observer.attempt_finished(attempt, [outcomes[i] for i in todo])
                todo = retry
        return RunReport(outcomes, self.requests(), errors)

    def _heartbeat(self, tags: Sequence[str], *, name_owner: bool = True) -> Heartbeat:
        """The heartbeat of one attempt's chains (its requests are added to the run's),
        naming the run as their owner unless ``name_owner`` is False (chains checked
        against their own owners when they were accepted: handed, streamed)."""
        enabled = self.heartbeat.enabled
        from functools import partial

        from ..stores.dynamodb.tracker import XorAckDynamoDB

        connect = partial(XorAckDynamoDB.from_config, self.config)
        tracker = heartbeat_tracker(self.tracker, connect) if enabled else self.tracker
        owner = self.tags.owner if name_owner else None
        return Heartbeat(tracker, tags, owner=owner, policy=self.heartbeat)

    def _add_heartbeat(self, beat: Heartbeat) -> None:
        beat.add_to(self.counts, self.tracker)

    def _create(self, edges: dict[str, int], attempt: int) -> tuple[set[str], dict[str, str]]:
        clock = time.perf_counter()
        try:
            return create_chains(
                self.tracker,
                edges,
                self.group,
                f"{self.tags.owner}.{attempt}/create",
                owner=self.tags.owner,
                threads=self.threads,
                transactions=self.transactions,
            )
        finally:
            self.counts["time_ms.creates"] += round(1000 * (time.perf_counter() - clock))

    def acked_rows(self, df: DataFrame, report: RunReport, tag_column: str = "xor_ack_tag") -> DataFrame:
        """The rows of ``df`` (written by this run's attempts) whose chain ended acked:
        what a cross-root aggregate must be computed over to stay exact under replay."""
        from pyspark.sql import functions as F

        acked = sorted(report.acked_tags())
        tags = self.spark.createDataFrame([(t,) for t in acked], f"{tag_column} string")
        return df.join(F.broadcast(tags), on=tag_column, how="left_semi")


# -- the same job without tracking (to measure what tracking costs) --------------------


class UntrackedFrame:
    """:class:`TrackedFrame`'s methods over a plain DataFrame: no tracking columns, no
    chains; ``fail_when`` raises in the JVM (failing the Spark job, as any error would).
    Like a tracked frame it knows its roots' column (``root``): ``group_by`` groups per
    root too, and ``write`` writes the root as ``tag_column``, so the untracked job
    produces the same rows as the tracked one (what a comparison needs)."""

    def __init__(self, df: DataFrame, root: str | None = None) -> None:
        self._df = df
        self.root = root

    @property
    def df(self) -> DataFrame:
        return self._df

    def _then(self, df: DataFrame) -> UntrackedFrame:
        return UntrackedFrame(df, self.root if self.root in df.columns else None)

    def select(self, *columns: str | Column) -> UntrackedFrame:
        extra = [self.root] if self.root and self.root not in columns else []
        return self._then(self._df.select(*columns, *extra))

    def with_column(self, name: str, column: Column) -> UntrackedFrame:
        return self._then(self._df.withColumn(name, column))

    def drop(self, *names: str) -> UntrackedFrame:
        return self._then(self._df.drop(*names))

    def where(self, condition: Column) -> UntrackedFrame:
        return self._then(self._df.where(condition))

    filter = where

    def fail_when(
        self, condition: Column, reason: str | Column, *, permanent: bool = False
    ) -> UntrackedFrame:
        from pyspark.sql import functions as F

        text = F.lit(reason) if isinstance(reason, str) else reason
        check = F.when(condition, F.raise_error(text)).cast("boolean")
        return self._then(self._df.where(F.coalesce(check, F.lit(True))))

    def explode(self, array: str | Column, alias: str, *, position: str | None = None) -> UntrackedFrame:
        from pyspark.sql import functions as F

        values = F.col(array) if isinstance(array, str) else array
        kept = [c for c in self._df.columns if c not in (alias, position)]
        if position:
            return self._then(self._df.select(*kept, F.posexplode(values).alias(position, alias)))
        return self._then(self._df.select(*kept, F.explode(values).alias(alias)))

    def group_by(self, *keys: str) -> _UntrackedGroups:
        return _UntrackedGroups(self, keys)

    def join(
        self, lookup: DataFrame, on: str | Sequence[str], how: str = "inner", *, check: bool = True
    ) -> UntrackedFrame:
        return self._then(self._df.join(lookup, on=[on] if isinstance(on, str) else list(on), how=how))

    def write(
        self, location: str | os.PathLike[str], *, format: str = "parquet", tag_column: str = "xor_ack_tag"
    ) -> WriteResult:
        """The same sink as a tracked write (so a comparison measures tracking, not two
        writers), told not to sum edges; ``tag_column`` reads ``untracked``."""
        from pyspark.sql import functions as F

        store = part_store(location)
        filler = {
            CHAIN: F.lit(0).cast("int"),
            EDGE: F.lit(0).cast("bigint"),
            GHOST: F.lit(False),
            ERR: F.lit(None).cast("string"),
            NOTE: F.lit(None).cast("string"),
        }
        (
            self._df.withColumns(filler)
            .write.format(TrackedSinkSource.name())
            .mode("append")
            .options(**store.options())
            .option("format", format)
            .option("tags", '["untracked"]')
            .option("tag_column", tag_column)
            .option("ledger", f"_untracked-{secrets.token_hex(6)}.json")
            .option("track", "false")
            .save()
        )
        return WriteResult(-1, "")


class _UntrackedGroups:
    def __init__(self, frame: UntrackedFrame, keys: Sequence[str]) -> None:
        self.frame = frame
        self.keys = [frame.root, *keys] if frame.root and frame.root not in keys else list(keys)

    def agg(self, *exprs: Column) -> UntrackedFrame:
        return self.frame._then(self.frame.df.groupBy(*self.keys).agg(*exprs))

    def count(self, name: str = "count") -> UntrackedFrame:
        from pyspark.sql import functions as F

        return self.agg(F.count(F.lit(1)).alias(name))


class UntrackedAttempt:
    """:class:`FrameAttempt`'s sources without tracking: the same reader (the same
    splits, decoding and normalization) with no edges."""

    def __init__(self, spark: SparkSession, roots: Sequence[Any], parallelism: int) -> None:
        self.spark = spark
        self.roots = list(roots)
        self.number = 1
        self.parallelism = parallelism

    def read_text(
        self,
        path: Callable[[Any], str | bytes | os.PathLike[str]] | None = None,
        *,
        split_bytes: int = SPLIT_BYTES,
        chunk_bytes: int = CHUNK_BYTES,
        partitions: int | None = None,
        bad_bytes: str = "replace",
        normalize: str = "NFC",
    ) -> UntrackedFrame:
        locate = path or (lambda root: root)
        roots = [TextRoot(i, path_bytes(locate(r)), 1) for i, r in enumerate(self.roots)]
        df = (
            self.spark.read.format(TrackedTextSource.name())
            .option("roots", roots_option(roots))
            .option("edge_key", bytes(32).hex())
            .option("split_bytes", str(split_bytes))
            .option("chunk_bytes", str(chunk_bytes))
            .option("partitions", str(partitions or 2 * self.parallelism))
            .option("bad_bytes", bad_bytes)
            .option("normalize", normalize)
            .option("track", "false")
            .load()
        )
        return UntrackedFrame(df.select("path", "offset", "line"), root="path")

    def start(self, df: DataFrame, key: str) -> UntrackedFrame:
        return UntrackedFrame(df, root=key)
