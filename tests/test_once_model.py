"""A model-based test of the serverless layer's exactly-once promise (issue 31, item 4).

A Hypothesis ``RuleBasedStateMachine`` plays the world a pipeline lives in: chains are
started (``serverless.start``), their messages go through a real SQS queue and are handed
to ``Pipeline.process_sqs_batch`` one record at a time, in any order, and the chain
table's real DynamoDB stream is read by ``Pipeline.stream_poller`` to fire completions.
The rules are the world's actions, the adversarial network's included:

* start a chain (a tree of messages; a wide one puts its first ops in the chain's history),
  and start it again (a caller's retry, a redelivered S3 event);
* deliver a record (and delete it, or leave it undeleted: the function timed out after its
  work), deliver many in a drawn order, hold a received one back while others go;
  redeliver an undeleted one at any later point (receive count 2+);
* a standard queue's duplicate of any message ever sent (same message id, receive count 1),
  delivered at once or held back and delivered at any later point (then with a fault on
  its stamp, if drawn); a DLQ redrive (the same body and envelope sent again: a new
  message, receive count 1);
* a child delivered before its parent's stamp started its edge (a producer that did not
  wait for the stamp: the edges are deterministic; every copy of such a child is checked
  from the chain's start, since none can name where its parent landed): in sum mode the
  sum may go below zero. Optionally its parent's own delivery runs in another container
  between two of the child's writes (before its ADD, or before its fail-write);
* a lost ``SendMessage``/``SendMessageBatch`` response (SQS applied it; botocore sends it
  again, so every message in it exists twice, both on their first receive); a crash
  between a stamp and its sends (or between two batches of sends);
* a lost response, or a throttle (once, or outlasting botocore's attempts), on any
  DynamoDB write: a stamp, a create, a history block, a trim, the completion's claim or
  mark, a fail (on the k-th next write, or on the next write of one kind); the function
  dying before one of its writes;
* the stream polled, a stream batch handed over twice (a retried batch), the whole stream
  replayed from its start.

Three rules aim at conjunctions a random walk seldom meets (each still a thing a network
and its users can do): a finish that takes the sum below zero for certain (the rest of
the chain delivered first, so the parent is the last open edge; a child whose edge is the
larger overtakes it) with a fault or a race on its fail-write; a late copy of an op that
has moved to history, delivered to a warm container with a fault on its first write
(and, if drawn, once more after the rest of its chain went through and it acked); a
chain delivered to its end, then the stream polled with a fault on its completion claim.
When no chain of the example offers the first two a scene, they start one shaped for it
(roots of one child each, so that a root is the last open edge and its stamp completes
the chain; a root and :data:`PADDING` leaves, delivered, one held back, until its first
ops have moved to history while it is still pending), up to :data:`TARGETED_CHAINS`
chains: each of the ``-model`` mutants (scripts/mutations.py) is met within the kill
budget's first examples.

The model holds each chain's tree, which nodes ran, which nodes' stamps are known to
have landed, the edges (each learned from the handler that emitted it), and the
completions owed. The invariants are the documented promises (docs/lambda.md,
docs/concepts.md):

* the chain's value is every started edge less every finished one (sum or XOR) whenever
  the model knows every outcome, so no op is applied twice and none is lost; in sum mode
  a pending chain is never left below zero once a delivery of it ran without a fault (a
  negative sum ends failed); a chain fails only when a finish overtook its start, with
  the negative-sum reason, and never after it acked;
* a chain is acked only after every node of its tree ran, and once acked stays acked;
* a delivery of an op that was applied is reported as a duplicate (``stamps.duplicate``),
  never applied again, never dropped as if its chain refused it (``TagAcked``, or
  ``TagFailed`` on a chain that acked); an op no copy had applied is never reported a
  duplicate (unless a lost response hid its own write, or a fault on the completion write
  after its ADD sent the call round again);
* a record is retried only when a fault hit its delivery (another container's delivery
  racing it is not a fault);
* nothing escapes ``process_sqs_batch`` or the stream handler, and ``start`` raises only
  the library's typed errors or a throttle that outlasted every retry (botocore's
  ``ClientError``, as docs/errors say);
* at the end, with the faults gone and every message delivered: each chain acked (or
  failed by its negative sum), each acked chain's completion fired exactly once, after at
  most one retry of its stream batch (the clock never passes the claim's lease, so a
  completion waiting for a lease fails the run), and a replay of the whole stream, every
  batch twice, fires nothing again.

Backends: DynamoDB on a moto server over HTTP (single-threaded interleavings; faults need
a request on the wire) and on Amazon's DynamoDB Local; SQS on the moto server. Both modes.
``XOR_ACK_MODEL=kill`` is the mutation check's budget (scripts/mutations.py, the
``-model`` mutants): more examples (80 per DynamoDB Local case: a survivor ends within
about four minutes), no shrinking.
``make test`` runs a bounded number of examples (under two minutes for the four cases);
an example stops choosing the rules that add messages past :data:`MAX_MESSAGES`. ``make
reliability`` (``XOR_ACK_RELIABILITY=full``) runs many more. ``XOR_ACK_ONCE_EXAMPLES`` and
``XOR_ACK_ONCE_STEPS`` override both. See docs/testing.md, "The model-based test of the
serverless layer".
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError
from conftest import unique_table
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
from once_model_faults import FAULTS, POLICY, SENDS, WRITES, Crash, Network, Violation, model_client
from reliability.sizes import record_figures

from xor_ack_dynamodb import XorAckDynamoDB
from xor_ack_dynamodb.core.chain import BLOCK
from xor_ack_dynamodb.errors import TagNotFound, XorAckError
from xor_ack_dynamodb.serverless import Completion, Context, Pipeline, PipelineConfig, start
from xor_ack_dynamodb.serverless.edges import child_edge
from xor_ack_dynamodb.serverless.envelope import Envelope
from xor_ack_dynamodb.testing import records_from_messages, sqs_record

FULL = os.environ.get("XOR_ACK_RELIABILITY", "").lower() == "full"
#: ``XOR_ACK_MODEL=kill``: the budget of the mutation check's ``-model`` mutants
#: (scripts/mutations.py): more examples, and no shrinking (a mutant is killed by the
#: first failure; shrinking this machine takes minutes). The search is the same.
KILL = os.environ.get("XOR_ACK_MODEL", "").lower() == "kill"
#: Examples and steps per (backend, mode): bounded in ``make test``, long in ``make reliability``.
EXAMPLES = {"server": 50 if FULL else 8 if KILL else 2, "ddblocal": 200 if FULL else 80 if KILL else 3}
STEPS = 40 if FULL else 20

#: Leaves added under a chain's root so that its first ops move to history (an item holds
#: ``max_ops`` + 40 op ids; the machine's chains keep ``max_ops`` 1).
PADDING = 50
MAX_CHAINS = 2
#: The rules aimed at a conjunction (:meth:`ServerlessModel._below_zero`,
#: :meth:`ServerlessModel._an_op_in_history`) start a chain shaped for it when none of
#: the example's offers one (each such chain serves one scenario): up to this many chains.
TARGETED_CHAINS = MAX_CHAINS + 3
#: That shape for a negative sum: roots of one child each, so that once the rest of the
#: chain went through a root is its last open edge, and its stamp, landing after its
#: child's finish, completes the chain (the edges are drawn: with three roots, one child's
#: edge is larger than its parent's seven times in eight).
ONE_CHILD_EACH = (((),),) * 3
#: Messages an example may receive before the rules that make more (a start run again
#: sends every child again, a redriven parent its children) stop being chosen: bounds an
#: example's cost, not what it may contain.
MAX_MESSAGES = 250
EDGE_SIZE = 16
#: The faults a DynamoDB write can meet, and the kinds of write a fault can wait for.
WRITE_FAULTS = ("lost", "lost_every_attempt", "throttle", "throttle_every_attempt", "crash")
LABELS = ("stamp", "history", "trim", "claim", "mark", "fail")
#: What meets the fail-write of a stamp that took the sum below zero (the function dying
#: before it, and the race on it, the parent's stamp landing first, are rules of their own).
#: The throttle twice as often: after it alone, a duplicate reported by the call's next
#: round shows the fail-write was not sent again (a lost response may hide its own write).
BELOW_ZERO_FAULTS = (None, "throttle_every_attempt", "throttle_every_attempt", "lost", "lost_every_attempt")
#: What meets a late copy's first write (:meth:`ServerlessModel.a_late_copy_of_an_op_in_history`):
#: each leaves the ``ADD``'s outcome unknown to the call (botocore does not resend an ``ADD``).
LATE_COPY_FAULTS = ("throttle_every_attempt", "lost", "lost_every_attempt")

#: A node of a tree is the tuple of its children.
TREES = st.recursive(
    st.just(()), lambda kids: st.lists(kids, min_size=1, max_size=3).map(tuple), max_leaves=8
)


@dataclass
class Node:
    id: str
    children: list[str]
    spec: dict[str, Any]
    edge: Any = None  # learned from the handler (or start) that emitted it
    ran: int = 0
    applied: bool = False  # its stamp is known to have landed
    uncertain: bool = False  # a delivery may have landed its stamp without telling


@dataclass
class ChainModel:
    tag: str
    start_id: str
    roots: list[str]
    nodes: dict[str, Node]
    specs: list[dict[str, Any]]
    started: bool = False  # a start() returned
    created: bool = False  # the chain is known to exist
    acked_seen: bool = False
    #: A child's finish was delivered before its parent's stamp: in sum mode its sum may
    #: go below zero, and the chain then ends failed (or acked, when the parent's stamp
    #: lands before the fail-write).
    overtaken: bool = False
    #: Nodes delivered before their parent's stamp: no copy of them can name where the
    #: parent landed, so every copy is checked from the chain's start (``after`` dropped).
    unbounded: set[str] = field(default_factory=set)
    #: A delivery of this chain crashed or was retried since the last one that ran
    #: without a fault: a sum below zero may wait for the next delivery's fail-write.
    limbo: bool = False
    #: Nodes in the order their stamps were seen to land: the first ones move to history
    #: once the chain's item holds ``window + BLOCK`` ops after them.
    landed: list[str] = field(default_factory=list)
    failed: bool = False  # seen failed (by its negative sum): no child overtakes any more

    @classmethod
    def build(cls, tag: str, tree: tuple[Any, ...], padding: int) -> ChainModel:
        nodes: dict[str, Node] = {}

        def spec(node_id: str, kids: tuple[Any, ...]) -> dict[str, Any]:
            ids = [f"{node_id}.{j}" for j in range(len(kids))]
            found = {"t": tag, "n": node_id, "c": []}
            nodes[node_id] = Node(node_id, ids, found)
            found["c"] = [spec(i, k) for i, k in zip(ids, kids, strict=True)]
            return found

        kids = tuple(tree) + ((),) * padding
        specs = [spec(f"r{i}", kid) for i, kid in enumerate(kids)]
        return cls(tag, f"start-{tag}", [s["n"] for s in specs], nodes, specs)

    def learn(self, node_id: str, edge: Any) -> None:
        node = self.nodes[node_id]
        if node.edge is not None and node.edge != edge:
            raise Violation(f"{self.tag}: node {node_id} emitted with another edge on a later attempt")
        node.edge = edge

    def emit_roots(self, ctx: Context) -> None:
        for spec in self.specs:
            self.learn(spec["n"], ctx.emit(spec).edge)

    def parent(self, node: Node) -> Node | None:
        return self.nodes.get(node.id.rpartition(".")[0]) if "." in node.id else None

    def started_nodes(self) -> list[Node]:
        """Nodes whose edge a landed stamp started: the roots (the start's), the children
        of applied nodes."""
        started = list(self.roots) + [c for n in self.nodes.values() if n.applied for c in n.children]
        return [self.nodes[i] for i in started]

    def open_nodes(self) -> list[Node]:
        return [n for n in self.started_nodes() if not n.applied]

    def knows_value(self) -> bool:
        return self.created and not any(n.uncertain for n in self.nodes.values())

    def expected(self, mode: str) -> Any:
        """Every started edge added, every finished one taken away (a finish that
        overtook its start included)."""
        started = [n.edge for n in self.started_nodes()]
        finished = [n.edge for n in self.nodes.values() if n.applied]
        if mode == "sum":
            return sum(started) - sum(finished)
        value = bytes(EDGE_SIZE)
        for edge in started + finished:
            value = bytes(a ^ b for a, b in zip(value, edge, strict=True))
        return value


@dataclass
class Delivery:
    """A record Lambda would hand to the function (``synthetic``: a copy SQS made that
    the test's queue does not hold: a standard queue's duplicate)."""

    record: dict[str, Any]
    tag: str
    node: str
    synthetic: bool = False


@dataclass
class World:
    """What the examples of one test share: the clients (faults on the pipeline's)."""

    backend: str
    mode: str
    net: Network
    dynamodb: Any
    sqs: Any
    #: Another container's clients (faults attached too): the racing delivery's.
    dynamodb2: Any
    sqs2: Any
    observer: Any
    queues: Any
    streams: Any
    runs: Counter[str] = field(default_factory=Counter)


#: (chain, child, parent): a child that may overtake its parent.
Overtaker = tuple[ChainModel, Node, Node]


def _unbounded(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with no ``after`` in its envelope: checked from the chain's start."""
    envelope = json.loads(record["messageAttributes"]["xor-ack"]["stringValue"])
    envelope.pop("after", None)
    attribute = dict(record["messageAttributes"]["xor-ack"], stringValue=json.dumps(envelope))
    return dict(record, messageAttributes=dict(record["messageAttributes"], **{"xor-ack": attribute}))


def _events(pipeline: Pipeline) -> Counter[str]:
    return Counter(pipeline.stats.events)


class ServerlessModel(RuleBasedStateMachine):
    world: World

    def __init__(self) -> None:
        super().__init__()
        world = self.world
        world.net.disarm()
        world.net.fired.clear()
        world.runs["examples"] += 1
        self.mode = world.mode
        self.table = unique_table("once")
        self.tracker = XorAckDynamoDB(
            self.table, client=world.dynamodb, mode=self.mode, max_ops=1, retry=POLICY
        )
        self.observer = XorAckDynamoDB(self.table, client=world.observer, mode=self.mode)
        self.queue = world.queues.create_queue(
            QueueName=f"q-{self.table}", Attributes={"VisibilityTimeout": "3600"}
        )["QueueUrl"]
        self.queue_arn = world.queues.get_queue_attributes(QueueUrl=self.queue, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        self.now = time.time()  # the pipeline's clock: never reaches a claim's lease
        self.fired: list[Completion] = []
        config = PipelineConfig(queue_url=self.queue, metrics_namespace=None)
        self.pipeline = Pipeline(
            self.tracker,
            config,
            sqs=world.sqs,
            on_complete=[self.fired.append],
            clock=lambda: self.now,
        )
        assert self.pipeline.create_table()
        #: Another Lambda container of the same function (its own tracker and caches).
        self.other = Pipeline(
            XorAckDynamoDB(self.table, client=world.dynamodb2, mode=self.mode, max_ops=1, retry=POLICY),
            config,
            sqs=world.sqs2,
            on_complete=[self.fired.append],
            clock=lambda: self.now,
        )
        self.poller = self.pipeline.stream_poller(world.streams, batch_size=1000)
        self.chains: dict[str, ChainModel] = {}
        self.pool: list[Delivery] = []  # received, not yet handed to the function
        self.kept: list[Delivery] = []  # handed over and not deleted: visible again later
        self.held: list[Delivery] = []  # received, held back by the queue while others go
        self.seen: list[Delivery] = []  # every record ever received

    # -- the function ----------------------------------------------------------------------

    def handle(self, ctx: Context) -> None:
        spec = ctx.json()
        chain = self.chains[ctx.tag]
        chain.nodes[spec["n"]].ran += 1
        for child in spec["c"]:
            chain.learn(child["n"], ctx.emit(child).edge)

    def _start(self, chain: ChainModel) -> None:
        faults = self.world.net.fired_count()
        try:
            start(chain.tag, pipeline=self.pipeline, start_id=chain.start_id, handler=chain.emit_roots)
        except Crash:
            event("start crashed")
            return
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code != "ProvisionedThroughputExceededException" or self.world.net.fired_count() == faults:
                raise Violation(f"start({chain.tag}) raised {exc!r}") from exc
            return
        except XorAckError as exc:
            if self.world.net.fired_count() == faults:
                raise Violation(f"start({chain.tag}) raised {exc!r} with no fault injected") from exc
            return
        except Exception as exc:
            raise Violation(f"start({chain.tag}) let an untyped error escape: {exc!r}") from exc
        chain.started = chain.created = True

    def _pull(self) -> None:
        while True:
            got = self.world.queues.receive_message(
                QueueUrl=self.queue,
                MaxNumberOfMessages=10,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
                VisibilityTimeout=3600,
            ).get("Messages", [])
            if not got:
                return
            for record in records_from_messages(got, self.queue_arn):
                body = json.loads(record["body"])
                delivery = Delivery(record, body["t"], body["n"])
                self.pool.append(delivery)
                self.seen.append(delivery)

    def _visible_again(self, delivery: Delivery) -> None:
        """As after the visibility timeout: SQS delivers it again, its receive count up."""
        if delivery.synthetic:
            record = dict(delivery.record)
            count = int(record["attributes"]["ApproximateReceiveCount"]) + 1
            record["attributes"] = dict(record["attributes"], ApproximateReceiveCount=str(count))
            self.pool.append(Delivery(record, delivery.tag, delivery.node, synthetic=True))
            return
        self.world.queues.change_message_visibility(
            QueueUrl=self.queue, ReceiptHandle=delivery.record["receiptHandle"], VisibilityTimeout=0
        )

    def _process(self, delivery: Delivery, keep: bool, pipeline: Pipeline | None = None) -> None:
        pipeline = pipeline or self.pipeline
        chain = self.chains[delivery.tag]
        node = chain.nodes[delivery.node]
        before, faults = _events(pipeline), self.world.net.fired_count()
        receive = int(delivery.record["attributes"]["ApproximateReceiveCount"])
        event(f"delivery: receive count {min(receive, 3)}{'+' if receive >= 3 else ''}")
        record = _unbounded(delivery.record) if node.id in chain.unbounded else delivery.record
        crashed = False
        try:
            answer = pipeline.process_sqs_batch({"Records": [record]}, self.handle)
        except Crash:
            crashed, answer = True, {"batchItemFailures": []}
        except Exception as exc:
            raise Violation(f"process_sqs_batch let {exc!r} escape") from exc
        delta = _events(pipeline) - before
        retried = bool(answer["batchItemFailures"])
        hit = self.world.net.fired[faults:]
        # Another container's delivery running between two of this one's writes is a
        # race, not a fault: the delivery must still end (applied, duplicate or refused).
        faulted = any(not h.startswith("interleave") for h in hit)
        what = f"{chain.tag}: delivery of {node.id} (receive {receive}, {delta}, faults {hit})"
        applied, duplicate = delta["stamps.applied"], delta["stamps.duplicate"]
        if delta["records.malformed"] or delta["records.failed_chain"]:
            raise Violation(f"{what}: the record was malformed or failed its chain: {self._reason(chain)}")
        if applied and node.applied:
            raise Violation(f"{what}: its op had been applied, and was applied again")
        # A lost response may hide this delivery's own write.
        hidden = any(h.startswith("lost") for h in hit)
        if duplicate and not (node.applied or node.uncertain) and not hidden:
            raise Violation(f"{what}: reported a duplicate, though no copy of its op had been applied")
        if applied or duplicate:
            if not node.applied:
                chain.landed.append(node.id)
            node.applied, node.uncertain = True, False
            if duplicate:
                event("delivery: a duplicate")
        elif retried or crashed:
            node.uncertain = True
        status = self._status(chain)
        if delta["records.dropped"] and not (applied or duplicate):
            # Refused by its chain (TagAcked, TagFailed): only a chain that failed its
            # negative sum refuses an op; an acked one answers a duplicate.
            if not (chain.overtaken and status is not None and status.state == "failed"):
                raise Violation(f"{what}: dropped, not reported as a duplicate: {status}")
            node.uncertain = not node.applied  # the stamp that took the sum below zero landed
        if retried and not faulted:
            raise Violation(f"{what}: retried although no fault hit it")
        if retried or crashed:
            chain.limbo = True
        elif not faulted:
            chain.limbo = False
            if self.mode == "sum" and status is not None and status.state == "pending" and status.value < 0:
                raise Violation(f"{what}: the chain is left pending below zero ({status.value})")
        if crashed or keep:
            self.kept.append(delivery)
        elif retried:
            self._visible_again(delivery)
        elif not delivery.synthetic:
            self.world.queues.delete_message(
                QueueUrl=self.queue, ReceiptHandle=delivery.record["receiptHandle"]
            )

    def _status(self, chain: ChainModel) -> Any:
        try:
            return self.observer.status(chain.tag)
        except TagNotFound:
            return None

    def _reason(self, chain: ChainModel) -> str:
        status = self._status(chain)
        return "no chain" if status is None else f"{status.state}: {status.reason}"

    def _chain(self, i: int) -> ChainModel:
        return list(self.chains.values())[i % len(self.chains)]

    # -- rules: chains and deliveries -------------------------------------------------------

    @initialize(
        tree=st.lists(TREES, min_size=1, max_size=4).map(tuple), padding=st.sampled_from([PADDING, 0])
    )
    def start_the_first_chain(self, tree: tuple[Any, ...], padding: int) -> None:
        self.start_a_chain(tree, padding)

    @precondition(lambda self: len(self.chains) < MAX_CHAINS)
    @rule(tree=st.lists(TREES, min_size=1, max_size=4).map(tuple), padding=st.sampled_from([PADDING, 0]))
    def start_a_chain(self, tree: tuple[Any, ...], padding: int) -> None:
        tag = f"chain-{len(self.chains)}"
        chain = self.chains[tag] = ChainModel.build(tag, tree, padding)
        self._start(chain)

    @precondition(lambda self: bool(self.chains) and len(self.seen) < MAX_MESSAGES)
    @rule(i=st.integers(0, MAX_CHAINS - 1))
    def start_it_again(self, i: int) -> None:
        """The same start again: the caller's retry, a redelivered S3 event."""
        self._start(self._chain(i))

    @rule()
    def receive(self) -> None:
        self._pull()

    @precondition(lambda self: bool(self.pool))
    @rule(i=st.integers(0, 200), keep=st.booleans())
    def deliver(self, i: int, keep: bool) -> None:
        """One record; ``keep``: the function timed out after its work (not deleted)."""
        self._process(self.pool.pop(i % len(self.pool)), keep)

    @rule(k=st.integers(1, 60), seed=st.integers(0, 2**16))
    def deliver_many(self, k: int, seed: int) -> None:
        """Receive, then deliver ``k`` records in the queue's own order (a standard queue's
        is not the sending order: ``seed`` draws it)."""
        self._pull()
        order = random.Random(seed)
        for _ in range(min(k, len(self.pool))):
            self._process(self.pool.pop(order.randrange(len(self.pool))), keep=False)

    @precondition(lambda self: bool(self.pool))
    @rule(i=st.integers(0, 200))
    def hold_back(self, i: int) -> None:
        """A received copy waits (a standard queue's order is not the sending order; a
        stalled sender): others are delivered meanwhile, however many."""
        self.held.append(self.pool.pop(i % len(self.pool)))

    @precondition(lambda self: bool(self.held))
    @rule(i=st.integers(0, 200), fault=st.sampled_from([None, *WRITE_FAULTS]))
    def deliver_a_held_one(self, i: int, fault: str | None) -> None:
        """A late copy (or a held one) arrives, ``fault``: on its stamp's first write."""
        if fault is not None:
            self.world.net.arm(fault, WRITES, 0, hits="stamp")
        self._process(self.held.pop(i % len(self.held)), keep=False)
        self.world.net.armed[:] = [f for f in self.world.net.armed if f.kind != fault or f.hits != "stamp"]

    def _overtakers(self) -> list[tuple[ChainModel, Node, Node]]:
        """(chain, child, parent): children none of whose messages exist, of parents
        emitted but not yet stamped."""
        self._pull()
        return [
            (chain, node, parent)
            for chain in self.chains.values()
            if not chain.failed
            for node in chain.nodes.values()
            if (parent := chain.parent(node)) is not None
            and parent.edge is not None
            and not parent.applied
            and not parent.uncertain
            and not node.ran
            and not any(d.tag == chain.tag and d.node == node.id for d in self.seen)
            and any(d.tag == chain.tag for d in self.seen)
        ]

    def _overtaking(self, chain: ChainModel, node: Node, parent: Node) -> Delivery:
        """``node``'s record as its parent's send would build it (the edges are
        deterministic), before its parent's stamp: no copy of it can name where the
        parent landed, so every copy is checked from the chain's start."""
        owner = next(
            json.loads(d.record["messageAttributes"]["xor-ack"]["stringValue"])["owner"]
            for d in self.seen
            if d.tag == chain.tag
        )
        edge = child_edge(parent.edge, parent.children.index(node.id))
        chain.learn(node.id, edge)
        chain.overtaken = True
        chain.unbounded.add(node.id)
        envelope = Envelope(chain.tag, edge, owner, self.mode)
        record = sqs_record(
            json.dumps(node.spec),
            message_attributes={"xor-ack": envelope.to_json()},
            queue_arn=self.queue_arn,
        )
        delivery = Delivery(record, chain.tag, node.id, synthetic=True)
        self.seen.append(delivery)
        return delivery

    def _race(self, chain: ChainModel, parent: Node, write: int) -> None:
        """Arm the parent's delivery in another container (its own tracker and caches)
        to run just before the next delivery's ``write``-th DynamoDB write."""
        theirs = [d for d in self.seen if d.tag == chain.tag and d.node == parent.id]
        if theirs:
            copy = self._copy(theirs[0])
            race_in = lambda: self._process(copy, keep=False, pipeline=self.other)  # noqa: E731
            self.world.net.arm("interleave", WRITES, write, action=race_in)

    @precondition(lambda self: self._may_overtake())
    @rule(
        i=st.integers(0, 10_000),
        race=st.sampled_from([None, 0, 1]),
        fail=st.sampled_from([None, "throttle_every_attempt", "crash"]),
    )
    def a_child_overtakes_its_parent(self, i: int, race: int | None, fail: str | None) -> None:
        """A child's finish delivered before its parent's stamp started its edge (what a
        producer outside the pipeline's stamp-then-send order does: the edges are
        deterministic). In sum mode the sum may go below zero: the chain must end failed,
        or acked when the parent's stamp lands before the fail-write, and the stamp say
        which. ``race``: the parent's own delivery runs in another container just before
        this delivery's ``race``-th DynamoDB write (0: its ADD; 1: the write after it, the
        fail-write when the sum went below zero); None: the copy waits in the queue.
        ``fail``: a fault on the child's fail-write, if it sends one."""
        candidates = self._overtakers()
        if not candidates:
            return
        chain, node, parent = candidates[i % len(candidates)]
        self.world.runs[f"overtakes (race {race}, fail-write fault {fail})"] += 1
        delivery = self._overtaking(chain, node, parent)
        event(f"a child overtakes its parent (race {race})")
        if race is None:
            self.pool.append(delivery)
            return
        armed = list(self.world.net.armed)
        if fail is not None:
            self.world.net.arm(fail, WRITES, 0, hits="fail")
        self._race(chain, parent, race)
        self._process(delivery, keep=False)
        self.world.net.armed[:] = [f for f in self.world.net.armed if any(f is a for a in armed)]

    def _may_overtake(self) -> bool:
        """Whether some child could overtake its parent (:meth:`_overtakers`, without
        receiving first)."""
        seen = {(d.tag, d.node) for d in self.seen}
        return any(
            (parent := chain.parent(node)) is not None
            and parent.edge is not None
            and not parent.applied
            and not parent.uncertain
            and not node.ran
            and (chain.tag, node.id) not in seen
            for chain in self.chains.values()
            if not chain.failed
            for node in chain.nodes.values()
        )

    @precondition(lambda self: self.mode == "sum" and self._may_below_zero())
    @rule(i=st.integers(0, 10_000), then=st.sampled_from(["copy", "parent", "wait"]))
    def the_parents_stamp_lands_before_the_fail_write(self, i: int, then: str) -> None:
        """Sum mode: :meth:`a_finish_takes_the_sum_below_zero` with the race that ends in
        an ack: the parent's delivery, in another container, lands between the child's
        ADD and its fail-write. The sum is back at zero and the parent's stamp completes
        the chain; the fail-write is refused, and the child's stamp must report itself
        applied (not ``TagFailed``, nor a retry: a race is not a fault)."""
        self._below_zero(i, "interleave", then)

    @precondition(lambda self: self.mode == "sum" and self._may_below_zero())
    @rule(i=st.integers(0, 10_000), then=st.sampled_from(["copy", "parent", "wait"]))
    def the_function_dies_before_the_fail_write(self, i: int, then: str) -> None:
        """Sum mode: :meth:`a_finish_takes_the_sum_below_zero` with the function dying
        between the child's ADD and its fail-write: the chain waits below zero; the next
        copy of the child (``then="copy"``: at once) must fail it, unless the parent's
        stamp lands first (``"parent"``) and brings the sum back to zero."""
        self._below_zero(i, "crash", then)

    @precondition(lambda self: self.mode == "sum" and self._may_below_zero())
    @rule(
        i=st.integers(0, 10_000),
        fault=st.sampled_from(BELOW_ZERO_FAULTS),
        then=st.sampled_from(["copy", "parent", "wait"]),
    )
    def a_finish_takes_the_sum_below_zero(self, i: int, fault: str | None, then: str) -> None:
        """Sum mode: a child overtakes its parent when the parent is the chain's last
        open edge and the child's edge is the larger one, so its ADD takes the sum below
        zero for certain. First every other message of the chain goes through (held
        back and undeleted ones too; the parent's is held back); then the child's, with
        ``fault`` on its fail-write: throttled past botocore's attempts, its response
        lost (once, or on every attempt), or none. ``then``: a copy of the child arrives
        at once (a redelivery, a standard queue's duplicate), or the parent's own
        message, or neither (later steps deliver them)."""
        self._below_zero(i, fault, then)

    def _may_below_zero(self) -> bool:
        return self._may_overtake() or len(self.chains) < TARGETED_CHAINS

    def _larger_children(self) -> tuple[list[Overtaker], list[Overtaker]]:
        """(chain, child, parent) of :meth:`_overtakers` whose child's edge is larger than
        its parent's: those of a parent with one child (its stamp may complete the chain),
        and all."""
        candidates = [
            (chain, node, parent)
            for chain, node, parent in self._overtakers()
            if chain.started and child_edge(parent.edge, parent.children.index(node.id)) > parent.edge
        ]
        return [c for c in candidates if len(c[2].children) == 1], candidates

    def _start_shaped(self, tree: tuple[Any, ...], padding: int) -> ChainModel | None:
        """A chain started for a targeted rule (:data:`TARGETED_CHAINS`), the faults
        armed left for later: None when there is no room for it."""
        if len(self.chains) >= TARGETED_CHAINS:
            return None
        tag = f"chain-{len(self.chains)}"
        chain = self.chains[tag] = ChainModel.build(tag, tree, padding)
        armed = list(self.world.net.armed)
        self.world.net.armed.clear()
        try:
            self._start(chain)
        finally:
            self.world.net.armed[:] = armed
        self.world.runs[f"chains started for a targeted rule (padding {padding})"] += 1
        return chain

    def _below_zero(self, i: int, fault: str | None, then: str) -> None:
        only, candidates = self._larger_children()
        if not only and self._start_shaped(ONE_CHILD_EACH, 0) is not None:
            only, candidates = self._larger_children()
        candidates = only or candidates
        if not candidates:
            self.world.runs["below zero: no child to overtake"] += 1
            return
        chain, node, parent = candidates[i % len(candidates)]
        armed = list(self.world.net.armed)
        self.world.net.armed.clear()  # the rest of the chain goes through, and only ``fault`` hits the child
        try:
            self._drain(chain, {parent.id, node.id})
            self.held += [d for d in self.pool if d.tag == chain.tag and d.node == parent.id]
            self.pool = [d for d in self.pool if d not in self.held]
            status = self._status(chain)
            if status is None or status.state != "pending":
                self.world.runs[f"below zero: the chain is {None if status is None else status.state}"] += 1
                return
            last = int(status.value) == parent.edge
            self.world.runs[f"below zero (fault {fault}, then {then}, parent the last open edge {last})"] += 1
            event(f"a finish takes the sum below zero (fault {fault})")
            delivery = self._overtaking(chain, node, parent)
            if fault == "interleave":
                self._race(chain, parent, 1)
            elif fault is not None:
                self.world.net.arm(fault, WRITES, 0, hits="fail")
            self._process(delivery, keep=False)
            self.world.net.armed.clear()
            if then == "copy":
                if delivery in self.kept:  # it crashed: delivered again once its timeout passes
                    self.kept.remove(delivery)
                    self._visible_again(delivery)
                    self._process(self.pool.pop(), keep=False)
                else:
                    self._process(self._copy(delivery), keep=False)
            elif then == "parent":
                mine = [d for d in self.held if d.tag == chain.tag and d.node == parent.id]
                if mine:
                    self.held.remove(mine[0])
                    self._process(mine[0], keep=False)
        finally:
            self.world.net.armed[:] = armed

    def _drain(self, chain: ChainModel, spare: set[str], until: Callable[[], bool] = lambda: False) -> None:
        """Deliver every message of ``chain`` but those of the nodes ``spare`` (the held
        back and undeleted ones too), until no more come or ``until()`` holds."""
        for _ in range(30):
            mine = lambda d: d.tag == chain.tag and d.node not in spare  # noqa: E731
            for delivery in [d for d in self.kept if mine(d)]:
                self.kept.remove(delivery)
                self._visible_again(delivery)
            self.pool += [d for d in self.held if mine(d)]
            self.held = [d for d in self.held if not mine(d)]
            self._pull()
            due = [d for d in self.pool if mine(d)]
            if not due:
                return
            for delivery in due:
                if until():
                    return
                self.pool.remove(delivery)
                self._process(delivery, keep=False)

    @precondition(
        lambda self: any(c.landed for c in self.chains.values()) or len(self.chains) < TARGETED_CHAINS
    )
    @rule(
        i=st.integers(0, 10_000),
        fault=st.sampled_from(LATE_COPY_FAULTS),
        then_acked=st.booleans(),
    )
    def a_late_copy_of_an_op_in_history(self, i: int, fault: str, then_acked: bool) -> None:
        """A standard queue's duplicate of a message whose stamp landed long ago (its op
        has moved to the chain's history: ``BLOCK`` and more landed after it), on a chain
        still pending, delivered to the warm container with ``fault`` on its stamp's
        first write: throttled past botocore's attempts, or its response lost (botocore
        does not resend an ``ADD``). The call's own retry must still look for earlier
        copies from the message's bound, not from the chain as the container last saw it
        (else the ``ADD`` lands a second time). When no chain has such an op, one is made
        (:meth:`_an_op_in_history`). ``then_acked``: the rest of the chain goes through
        (no faults) and, once it acked, one more copy comes: a duplicate found in the
        history, not refused by the chain's state (``TagAcked``)."""
        found = self._an_op_in_history(i)
        if found is None:
            old = [(c, n) for c in self.chains.values() for n in c.landed]
            if not old:
                return
            chain, node = old[i % len(old)]
            aged = False
        else:
            (chain, node), aged = found, True
        copies = [d for d in self.seen if d.tag == chain.tag and d.node == node]
        if not copies:
            return
        self.world.runs[f"late copies of old ops (fault {fault}, aged {aged})"] += 1
        armed = list(self.world.net.armed)
        self.world.net.armed[:] = []
        self.world.net.arm(fault, WRITES, 0, hits="stamp")
        try:
            self._process(self._copy(copies[0]), keep=False)
            self.world.net.armed[:] = []
            if then_acked and aged:
                self._drain(chain, set())
                if self._state(chain) == "acked":
                    self.world.runs["late copies of old ops, again once acked"] += 1
                    self._process(self._copy(copies[0]), keep=False)
        finally:
            self.world.net.armed[:] = armed

    def _aged(self, chain: ChainModel) -> list[str]:
        """The nodes of ``chain`` whose ops have moved to its history for certain."""
        return chain.landed[: max(0, len(chain.landed) - BLOCK - 5)]

    def _an_op_in_history(self, i: int) -> tuple[ChainModel, str] | None:
        """(chain, node): an op in the history of a chain still pending (only there can
        a second ``ADD`` of it land). None there is, the messages of a pending chain
        large enough go through (faults held back) until its first ops have moved, one
        of its leaves held back so that it stays pending; a chain is started for it
        (a root, :data:`PADDING` leaves) when no chain of the example is large enough."""
        pending = [c for c in self.chains.values() if c.started and self._state(c) == "pending"]
        ready = [c for c in pending if self._aged(c)]
        if not ready:
            large = [c for c in pending if len(c.nodes) >= BLOCK + 8]
            chain = large[i % len(large)] if large else self._start_shaped(((),), PADDING)
            if chain is None or not chain.started:
                return None
            self._age(chain)
            ready = [chain] if self._aged(chain) and self._state(chain) == "pending" else []
        if not ready:
            self.world.runs["late copies: no pending chain with an op in history"] += 1
            return None
        chain = ready[i % len(ready)]
        aged = self._aged(chain)
        return chain, aged[i % len(aged)]

    def _state(self, chain: ChainModel) -> str | None:
        status = self._status(chain)
        return None if status is None else status.state

    def _age(self, chain: ChainModel) -> None:
        """Deliver ``chain``'s messages (held back and undeleted ones too, no faults),
        one leaf's held back, until ``BLOCK`` and more landed after its first ops."""
        leaves = [n.id for n in chain.nodes.values() if not n.children and not n.applied and not n.uncertain]
        if not leaves:
            return
        armed = list(self.world.net.armed)
        self.world.net.armed.clear()
        try:
            self._drain(chain, {leaves[-1]}, until=lambda: bool(self._aged(chain)))
        finally:
            self.world.net.armed[:] = armed
            self.world.runs["chains aged for a late copy"] += 1

    @precondition(lambda self: bool(self.kept))
    @rule(i=st.integers(0, 200))
    def redeliver(self, i: int) -> None:
        """An undeleted record's visibility timeout passes: delivered again, however late."""
        self._visible_again(self.kept.pop(i % len(self.kept)))

    def _copy(self, original: Delivery) -> Delivery:
        record = original.record
        copy = sqs_record(
            record["body"],
            message_attributes=record["messageAttributes"],
            message_id=record["messageId"],
            receive_count=1,
            queue_arn=self.queue_arn,
        )
        return Delivery(copy, original.tag, original.node, synthetic=True)

    @precondition(lambda self: 0 < len(self.seen) < MAX_MESSAGES)
    @rule(i=st.integers(0, 10_000), late=st.booleans())
    def standard_queue_duplicate(self, i: int, late: bool) -> None:
        """A standard queue delivers a message twice: same id, each on its first receive;
        ``late``: the copy is held back (delivered at any later point)."""
        (self.held if late else self.pool).append(self._copy(self.seen[i % len(self.seen)]))

    @precondition(lambda self: 0 < len(self.seen) < MAX_MESSAGES)
    @rule(i=st.integers(0, 10_000))
    def dlq_redrive(self, i: int) -> None:
        """A message moved to the DLQ and redriven: sent again as a new message (receive
        count 1)."""
        record = self.seen[i % len(self.seen)].record
        attributes = {
            name: {"DataType": a["dataType"], "StringValue": a["stringValue"]}
            for name, a in record["messageAttributes"].items()
        }
        self.world.queues.send_message(
            QueueUrl=self.queue, MessageBody=record["body"], MessageAttributes=attributes
        )

    # -- rules: the network -----------------------------------------------------------------

    @precondition(lambda self: len(self.world.net.armed) < 3)
    @rule(kind=st.sampled_from(["lost", "crash"]), skip=st.integers(0, 5))
    def fault_on_a_send(self, kind: str, skip: int) -> None:
        """A lost SendMessage(Batch) response (botocore sends it again), or the function
        dying before a send: after its stamp, or between two batches."""
        self.world.net.arm(kind, SENDS, skip)

    @precondition(lambda self: len(self.world.net.armed) < 3)
    @rule(
        kind=st.sampled_from(["lost", "lost_every_attempt", "throttle", "throttle_every_attempt"]),
        skip=st.integers(0, 12),
    )
    def fault_on_a_dynamodb_write(self, kind: str, skip: int) -> None:
        self.world.net.arm(kind, WRITES, skip)

    @precondition(lambda self: len(self.world.net.armed) < 3)
    @rule(kind=st.sampled_from(WRITE_FAULTS), write=st.sampled_from(LABELS))
    def fault_on_the_next_write_of_a_kind(self, kind: str, write: str) -> None:
        """The next write of one kind (see :func:`once_model_faults.what_it_hit`): a
        history block, a trim, the completion's claim or mark, a fail-write are rare
        among writes, which a fault on the k-th next write seldom meets. A crash only
        where the function writes (the stream handler's crash between its claim and its
        mark is at-least-once, docs/lambda.md)."""
        if kind == "crash" and write in ("claim", "mark"):
            kind = "lost"  # a dead claimant's claim holds for its lease: at-least-once, documented
        self.world.net.arm(kind, WRITES, 0, hits=write)

    # -- rules: the stream ------------------------------------------------------------------

    @rule(batch_retried=st.booleans(), claim=st.sampled_from([None, "lost", "lost_every_attempt"]))
    def poll_the_stream(self, batch_retried: bool, claim: str | None) -> None:
        """One pass of the stream trigger; ``batch_retried``: each batch handed over twice;
        ``claim``: a fault on the pass's first completion claim."""
        if claim is not None:
            self.world.net.arm(claim, WRITES, 0, hits="claim")
        self.poller.twice = batch_retried
        try:
            self.poller.poll()
        except Exception as exc:
            raise Violation(f"the stream handler let {exc!r} escape") from exc
        finally:
            self.poller.twice = False

    @precondition(lambda self: bool(self.chains))
    @rule(
        i=st.integers(0, MAX_CHAINS - 1),
        batch_retried=st.booleans(),
        claim=st.sampled_from(["lost", "lost_every_attempt", "throttle_every_attempt"]),
    )
    def a_chain_completes_and_its_claim_meets_a_fault(self, i: int, batch_retried: bool, claim: str) -> None:
        """Every message of a chain goes through (held back and undeleted ones too,
        without faults), then the stream is polled with ``claim`` on the pass's first
        completion claim: its response lost (botocore's resend is refused: the claim is
        this claimant's own), lost on every attempt, or throttled past botocore's
        attempts (the stream's retry claims again)."""
        chain = self._chain(i)
        if not chain.started:
            return
        armed = list(self.world.net.armed)
        self.world.net.armed.clear()
        try:
            self._drain(chain, set())
        finally:
            self.world.net.armed[:] = armed
        self.world.runs[f"chains completed, then a claim {claim}"] += 1
        self.poll_the_stream(batch_retried, claim)

    @rule()
    def replay_the_stream(self) -> None:
        """The event source mapping re-created: every record from the stream's start."""
        replay = self.pipeline.stream_poller(self.world.streams, batch_size=1000)
        try:
            for _ in range(3):
                if not replay.poll():
                    break
        except Exception as exc:
            raise Violation(f"the stream handler let {exc!r} escape") from exc

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def count_the_steps(self) -> None:
        self.world.runs["steps (the first start included)"] += 1

    @invariant()
    def chains_agree_with_the_model(self) -> None:
        if not hasattr(self, "chains"):
            return
        fired = Counter(c.tag for c in self.fired)
        for chain in self.chains.values():
            status = self._status(chain)
            if status is None:
                if chain.created:
                    raise Violation(f"{chain.tag}: the chain is gone")
                continue
            chain.created = True
            where = f"{chain.tag} ({status.state}, value {status.value!r}, reason {status.reason!r})"
            if status.state == "failed":
                chain.failed = True
                if not (self.mode == "sum" and chain.overtaken and "negative" in (status.reason or "")):
                    raise Violation(f"{where}: failed, though no work failed nor overtook its start")
                if chain.acked_seen:
                    raise Violation(f"{where}: was acked, is failed now")
                if fired[chain.tag]:
                    raise Violation(f"{where}: failed, and its completion fired")
                continue
            if chain.acked_seen and status.state != "acked":
                raise Violation(f"{where}: was acked, is not any more")
            if status.state == "acked":
                chain.acked_seen = True
                missing = [n.id for n in chain.nodes.values() if not n.ran]
                if missing:
                    raise Violation(f"{where}: acked before {missing} ran")
            if self.mode == "sum" and status.state == "pending" and int(status.value) < 0 and not chain.limbo:
                raise Violation(f"{where}: a negative sum left pending")
            if chain.knows_value() and status.value != chain.expected(self.mode):
                raise Violation(
                    f"{where}: its value is not the sum of its open edges "
                    f"{sorted(n.id for n in chain.open_nodes())} (expected {chain.expected(self.mode)!r})"
                )
            if fired[chain.tag] > 1:
                raise Violation(f"{where}: its completion fired {fired[chain.tag]} times")
            if fired[chain.tag] and status.state != "acked":
                raise Violation(f"{where}: its completion fired, and it is not acked")

    # -- the end: faults gone, every message delivered --------------------------------------

    def teardown(self) -> None:
        try:
            if sys.exc_info()[1] is None and hasattr(self, "chains"):
                self._quiesce()
        finally:
            if hasattr(self, "chains"):
                self.world.net.disarm()
                self.world.queues.delete_queue(QueueUrl=self.queue)
                self.world.observer.delete_table(TableName=self.table)

    def _quiesce(self) -> None:
        self.world.net.disarm()
        for chain in self.chains.values():
            if not chain.started:
                self._start(chain)
                if not chain.started:
                    raise Violation(f"{chain.tag}: its start did not go through without faults")
        for _ in range(100):
            for delivery in self.kept:
                self._visible_again(delivery)
            self.kept.clear()
            self.pool += self.held
            self.held.clear()
            self._pull()
            if not self.pool:
                break
            while self.pool:
                self._process(self.pool.pop(0), keep=False)
        else:
            raise Violation("the queue still had messages after 100 rounds without faults")
        self.chains_agree_with_the_model()
        failed = set()
        for chain in self.chains.values():
            status = self._status(chain)
            if status is not None and status.state == "failed":  # its negative sum (checked above)
                failed.add(chain.tag)
                self.world.runs["chains failed by a negative sum"] += 1
                continue
            if chain.overtaken:
                self.world.runs["chains overtaken, acked"] += 1
            missing = [n.id for n in chain.nodes.values() if not n.ran]
            if missing or status is None or status.state != "acked":
                raise Violation(
                    f"{chain.tag}: every message delivered, and it is {self._reason(chain)}, "
                    f"value {None if status is None else status.value!r}; nodes that never ran: {missing}"
                )
        retried = _events(self.pipeline)["completions.retried"]
        for _ in range(40):
            if not self.poller.poll():
                break
        retries = _events(self.pipeline)["completions.retried"] - retried
        fired = Counter(c.tag for c in self.fired)
        for chain in self.chains.values():
            if fired[chain.tag] != (chain.tag not in failed):
                raise Violation(
                    f"{chain.tag}: acked, its completion fired {fired[chain.tag]} times after the stream "
                    f"was read to its end ({retries} batches retried on the way; the clock stays "
                    "within the claim's lease)"
                )
        if retries > len(self.chains) - len(failed):
            raise Violation(f"{retries} stream batches retried for {len(self.chains)} completions")
        if _events(self.pipeline)["completions.missed"]:
            raise Violation("a completion was missed")
        replay = self.pipeline.stream_poller(self.world.streams, batch_size=1000, twice=True)
        for _ in range(40):
            if not replay.poll():
                break
        if Counter(c.tag for c in self.fired) != fired:
            raise Violation("a replay of the whole stream fired a completion again")
        self.world.runs["examples with chains"] += 1
        self.world.runs["chains"] += len(self.chains)
        self.world.runs["messages"] += sum(len(c.nodes) for c in self.chains.values())
        for name in self.world.net.fired:
            event(f"fault: {name}")
            self.world.runs[f"fault {name}"] += 1


# -- the tests ------------------------------------------------------------------------------


@pytest.fixture
def world(request: pytest.FixtureRequest, moto_server: Any, instant_retries: None) -> Iterator[World]:
    backend, mode = request.param
    dynamodb_endpoint = (
        moto_server.endpoint_url if backend == "server" else request.getfixturevalue("ddblocal").endpoint_url
    )
    net = Network()
    observer = model_client("dynamodb", dynamodb_endpoint)
    found = World(
        backend=backend,
        mode=mode,
        net=net,
        dynamodb=net.attach(model_client("dynamodb", dynamodb_endpoint)),
        sqs=net.attach(model_client("sqs", moto_server.endpoint_url)),
        dynamodb2=net.attach(model_client("dynamodb", dynamodb_endpoint)),
        sqs2=net.attach(model_client("sqs", moto_server.endpoint_url)),
        observer=observer,
        queues=model_client("sqs", moto_server.endpoint_url),
        streams=model_client("dynamodbstreams", dynamodb_endpoint),
    )
    yield found
    net.close()


def _settings(backend: str) -> settings:
    return settings(
        max_examples=int(os.environ.get("XOR_ACK_ONCE_EXAMPLES", EXAMPLES[backend])),
        stateful_step_count=int(os.environ.get("XOR_ACK_ONCE_STEPS", STEPS)),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
        database=None,  # every run searches: none replays a failure an earlier run saved
        phases=[Phase.explicit, Phase.generate] if KILL else list(Phase),
    )


CASES = [(backend, mode) for backend in ("server", "ddblocal") for mode in ("sum", "xor")]


#: A long run (``make reliability``, or examples set by hand) is not held to pytest's timeout.
LONG = FULL or KILL or "XOR_ACK_ONCE_EXAMPLES" in os.environ


@pytest.mark.server
@pytest.mark.timeout(0 if LONG else 600)
@pytest.mark.parametrize("world", CASES, ids=[f"{b}-{m}" for b, m in CASES], indirect=True)
def test_the_serverless_layer_keeps_its_promises_against_an_adversarial_network(world: World) -> None:
    machine = type("ServerlessModel", (ServerlessModel,), {"world": world})
    started = time.perf_counter()
    try:
        run_state_machine_as_test(machine, settings=_settings(world.backend))
    finally:
        runs = world.runs
        faults = Counter(
            {kind: n for name, n in runs.items() for kind in FAULTS if name.startswith(f"fault {kind} ")}
        )
        record_figures(
            f"once model, {world.backend} {world.mode}",
            chains=runs["chains"],
            stamps=runs["messages"],
            faults={
                "lost_response": faults["lost"] + faults["lost_every_attempt"],
                "throttle": faults["throttle"] + faults["throttle_every_attempt"],
                "sigkill": faults["crash"],
            },
            examples=runs["examples"],
            seconds=round(time.perf_counter() - started, 1),
        )
        print(f"once model, {world.backend} {world.mode}: {dict(runs)}")
