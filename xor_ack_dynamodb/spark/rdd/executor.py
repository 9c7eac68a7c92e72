"""What runs inside a Spark task: the per-partition ledger and its carrier record.

A record of a tracked RDD is ``(value, tag, anchor)``: one chain's tag and an ``int``
anchor (the XOR of its pending edges), or ``None`` and a ``{tag: XOR}`` dict for a
record that stands for several chains. A ledger collects one partition's XORs per chain
for one step, the chains whose records raised and the notes of its records, and at the
partition's end emits them as one carrier record (a :class:`Carry`) that travels with
the data to the sink, which returns it to the driver. Executors send no request: the
driver creates every chain before the job's sink is applied, stamps each once per
attempt and fails the chains that failed. Spark hands the driver one result per
partition, so this is exact whatever tasks were retried, recomputed or speculated.

See docs/spark.md, "RDDs" ("Coalescing: one stamp per chain, at any number of
partitions").
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..edges import EdgeKey
from ..group import Group
from ..outcomes import failure_reason
from ..tags import TagScheme

if TYPE_CHECKING:
    from ...config import AckConfig
    from ...stores.dynamodb.tracker import XorAckDynamoDB

__all__ = ["RunSpec", "Ledger", "executor_tracker", "Anchors", "Anchor", "Record", "Noted", "Carry"]

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
    """The value of a carrier record: what one partition of one step owes its chains (the
    XORs in the record's anchor; the chains whose records raised and the notes here), on
    its way to the driver; see the module doc. Its own shuffle key (one per step and
    partition, never equal to a user's key), with a hash that is the same in every
    process, so a recomputed map task sends it to the same reduce partition."""

    step: str
    partition: int
    failed: Mapping[str, str] = field(default_factory=dict, compare=False)
    notes: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __hash__(self) -> int:
        return zlib.crc32(f"{self.step}/{self.partition}".encode())


#: Called after a ledger flushed (and after a sink wrote), with the step name and the
#: partition index (a test hook: make a task die after its step's work).
AfterFlush = Callable[[str, int], None]

# One tracker per AckConfig per Python worker process, built lazily from the picklable
# config, for code of yours that runs in tasks (the library's own tasks send nothing).
_TRACKERS: dict[AckConfig, XorAckDynamoDB] = {}
_TRACKERS_LOCK = threading.Lock()


def executor_tracker(config: AckConfig) -> XorAckDynamoDB:
    """This worker process's tracker for ``config``, built on first use."""
    from ...stores.dynamodb.tracker import XorAckDynamoDB

    with _TRACKERS_LOCK:
        tracker = _TRACKERS.get(config)
        if tracker is None:
            tracker = XorAckDynamoDB.from_config(config)
            _TRACKERS[config] = tracker
        return tracker


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

    ``edges`` derives edges (keyed per run, so different runs get unrelated edges);
    ``tags`` and ``attempt`` make chain tags; ``group`` says how anchors combine (xor or
    sum chains).
    """

    edges: EdgeKey
    tags: TagScheme
    attempt: int
    after_flush: AfterFlush | None = None
    group: Group = Group("xor")

    def tag(self, key: Any) -> str:
        return self.tags.tag(key, self.attempt)


class Ledger:
    """The pending stamps, failures and notes of one partition of one step; see the
    module doc. A pending stamp is the XOR (xor chains) or the signed sum (sum chains:
    started edges added, finished anchors subtracted) of what the step did to the
    chain."""

    def __init__(self, spec: RunSpec, step: str, partition: int) -> None:
        self.spec = spec
        self.step = step
        self.partition = partition
        self.pending: dict[str, int] = {}
        self.failed: dict[str, str] = {}
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

    def anchor(self, tag: str | None, anchor: Anchor) -> None:
        """Finish a record's anchor (see :data:`Record`)."""
        if tag is not None:
            self.pending[tag] = self._finish(self.pending.get(tag, 0), anchor)  # type: ignore[arg-type]
        else:
            self.ack(anchor)  # type: ignore[arg-type]

    def fail(self, tags: Iterable[str], error: BaseException | str) -> None:
        """Fail these chains (the first reason per chain is kept)."""
        reason = failure_reason(error)
        for tag in tags:
            self.failed.setdefault(tag, reason)

    def fail_anchor(self, tag: str | None, anchor: Anchor, error: BaseException | str) -> None:
        """Fail the chains of a record's anchor."""
        self.fail([tag] if tag is not None else list(anchor), error)  # type: ignore[arg-type]

    def owe(self, pending: Mapping[str, int], failed: Mapping[str, str], notes: Mapping[str, str]) -> None:
        """Take in what another ledger owes: a carrier of an earlier step (at the sink),
        or a sink partition's result (on the driver). Pending amounts (edges started less
        edges finished) merge in the chain's group; the first reason and note per chain
        are kept."""
        merge = self.group.merge
        for chain, amount in pending.items():
            self.pending[chain] = merge(self.pending.get(chain, 0), amount)
        for chain, reason in failed.items():
            self.failed.setdefault(chain, reason)
        for chain, text in notes.items():
            self.notes.setdefault(chain, text)

    def flush(self) -> list[Record]:
        """What the step must emit after its records: its carrier (a list of one record,
        or empty when it owes nothing)."""
        if self.spec.after_flush is not None:
            self.spec.after_flush(self.step, self.partition)
        pending = {t: v for t, v in self.pending.items() if v}
        if not (pending or self.failed or self.notes):
            return []
        return [(Carry(self.step, self.partition, self.failed, self.notes), None, pending)]
