"""The tracked DataFrame sink: a Spark 4 Python data source (``xor_ack_sink``).

Why a data source writer and not ``mapInArrow`` before an ordinary ``df.write``: the ack
must follow the durable write, and a data source writer is the one place where Spark
tells Python both things in order. Each task's :meth:`TrackedSinkWriter.write` writes its
partition durably (a file written, fsync'd and renamed into place, or one S3
``PutObject``), folding the rows' edges into one XOR per chain with numpy as the Arrow
batches go by, and returns those XORs as its commit message. Spark calls
:meth:`TrackedSinkWriter.commit` on the driver once every task has succeeded, with
exactly one message per partition (a retried or speculative task's duplicate is
discarded); the commit merges them and writes the run's *ledger* (per chain: the XOR of
everything written, the first failure reason and note), as one atomic file beside the
data. The attempt (:class:`~xor_ack_dynamodb.spark.frame.FrameAttempt`) reads the ledger
once the write has returned and stamps each chain once. Every file goes through
:meth:`Location.open <xor_ack_dynamodb.spark.output.Location.open>`.

So no executor sends a DynamoDB request on this path, and the writer needs no AWS
credentials for DynamoDB: the commit only writes a file. It runs the same under Spark
Connect (the data source runs in the server's Python workers; the ledger is read by the
client from the output location, a shared directory or S3).

Output: the rows that are not ghosts, with the user's columns and the chain's tag (as
``tag_column``), in Parquet (default) or CSV, ``part-<partition>.<ext>`` per partition
in ``location``. A retried task rewrites the same name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from ...errors import InvalidConfig
from ..output import Location
from .columns import CHAIN, GHOST, TRACKING, ChainXors
from .text_source import hook_option, load_hook

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = [
    "TrackedSinkSource",
    "TrackedSinkWriter",
    "SinkMessage",
    "SINK_FORMATS",
    "write_frame",
    "read_ledger",
]

SINK_FORMATS = ("parquet", "csv")


class SinkMessage(WriterCommitMessage):
    """One task's commit message: its partition and the :class:`ChainXors` of every row
    it wrote (and every ghost it acked)."""

    def __init__(self, partition: int, sums: ChainXors) -> None:
        self.partition = partition
        self.sums = sums


class TrackedSinkWriter(DataSourceArrowWriter):
    """See the module doc. Options: ``location`` (and ``s3_endpoint``, ``s3_region``),
    ``format`` (``parquet`` or ``csv``), ``tags`` (JSON list: chain ``i``'s tag),
    ``tag_column``, ``ledger`` (the ledger's file name in ``location``), ``track``
    (``false``: write only, no sums: the untracked job's baseline)."""

    def __init__(self, options: Any) -> None:
        self.location = Location.from_options(options)
        self.format = options.get("format", "parquet")
        self.tags: list[str] = json.loads(options["tags"])
        self.tag_column = options.get("tag_column", "xor_ack_tag")
        self.ledger = options["ledger"]
        self.track = options.get("track", "true") == "true"
        self.after_write = load_hook(options.get("after_flush"))

    def _data(self, batch: pa.RecordBatch, dictionary: pa.Array) -> pa.RecordBatch:
        import pyarrow as pa
        import pyarrow.compute as pc

        keep = pc.invert(batch.column(GHOST).fill_null(False))
        data = batch.filter(keep)
        names = [n for n in data.schema.names if n not in TRACKING]
        tags = pa.DictionaryArray.from_arrays(data.column(CHAIN).cast(pa.int32()), dictionary)
        if self.format != "parquet":  # Parquet keeps the dictionary encoding; CSV wants text
            tags = tags.cast(pa.string())
        columns = [data.column(n) for n in names] + [tags]
        return pa.RecordBatch.from_arrays(columns, names=[*names, self.tag_column])

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkMessage:
        """Write this task's partition durably, then return its per-chain sums. A
        partition without rows writes no file."""
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        sums = ChainXors()
        dictionary = pa.array(self.tags, pa.string())
        name = f"part-{partition:05d}.{'parquet' if self.format == 'parquet' else 'csv'}"
        with ExitStack() as stack:
            writer: Any = None
            for batch in iterator:
                if self.track:
                    sums.add_batch(batch)
                data = self._data(batch, dictionary)
                if writer is None:
                    handle = stack.enter_context(self.location.open(name))
                    writer = self._open(handle, data.schema)
                    stack.callback(writer.close)
                if data.num_rows:
                    writer.write_batch(data)
        if self.after_write is not None:
            self.after_write("write", partition)
        return SinkMessage(partition, sums)

    def _open(self, handle: Any, schema: pa.Schema) -> Any:
        if self.format == "parquet":
            import pyarrow.parquet as pq

            return pq.ParquetWriter(handle, schema)
        import pyarrow.csv as pcsv

        return pcsv.CSVWriter(handle, schema)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task succeeded: merge their sums and write the ledger (atomically)."""
        total = ChainXors()
        partitions = 0
        for message in messages:
            if isinstance(message, SinkMessage):
                total.merge(message.sums)
                partitions += 1
        body = {"partitions": partitions, **total.named(self.tags).to_json()}
        self.location.put(self.ledger, json.dumps(body, ensure_ascii=False).encode("utf-8"))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """The write failed: no ledger, so nothing is acked (the chains stay pending and
        the run fails and replays them)."""


class TrackedSinkSource(DataSource):
    """The ``xor_ack_sink`` data source; see the module doc."""

    @classmethod
    def name(cls) -> str:
        return "xor_ack_sink"

    def writer(self, schema: StructType, overwrite: bool) -> TrackedSinkWriter:
        missing = [c for c in TRACKING if c not in schema.fieldNames()]
        if missing:
            raise ValueError(f"xor_ack_sink writes tracked frames only; missing columns {missing}")
        return TrackedSinkWriter(self.options)


def write_frame(
    df: DataFrame,
    location: Location,
    *,
    format: str,
    tags: Sequence[str],
    tag_column: str,
    ledger: str,
    after_flush: Callable[[str, int], None] | None = None,
    track: bool = True,
) -> None:
    """Write ``df`` (tracking columns included) with the ``xor_ack_sink`` source: the
    rows of chain ``i`` tagged ``tags[i]`` in ``tag_column``, the ledger as ``ledger``
    (``track=False``: no XORs). :class:`InvalidConfig` for a format not in
    :data:`SINK_FORMATS`."""
    if format not in SINK_FORMATS:
        raise InvalidConfig(f"format must be one of {SINK_FORMATS}, got {format!r}")
    writer = (
        df.write.format(TrackedSinkSource.name())
        .mode("append")
        .options(**location.options())
        .options(format=format, tag_column=tag_column, ledger=ledger, track=str(track).lower())
        .option("tags", json.dumps(list(tags), ensure_ascii=False))
    )
    if after_flush is not None:
        writer = writer.option("after_flush", hook_option(after_flush))
    writer.save()


def read_ledger(location: Location, name: str) -> ChainXors | None:
    """The ledger a committed write left, or None (the write did not commit)."""
    data = location.get(name)
    return None if data is None else ChainXors.from_json(json.loads(data.decode("utf-8")))
