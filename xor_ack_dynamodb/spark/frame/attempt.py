"""One attempt of a tracked DataFrame run, as its job sees it: the attempt's roots, the
sources that start their chains' rows (:meth:`FrameAttempt.read_text`,
:meth:`FrameAttempt.start`), and the one tracked write whose commit stamps them
(:meth:`FrameAttempt.write`, the ``xor_ack_sink`` source of :mod:`.sink`).

The attempt loop around it (creating the chains, the heartbeat, settling, replaying) is
the one every path shares (:mod:`~xor_ack_dynamodb.spark.attempts`); a :class:`Commit`
says how the committed chains are stamped.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import InvalidConfig
from ..chains import Owners, Started
from ..edges import EdgeKey
from ..group import Group
from ..outcomes import Attempt
from ..output import Location
from ..tags import TagScheme
from .columns import CHAIN, EDGE, ERR, GHOST, NOTE, TRACKING, ChainXors, to_signed
from .sink import read_ledger, write_frame
from .text_source import CHUNK_BYTES, SPLIT_BYTES, TextRoot, path_bytes, read_text
from .tracked import TrackedFrame, WriteResult

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["FrameAttempt", "FrameRun", "Commit", "FrameJob"]

_KEY = "_xa_key"
_ROOT = "_xa_root"


class FrameRun(Protocol):
    """What an attempt needs of its run (:class:`~.tracking.FrameTracking`)."""

    spark: SparkSession
    edges: EdgeKey
    run_key: int
    parallelism: int
    after_flush: Callable[[str, int], None] | None
    transactions: bool
    tags: TagScheme
    group: Group
    counts: Counter[str]

    def stamp(self, *args: Any, **kwargs: Any) -> Counter[str]:
        """:meth:`~xor_ack_dynamodb.spark.attempts.Driver.stamp`."""


@dataclass
class Commit:
    """How an attempt stamps its chains once its write committed. The defaults are a
    run's own chains; a stream's batch and chains handed over from upstream name, own
    and stamp theirs under op ids of their own."""

    #: Op ids ``<op_prefix>/<tag>`` (default: ``<run owner>.<attempt>/<ledger name>``).
    op_prefix: str | None = None
    #: Who each chain belongs to, and its group (default: the run's).
    owner: Owners | None = None
    group: Group | Mapping[str, Group] | None = None
    #: The ledger's file name (default: a fresh random name).
    ledger: str | None = None
    #: Told the committed XORs before the stamps go out.
    before: Callable[[ChainXors], None] | None = None
    #: Receives the outcomes the stamps decided (None: not kept), for the settle.
    known: dict[str, Attempt] | None = field(default_factory=dict)
    #: Receives the notes of the committed rows, per chain.
    notes: dict[str, str] = field(default_factory=dict)


def _balance(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` step of :meth:`FrameAttempt.start`: pass the rows through, then add
    one ghost row per chain seen in this partition whose edge cancels the XOR of that
    chain's rows here."""
    import pyarrow as pa

    xors = ChainXors()
    schema = None
    for batch in batches:
        schema = batch.schema
        xors.add_batch(batch)
        yield batch
    if schema is None or not xors.xors:
        return
    chains = sorted(xors.xors)
    columns = []
    for name, kind in zip(schema.names, schema.types, strict=True):
        if name == CHAIN:
            columns.append(pa.array(chains, kind))
        elif name == EDGE:
            columns.append(pa.array([to_signed(xors.xors[c]) for c in chains], kind))
        elif name == GHOST:
            columns.append(pa.array([True] * len(chains), kind))
        else:
            columns.append(pa.nulls(len(chains), kind))
    yield pa.RecordBatch.from_arrays(columns, schema=schema)


class FrameAttempt:
    """One attempt of a tracked DataFrame run, handed to the job: its roots, and the
    sources that start their chains' records.

    :param starting: resolves to the chains started for this attempt (only those are
        stamped after the write) and why the others were not.
    :param commit: how they are stamped (default: a run's own chains).
    """

    def __init__(
        self,
        tracking: FrameRun,
        number: int,
        roots: Sequence[Any],
        keys: Sequence[Any],
        tags: Sequence[str],
        edges: dict[str, int],
        starting: Future[Started],
        commit: Commit | None = None,
    ) -> None:
        self.tracking = tracking
        self.number = number
        self.roots = list(roots)
        self.keys = list(keys)
        self.tags = list(tags)
        self.root_edges = edges
        self._starting = starting
        self.commit = commit or Commit()
        self.run_key = tracking.run_key
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
        splits; columns ``path``, ``offset``, ``line``. See :mod:`.text_source`."""
        locate = path or (lambda root: root)
        roots = [
            TextRoot(chain, path_bytes(locate(root)), self.root_edges[tag])
            for chain, (root, tag) in enumerate(zip(self.roots, self.tags, strict=True))
        ]
        df = read_text(
            self.spark,
            roots,
            self.tracking.edges.key,
            split_bytes=split_bytes,
            chunk_bytes=chunk_bytes,
            partitions=partitions or 2 * self.tracking.parallelism,
            bad_bytes=bad_bytes,
            normalize=normalize,
            after_flush=self.tracking.after_flush,
        )
        return TrackedFrame(df, self)

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
        self,
        frame: TrackedFrame,
        location: str | os.PathLike[str] | Location,
        *,
        format: str,
        tag_column: str,
    ) -> WriteResult:
        """The attempt's one tracked write (:meth:`TrackedFrame.write`), then its stamps."""
        with self._lock:
            if self.write_result is not None:
                raise InvalidConfig("one tracked write per attempt: its commit acks the chains")
            store = Location.of(location)
            ledger = self.commit.ledger or f"_xor_ack_ledger-{self.number}-{secrets.token_hex(6)}.json"
            write_frame(
                frame.df,
                store,
                format=format,
                tags=self.tags,
                tag_column=tag_column,
                ledger=ledger,
                after_flush=self.tracking.after_flush,
            )
            xors = read_ledger(store, ledger)
            if xors is None:
                raise RuntimeError(f"the write returned but left no ledger {ledger} in {store.url}")
            counts = self._stamp(xors, ledger)
            self.write_result = WriteResult(xors.rows, ledger, counts)
            return self.write_result

    def _stamp(self, xors: ChainXors, ledger: str) -> Counter[str]:
        """Stamp or fail each chain this attempt started, once, with what the write
        committed. Chains it did not start are left alone."""
        commit = self.commit
        if commit.before is not None:
            commit.before(xors)
        clock = time.perf_counter()
        started = self._starting.result()[0]
        self.tracking.counts["time_ms.create_wait"] += round(1000 * (time.perf_counter() - clock))
        mine = set(self.tags) & started
        commit.notes.update({tag: note for tag, note in xors.notes.items() if tag in mine})
        # The rows keep the XOR invariant in both modes; for a sum chain (created holding
        # the root edge r) the stamp that finishes the committed XOR x is -x, which
        # brings the chain to zero exactly when x == r.
        finished = self.tracking.group.finished
        return self.tracking.stamp(
            {tag: finished(value) for tag, value in xors.xors.items() if tag in mine},
            {tag: reason for tag, reason in xors.errors.items() if tag in mine},
            commit.op_prefix or f"{self.tracking.tags.owner}.{self.number}/{ledger}",
            owner=commit.owner,
            group=commit.group,
            known=commit.known,
            transactions=self.tracking.transactions,
        )


FrameJob = Callable[[FrameAttempt], Any]
