"""MemoryAck and AsyncMemoryAck: the calls, rules and drivers of
:class:`~xor_ack_dynamodb.XorAckDynamoDB` on chains kept in memory, with Storm's
RotatingMap expiry, so pipeline logic tested against it behaves the same against DynamoDB.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Unpack

from ..config import TrackerKeywords, TrackerOptions
from ..core.algebra import is_zero
from ..core.chain import Chain, Op, updated
from ..core.messages import (
    Add,
    BatchRead,
    Cancelled,
    Committed,
    Extend,
    HistoryRead,
    MarkFailed,
    Put,
    Read,
    ReadHistory,
    Rejected,
    Remove,
    RemoveAny,
    Reply,
    Request,
    Trim,
    WriteHistory,
    Written,
    tag_of,
)
from ..core.rules import ChainRules
from ..drivers import AsyncTracker, SyncTracker
from ..errors import InvalidConfig
from ..stamps import Stamp, Sum
from ..stats import RequestStats

if TYPE_CHECKING:
    from .dynamodb.claims import ClaimResult

#: The reason a chain timed out by rotation carries.
TIMEOUT = "timeout"
#: The most rotation buckets a memory tracker takes (each is a set, made up front).
MAX_BUCKETS = 10_000

AckedCallback = Callable[[str], None]
FailedCallback = Callable[[str, str | None], None]


class MemoryStore:
    """Chains in a dict, each request applied atomically under one lock, its condition
    the rules' own predicate. Every write that starts, touches or finishes a chain puts
    it in the newest of ``buckets`` buckets; :meth:`rotate` drops the oldest."""

    def __init__(
        self, rules: ChainRules, stats: RequestStats, buckets: int, share: MemoryStore | None = None
    ) -> None:
        self.rules = rules
        self.stats = stats
        if share is None:
            self._lock = threading.Lock()
            self._chains: dict[str, Chain] = {}
            self._buckets: deque[set[str]] = deque(set() for _ in range(buckets))
            self._history: dict[str, dict[tuple[bytes, int], tuple[Op, ...]]] = {}
            self.claims: dict[str, tuple[str, str, float]] = {}  # tag -> (state, claimant, until)
        else:  # another tracker's chains, seen through these rules (as two trackers share a table)
            self._lock, self._chains, self._buckets = share._lock, share._chains, share._buckets
            self._history, self.claims = share._history, share.claims

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

    def execute(self, request: Request) -> Reply | Chain | HistoryRead | None:
        self.stats.request(type(request).__name__)
        with self._lock:
            if isinstance(request, Read):
                return self._chains.get(request.tag)
            if isinstance(request, ReadHistory):
                kept = self._history.get(request.tag, {})
                found = {
                    i: kept[(request.lineage, i)] for i in request.indexes if (request.lineage, i) in kept
                }
                return HistoryRead(found)
            if isinstance(request, WriteHistory):
                kept = self._history.setdefault(request.tag, {})
                for block in request.blocks:
                    kept[(request.lineage, block.index)] = block.ops
                return Written(None)
            current, apply = self._judge(request)
            return Rejected(current) if apply is None else apply()

    def drop_history(self, tag: str, lineage: bytes, index: int) -> bool:
        """Forget one history block (as TTL would, or a lost write): for tests of what
        a missing block does. Returns whether it was there."""
        with self._lock:
            return self._history.get(tag, {}).pop((lineage, index), None) is not None

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
        """The chain ``request`` finds, and how to apply it (None: its condition fails).
        Lock held."""
        rules = self.rules
        chain = self._chains.get(tag_of(request))
        if isinstance(request, RemoveAny):
            return chain, lambda: Written(self._drop(request.tag))
        if isinstance(request, (Put, Remove)):
            old = request.expect  # still the chain it was based on (its token), or none
            if (chain is None) != (old is None) or (chain and old and chain.token != old.token):
                return chain, None
            if isinstance(request, Put):
                if request.now is not None and not rules.before_deadline(chain, request.now):
                    return chain, None  # a stamp's write tests the deadline too
                return chain, lambda: Written(self._keep(request.new, chain))
            return chain, lambda: (self._drop(request.expect.tag), Written(None))[1]
        if chain is None:
            return None, None
        if isinstance(request, Add):
            if not rules.add_allowed(chain, request.op, request.owner, request.now, request.after):
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
            if not rules.trim_allowed(chain, request):
                return chain, None
            return chain, lambda: (self._keep(rules.trimmed(chain, request), chain), Written(None))[1]
        raise TypeError(f"not a store request: {request!r}")

    def _keep(self, chain: Chain, old: Chain | None, *, nursery: bool = False) -> Chain:
        """Store ``chain``; a new chain, a state change or a touch puts it in the newest
        bucket."""
        self._chains[chain.tag] = chain
        if nursery or old is None or old.create_op != chain.create_op or old.state != chain.state:
            for bucket in self._buckets:
                bucket.discard(chain.tag)
            self._buckets[0].add(chain.tag)
        return chain

    def _drop(self, tag: str) -> Chain | None:
        for bucket in self._buckets:
            bucket.discard(tag)
        self._history.pop(tag, None)
        return self._chains.pop(tag, None)

    def rotate(self, now: int) -> list[str]:
        """Drop the oldest bucket: its pending chains time out (their deadline moves to
        just past, their reason is ``timeout``, and they get a new write token, so that
        a stamp that read the chain before cannot write it back) and stay one more cycle
        as tombstones; its finished chains are forgotten. Returns the tags that timed
        out."""
        timed_out = []
        with self._lock:
            oldest = self._buckets.pop()
            self._buckets.appendleft(set())
            for tag in oldest:
                chain = self._chains[tag]
                if chain.state == "pending" and chain.reason != TIMEOUT and not is_zero(chain.value):
                    past = now - self.rules.skew - 1
                    self._chains[tag] = updated(chain, now, deadline=past, reason=TIMEOUT)  # a new token
                    self._buckets[0].add(tag)
                    timed_out.append(tag)
                else:
                    del self._chains[tag]
                    self._history.pop(tag, None)
        return timed_out


class _AsyncMemoryStore:
    """A :class:`MemoryStore` for the asyncio driver (it never waits)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.is_transient = store.is_transient

    async def execute(self, request: Request) -> Reply | Chain | HistoryRead | None:
        return self.store.execute(request)

    async def read_many(self, tags: list[str]) -> BatchRead:
        return self.store.read_many(tags)

    async def transact(self, requests: list[Request]) -> Committed | Cancelled:
        return self.store.transact(requests)


class _Memory:
    """What both memory trackers add to the shared methods: the constructor, the store,
    rotation and the ``on_acked`` / ``on_failed`` callbacks (called from the tracker's
    hooks)."""

    store: MemoryStore
    on_acked: AckedCallback | None
    on_failed: FailedCallback | None

    def __init__(
        self,
        *,
        buckets: int = 3,
        on_acked: AckedCallback | None = None,
        on_failed: FailedCallback | None = None,
        share: MemoryAck | AsyncMemoryAck | None = None,
        **options: Unpack[TrackerKeywords],
    ) -> None:
        if isinstance(buckets, bool) or not isinstance(buckets, int) or not 2 <= buckets <= MAX_BUCKETS:
            raise InvalidConfig(f"buckets must be an int from 2 to {MAX_BUCKETS}, got {buckets!r}")
        for name, callback in (("on_acked", on_acked), ("on_failed", on_failed)):
            if callback is not None and not callable(callback):
                raise InvalidConfig(f"{name} must be a callable or None, got {callback!r}")
        if share is not None and not isinstance(share, _Memory):
            raise InvalidConfig(f"share must be a MemoryAck or an AsyncMemoryAck, got {type(share).__name__}")
        options.setdefault("ttl", None)
        options.setdefault("cache_size", 0)
        settings = TrackerOptions.of(
            options, type(self).__name__, ("buckets", "on_acked", "on_failed", "share")
        )
        self._limits = settings.rules()
        self.on_acked, self.on_failed, self._time = on_acked, on_failed, settings.clock
        shared = None if share is None else share.store
        self.store = MemoryStore(self._limits, RequestStats(), buckets, shared)
        self._open(settings)

    def _open(self, settings: TrackerOptions) -> None:
        """Bind the tracker's driver to :attr:`store`."""
        raise NotImplementedError

    def __len__(self) -> int:
        """How many chains (tombstones included) the tracker holds."""
        return len(self.store)

    def stamped(self, tag: str, result: Stamp | Sum) -> None:
        """Calls ``on_acked(tag)`` when this stamp completed the chain (not for a
        duplicate of the completing stamp)."""
        if result.acked and not result.duplicate and self.on_acked is not None:
            self.on_acked(tag)

    def timed_out(self, tag: str) -> bool:
        """Whether rotation timed ``tag`` out (and reported it to ``on_failed``)."""
        chain = self.store.peek(tag)
        return chain is not None and chain.reason == TIMEOUT

    def failed(self, tag: str, reason: str | None) -> None:
        """Calls ``on_failed(tag, reason)`` when ``fail()`` failed the chain."""
        if self.on_failed is not None:
            self.on_failed(tag, reason)

    def rotate(self) -> list[str]:
        """Advance expiry by one bucket (Storm's RotatingMap). Chains still pending in
        the oldest bucket become ``expired``, and ``on_failed(tag, "timeout")`` is called
        for each; tombstones in it are forgotten. Returns the tags that timed out.
        Synchronous on either tracker: it never waits."""
        timed_out = self.store.rotate(int(self._time()))
        if self.on_failed is not None:
            for tag in timed_out:
                self.on_failed(tag, TIMEOUT)
        return timed_out


class MemoryAck(_Memory, SyncTracker):
    """Ack chains in memory, with Storm's rotating expiry. Thread-safe.

    :param buckets: how many ``rotate()`` calls a chain survives without being created,
        touched or finished (Storm's RotatingMap buckets), 2 to 10,000. A chain still pending when it
        falls off the oldest bucket becomes ``expired`` and ``on_failed(tag, "timeout")``
        is called. Finished chains stay as tombstones for one more full cycle, then are
        forgotten, so memory is bounded by what rotation keeps.
    :param on_acked: called with the tag when a stamp completes a chain (once: not for a
        duplicate of that stamp).
    :param on_failed: called with the tag and the reason when ``fail()`` fails a chain
        (not again for one that had failed) or a chain times out.
    :param share: another memory tracker (sync or asyncio) whose chains this one works
        on (with its own options), as two trackers share one DynamoDB table.
    :param options: the tracker's options, documented once in
        :class:`~xor_ack_dynamodb.config.TrackerOptions`; here ``ttl`` defaults to None
        (chains time out by rotation only) and ``cache_size`` to 0.

    Callbacks run on the calling thread after the tracker's lock is released, so they
    may call the tracker. ``ChainStatus.expires_at`` is None for chains without a clock
    deadline. Raises :class:`~xor_ack_dynamodb.errors.InvalidConfig` for an argument of
    the wrong type or out of range, or a keyword it does not take.
    """

    def _open(self, settings: TrackerOptions) -> None:
        self._bind(self.store, self._limits, settings, self.store.stats)

    # -- the serverless completion's claim, as :class:`~xor_ack_dynamodb.XorAckDynamoDB`'s
    # on a chain's item (one process, one clock: no skew margin; the owner checked, not
    # the create op) --

    def claim_completion(
        self,
        tag: str,
        claimant: str,
        now: float,
        lease: float,
        *,
        owner: str | None = None,
        create_op: bytes | None = None,
    ) -> ClaimResult:
        """Claim the completion of the acked chain ``tag`` (of ``owner`` where given)
        for ``lease`` seconds from ``now``: ``claimed``, ``fired`` (marked before),
        ``held`` (another claim, its lease not run out) or ``gone`` (no such acked
        chain)."""
        status = self.status(tag)
        if status.state != "acked" or owner not in (None, status.owner):
            return "gone"
        with self.store._lock:
            state, _, until = self.store.claims.get(tag, ("", "", 0.0))
            if state == "fired":
                return "fired"
            if state == "claimed" and until >= now:
                return "held"
            self.store.claims[tag] = ("claimed", claimant, now + lease)
            return "claimed"

    def mark_completion_fired(self, tag: str, claimant: str, now: float) -> bool:
        """Mark ``tag``'s completion fired, if ``claimant`` still holds its claim (False
        if another took it over)."""
        with self.store._lock:
            if self.store.claims.get(tag, ("", "", 0.0))[1] != claimant:
                return False
            self.store.claims[tag] = ("fired", claimant, now)
            return True

    def release_completion(self, tag: str, claimant: str) -> None:
        """Give up ``claimant``'s claim on ``tag``'s completion (nothing if it holds none)."""
        with self.store._lock:
            state, by, _ = self.store.claims.get(tag, ("", "", 0.0))
            if state == "claimed" and by == claimant:
                del self.store.claims[tag]


class AsyncMemoryAck(_Memory, AsyncTracker):
    """Ack chains in memory, awaited: :class:`MemoryAck`'s parameters, callbacks,
    rotation and guarantees (``share`` takes either memory tracker)."""

    def _open(self, settings: TrackerOptions) -> None:
        self._bind(_AsyncMemoryStore(self.store), self._limits, settings, self.store.stats)
