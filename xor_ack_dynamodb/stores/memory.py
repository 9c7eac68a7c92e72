"""MemoryAck: the same chains kept in memory, for one process and for tests.

It is the ``ack`` package (events on ack and fail) with Storm's RotatingMap expiry, and it
runs the very same calls and rules as :class:`~xor_ack_dynamodb.XorAckDynamoDB` on an
in-memory store: the same methods, errors, op-id idempotency, windows, owners, modes and
tombstones, so pipeline logic tested against it behaves the same against DynamoDB.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from ..core.algebra import Mode
from ..core.chain import Chain
from ..core.factory import chain_rules
from ..core.messages import (
    Add,
    Cancelled,
    Committed,
    Extend,
    MarkFailed,
    Put,
    Read,
    Rejected,
    Remove,
    RemoveAny,
    Reply,
    Request,
    Trim,
    Written,
)
from ..core.rules import ChainRules
from ..drivers.engine import BatchRead, Engine
from ..drivers.tracker import SyncTracker
from ..errors import InvalidConfig
from ..stamps import Stamp, Sum
from ..stats import RequestStats
from ..status import ChainStatus

__all__ = ["MemoryAck", "MemoryStore"]

#: The reason a chain timed out by rotation carries.
TIMEOUT = "timeout"

AckedCallback = Callable[[str], None]
FailedCallback = Callable[[str, str | None], None]


class MemoryStore:
    """Chains in a dict, each request applied atomically under one lock, with the
    conditions of :mod:`.core.messages` evaluated by the rules' own predicates.

    Expiry by rotation (Storm's RotatingMap): every write that starts a chain, touches it
    or finishes it puts the chain in the newest of ``buckets`` buckets; :meth:`rotate`
    drops the oldest bucket.
    """

    def __init__(
        self, rules: ChainRules, stats: RequestStats, buckets: int, share: MemoryStore | None = None
    ) -> None:
        self.rules = rules
        self.stats = stats
        if share is None:
            self._lock = threading.Lock()
            self._chains: dict[str, Chain] = {}
            self._buckets: deque[set[str]] = deque(set() for _ in range(buckets))
        else:  # another tracker's chains, seen through these rules (as two trackers share a table)
            self._lock, self._chains, self._buckets = share._lock, share._chains, share._buckets

    def __len__(self) -> int:
        with self._lock:
            return len(self._chains)

    def is_transient(self, error: BaseException) -> bool:
        return False

    def peek(self, tag: str) -> Chain | None:
        """The chain as held now, without counting a request (for callbacks)."""
        with self._lock:
            return self._chains.get(tag)

    def read_many(self, tags: list[str]) -> BatchRead:
        self.stats.request("BatchGetItem")
        with self._lock:
            return BatchRead(chains=[self._chains[t] for t in tags if t in self._chains])

    def execute(self, request: Request) -> Reply | Chain | None:
        self.stats.request(type(request).__name__)
        with self._lock:
            if isinstance(request, Read):
                return self._chains.get(request.tag)
            current, apply = self._judge(request)
            return Rejected(current) if apply is None else apply()

    def transact(self, requests: list[Request]) -> Committed | Cancelled:
        """Apply ``requests`` (on distinct chains) all or none, under the one lock."""
        self.stats.request("Transact")
        with self._lock:
            judged = [self._judge(r) for r in requests]
            rejected = {i: Rejected(current) for i, (current, apply) in enumerate(judged) if apply is None}
            if rejected:
                return Cancelled(rejected)
            return Committed([apply() for _, apply in judged if apply is not None])

    def _judge(self, request: Request) -> tuple[Chain | None, Callable[[], Written] | None]:
        """The chain ``request`` finds, and how to apply it, or None when its condition
        (the rules' predicate, as DynamoDB's ConditionExpression) fails. Lock held."""
        rules = self.rules
        if isinstance(request, RemoveAny):
            return self._chains.get(request.tag), lambda: Written(self._drop(request.tag))
        if isinstance(request, Put):
            current = self._chains.get(request.new.tag)
            if not _same(current, request.expect):
                return current, None
            return current, lambda: Written(self._keep(request.new, current))
        if isinstance(request, Remove):
            current = self._chains.get(request.expect.tag)
            if not _same(current, request.expect):
                return current, None
            return current, lambda: (self._drop(request.expect.tag), Written(None))[1]
        current = self._chains.get(request.tag)
        if current is None:
            return None, None
        chain = current
        if isinstance(request, Add):
            if not rules.add_allowed(
                chain, request.op, request.owner, request.now, request.since, request.after_seq
            ):
                return chain, None
            return chain, lambda: Written(
                self._keep(rules.added(chain, request.delta, request.op, request.now), chain)
            )
        if isinstance(request, Extend):
            if not rules.touch_allowed(chain, request.owner, request.now):
                return chain, None
            touched = rules.touched(chain, request.ttl, request.now)
            return chain, lambda: Written(self._keep(touched, chain, nursery=True))
        if isinstance(request, MarkFailed):
            if not rules.fail_allowed(chain, request.owner):
                return chain, None
            return chain, lambda: Written(self._keep(rules.failed(chain, request.reason, request.now), chain))
        if isinstance(request, Trim):
            if not rules.trim_allowed(chain, request.count, request.window):
                return chain, None
            return chain, lambda: (
                self._keep(rules.trimmed(chain, request.count, request.now), chain),
                Written(None),
            )[1]
        raise TypeError(f"not a store request: {request!r}")

    def _keep(self, chain: Chain, old: Chain | None, *, nursery: bool = False) -> Chain:
        """Store ``chain``; a new chain, a state change or a touch puts it in the newest
        bucket (a tombstone's retention starts when the chain finishes)."""
        self._chains[chain.tag] = chain
        if nursery or old is None or old.create_op != chain.create_op or old.state != chain.state:
            for bucket in self._buckets:
                bucket.discard(chain.tag)
            self._buckets[0].add(chain.tag)
        return chain

    def _drop(self, tag: str) -> Chain | None:
        for bucket in self._buckets:
            bucket.discard(tag)
        return self._chains.pop(tag, None)

    def rotate(self, now: int) -> list[str]:
        """Drop the oldest bucket: its pending chains time out (their deadline moves to
        just past, their reason is ``timeout``) and stay one more cycle as tombstones;
        its finished chains are forgotten. Returns the tags that timed out."""
        timed_out = []
        with self._lock:
            oldest = self._buckets.pop()
            self._buckets.appendleft(set())
            for tag in oldest:
                chain = self._chains[tag]
                if chain.state == "pending" and chain.reason != TIMEOUT and not _zero(chain):
                    past = now - self.rules.skew - 1
                    self._chains[tag] = replace(chain, deadline=past, reason=TIMEOUT, updated_at=now)
                    self._buckets[0].add(tag)
                    timed_out.append(tag)
                else:
                    del self._chains[tag]
        return timed_out


def _same(current: Chain | None, expect: Chain | None) -> bool:
    if expect is None:
        return current is None
    return current is not None and current.token == expect.token


def _zero(chain: Chain) -> bool:
    return not any(chain.value) if isinstance(chain.value, bytes) else chain.value == 0


class MemoryAck(SyncTracker):
    """Ack chains in memory, with Storm's rotating expiry. Thread-safe.

    :param mode: ``"xor"`` or ``"sum"``, as for ``XorAckDynamoDB``.
    :param buckets: how many ``rotate()`` calls a chain survives without being created,
        touched or finished (Storm's RotatingMap buckets). A chain still pending when it
        falls off the oldest bucket becomes ``expired`` and ``on_failed(tag, "timeout")``
        is called. Finished chains stay as tombstones for one more full cycle, then are
        forgotten, so memory is bounded by what rotation keeps.
    :param on_acked: called with the tag when a stamp completes a chain (once: not for a
        duplicate of that stamp).
    :param on_failed: called with the tag and the reason when ``fail()`` fails a chain
        (not again for one that had failed) or a chain times out.
    :param max_ops: op ids remembered per chain, as in ``XorAckDynamoDB``.
    :param ttl: chains also time out by the clock after this long (default: never; they
        expire by rotation only). ``touch(tag, ttl)`` sets a clock deadline either way.
    :param clock: the time source in epoch seconds.
    :param delete_on_ack: forget a chain once it completes, as ``XorAckDynamoDB`` can.
    :param share: another ``MemoryAck`` whose chains this one works on (with its own
        options), as two trackers share one DynamoDB table.

    Callbacks run on the calling thread after the tracker's lock is released, so they
    may call the tracker. ``ChainStatus.expires_at`` is None for chains without a clock
    deadline.
    """

    def __init__(
        self,
        *,
        mode: Mode = "xor",
        buckets: int = 3,
        on_acked: AckedCallback | None = None,
        on_failed: FailedCallback | None = None,
        max_ops: int = 32,
        ttl: timedelta | float | None = None,
        retention: timedelta | float = timedelta(days=1),
        skew: timedelta | float = 5,
        edge_size: int = 16,
        delete_on_ack: bool = False,
        clock: Callable[[], float] = time.time,
        share: MemoryAck | None = None,
    ) -> None:
        if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 2:
            raise InvalidConfig(f"buckets must be an int of at least 2, got {buckets!r}")
        rules = chain_rules(
            mode,
            edge_size,
            ttl=ttl,
            retention=retention,
            skew=skew,
            max_ops=max_ops,
            delete_on_ack=delete_on_ack,
        )
        self.on_acked = on_acked
        self.on_failed = on_failed
        stats = RequestStats()
        self.store: MemoryStore = MemoryStore(
            rules, stats, buckets, share.store if share is not None else None
        )
        self._bind(Engine(self.store, rules, stats=stats, clock=clock, cache_size=0))

    def __len__(self) -> int:
        """How many chains (tombstones included) the tracker holds."""
        return len(self.store)

    @property
    def max_ops(self) -> int:
        return self.rules.window

    def stamped(self, tag: str, result: Stamp | Sum) -> None:
        """Calls ``on_acked(tag)`` when this stamp completed the chain (not for a
        duplicate of the completing stamp)."""
        if result.acked and not result.duplicate and self.on_acked is not None:
            self.on_acked(tag)

    def fail(self, tag: str, reason: str | None = None, *, owner: str | None = None) -> ChainStatus:
        """See :meth:`SyncTracker.fail`; calls ``on_failed(tag, reason)`` when this call
        failed the chain (not for one whose time-out was already reported)."""
        call = self.calls.fail(tag, reason, owner)
        before = self.store.peek(call.tag)
        status, applied = self.engine.run(call)
        if applied and self.on_failed is not None and (before is None or before.reason != TIMEOUT):
            self.on_failed(status.tag, reason)
        return status

    def rotate(self) -> list[str]:
        """Advance expiry by one bucket (Storm's RotatingMap). Chains still pending in
        the oldest bucket become ``expired``, and ``on_failed(tag, "timeout")`` is called
        for each; tombstones in it are forgotten. Returns the tags that timed out."""
        timed_out = self.store.rotate(self.engine.now())
        if self.on_failed is not None:
            for tag in timed_out:
                self.on_failed(tag, TIMEOUT)
        return timed_out
