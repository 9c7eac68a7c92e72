"""Tracked RDDs: Spark transformations that keep each record's root.

A :class:`TrackedRDD` of ``(value, tag)`` records mirrors ``flatMap`` (``fan_out``),
``map``, ``filter`` and ``reduceByKey`` and ends in :meth:`TrackedRDD.sink`. A root is
acked because the job that wrote its output committed (Spark hands the driver one result
per partition, whatever was retried) and none of its records failed (:class:`Pass`).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from . import steps
from .executor import Noted, RunSpec, keep_first

if TYPE_CHECKING:
    from pyspark import RDD

    from ..chains import Started
    from ..outcomes import Attempt

__all__ = ["TrackedRDD", "Stream", "PartitionWriter", "Acker", "Pass", "Sunk", "MIXED"]

T = TypeVar("T")
U = TypeVar("U")

#: ``writer(partition_index, values)``: writes one partition's output whole (replacing
#: an earlier call's for the index) and returns once it is durable.
PartitionWriter = Callable[[int, list[Any]], None]
#: ``acker(step, stamps, failures, notes)``: the driver's requests after a sink
#: (:meth:`RDDTracking.acker`); returns counts.
Acker = Callable[[str, dict[str, int], dict[str, str], dict[str, str]], Counter[str]]

MIXED = "the committed output also holds records of roots that failed, and this job cannot be run again"


class Stream(Protocol):
    """The methods of :class:`TrackedRDD` a job function may use (an untracked twin too)."""

    def fan_out(self, fn: Callable[[Any], Iterable[Any] | Noted], name: str = ...) -> Stream: ...
    def map(self, fn: Callable[[Any], Any], name: str = ...) -> Stream: ...
    def filter(self, pred: Callable[[Any], bool], name: str = ...) -> Stream: ...
    def reduce_by_key(
        self, fn: Callable[[Any, Any], Any], num_partitions: int | None = ..., name: str = ...
    ) -> Stream: ...
    def sink(self, writer: PartitionWriter, name: str = ...) -> int: ...


@dataclass
class Sunk:
    """What a sink's job returned, merged over its partitions (one result each); key
    ``None``: every root of the pass."""

    partitions: int = 0
    written: int = 0
    tags: set[str] = field(default_factory=set)
    cross: bool = False
    failed: dict[str | None, str] = field(default_factory=dict)
    notes: dict[str | None, str] = field(default_factory=dict)

    def add(self, result: steps.SinkResult) -> None:
        count, tags, cross, failed, notes = result
        self.partitions += 1
        self.written += count
        self.tags |= tags
        self.cross = self.cross or cross
        keep_first(self.failed, failed)
        keep_first(self.notes, notes)

    @staticmethod
    def per_root(found: Mapping[str | None, str], roots: Iterable[str]) -> dict[str, str]:
        """``found`` per root of ``roots``, what is under ``None`` to each without its own."""
        out = {t: v for t, v in found.items() if t is not None}
        if None in found:
            for tag in roots:
                out.setdefault(tag, found[None])
        return out


@dataclass
class Pass:
    """The driver's side of one run of a job over some roots (``stamps``: what acks each
    one's chain): once the sink committed, stamp the roots that did not fail and fail the
    others (with ``failed`` by earlier passes; a chain not started counts as failed).
    When the output holds records of failed roots, ask for a run without them
    (:attr:`again`), or, without ``rerun``, fail every root (:data:`MIXED`). When it
    holds records of several roots and a stamp did not ack (the chain failed or expired
    behind the run's back; ``known`` holds what the stamps decided), ask for a run over
    the roots that acked (:attr:`again`, :attr:`after_ack`): records of a root that did
    not ack are in no kept output, so its replay counts them once. ``acked``: the roots
    are acked already, the pass writes only (a root failing there: :attr:`again`).
    """

    stamps: Mapping[str, int]
    acker: Acker
    starting: Future[Started] | None = None
    failed: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    rerun: bool = True
    known: Mapping[str, Attempt] = field(default_factory=dict)
    acked: bool = False
    #: When the output holds records of roots that failed or did not ack: the roots to
    #: leave out, the writer, the partitions written.
    again: tuple[set[str], PartitionWriter, int] | None = None
    #: Whether :attr:`again` comes after the stamps (the roots left are acked).
    after_ack: bool = False
    sunk: Sunk | None = None

    def __call__(self, step: str, writer: PartitionWriter, sunk: Sunk) -> None:
        self.sunk = sunk
        roots = set(self.stamps)
        failures = Sunk.per_root(sunk.failed, roots)
        if self.acked:
            if failures:
                self.again = set(failures), writer, sunk.partitions
            return
        keep_first(self.notes, Sunk.per_root(sunk.notes, roots))
        refused = set(self.starting.result()[1]) if self.starting is not None else set()
        bad = (set(failures) | refused) & roots
        keep_first(self.failed, failures)
        if bad and (sunk.cross or not sunk.tags.isdisjoint(bad)):
            if self.rerun:
                self.again = bad, writer, sunk.partitions
                return
            for tag in roots:
                self.failed.setdefault(tag, MIXED)
        stamps = {t: v for t, v in self.stamps.items() if t not in self.failed and t not in refused}
        self.acker(step, stamps, dict(self.failed), dict(self.notes))
        if not self.rerun:
            return
        unacked = {t for t in stamps if (a := self.known.get(t)) is None or a.state != "acked"}
        if unacked and (sunk.cross or not sunk.tags.isdisjoint(unacked)):
            self.again, self.after_ack = (unacked, writer, sunk.partitions), True


class TrackedRDD(Generic[T]):
    """An RDD of ``(value, tag)`` records of one tracked pass; lazy: nothing runs, and
    nothing is stamped, until :meth:`sink`. A user function that raises fails the
    record's root (the exception's ``repr`` is the reason). ``sink``: the records'
    :class:`Pass`.
    """

    def __init__(
        self,
        rdd: RDD[Any],
        spec: RunSpec,
        steps_counter: itertools.count[int],
        sink: Pass,
    ) -> None:
        self.rdd = rdd
        self.spec = spec
        self._steps = steps_counter
        self._pass = sink

    def _step(self, name: str) -> str:
        return f"{next(self._steps)}-{name}"

    def _then(self, rdd: RDD[Any]) -> TrackedRDD[Any]:
        return TrackedRDD(rdd, self.spec, self._steps, self._pass)

    def _each(self, fn: Callable[[Any], Any], name: str, kind: str) -> TrackedRDD[Any]:
        each = partial(steps.map_partition, self.spec, self._step(name), fn, kind=kind)
        return self._then(self.rdd.mapPartitionsWithIndex(each))

    def fan_out(self, fn: Callable[[T], Iterable[U] | Noted], name: str = "fan_out") -> TrackedRDD[U]:
        """Like ``flatMap``, the children of the same root; ``fn`` may return
        :class:`Noted` items to note the root."""
        return self._each(fn, name, "fan_out")

    def map(self, fn: Callable[[T], U], name: str = "map") -> TrackedRDD[U]:
        return self._each(fn, name, "map")

    def filter(self, pred: Callable[[T], bool], name: str = "filter") -> TrackedRDD[T]:
        return self._each(pred, name, "filter")

    def reduce_by_key(
        self, fn: Callable[[Any, Any], Any], num_partitions: int | None = None, name: str = "reduce_by_key"
    ) -> TrackedRDD[tuple[Any, Any]]:
        """Like ``reduceByKey`` on ``(key, value)`` values, across roots; a combined
        record keeps its root only when all its values had it. A value that is not a
        pair, or a combination where ``fn`` raised, fails its root (or roots)."""
        step = self._step(name)
        keyed = self.rdd.mapPartitionsWithIndex(partial(steps.key_partition, self.spec, f"{step}.key"))
        reduced = keyed.reduceByKey(partial(steps.combine, fn), num_partitions)
        return self._then(
            reduced.mapPartitionsWithIndex(partial(steps.unpack_partition, self.spec, f"{step}.unpack"))
        )

    def sink(self, writer: PartitionWriter, name: str = "sink") -> int:
        """Run the job: write every partition's values with ``writer``, then ack what
        was written (:class:`Pass`). Returns the number of values written; a partition
        whose writer raised fails the roots of its records."""
        step = self._step(name)
        results = self.rdd.mapPartitionsWithIndex(
            partial(steps.sink_partition, self.spec, step, writer)
        ).collect()
        sunk = Sunk()
        for result in results:
            sunk.add(result)
        self._pass(step, writer, sunk)
        return sunk.written
