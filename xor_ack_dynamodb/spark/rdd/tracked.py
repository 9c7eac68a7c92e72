"""Tracked RDDs: Spark transformations that keep every record's ack anchors.

A :class:`TrackedRDD` wraps an RDD of ``(value, tag, anchor)`` records. Its methods mirror the
RDD methods a pipeline needs (``fan_out`` for ``flatMap``, ``map``, ``filter``,
``reduce_by_key``) and end in :meth:`TrackedRDD.sink`, which writes the output and then
acks. :class:`Stream` names those methods, so that a job function can also run over an
untracked twin (the word count's baseline does, to measure what tracking costs).

Executors send no request: each step's per-partition XORs (and failed chains, notes)
travel down the pipeline with the data as one carrier record per partition (see
:mod:`.executor`), the sink returns them with its own XORs to the driver, which created
the chains and stamps each once for the whole job. The number of DynamoDB writes grows
with chains, not with records or partitions.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from . import steps
from .executor import Ledger, Noted, RunSpec

if TYPE_CHECKING:
    from pyspark import RDD

__all__ = ["TrackedRDD", "Stream", "PartitionWriter", "Acker"]

T = TypeVar("T")
U = TypeVar("U")

#: ``writer(partition_index, values)``: writes one partition's output and returns only
#: once it is durable; idempotent per partition (retries and speculation call it again
#: with the same values).
PartitionWriter = Callable[[int, list[Any]], None]
#: The driver's side of a sink: given the step name, the merged XOR per chain, the
#: failure reason per chain and the note per chain of every partition, stamps and fails
#: the chains; returns counts (``stamps``, ``chains_acked``, ...). Provided by
#: :class:`RDDTracking`.
Acker = Callable[[str, dict[str, int], dict[str, str], dict[str, str]], Counter[str]]


class Stream(Protocol):
    """What a job function may use: the methods of :class:`TrackedRDD`, which an
    untracked twin over a plain RDD can share."""

    def fan_out(self, fn: Callable[[Any], Iterable[Any] | Noted], name: str = ...) -> Stream: ...
    def map(self, fn: Callable[[Any], Any], name: str = ...) -> Stream: ...
    def filter(self, pred: Callable[[Any], bool], name: str = ...) -> Stream: ...
    def reduce_by_key(
        self, fn: Callable[[Any, Any], Any], num_partitions: int | None = ..., name: str = ...
    ) -> Stream: ...
    def sink(self, writer: PartitionWriter, name: str = ...) -> int: ...


class TrackedRDD(Generic[T]):
    """An RDD of ``(value, tag, anchor)`` records of one tracked attempt (built by
    :meth:`xor_ack_dynamodb.spark.RDDTracking.start`). Lazy like any RDD: nothing runs, and
    nothing is stamped, until :meth:`sink`.

    User functions run on the executors; when one raises, the record's chains fail (the
    exception's ``repr`` is the reason) and the rest of the partition goes on.
    """

    def __init__(
        self,
        rdd: RDD[tuple[T, str | None, Any]],
        spec: RunSpec,
        steps_counter: itertools.count[int],
        acker: Acker,
    ) -> None:
        self.rdd = rdd
        self.spec = spec
        self._steps = steps_counter
        self._acker = acker

    def _step(self, name: str) -> str:
        return f"{next(self._steps)}-{name}"

    def _then(self, rdd: RDD[Any]) -> TrackedRDD[Any]:
        return TrackedRDD(rdd, self.spec, self._steps, self._acker)

    def fan_out(self, fn: Callable[[T], Iterable[U] | Noted], name: str = "fan_out") -> TrackedRDD[U]:
        """Like ``flatMap``: each record is replaced by ``fn(value)``'s items, each
        anchored to a new edge of the parent's chains; the partition's carrier (one XOR
        per chain, stamped by the driver after the sink) acks the parents and starts the
        children."""
        step = self._step(name)
        return self._then(
            self.rdd.mapPartitionsWithIndex(partial(steps.fan_out_partition, self.spec, step, fn))
        )

    def map(self, fn: Callable[[T], U], name: str = "map") -> TrackedRDD[U]:
        """Like ``map``; the record keeps its anchors."""
        step = self._step(name)
        return self._then(self.rdd.mapPartitionsWithIndex(partial(steps.map_partition, self.spec, step, fn)))

    def filter(self, pred: Callable[[T], bool], name: str = "filter") -> TrackedRDD[T]:
        """Like ``filter``; a dropped record is finished, so its edges are acked."""
        step = self._step(name)
        return self._then(
            self.rdd.mapPartitionsWithIndex(partial(steps.map_partition, self.spec, step, pred, keep=True))
        )

    def reduce_by_key(
        self, fn: Callable[[Any, Any], Any], num_partitions: int | None = None, name: str = "reduce_by_key"
    ) -> TrackedRDD[tuple[Any, Any]]:
        """Like ``reduceByKey`` on ``(key, value)`` values. A combined record carries,
        per chain, the XOR of the pending edges of everything it combines (Storm's
        multi-anchoring, without new edges), so no stamp is needed here; the sink acks
        them all. Values that are not pairs, and combinations where ``fn`` raised, fail
        their chains."""
        step = self._step(name)
        keyed = self.rdd.mapPartitionsWithIndex(partial(steps.key_partition, self.spec, f"{step}.key"))
        merge = self.spec.group.merge if self.spec.group.is_sum else None
        reduced = keyed.reduceByKey(partial(steps.combine, fn, merge=merge), num_partitions)
        return self._then(
            reduced.mapPartitionsWithIndex(partial(steps.unpack_partition, self.spec, f"{step}.unpack"))
        )

    def sink(self, writer: PartitionWriter, name: str = "sink") -> int:
        """Run the job: write every partition's values with ``writer``; then the driver
        acks what was written. Returns the number of values written.

        Each partition returns the XOR of its written records' anchors per chain (Spark
        hands the driver exactly one result per partition, from a successful attempt);
        the driver merges them and sends one stamp per chain for the whole sink (op id
        ``<run>.<attempt>/<step>/driver/<tag>``), concurrently. A partition whose writer
        raised fails its chains instead; so do the chains of records that raised."""
        step = self._step(name)
        results = self.rdd.mapPartitionsWithIndex(
            partial(steps.sink_partition, self.spec, step, writer)
        ).collect()
        owed = Ledger(self.spec, step, -1)
        written = 0
        for count, pending, failures, noted in results:
            written += count
            owed.owe(pending, failures, noted)
        self._acker(step, owed.pending, owed.failed, owed.notes)
        return written
