"""A model-based test of the tracker's own calls against an adversarial network (issue 39,
item 4): what tests/test_once_model.py does for the serverless layer, for the calls
under it that the pipeline does not make.

A Hypothesis ``RuleBasedStateMachine`` plays the producers of chains of work. Each chain
is a tree: its create starts the roots' edges; the work of a node finishes its own edge
and starts its children's, in one stamp whose ``op_id`` names the node, sent with
``after=`` the position of the stamp that started it (as the serverless layer sends a
child). The rules are the world's actions:

* start chains, one ``create`` each or one ``create_many`` for several (transactions),
  and start them again (the same op ids: a caller's retry);
* deliver a message through a writer drawn from: a plain tracker's ``stamp``, a
  :class:`~xor_ack_dynamodb.CombiningTracker`'s ``stamp`` (its own tracker and cache),
  and, in the async leg, the asyncio tracker's (``AsyncXorAckDynamoDB`` on aiobotocore);
  bounded by its ``after``, or not (checked from the chain's start);
* deliver several messages of distinct chains in one ``stamp_many`` (transactions);
* xor mode: deliver several messages of one chain concurrently through the
  ``CombiningTracker`` (threads queued on the chain while its leader's write is on the
  wire, so the next write carries them all, behind its batch marker);
* a duplicate of any message ever sent, delivered at once or held back and delivered at
  any later point with a fault on its stamp's first write; a late copy of an op that
  has moved to the chain's history, with such a fault;
* a lost response (once, or on every attempt), or a throttle (once, or outlasting
  botocore's attempts), on the k-th next DynamoDB write (a transaction of a batch
  included) or read.

The invariants are the documented promises (the tracker's docstrings, docs/concepts.md):
a chain's value is every started edge less every finished one whenever the model knows
every outcome (no op applied twice, none lost); a stamp that applied is never applied
again, a duplicate is reported only for an op some copy applied (or a lost response may
have); a call raises only after a fault, and only a transient error's type (the service's
throttle, ``RequestFailed``, ``OutcomeUnknown``, ``StaleLocalData``); a copy of an
applied op on an acked chain is a duplicate, never ``TagAcked``; a chain acks only
after every node's stamp landed, stays acked, never fails, and at most one op's calls see
``acked`` (exactly one, unless a call on the chain raised), and a duplicate of it answers
as it did. At the end, with the faults
gone and every message delivered, every chain is acked at zero.

Backends: DynamoDB on a moto server over HTTP and on Amazon's DynamoDB Local; both
modes. The asyncio tracker's case (``aio``) runs in the async leg alone (Makefile's
test-async: its venv has aiobotocore). ``make test`` runs a bounded number of examples;
``XOR_ACK_RELIABILITY=full`` and ``XOR_ACK_MODEL=kill`` many more;
``XOR_ACK_TRACKER_EXAMPLES`` and ``XOR_ACK_TRACKER_STEPS`` override both.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError
from conftest import HAS_AIOBOTOCORE, unique_table
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from once_model_faults import POLICY, READS, WRITES, Network, Violation, model_client

from xor_ack_dynamodb import CombiningTracker, StampSpec, XorAckDynamoDB
from xor_ack_dynamodb.core.chain import BLOCK
from xor_ack_dynamodb.errors import (
    OutcomeUnknown,
    RequestFailed,
    StaleLocalData,
    TagNotFound,
)
from xor_ack_dynamodb.stamps import Position
from xor_ack_dynamodb.testing.endpoint import LOCAL_KEY_ID, LOCAL_REGION, LOCAL_SECRET

FULL = os.environ.get("XOR_ACK_RELIABILITY", "").lower() == "full"
KILL = os.environ.get("XOR_ACK_MODEL", "").lower() == "kill"
#: Examples and steps per (backend, mode): bounded in ``make test``, long otherwise.
EXAMPLES = {"server": 40 if FULL else 10 if KILL else 2, "ddblocal": 100 if FULL else 40 if KILL else 2}
STEPS = 40 if FULL else 20

MAX_CHAINS = 4
#: Leaves added under a chain's roots so that its first ops move to history (the
#: machine's chains keep ``max_ops`` 1: an item holds 41 op ids).
PADDING = 50
#: Messages an example may send before the rules that copy them stop being chosen.
MAX_MESSAGES = 250
EDGE_SIZE = 16
FAULT_KINDS = ("lost", "lost_every_attempt", "throttle", "throttle_every_attempt")
#: What meets a late copy's first write: each leaves the call's own outcome unknown to it.
LATE_COPY_FAULTS = (None, "throttle_every_attempt", "lost", "lost_every_attempt")
#: The errors a call may raise once a fault hit it: the transient ones, past the budget.
TRANSIENT = (RequestFailed, OutcomeUnknown, StaleLocalData, ClientError)

TREES = st.recursive(
    st.just(()), lambda kids: st.lists(kids, min_size=1, max_size=3).map(tuple), max_leaves=6
)


@dataclass
class Work:
    """A node of a chain's tree: the work of one message."""

    id: str
    children: list[str]
    edge: Any
    applied: bool = False  # its stamp is known to have landed
    uncertain: bool = False  # a call may have landed it without telling
    sent_children: bool = False  # a stamp of it returned: its children's messages exist


@dataclass
class Chain:
    tag: str
    works: dict[str, Work]
    roots: list[str]
    value: Any  # the create's: the roots' edges combined
    created: bool = False  # a create returned
    create_raised: bool = False  # a create raised (after a fault): it may have landed
    sent_roots: bool = False
    acked_seen: bool = False
    #: Works whose calls returned ``acked``: the op that completed the chain (a
    #: duplicate of it answers as it did; any other op's, not acked).
    ackers: set[str] = field(default_factory=set)
    raised: int = 0  # calls on the chain that raised (after a fault)
    landed: list[str] = field(default_factory=list)  # works, in the order seen to land

    @classmethod
    def build(cls, tag: str, tree: tuple[Any, ...], padding: int, mode: str) -> Chain:
        rng = random.Random(tag)
        works: dict[str, Work] = {}

        def edge() -> Any:
            return rng.randrange(1, 2**62) if mode == "sum" else rng.randbytes(EDGE_SIZE - 1) + b"\x01"

        def add(work_id: str, kids: tuple[Any, ...]) -> None:
            ids = [f"{work_id}.{j}" for j in range(len(kids))]
            works[work_id] = Work(work_id, ids, edge())
            for i, k in zip(ids, kids, strict=True):
                add(i, k)

        roots = [f"r{i}" for i in range(len(tree) + padding)]
        for root, kids in zip(roots, tuple(tree) + ((),) * padding, strict=True):
            add(root, kids)
        return cls(tag, works, roots, _combine(mode, [works[r].edge for r in roots]))

    def expected(self, mode: str) -> Any:
        applied = [w for w in self.works.values() if w.applied]
        started = [self.works[r].edge for r in self.roots] + [
            self.works[c].edge for w in applied for c in w.children
        ]
        finished = [w.edge for w in applied]
        if mode == "sum":
            return sum(started) - sum(finished)
        return _combine(mode, started + finished)

    def knows_value(self) -> bool:
        return not any(w.uncertain for w in self.works.values())


def _combine(mode: str, edges: list[Any]) -> Any:
    if mode == "sum":
        return sum(edges)
    value = bytes(EDGE_SIZE)
    for edge in edges:
        value = bytes(a ^ b for a, b in zip(value, edge, strict=True))
    return value


@dataclass(frozen=True)
class Message:
    """A work's message: its chain, its node, the bound its sender gave it."""

    tag: str
    work: str
    after: Position | None


@dataclass
class World:
    """What the examples of one test share: the clients (faults on the writers')."""

    backend: str
    mode: str
    net: Network
    dynamodb: Any  # the plain tracker's
    dynamodb2: Any  # the combining tracker's
    observer: Any
    aio: Any = None  # (LoopThread, aiobotocore client) in the async leg
    runs: Counter[str] = field(default_factory=Counter)


class TrackerModel(RuleBasedStateMachine):
    world: World

    def __init__(self) -> None:
        super().__init__()
        world = self.world
        world.net.disarm()
        world.net.fired.clear()
        world.runs["examples"] += 1
        self.mode = world.mode
        self.table = unique_table("trk")
        options: dict[str, Any] = {"mode": self.mode, "max_ops": 1, "retry": POLICY}
        self.observer = XorAckDynamoDB(self.table, client=world.observer, mode=self.mode)
        assert self.observer.create_table()
        self.writers: dict[str, Any] = {
            "plain": XorAckDynamoDB(self.table, client=world.dynamodb, **options),
            "combining": CombiningTracker(XorAckDynamoDB(self.table, client=world.dynamodb2, **options)),
        }
        if world.aio is not None:
            from aio_helpers import Blocking

            from xor_ack_dynamodb.aio import AsyncXorAckDynamoDB

            loop, client = world.aio
            self.writers["async"] = Blocking(AsyncXorAckDynamoDB(self.table, client=client, **options), loop)
        self.names = sorted(self.writers)
        self.chains: dict[str, Chain] = {}
        self.pool: list[Message] = []  # sent, not yet delivered
        self.held: list[Message] = []  # copies held back
        self.seen: list[Message] = []  # every message ever sent

    # -- calls and their outcomes ---------------------------------------------------------

    def _writer(self, i: int) -> tuple[str, Any]:
        name = self.names[i % len(self.names)]
        return name, self.writers[name]

    def _faults(self) -> int:
        return self.world.net.fired_count()

    def _hit_since(self, mark: int) -> tuple[bool, bool]:
        """(a fault hit since ``mark``, a lost response among them)."""
        hit = self.world.net.fired[mark:]
        return bool(hit), any(h.startswith("lost") for h in hit)

    def _send(self, message: Message) -> None:
        self.pool.append(message)
        self.seen.append(message)

    def _created(self, chain: Chain, outcome: Any, faulted: bool, hidden: bool, what: str) -> None:
        if isinstance(outcome, BaseException):
            self._allowed(chain, outcome, faulted, what)
            chain.create_raised = True
            return
        if outcome.duplicate and not (chain.created or chain.create_raised or hidden):
            raise Violation(f"{what}: reported a duplicate create, though none had landed")
        chain.created = True
        if not chain.sent_roots:
            chain.sent_roots = True
            for root in chain.roots:
                self._send(Message(chain.tag, root, outcome.position))

    def _allowed(self, chain: Chain, exc: BaseException, faulted: bool, what: str) -> None:
        if not faulted:
            raise Violation(f"{what}: raised {exc!r} with no fault injected") from exc
        if not isinstance(exc, TRANSIENT):
            raise Violation(f"{what}: raised {exc!r} after a fault (not a transient error)") from exc
        if isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") != (
            "ProvisionedThroughputExceededException"
        ):
            raise Violation(f"{what}: raised {exc!r}") from exc
        chain.raised += 1
        event(f"raised {type(exc).__name__}")

    def _stamped(self, message: Message, outcome: Any, faulted: bool, hidden: bool, what: str) -> None:
        """The model learns a stamp's outcome; the message is sent again if it raised."""
        chain = self.chains[message.tag]
        work = chain.works[message.work]
        what = f"{chain.tag}: {what} of {work.id} (after {message.after})"
        if isinstance(outcome, BaseException):
            self._allowed(chain, outcome, faulted, what)
            work.uncertain = not work.applied
            self.pool.append(message)  # delivered again
            return
        if outcome.duplicate:
            if not (work.applied or work.uncertain) and not hidden:
                raise Violation(f"{what}: reported a duplicate, though no copy of its op had been applied")
            event("stamp: a duplicate")
        elif work.applied:
            raise Violation(f"{what}: its op had been applied, and was applied again ({outcome!r})")
        if not work.applied:
            chain.landed.append(work.id)
        work.applied, work.uncertain = True, False
        if outcome.acked:
            chain.ackers.add(work.id)
            if len(chain.ackers) > 1:
                raise Violation(f"{what}: the ops of {sorted(chain.ackers)} each saw the chain acked")
            if not all(w.applied for w in chain.works.values()):
                raise Violation(
                    f"{what}: acked before {[w.id for w in chain.works.values() if not w.applied]}"
                )
        if not work.sent_children:
            work.sent_children = True
            after = outcome.position if outcome.position is not None else message.after
            for child in work.children:
                self._send(Message(chain.tag, child, after))

    def _stamp(self, writer: Any, message: Message) -> Any:
        chain = self.chains[message.tag]
        work = chain.works[message.work]
        started = [chain.works[c].edge for c in work.children]
        try:
            return writer.stamp(
                chain.tag,
                finished=[work.edge],
                started=started,
                op_id=f"{chain.tag}/{work.id}",
                after=message.after,
            )
        except Exception as exc:  # judged by _stamped
            return exc

    def _deliver(self, message: Message, name: str) -> None:
        mark = self._faults()
        outcome = self._stamp(self.writers[name], message)
        self.world.runs[f"stamps ({name})"] += 1
        faulted, hidden = self._hit_since(mark)
        self.world.runs[f"stamps hit by a fault ({name})"] += faulted
        self._stamped(message, outcome, faulted, hidden, f"stamp ({name})")

    def _spec(self, message: Message) -> StampSpec:
        chain = self.chains[message.tag]
        work = chain.works[message.work]
        return StampSpec(
            chain.tag,
            finished=(work.edge,),
            started=tuple(chain.works[c].edge for c in work.children),
            op_id=f"{chain.tag}/{work.id}",
            after=message.after,
        )

    def _deliver_many(self, messages: list[Message], name: str, transactions: bool = True) -> None:
        mark = self._faults()
        writer = self.writers[name]
        try:
            results: Any = writer.stamp_many([self._spec(m) for m in messages], transactions=transactions)
        except Exception as exc:
            raise Violation(
                f"stamp_many ({name}) raised {exc!r}: each chain's error belongs in its result"
            ) from exc
        faulted, hidden = self._hit_since(mark)
        self.world.runs[f"stamp_many ({name}, {len(messages)} chains)"] += 1
        self.world.runs[f"stamp_many hit by a fault ({name})"] += faulted
        for message in messages:
            self._stamped(message, results[message.tag], faulted, hidden, f"stamp_many ({name})")

    def _start(self, chains: list[Chain], name: str, batch: bool) -> None:
        writer = self.writers[name]
        mark = self._faults()
        if batch:
            try:
                results: Any = writer.create_many(
                    {c.tag: c.value for c in chains}, op_ids={c.tag: f"start-{c.tag}" for c in chains}
                )
            except Exception as exc:
                raise Violation(f"create_many ({name}) raised {exc!r}") from exc
            faulted, hidden = self._hit_since(mark)
            self.world.runs[f"create_many ({name})"] += 1
            self.world.runs[f"create_many hit by a fault ({name})"] += faulted
            for chain in chains:
                self._created(
                    chain, results[chain.tag], faulted, hidden, f"{chain.tag}: create_many ({name})"
                )
            return
        for chain in chains:
            mark = self._faults()
            try:
                outcome: Any = writer.create(chain.tag, chain.value, op_id=f"start-{chain.tag}")
            except Exception as exc:
                outcome = exc
            self.world.runs[f"create ({name})"] += 1
            self._created(chain, outcome, *self._hit_since(mark), f"{chain.tag}: create ({name})")

    def _status(self, chain: Chain) -> Any:
        try:
            return self.observer.status(chain.tag)
        except TagNotFound:
            return None

    # -- rules: chains and deliveries -------------------------------------------------------

    @initialize(
        trees=st.lists(st.lists(TREES, min_size=1, max_size=3).map(tuple), min_size=1, max_size=3),
        padding=st.sampled_from([0, 0, PADDING]),
        batch=st.booleans(),
        writer=st.integers(0, 2),
    )
    def start_the_first_chains(
        self, trees: list[tuple[Any, ...]], padding: int, batch: bool, writer: int
    ) -> None:
        self.start_chains(trees, padding, batch, writer)

    @precondition(lambda self: len(self.chains) < MAX_CHAINS)
    @rule(
        trees=st.lists(st.lists(TREES, min_size=1, max_size=3).map(tuple), min_size=1, max_size=2),
        padding=st.sampled_from([0, 0, PADDING]),
        batch=st.booleans(),
        writer=st.integers(0, 2),
    )
    def start_chains(self, trees: list[tuple[Any, ...]], padding: int, batch: bool, writer: int) -> None:
        """Chains started by one ``create`` each or together by ``create_many``; the
        first drawn gets ``padding`` leaves."""
        made = []
        for n, tree in enumerate(trees[: MAX_CHAINS - len(self.chains)]):
            tag = f"chain-{len(self.chains)}"
            made.append(
                self.chains.setdefault(tag, Chain.build(tag, tree, padding if n == 0 else 0, self.mode))
            )
        self._start(made, self._writer(writer)[0], batch)

    @precondition(lambda self: bool(self.chains) and len(self.seen) < MAX_MESSAGES)
    @rule(i=st.integers(0, MAX_CHAINS - 1), both=st.booleans(), batch=st.booleans(), writer=st.integers(0, 2))
    def start_again(self, i: int, both: bool, batch: bool, writer: int) -> None:
        """The same start again (same op ids): a caller's retry; ``both``: with another
        chain in one ``create_many``."""
        chains = list(self.chains.values())
        picked = [chains[i % len(chains)]] + (
            [chains[(i + 1) % len(chains)]] if both and len(chains) > 1 else []
        )
        self._start(picked, self._writer(writer)[0], batch)

    @precondition(lambda self: bool(self.pool))
    @rule(i=st.integers(0, 200), writer=st.integers(0, 2), bounded=st.sampled_from([True, True, False]))
    def deliver(self, i: int, writer: int, bounded: bool) -> None:
        """One message, through a writer; not ``bounded``: sent without its ``after``
        (checked from the chain's start)."""
        message = self.pool.pop(i % len(self.pool))
        if not bounded:
            message = Message(message.tag, message.work, None)
        self._deliver(message, self._writer(writer)[0])

    @precondition(lambda self: bool(self.pool))
    @rule(k=st.integers(1, 40), seed=st.integers(0, 2**16), writer=st.integers(0, 2))
    def deliver_many(self, k: int, seed: int, writer: int) -> None:
        """``k`` messages one by one through a writer, in the queue's order (``seed``)."""
        order = random.Random(seed)
        name = self._writer(writer)[0]
        for _ in range(min(k, len(self.pool))):
            self._deliver(self.pool.pop(order.randrange(len(self.pool))), name)

    @precondition(lambda self: bool(self.pool))
    @rule(
        k=st.integers(1, MAX_CHAINS), seed=st.integers(0, 2**16), writer=st.integers(0, 2), tx=st.booleans()
    )
    def deliver_a_batch(self, k: int, seed: int, writer: int, tx: bool) -> None:
        """``stamp_many``: up to ``k`` messages of distinct chains, drawn in the queue's
        order (``seed``); ``tx``: as transactions, or one conditional write per chain."""
        order = random.Random(seed)
        picked: dict[str, Message] = {}
        for message in order.sample(self.pool, len(self.pool)):
            if message.tag not in picked and len(picked) < k:
                picked[message.tag] = message
        for message in picked.values():
            self.pool.remove(message)
        self._deliver_many(list(picked.values()), self._writer(writer)[0], transactions=tx)

    @precondition(lambda self: self.mode == "xor" and bool(self.pool))
    @rule(i=st.integers(0, 200), k=st.integers(2, 6))
    def deliver_concurrently(self, i: int, k: int) -> None:
        """xor mode: up to ``k`` messages of one chain stamped at once through the
        ``CombiningTracker``: the first leads; while its write is on the wire the others
        queue on the chain (threads), and the next write carries them all."""
        counts = Counter(m.tag for m in self.pool)
        tags = [t for t, n in counts.items() if n > 1] or list(counts)
        tag = tags[i % len(tags)]
        mine = [m for m in self.pool if m.tag == tag][:k]
        for message in mine:
            self.pool.remove(message)
        combining = self.writers["combining"]
        first, rest = mine[0], mine[1:]
        outcomes: dict[int, Any] = {}
        threads: list[threading.Thread] = []

        def one(n: int, message: Message) -> None:
            outcomes[n] = self._stamp(combining, message)

        def queue_the_rest() -> None:
            for n, message in enumerate(rest):
                threads.append(threading.Thread(target=one, args=(n, message), daemon=True))
                threads[-1].start()
            deadline = time.monotonic() + 30
            while combining.waiting(tag) < len(rest) and time.monotonic() < deadline:
                time.sleep(0.001)

        mark = self._faults()
        self.world.net.arm("interleave", WRITES, 0, action=queue_the_rest)
        lead = self._stamp(combining, first)
        self.world.net.armed[:] = [f for f in self.world.net.armed if f.kind != "interleave"]
        for thread in threads:
            thread.join(150)
            if thread.is_alive():
                raise Violation(f"{tag}: a combined stamp did not return")
        hit = [h for h in self.world.net.fired[mark:] if not h.startswith("interleave")]
        faulted, hidden = bool(hit), any(h.startswith("lost") for h in hit)
        self.world.runs[f"combined ({len(rest) + 1} stamps, queued {bool(threads)})"] += 1
        event(f"combined stamps (queued {bool(threads)})")
        self._stamped(first, lead, faulted, hidden, "combined stamp (leader)")
        if not threads:  # no write for the leader to hold (a duplicate): the rest one by one
            for message in rest:
                self._deliver(message, "combining")
            return
        for n, message in enumerate(rest):
            self._stamped(message, outcomes[n], faulted, hidden, "combined stamp")

    @precondition(lambda self: 0 < len(self.seen) < MAX_MESSAGES)
    @rule(i=st.integers(0, 10_000), late=st.booleans())
    def duplicate(self, i: int, late: bool) -> None:
        """A copy of any message ever sent; ``late``: held back (delivered at any later
        point)."""
        (self.held if late else self.pool).append(self.seen[i % len(self.seen)])

    @precondition(lambda self: bool(self.held))
    @rule(i=st.integers(0, 200), fault=st.sampled_from(LATE_COPY_FAULTS), writer=st.integers(0, 2))
    def deliver_a_held_one(self, i: int, fault: str | None, writer: int) -> None:
        """A held copy arrives, ``fault`` on its stamp's first write."""
        self._late(self.held.pop(i % len(self.held)), fault, self._writer(writer)[0])

    def _late(self, message: Message, fault: str | None, name: str) -> None:
        armed = list(self.world.net.armed)
        self.world.net.armed.clear()
        if fault is not None:
            self.world.net.arm(fault, WRITES, 0, hits="stamp")
        try:
            self._deliver(message, name)
        finally:
            self.world.net.armed[:] = armed

    def _aged(self) -> list[tuple[Chain, str]]:
        """(chain, work): ops moved to the history of a chain not yet acked."""
        return [
            (c, w)
            for c in self.chains.values()
            if not c.acked_seen
            for w in c.landed[: max(0, len(c.landed) - BLOCK - 5)]
        ]

    def _large(self) -> list[Chain]:
        """Created chains, not acked, with enough works for ops to move to history."""
        return [
            c for c in self.chains.values() if c.created and not c.acked_seen and len(c.works) > BLOCK + 8
        ]

    def _age(self, chain: Chain) -> None:
        """Deliver ``chain``'s messages (no faults; one of its leaves held back, so that
        it stays pending) until its first ops have moved to its history."""
        leaves = [w.id for w in chain.works.values() if not w.children and not w.applied and not w.uncertain]
        if not leaves:
            return
        armed = list(self.world.net.armed)
        self.world.net.armed.clear()
        try:
            for _ in range(len(chain.works)):
                due = [m for m in self.pool if m.tag == chain.tag and m.work != leaves[-1]]
                if not due or any(c is chain for c, _ in self._aged()):
                    return
                self.pool.remove(due[0])
                self._deliver(due[0], "plain")
        finally:
            self.world.net.armed[:] = armed
            self.world.runs["chains aged for a late copy"] += 1

    @precondition(lambda self: bool(self._aged() or self._large()))
    @rule(i=st.integers(0, 10_000), fault=st.sampled_from(LATE_COPY_FAULTS), writer=st.integers(0, 2))
    def a_late_copy_of_an_op_in_history(self, i: int, fault: str | None, writer: int) -> None:
        """A copy of a message whose op has moved to its chain's history, ``fault`` on
        its stamp's first write: the call's own retry must still find the earlier copy.
        When no chain has such an op, a large one's messages go through until it has."""
        if not self._aged():
            large = self._large()
            self._age(large[i % len(large)])
        aged = self._aged()
        if not aged:
            return
        chain, work = aged[i % len(aged)]
        copies = [m for m in self.seen if m.tag == chain.tag and m.work == work]
        self.world.runs[f"late copies in history (fault {fault})"] += 1
        self._late(copies[0], fault, self._writer(writer)[0])

    # -- rules: the network -----------------------------------------------------------------

    @precondition(lambda self: len(self.world.net.armed) < 3)
    @rule(kind=st.sampled_from(FAULT_KINDS), skip=st.integers(0, 8))
    def fault_on_a_write(self, kind: str, skip: int) -> None:
        self.world.net.arm(kind, WRITES, skip)

    @precondition(lambda self: len(self.world.net.armed) < 3)
    @rule(kind=st.sampled_from(FAULT_KINDS), skip=st.integers(0, 4))
    def fault_on_a_read(self, kind: str, skip: int) -> None:
        self.world.net.arm(kind, READS, skip)

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def chains_agree_with_the_model(self) -> None:
        if not hasattr(self, "chains"):
            return
        for chain in self.chains.values():
            status = self._status(chain)
            if status is None:
                if chain.created:
                    raise Violation(f"{chain.tag}: the chain is gone")
                continue
            where = f"{chain.tag} ({status.state}, value {status.value!r}, reason {status.reason!r})"
            if status.state not in ("pending", "acked"):
                raise Violation(f"{where}: no work failed, and it is {status.state}")
            if chain.acked_seen and status.state != "acked":
                raise Violation(f"{where}: was acked, is not any more")
            if status.state == "acked":
                chain.acked_seen = True
                missing = [w.id for w in chain.works.values() if not w.applied and not w.uncertain]
                if missing:
                    raise Violation(f"{where}: acked before {missing} landed")
            if self.mode == "sum" and int(status.value) < 0:
                raise Violation(f"{where}: below zero, though no finish overtook its start")
            if chain.knows_value() and status.value != chain.expected(self.mode):
                raise Violation(
                    f"{where}: its value is not its open edges' (expected {chain.expected(self.mode)!r})"
                )

    # -- the end: faults gone, every message delivered --------------------------------------

    def teardown(self) -> None:
        try:
            if sys.exc_info()[1] is None and hasattr(self, "chains"):
                self._quiesce()
        finally:
            if hasattr(self, "chains"):
                self.world.net.disarm()
                self.world.observer.delete_table(TableName=self.table)

    def _quiesce(self) -> None:
        self.world.net.disarm()
        unstarted = [c for c in self.chains.values() if not c.created]
        if unstarted:
            self._start(unstarted, "plain", batch=False)
        for n in range(200):
            self.pool += self.held
            self.held.clear()
            if not self.pool:
                break
            name = self.names[n % len(self.names)]
            picked: dict[str, Message] = {}
            for message in list(self.pool):
                if message.tag not in picked:
                    picked[message.tag] = message
                    self.pool.remove(message)
            self._deliver_many(list(picked.values()), name)
        else:
            raise Violation("messages still pending after 200 rounds without faults")
        self.chains_agree_with_the_model()
        for chain in self.chains.values():
            status = self._status(chain)
            missing = [w.id for w in chain.works.values() if not w.applied]
            if status is None or status.state != "acked" or missing:
                raise Violation(
                    f"{chain.tag}: every message delivered, and it is "
                    f"{None if status is None else (status.state, status.value)}; "
                    f"works never applied: {missing}"
                )
            if not chain.ackers and not chain.raised:
                raise Violation(f"{chain.tag}: no call saw it acked, and none raised")
        self.world.runs["examples with chains"] += 1
        self.world.runs["chains"] += len(self.chains)
        self.world.runs["stamps"] += sum(len(c.works) for c in self.chains.values())
        for name in self.world.net.fired:
            event(f"fault: {name}")
            self.world.runs[f"fault {name}"] += 1


# -- the tests ------------------------------------------------------------------------------


def _endpoint(request: pytest.FixtureRequest, backend: str) -> str:
    if backend == "server":
        return str(request.getfixturevalue("moto_server").endpoint_url)
    return str(request.getfixturevalue("ddblocal").endpoint_url)


def _world(backend: str, mode: str, endpoint: str, net: Network, aio: tuple[Any, Any] | None = None) -> World:
    """The world of one case: two writers' clients through ``net``, an observer's beside."""
    return World(
        backend=backend,
        mode=mode,
        net=net,
        dynamodb=net.attach(model_client("dynamodb", endpoint)),
        dynamodb2=net.attach(model_client("dynamodb", endpoint)),
        observer=model_client("dynamodb", endpoint),
        aio=aio,
    )


@pytest.fixture
def world(request: pytest.FixtureRequest, instant_retries: None) -> Iterator[World]:
    backend, mode = request.param
    net = Network()
    yield _world(backend, mode, _endpoint(request, backend), net)
    net.close()


@pytest.fixture
def aio_world(request: pytest.FixtureRequest, instant_retries: None) -> Iterator[World]:
    """The world with the asyncio tracker as a third writer (aiobotocore, faults too)."""
    from aio_helpers import LoopThread

    from xor_ack_dynamodb.stores.dynamodb.clients import client_settings, open_client

    backend, mode = request.param
    endpoint = _endpoint(request, backend)
    net = Network()
    loop = LoopThread()
    context = open_client(
        client_settings(
            region=LOCAL_REGION,
            endpoint_url=endpoint,
            aws_access_key_id=LOCAL_KEY_ID,
            aws_secret_access_key=LOCAL_SECRET,
            retry=POLICY,
        )
    )
    client = loop.run(context.__aenter__())
    net.attach(client, aio=True)
    try:
        yield _world(backend, mode, endpoint, net, aio=(loop, client))
    finally:
        loop.run(context.__aexit__(None, None, None))
        loop.close()
        net.close()


def _settings(backend: str) -> settings:
    return settings(
        max_examples=int(os.environ.get("XOR_ACK_TRACKER_EXAMPLES", EXAMPLES[backend])),
        stateful_step_count=int(os.environ.get("XOR_ACK_TRACKER_STEPS", STEPS)),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
        database=None,
        phases=[Phase.explicit, Phase.generate] if KILL else list(Phase),
    )


def _run(world: World, name: str) -> None:
    machine = type("TrackerModel", (TrackerModel,), {"world": world})
    started = time.perf_counter()
    try:
        run_state_machine_as_test(machine, settings=_settings(world.backend))
    finally:
        print(
            f"{name}, {world.backend} {world.mode}: {time.perf_counter() - started:.1f} s, "
            f"{dict(sorted(world.runs.items()))}"
        )


CASES = [(backend, mode) for backend in ("server", "ddblocal") for mode in ("sum", "xor")]
LONG = FULL or KILL or "XOR_ACK_TRACKER_EXAMPLES" in os.environ


@pytest.mark.server
@pytest.mark.timeout(0 if LONG else 600)
@pytest.mark.parametrize("world", CASES, ids=[f"{b}-{m}" for b, m in CASES], indirect=True)
def test_the_tracker_keeps_its_promises_against_an_adversarial_network(world: World) -> None:
    """Plain and combining stamps, ``create_many`` and ``stamp_many``."""
    _run(world, "tracker model")


@pytest.mark.server
@pytest.mark.aio
@pytest.mark.skipif(not HAS_AIOBOTOCORE, reason="the asyncio tracker needs aiobotocore: make test-async")
@pytest.mark.timeout(0 if LONG else 600)
@pytest.mark.parametrize("aio_world", CASES, ids=[f"{b}-{m}" for b, m in CASES], indirect=True)
def test_the_async_tracker_keeps_its_promises_against_an_adversarial_network(aio_world: World) -> None:
    """The same with the asyncio tracker as a third writer, on the same table."""
    _run(aio_world, "tracker model (asyncio)")
