"""The methods every synchronous tracker shares: check arguments, build a call, run it.

:class:`~xor_ack_dynamodb.XorAckDynamoDB` and :class:`~xor_ack_dynamodb.MemoryAck` are
this class on different stores; the guarantees below hold on both (the costs quoted are
DynamoDB's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta

from ..core.algebra import EdgeLike, Mode
from ..core.calls import Call, StampCall, first_outcome
from ..core.factory import CallFactory, StampSpec
from ..core.rules import ChainRules, Plan
from ..errors import XorAckError
from ..stamps import Stamp, Sum
from ..stats import RequestStats
from ..status import ChainStatus
from .engine import Engine

__all__ = ["SyncTracker"]


class SyncTracker:
    """Chains on ``engine``'s store, under ``engine``'s rules. Thread-safe."""

    engine: Engine
    calls: CallFactory

    def _bind(self, engine: Engine) -> None:
        self.engine = engine
        self.calls = CallFactory(engine.rules)

    @property
    def rules(self) -> ChainRules:
        return self.engine.rules

    @property
    def stats(self) -> RequestStats:
        """Requests made (what DynamoDB bills) and events (``conflicts``, ``retries``,
        ``duplicates``, ``completions``, ``trims``...)."""
        return self.engine.stats

    @property
    def mode(self) -> Mode:
        """``"xor"`` or ``"sum"``."""
        return self.engine.rules.mode

    def new_edge(self) -> Stamp | int:
        """A random edge for this tracker's mode: random bytes (never all zeros) in xor
        mode, an int in [1, 2**63) in sum mode."""
        return self.engine.rules.algebra.new_edge()

    def create(
        self, tag: str, value: EdgeLike, *, op_id: str | None = None, owner: str | None = None
    ) -> Stamp | Sum:
        """Start a chain holding ``value`` (its root edge, or the combination of the
        edges started with it); it times out ``ttl`` from now. One request.

        A chain that timed out (deadline + skew passed), or a tombstone past its
        retention, is overwritten. Idempotent per ``op_id`` for the chain's whole life:
        a create delivered again (botocore resending it, a retried task, a redelivered
        message) returns the chain's current value (``duplicate`` True) instead of
        raising, even after the chain expired, and never revives it. ``owner`` is stored
        with the chain; calls that name an owner are refused on another's chain.

        Raises :class:`TagExists` for a live chain with that tag, :class:`OpIdReused`
        for a known op id with another value, :class:`ZeroBufferNoOp` for a zero value,
        :class:`InvalidTag`/:class:`InvalidStamp`/:class:`InvalidConfig` for bad input
        (before any request is sent).
        """
        return self.engine.run(self.calls.create(tag, value, op_id, owner))

    def stamp(
        self,
        tag: str,
        value: EdgeLike | None = None,
        *,
        finished: Iterable[EdgeLike] = (),
        started: Iterable[EdgeLike] = (),
        op_id: str | None = None,
        owner: str | None = None,
    ) -> Stamp | Sum:
        """Apply one stamp: ``value``, or the edges this work ``finished`` and the edges
        of the children it ``started`` (xor mode XORs them all; sum mode adds the
        started and subtracts the finished). Returns the chain's new value; its
        ``acked`` is True for exactly one call: the one whose stamp completed the chain.

        Cost: xor mode reads and writes conditionally (one request when this tracker
        knows the chain's last value, two otherwise; a lost race costs another round);
        sum mode is one ``UpdateItem`` whatever the concurrency (plus, once per chain,
        the write that stores ``acked``, and one trim of the op list per ``slack``
        stamps).

        Guarantees: applied at most once per ``op_id`` (a random op id is used when none
        is given, which covers botocore's resends and this library's retries; pass your
        own to cover redeliveries), and exactly once if the call returns. A duplicate
        returns the current value with ``duplicate`` True. A lost race is retried within
        the retry budget; once spent, :class:`StaleLocalData` is raised and nothing was
        applied by this call unless a transient error hid an outcome, in which case
        calling again with the same ``op_id`` tells.

        Raises :class:`TagNotFound`, :class:`TagFailed`, :class:`TagExpired`,
        :class:`TagAcked` for a chain in that state; :class:`NotOwner`;
        :class:`OpIdReused` for a known op id with another stamp;
        :class:`ChainModeMismatch`; :class:`OutcomeUnknown` when a lost response and a
        reset history leave the outcome unknowable; :class:`BufferLengthsUnequal`,
        :class:`ZeroBufferNoOp`, :class:`InvalidTag`/:class:`InvalidStamp` for bad input
        (before any request); a ``ClientError`` (or botocore connection error) only when
        transient errors outlast the budget.
        """
        call = self.calls.stamp(tag, value, finished, started, op_id, owner, self.engine.cache.get(tag))
        result = (
            first_outcome(self.engine.run(call)) if isinstance(call, StampCall) else self.engine.run(call)
        )
        self.stamped(call.tag, result)
        return result

    def stamped(self, tag: str, result: Stamp | Sum) -> None:
        """Called with the result of every stamp this tracker applied or recognised
        (also for stamps a ``CombiningTracker`` wrote for it). A no-op here;
        ``MemoryAck`` calls ``on_acked`` from it."""

    # -- many chains at once ---------------------------------------------------------

    def create_many(
        self,
        chains: Mapping[str, EdgeLike],
        *,
        op_ids: Mapping[str, str] | None = None,
        owner: str | None = None,
    ) -> dict[str, Stamp | Sum | Exception]:
        """Start many chains (tag -> value) together: on DynamoDB, transactions of up
        to 100 conditional puts (one request per 100 chains, two write units per KB of
        each item), one put each where the backend has no transactions. Each chain gets
        exactly what :meth:`create` would give it: its value, or the error (``TagExists``
        for a live chain, ...), in the returned dict; the others are unaffected. Bad
        input raises before any request (``InvalidConfig`` for a tag named twice)."""
        op_ids = op_ids or {}
        calls = [self.calls.create(tag, value, op_ids.get(tag), owner) for tag, value in chains.items()]
        outcomes = self.engine.run_many(calls)
        return {call.tag: outcome for call, outcome in zip(calls, outcomes, strict=True)}

    def stamp_many(self, stamps: Iterable[StampSpec]) -> dict[str, Stamp | Sum | Exception]:
        """Apply one stamp to each of many chains together: their reads as BatchGetItem
        and their conditional writes as transactions of up to 100 (one request per 100
        chains each way, in either mode). Each stamp has the guarantees of
        :meth:`stamp` (op ids, owners, exactly one ``acked``); its value or error is in
        the returned dict. Bad input raises before any request (``InvalidConfig`` for a
        chain named twice: combine its stamps first)."""
        cache = self.engine.cache
        calls: list[Call[Plan]] = [
            self.calls.batch_stamp(spec, cache.get(getattr(spec, "tag", ""))) for spec in stamps
        ]
        self.calls.distinct([c.tag for c in calls])
        out: dict[str, Stamp | Sum | Exception] = {}
        plans: list[Plan | Exception] = self.engine.run_many(calls)
        for call, plan in zip(calls, plans, strict=True):
            if isinstance(plan, Exception):
                out[call.tag] = plan
                continue
            try:
                out[call.tag] = outcome = first_outcome(plan)
            except XorAckError as error:
                out[call.tag] = error
                continue
            self.stamped(call.tag, outcome)
        return out

    def touch_many(
        self, tags: Iterable[str], ttl: timedelta | float | None = None, *, owner: str | None = None
    ) -> dict[str, ChainStatus | Exception]:
        """Push the deadlines of many pending chains together (a heartbeat): transactions
        of up to 100 conditional updates, and one batch read for their new values. Each
        chain gets what :meth:`touch` would give it, its status or its error
        (``TagAcked``, ``TagExpired``...), in the returned dict."""
        calls = [self.calls.touch(tag, ttl, owner) for tag in self.calls.tags(tags)]
        self.calls.distinct([c.tag for c in calls])
        outcomes = self.engine.run_many(calls)
        return {call.tag: outcome for call, outcome in zip(calls, outcomes, strict=True)}

    def fail(self, tag: str, reason: str | None = None, *, owner: str | None = None) -> ChainStatus:
        """Mark a pending (or timed-out) chain failed, keeping it as a tombstone for
        ``retention``; one request. Failing a failed chain changes nothing (the first
        reason stays). Returns the chain's status.

        Raises :class:`TagNotFound`, :class:`TagAcked` for a chain that completed,
        :class:`NotOwner`.
        """
        status, _ = self.engine.run(self.calls.fail(tag, reason, owner))
        return status

    def touch(
        self, tag: str, ttl: timedelta | float | None = None, *, owner: str | None = None
    ) -> ChainStatus:
        """Push a pending chain's deadline to ``ttl`` (default: the tracker's) from now,
        as Storm resets a tuple tree's timeout; one request. Returns the chain's status.

        Raises :class:`TagNotFound`, :class:`TagAcked`, :class:`TagFailed`,
        :class:`TagExpired` (a chain past its deadline is not revived: replay it),
        :class:`NotOwner`.
        """
        return self.engine.run(self.calls.touch(tag, ttl, owner))

    def status(self, tag: str) -> ChainStatus:
        """The chain as it is now (a strongly consistent read). Raises :class:`TagNotFound`."""
        return self.engine.run(self.calls.status(tag))

    def status_many(self, tags: Iterable[str]) -> dict[str, ChainStatus]:
        """The status of many chains (on DynamoDB: BatchGetItem, 100 keys a request,
        strongly consistent, unprocessed keys asked again with backoff). Tags with no
        chain are absent; an item that cannot be decoded reads ``corrupt`` (the others
        are still returned). Raises :class:`BatchIncomplete` if keys are still
        unprocessed when the retry budget is spent."""
        return self.engine.status_many(self.calls.tags(tags))

    def delete(self, tag: str) -> None:
        """Delete the chain whatever its state. Raises :class:`TagNotFound` if there is
        none, unless the request had to be sent again (by botocore or by this library's
        retry), since the first attempt may be the one that deleted it."""
        self.engine.run(self.calls.delete(tag))
