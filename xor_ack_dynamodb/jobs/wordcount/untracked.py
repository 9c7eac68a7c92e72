"""The RDD word count's baseline: the same job without tracking
(``xor-ack wordcount --api rdd --no-tracking``). :class:`UntrackedRDD` gives the RDD job
the methods of a tracked RDD (:class:`~xor_ack_dynamodb.spark.Stream`). (The DataFrame
job's baseline is the plain PySpark count, :func:`.frame.plain_counts`.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ...spark.rdd import PartitionWriter
from ...spark.rdd.executor import Noted

if TYPE_CHECKING:
    from pyspark import RDD

__all__ = ["UntrackedRDD"]

T = TypeVar("T")
U = TypeVar("U")


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
