"""The word count's baselines: the same jobs without tracking, to measure what tracking
costs (``xor-ack wordcount --no-tracking``, the benchmark).

:class:`UntrackedAttempt` and :class:`UntrackedFrame` give the DataFrame job the methods
of a tracked attempt and frame over plain DataFrames, reading with the same
``xor_ack_text`` source and writing with the same ``xor_ack_sink`` (told not to track),
so a comparison measures tracking, not two readers or writers. :class:`UntrackedRDD`
gives the RDD job the methods of a tracked RDD (:class:`~xor_ack_dynamodb.spark.Stream`).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ...spark.frame import WriteResult
from ...spark.frame.columns import CHAIN, EDGE, ERR, GHOST, NOTE
from ...spark.frame.sink import write_frame
from ...spark.frame.text_source import CHUNK_BYTES, SPLIT_BYTES, TextRoot, path_bytes, read_text
from ...spark.output import Location
from ...spark.rdd import PartitionWriter
from ...spark.rdd.executor import Noted

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["UntrackedAttempt", "UntrackedFrame", "UntrackedRDD"]

T = TypeVar("T")
U = TypeVar("U")


class UntrackedFrame:
    """The :class:`~xor_ack_dynamodb.spark.TrackedFrame` methods the word count uses, over
    a plain DataFrame: no tracking columns, no chains; ``fail_when`` raises in the JVM
    (failing the Spark job, as any error would).
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

    def with_column(self, name: str, column: Column) -> UntrackedFrame:
        return self._then(self._df.withColumn(name, column))

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

    def write(
        self,
        location: str | os.PathLike[str] | Location,
        *,
        format: str = "parquet",
        tag_column: str = "xor_ack_tag",
    ) -> WriteResult:
        """The same sink as a tracked write (so a comparison measures tracking, not two
        writers), told not to sum edges; ``tag_column`` reads ``untracked``."""
        from pyspark.sql import functions as F

        filler = {
            CHAIN: F.lit(0).cast("int"),
            EDGE: F.lit(0).cast("bigint"),
            GHOST: F.lit(False),
            ERR: F.lit(None).cast("string"),
            NOTE: F.lit(None).cast("string"),
        }
        ledger = f"_untracked-{secrets.token_hex(6)}.json"
        write_frame(
            self._df.withColumns(filler),
            Location.of(location),
            format=format,
            tags=["untracked"],
            tag_column=tag_column,
            ledger=ledger,
            track=False,
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
    """The sources of a :class:`~xor_ack_dynamodb.spark.FrameAttempt` without tracking:
    the same reader (the same splits, decoding and normalization) with no edges."""

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
        df = read_text(
            self.spark,
            roots,
            bytes(32),
            split_bytes=split_bytes,
            chunk_bytes=chunk_bytes,
            partitions=partitions or 2 * self.parallelism,
            bad_bytes=bad_bytes,
            normalize=normalize,
            track=False,
        )
        return UntrackedFrame(df.select("path", "offset", "line"), root="path")

    def start(self, df: DataFrame, key: str) -> UntrackedFrame:
        return UntrackedFrame(df, root=key)


class UntrackedRDD(Generic[T]):
    """The :class:`~xor_ack_dynamodb.spark.TrackedRDD` methods the word count uses, over a
    plain RDD of values, with no tracking: no DynamoDB, and a user function that raises
    fails its task (and, past ``spark.task.maxFailures``, the whole job), as in any
    Spark job."""

    def __init__(self, rdd: RDD[T]) -> None:
        self.rdd = rdd

    def fan_out(self, fn: Callable[[T], Iterable[U] | Noted], name: str = "fan_out") -> UntrackedRDD[U]:
        return UntrackedRDD(self.rdd.flatMap(partial(_items, fn)))

    def map(self, fn: Callable[[T], U], name: str = "map") -> UntrackedRDD[U]:
        return UntrackedRDD(self.rdd.map(fn))

    def filter(self, pred: Callable[[T], bool], name: str = "filter") -> UntrackedRDD[T]:
        return UntrackedRDD(self.rdd.filter(pred))

    def reduce_by_key(
        self, fn: Callable[[Any, Any], Any], num_partitions: int | None = None, name: str = "reduce_by_key"
    ) -> UntrackedRDD[tuple[Any, Any]]:
        return UntrackedRDD(self.rdd.reduceByKey(fn, num_partitions))  # type: ignore[misc]

    def sink(self, writer: PartitionWriter, name: str = "sink") -> int:
        return sum(self.rdd.mapPartitionsWithIndex(partial(_plain_sink, writer)).collect())


def _items(fn: Callable[[Any], Iterable[Any] | Noted], value: Any) -> Iterable[Any]:
    result = fn(value)
    return result.items if isinstance(result, Noted) else result


def _plain_sink(writer: PartitionWriter, index: int, values: Iterable[Any]) -> Iterable[int]:
    rows = list(values)
    writer(index, rows)
    yield len(rows)
