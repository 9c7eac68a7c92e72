"""Tracked RDDs: Spark transformations that keep each record's root.

A :class:`TrackedRDD` wraps an RDD of ``(value, tag)`` records (see :mod:`.executor`).
Its methods mirror the RDD methods a pipeline needs (``fan_out`` for ``flatMap``,
``map``, ``filter``, ``reduce_by_key``) and end in :meth:`TrackedRDD.sink`, which
writes the output. :class:`Stream` names those methods, so that a job function can also
run over an untracked twin (the word count's baseline does, to measure what tracking
costs).

A root is acked because the job that wrote its output committed (Spark hands the
driver exactly one result per partition of the sink's job, whatever tasks were retried
or speculated) and none of its records failed. After the sink's job the driver
(:class:`Pass`) stamps each root that did not fail once, with what acks its chain (its
root edge; minus it for sum chains), and fails the failed roots with their reasons: two
requests per root, whatever its records. When roots failed and the output holds records
of theirs (their own records, or records of several roots), the output cannot be
stamped: the pass asks for the job to be run again over the other roots
(:meth:`RDDTracking.run <xor_ack_dynamodb.spark.rdd.RDDTracking.run>` does, in the same
attempt, before any stamp).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from . import steps
from .executor import Noted, RunSpec

if TYPE_CHECKING:
    from pyspark import RDD

    from ..chains import Started

__all__ = ["TrackedRDD", "Stream", "PartitionWriter", "Acker", "Pass", "Sunk", "MIXED"]

T = TypeVar("T")
U = TypeVar("U")

#: ``writer(partition_index, values)``: writes one partition's output whole (replacing
#: what an earlier call for the same index wrote) and returns only once it is durable;
#: retries and speculation call it again with the same values.
PartitionWriter = Callable[[int, list[Any]], None]
#: The driver's requests after a sink: given the step name, the stamp per root to ack,
#: the failure reason per root and the note per root, stamps and fails the chains;
#: returns counts (``stamps``, ``chains_acked``, ...). Provided by :class:`RDDTracking`.
Acker = Callable[[str, dict[str, int], dict[str, str], dict[str, str]], Counter[str]]

#: Why a root that did not fail is failed when its pass cannot be run again.
MIXED = "the committed output also holds records of roots that failed, and this job cannot be run again"


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


@dataclass
class Sunk:
    """What a sink's job returned, merged over its partitions (one result each)."""

    partitions: int = 0
    written: int = 0
    #: The roots with a record written, and whether a written record stood for several.
    tags: set[str] = field(default_factory=set)
    cross: bool = False
    #: Reason and note per root; ``None``: every root of the pass.
    failed: dict[str | None, str] = field(default_factory=dict)
    notes: dict[str | None, str] = field(default_factory=dict)

    def add(self, result: steps.SinkResult) -> None:
        count, tags, cross, failed, notes = result
        self.partitions += 1
        self.written += count
        self.tags |= tags
        self.cross = self.cross or cross
        for tag, reason in failed.items():
            self.failed.setdefault(tag, reason)
        for tag, text in notes.items():
            self.notes.setdefault(tag, text)

    @staticmethod
    def per_root(found: Mapping[str | None, str], roots: Iterable[str]) -> dict[str, str]:
        """``found`` (:attr:`failed` or :attr:`notes`) per root of ``roots``; what is kept
        under ``None`` goes to each root without its own."""
        out = {t: v for t, v in found.items() if t is not None}
        if None in found:
            for tag in roots:
                out.setdefault(tag, found[None])
        return out


@dataclass
class Pass:
    """The driver's side of one run of a job over some roots: what their sink wrote and,
    when it can be trusted, the stamps and fails (see the module doc).

    :param stamps: per root of the pass (its tag), the stamp that acks its chain.
    :param acker: sends them (:meth:`RDDTracking.acker`).
    :param starting: resolves to the chains started (a refused chain counts as failed).
    :param failed: roots failed by earlier passes (failed with the others).
    :param rerun: whether the caller runs the job again when asked (:attr:`again`);
        if not, the pass fails every root instead (reason :data:`MIXED`).
    """

    stamps: Mapping[str, int]
    acker: Acker
    starting: Future[Started] | None = None
    failed: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    rerun: bool = True
    #: Set by :meth:`__call__` when the output holds records of failed roots: the roots
    #: to leave out, the writer and the number of partitions written.
    again: tuple[set[str], PartitionWriter, int] | None = None
    sunk: Sunk | None = None

    def __call__(self, step: str, writer: PartitionWriter, sunk: Sunk) -> None:
        self.sunk = sunk
        roots = set(self.stamps)
        failures = Sunk.per_root(sunk.failed, roots)
        for tag, text in Sunk.per_root(sunk.notes, roots).items():
            self.notes.setdefault(tag, text)
        refused = set(self.starting.result()[1]) if self.starting is not None else set()
        bad = (set(failures) | refused) & roots
        for tag, reason in failures.items():
            self.failed.setdefault(tag, reason)
        if bad and (sunk.cross or not sunk.tags.isdisjoint(bad)):
            if self.rerun:
                self.again = bad, writer, sunk.partitions
                return
            for tag in roots:
                self.failed.setdefault(tag, MIXED)
        stamps = {t: v for t, v in self.stamps.items() if t not in self.failed and t not in refused}
        self.acker(step, stamps, dict(self.failed), dict(self.notes))


class TrackedRDD(Generic[T]):
    """An RDD of ``(value, tag)`` records of one tracked pass (built by
    :meth:`xor_ack_dynamodb.spark.RDDTracking.run`). Lazy like any RDD: nothing runs,
    and nothing is stamped, until :meth:`sink`.

    User functions run on the executors; when one raises, the record's root fails (the
    exception's ``repr`` is the reason) and the rest of the partition goes on.

    ``sink`` is the :class:`Pass` the records belong to. (Given an :data:`Acker`
    instead, the records are ``(value, tag, edge)`` triples: each root's chain is
    acked by a stamp of its edge, and the pass cannot be run again; the handed-chains
    path builds them so.)
    """

    def __init__(
        self,
        rdd: RDD[Any],
        spec: RunSpec,
        steps_counter: itertools.count[int],
        sink: Pass | Acker,
    ) -> None:
        if not isinstance(sink, Pass):
            sink = Pass(dict(rdd.map(itemgetter(1, 2)).collect()), sink, rerun=False)
            rdd = rdd.map(itemgetter(0, 1))
        self.rdd = rdd
        self.spec = spec
        self._steps = steps_counter
        self._pass = sink

    def _step(self, name: str) -> str:
        return f"{next(self._steps)}-{name}"

    def _then(self, rdd: RDD[Any]) -> TrackedRDD[Any]:
        return TrackedRDD(rdd, self.spec, self._steps, self._pass)

    def fan_out(self, fn: Callable[[T], Iterable[U] | Noted], name: str = "fan_out") -> TrackedRDD[U]:
        """Like ``flatMap``: each record is replaced by ``fn(value)``'s items, of the
        same root; ``fn`` may return :class:`Noted` items to note the root."""
        step = self._step(name)
        return self._then(
            self.rdd.mapPartitionsWithIndex(partial(steps.fan_out_partition, self.spec, step, fn))
        )

    def map(self, fn: Callable[[T], U], name: str = "map") -> TrackedRDD[U]:
        """Like ``map``."""
        step = self._step(name)
        return self._then(self.rdd.mapPartitionsWithIndex(partial(steps.map_partition, self.spec, step, fn)))

    def filter(self, pred: Callable[[T], bool], name: str = "filter") -> TrackedRDD[T]:
        """Like ``filter``."""
        step = self._step(name)
        return self._then(
            self.rdd.mapPartitionsWithIndex(partial(steps.map_partition, self.spec, step, pred, keep=True))
        )

    def reduce_by_key(
        self, fn: Callable[[Any, Any], Any], num_partitions: int | None = None, name: str = "reduce_by_key"
    ) -> TrackedRDD[tuple[Any, Any]]:
        """Like ``reduceByKey`` on ``(key, value)`` values: each key's values are
        combined across roots, as the plain operator does; a combined record keeps its
        root only when all its values had the same one. Values that are not pairs, and
        combinations where ``fn`` raised, fail their root (every root of the pass for a
        record of several roots)."""
        step = self._step(name)
        keyed = self.rdd.mapPartitionsWithIndex(partial(steps.key_partition, self.spec, f"{step}.key"))
        reduced = keyed.reduceByKey(partial(steps.combine, fn), num_partitions)
        return self._then(
            reduced.mapPartitionsWithIndex(partial(steps.unpack_partition, self.spec, f"{step}.unpack"))
        )

    def sink(self, writer: PartitionWriter, name: str = "sink") -> int:
        """Run the job: write every partition's values with ``writer``; then the driver
        acks what was written (:class:`Pass`). Returns the number of values written.

        Each partition returns which roots its records were of and what its carriers
        brought (Spark hands the driver exactly one result per partition, from a
        successful attempt); the driver then stamps each root of the pass that did not
        fail once (op id ``<run>.<attempt>/<step>/driver/<tag>``), concurrently, and
        fails the others. A partition whose writer raised fails the roots of its
        records."""
        step = self._step(name)
        results = self.rdd.mapPartitionsWithIndex(
            partial(steps.sink_partition, self.spec, step, writer)
        ).collect()
        sunk = Sunk()
        for result in results:
            sunk.add(result)
        self._pass(step, writer, sunk)
        return sunk.written
