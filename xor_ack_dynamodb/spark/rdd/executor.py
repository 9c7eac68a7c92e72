"""What runs inside a Spark task: the executor's tracker and the per-partition ledger.

A record of a tracked RDD is ``(value, tag, anchor)``: one chain's tag and an ``int``
anchor (the XOR of its pending edges), or ``None`` and a ``{tag: XOR}`` dict for a
record that stands for several chains. A ledger collects one partition's XORs per chain
for one step and flushes at the partition's end: one ``create`` per chain the step
starts (op id ``<run>.<attempt>/<step>/<partition>/<tag>/create``, remembered for the
chain's life), one ``fail`` per chain whose records raised (failing twice changes
nothing), and no stamp: the other XORs leave as one carrier record (a :class:`Carry`)
for the sink to return to the driver, which stamps each chain once per attempt. Spark
hands the driver one result per partition, so this is exact whatever tasks were
retried, recomputed or speculated, and the op-id window (``win``, 32) is never the
limit.

See docs/spark.md, "RDDs" ("Coalescing: one stamp per chain, at any number of
partitions").
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from pyspark.accumulators import AccumulatorParam

from ...errors import NotOwner, TagAcked, TagExists, TagNotFound
from ...stores.dynamodb.tracker import XorAckDynamoDB
from ..chains import pool_map, snapshot
from ..edges import EdgeKey
from ..group import Group
from ..outcomes import failure_reason
from ..tags import TagScheme

if TYPE_CHECKING:
    from pyspark import Accumulator

    from ...config import AckConfig

__all__ = [
    "RunSpec",
    "Ledger",
    "CounterParam",
    "executor_tracker",
    "Anchors",
    "Anchor",
    "Record",
    "Noted",
    "Carry",
]

log = logging.getLogger("xor_ack_dynamodb.spark")

#: The anchors of a record that stands for several chains: for each chain, the XOR of
#: its pending edges.
Anchors = dict[str, int]
#: A record's anchor: its pending XOR (an ``int``, with the tag beside it) or, for a
#: record of several chains, :data:`Anchors` (with the tag ``None``).
Anchor = int | Anchors
#: ``(value, tag, anchor)``; see the module doc.
Record = tuple[Any, str | None, Anchor]


@dataclass(frozen=True, eq=True)
class Carry:
    """The value of a carrier record: the XORs one partition of one step owes its chains
    (in the record's anchor), on their way to the driver; see the module doc. Its own
    shuffle key (one per step and partition, never equal to a user's key), with a hash
    that is the same in every process, so a recomputed map task sends it to the same
    reduce partition."""

    step: str
    partition: int

    def __hash__(self) -> int:
        return zlib.crc32(f"{self.step}/{self.partition}".encode())


#: Called after a ledger flushed (and after a sink wrote), with the step name and the
#: partition index (a test hook: make a task die after its stamps landed).
AfterFlush = Callable[[str, int], None]

# Executor-side cache, one tracker per AckConfig per Python worker process. This is the
# only module-level state in the library, and it never holds anything the driver built:
# each worker fills it lazily from the picklable AckConfig that travelled with the task,
# so a boto3 client is built once per worker process instead of once per task (building
# one costs tens of milliseconds) and never crosses a process boundary. Python workers
# run one task at a time; the lock guards the odd thread a user task may start.
_TRACKERS: dict[AckConfig, XorAckDynamoDB] = {}
#: How many chains one partition flushes at the same time (at most botocore's pool of
#: 10 connections per client).
FLUSH_THREADS = 8
_TRACKERS_LOCK = threading.Lock()


def executor_tracker(config: AckConfig) -> XorAckDynamoDB:
    """This worker process's tracker for ``config``, built on first use."""
    with _TRACKERS_LOCK:
        tracker = _TRACKERS.get(config)
        if tracker is None:
            tracker = XorAckDynamoDB.from_config(config)
            _TRACKERS[config] = tracker
        return tracker


#: The note that marks a chain whose create met an existing item (see :func:`report_conflict`).
CONFLICT_NOTE = "\x00conflict"


def report_conflict(spec: RunSpec, tag: str) -> None:
    """Tell the driver that ``tag``'s create found a chain already there: the driver then
    never stamps it, fails it, or reports it acked."""
    if spec.notes is not None:
        spec.notes.add(Counter({f"{tag}\x00{CONFLICT_NOTE}": 1}))


def report(spec: RunSpec, tracker: XorAckDynamoDB, before: Counter[str], counts: Counter[str]) -> None:
    """Add ``counts``, and what ``tracker`` did since ``before`` (a :func:`snapshot`),
    to the run's accumulator."""
    delta = snapshot(tracker)
    delta.subtract(before)
    counts.update({k: n for k, n in delta.items() if n})
    spec.counters.add(counts)


class CounterParam(AccumulatorParam[Counter[str]]):
    """Sums ``Counter``s: how tasks report their DynamoDB requests to the driver."""

    def zero(self, value: Counter[str]) -> Counter[str]:
        return Counter()

    def addInPlace(self, value1: Counter[str], value2: Counter[str]) -> Counter[str]:
        value1.update(value2)
        return value1


@dataclass(frozen=True)
class Noted:
    """What a ``fan_out`` function may return instead of a plain iterable: the children,
    and a note for the chains of the record it split (e.g. "bad bytes replaced"). The
    note shows in the run's report (:attr:`Attempt.note`); the chain is not failed."""

    items: Iterable[Any]
    note: str


@dataclass(frozen=True)
class RunSpec:
    """What every tracked step of one attempt needs on the executors. Picklable.

    ``op_run`` names the attempt in op ids; ``edges`` derives edges (keyed per run, so
    different runs get unrelated edges); ``tags`` and ``attempt`` make chain tags;
    ``counters`` is the accumulator tasks add their request counts to (requests made by a
    task that later died are not reported: Spark drops the accumulator updates of failed
    tasks).
    """

    config: AckConfig
    op_run: str
    edges: EdgeKey
    tags: TagScheme
    attempt: int
    counters: Accumulator[Counter[str]]
    notes: Accumulator[Counter[str]] | None = None
    after_flush: AfterFlush | None = None
    #: The owners of chains this run was handed (tag -> owner, see :mod:`.upstream`);
    #: every other chain is the run's own.
    owners: Mapping[str, str] | None = None
    #: How anchors combine and stamps are sent (xor or sum chains).
    group: Group = Group("xor")
    #: Send a partition's creates as ``create_many`` (TransactWriteItems of up to 100).
    transactions: bool = False

    @property
    def edge_size(self) -> int:
        return self.edges.size

    def owner(self, tag: str) -> str:
        """Who chain ``tag`` belongs to: named in every request sent to it."""
        return (self.owners or {}).get(tag, self.tags.owner)

    def tag(self, key: Any) -> str:
        return self.tags.tag(key, self.attempt)


class Ledger:
    """The pending stamps and failures of one partition of one step; see the module doc.
    A pending stamp is the XOR (xor chains) or the signed sum (sum chains: started edges
    added, finished anchors subtracted) of what the step did to the chain.

    Flushing raises only for errors worth a task retry (DynamoDB unreachable, a budget
    spent on lost races): a chain that cannot be failed (acked or gone) is counted under
    ``skipped``, because its outcome no longer depends on this partition. The XORs of
    the chains not failed leave as a carrier record (:meth:`flush`), never as a stamp.
    """

    def __init__(self, spec: RunSpec, step: str, partition: int) -> None:
        self.spec = spec
        self.step = step
        self.partition = partition
        self.pending: dict[str, int] = {}
        self.failed: dict[str, str] = {}
        self.creates: dict[str, int] = {}
        self.notes: dict[str, str] = {}
        self.group = spec.group
        self._finish = spec.group.finish

    def note(self, tags: Iterable[str], text: str) -> None:
        """Report ``text`` for these chains (the first note per chain is kept)."""
        for tag in tags:
            self.notes.setdefault(tag, text)

    def ack(self, anchors: Anchors) -> None:
        """Finish ``anchors`` (per chain: XOR them in, or subtract them)."""
        pending = self.pending
        finish = self._finish
        for tag, edge in anchors.items():
            pending[tag] = finish(pending.get(tag, 0), edge)

    def add(self, tag: str, amount: int) -> None:
        """Add a pending amount (edges started less edges finished, in the chain's
        group) to chain ``tag``'s pending stamp."""
        self.pending[tag] = self.group.merge(self.pending.get(tag, 0), amount)

    def anchor(self, tag: str | None, anchor: Anchor) -> None:
        """Finish a record's anchor (see :data:`Record`)."""
        if tag is not None:
            self.pending[tag] = self._finish(self.pending.get(tag, 0), anchor)  # type: ignore[arg-type]
        else:
            self.ack(anchor)  # type: ignore[arg-type]

    def fail(self, tags: Iterable[str], error: BaseException | str) -> None:
        """Fail these chains at the flush (the first reason per chain is kept)."""
        reason = failure_reason(error)
        for tag in tags:
            self.failed.setdefault(tag, reason)

    def fail_anchor(self, tag: str | None, anchor: Anchor, error: BaseException | str) -> None:
        """Fail the chains of a record's anchor."""
        self.fail([tag] if tag is not None else list(anchor), error)  # type: ignore[arg-type]

    def op_id(self, tag: str) -> str:
        return f"{self.spec.op_run}/{self.step}/{self.partition}/{tag}"

    def create(self, tag: str, root: int) -> None:
        """Start chain ``tag`` at the flush, with root edge ``root`` (which the records of
        this step have already finished, so the chain is created holding the XOR, or
        sum, of the edges they started: one write instead of a create and a stamp)."""
        self.creates[tag] = root

    def flush(self) -> list[Record]:
        """Send this partition's creates and fails, and return what the step must emit
        after its records: the carrier of the other chains' XORs (a list of one record,
        or empty). Creates and fails go out concurrently (up to :data:`FLUSH_THREADS`
        chains at a time: a request is mostly waiting on the network); a chain's own
        requests stay in order (create, then fail)."""
        if self.notes and self.spec.notes is not None:
            self.spec.notes.add(Counter(f"{tag}\x00{text}" for tag, text in self.notes.items()))
        pending = {t: v for t, v in self.pending.items() if v and t not in self.failed}
        tags = self._order(set(self.creates) | set(self.failed))
        if tags:
            tracker = executor_tracker(self.spec.config)
            before = snapshot(tracker)
            counts: Counter[str] = Counter()
            results = self._create_many(tracker, tags) if self.spec.transactions else {}
            rest = [t for t in tags if t not in results]
            flush_one = partial(self._flush_one, tracker)
            results.update(zip(rest, pool_map(FLUSH_THREADS, flush_one, rest, "xor-ack-flush"), strict=True))
            for tag, (result, carried) in results.items():
                counts.update(result)
                if tag in self.creates:
                    if carried:
                        pending[tag] = carried
                    else:
                        pending.pop(tag, None)
            report(self.spec, tracker, before, counts)
        if self.spec.after_flush is not None:
            self.spec.after_flush(self.step, self.partition)
        if not pending:
            return []
        return [(Carry(self.step, self.partition), None, pending)]

    def _create_many(self, tracker: XorAckDynamoDB, tags: list[str]) -> dict[str, tuple[Counter[str], int]]:
        """The creates of chains that need nothing else (no fail), as ``create_many``
        per owner; returns what :meth:`_flush_one` would for each."""
        group = self.group
        values = {
            t: group.merge(self.creates[t], self.pending.get(t, 0))
            for t in tags
            if t in self.creates and t not in self.failed
        }
        out: dict[str, tuple[Counter[str], int]] = {}
        for owner in sorted({self.spec.owner(t) for t in values}):
            mine = {t: v for t, v in values.items() if self.spec.owner(t) == owner}
            results = tracker.create_many(
                {t: group.value(v or self.creates[t]) for t, v in mine.items()},
                op_ids={t: self.op_id(t) + "/create" for t in mine},
                owner=owner,
            )
            for tag, result in results.items():
                if isinstance(result, TagExists):
                    report_conflict(self.spec, tag)
                    out[tag] = (Counter(create_exists=1), 0)
                elif isinstance(result, Exception):
                    raise result
                else:
                    carried = group.finished(self.creates[tag]) if mine[tag] == 0 else 0
                    out[tag] = (Counter(chains_created=1), carried)
        return out

    def _flush_one(self, tracker: XorAckDynamoDB, tag: str) -> tuple[Counter[str], int]:
        """Create and/or fail chain ``tag``; returns counts, and for a created chain the
        XOR still to carry to the driver (0: none)."""
        counts: Counter[str] = Counter()
        group = self.group
        carried = 0
        if tag in self.creates:
            root = self.creates[tag]
            value = root if tag in self.failed else group.merge(root, self.pending.get(tag, 0))
            try:
                # Nothing started (e.g. an empty file): create it with its root edge and
                # carry its finishing to the driver; a create never stores zero.
                tracker.create(
                    tag,
                    group.value(value or root),
                    op_id=self.op_id(tag) + "/create",
                    owner=self.spec.owner(tag),
                )
            except TagExists:
                # Another writer's chain (the tracker remembers a create's op id for the
                # chain's life, so a retry of ours is a duplicate, not this): never adopt
                # it. The driver reports the root failed and sends it nothing.
                report_conflict(self.spec, tag)
                return Counter(create_exists=1), 0
            counts["chains_created"] += 1
            if value == 0 and tag not in self.failed:
                carried = group.finished(root)
        if tag in self.failed:
            try:
                tracker.fail(tag, reason=self.failed[tag], owner=self.spec.owner(tag))
                counts["chains_failed"] += 1
            except NotOwner:
                report_conflict(self.spec, tag)
                counts["conflicts"] += 1
            except (TagAcked, TagNotFound) as exc:
                # Acked: impossible unless an op id fell out of the chain's memory.
                log.warning("could not fail chain %s: %r", tag, exc)
                counts["skipped"] += 1
        return counts, carried

    def _order(self, tags: Iterable[str]) -> list[str]:
        """Tags sorted, then rotated by the partition index: partitions flushing the same
        chains at the same moment start at different chains instead of racing on each."""
        ordered = sorted(tags)
        shift = (self.partition * 7919) % max(1, len(ordered))
        return ordered[shift:] + ordered[:shift]
