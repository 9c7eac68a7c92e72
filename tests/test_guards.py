"""Issue 23: guards the docs promise whose removal no test noticed. Each test here fails
when its guard is removed (``scripts/mutations.py`` removes it and runs the test: see
docs/testing.md, "Mutation check"); the fourth surviving mutant, Spark's replay of an
expired root, is ``test_spark_wordcount.py::test_a_root_that_reads_expired_is_replayed``
(it needs the session's Spark).

- ``serverless/records.py``, stamp then send: a record whose stamp is refused or fails
  sends no child (``test_a_record_whose_stamp_is_refused_or_fails_sends_no_child``).
- ``core/stamping.py``, xor mode's lost response: a stamp with a random op id whose
  write landed, lost its response and was outrun by more than the window of other
  stamps is found in the history, not applied again
  (``test_an_xor_stamp_with_a_random_op_id_lost_and_outrun_is_applied_once``).
- the sum ``ADD``'s ``sum <> 0`` (``stores/dynamodb/codec.py``; ``core/rules.py`` for
  the memory store): a zero sum whose ``acked`` write is missing takes no more stamps
  (``test_a_zero_sum_whose_acked_write_is_missing_refuses_a_stamp``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from conftest import unique_table
from moto import mock_aws
from regression_clients import client, sum_tracker, tracker
from scripted import Script
from serverless_helpers import example, queue_depth

from xor_ack_dynamodb import CombiningTracker, LocalDynamoDB, MemoryAck, XorAckDynamoDB, errors, xor
from xor_ack_dynamodb.core.chain import random_op
from xor_ack_dynamodb.core.messages import Add, Written
from xor_ack_dynamodb.retry import RetryPolicy
from xor_ack_dynamodb.serverless import Context, Pipeline, PipelineConfig, process_sqs_batch

TAG = "database/file23"
REGION = "us-east-1"


# -- serverless: stamp, then send ------------------------------------------------------------


class _Pipeline:
    """A sum-mode pipeline on moto (a fresh queue and table), one chain started with one
    child: the child's record is the one the tests deliver."""

    def __init__(self) -> None:
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.queue = self.sqs.create_queue(QueueName="guards", Attributes={"VisibilityTimeout": "0"})[
            "QueueUrl"
        ]
        self.ddb = boto3.client("dynamodb", region_name=REGION)
        retry = RetryPolicy(max_attempts=2, initial_wait=0.001, max_wait=0.01)
        tracker = XorAckDynamoDB("guards", client=self.ddb, mode="sum", retry=retry)
        tracker.create_table()
        s3 = boto3.client("s3", region_name=REGION)
        self.pipeline = Pipeline(tracker, PipelineConfig(queue_url=self.queue), sqs=self.sqs, s3=s3)
        self.started = self.pipeline.start("job-1", children=[{"n": 0}])
        got = self.sqs.receive_message(
            QueueUrl=self.queue, MaxNumberOfMessages=1, AttributeNames=["All"], MessageAttributeNames=["All"]
        )["Messages"]
        [self.record] = example("run_local").lambda_records(got)

    def deliver(self, children: int) -> dict[str, Any]:
        """The child's record, through a handler that emits ``children`` children."""

        def handler(ctx: Context) -> None:
            for i in range(children):
                ctx.emit({"n": i + 1})

        result: dict[str, Any] = process_sqs_batch(
            {"Records": [self.record]}, handler, pipeline=self.pipeline
        )
        return result

    def depth(self) -> int:
        return queue_depth(self.sqs, self.queue)


@pytest.fixture
def serverless() -> Iterator[_Pipeline]:
    with mock_aws():
        yield _Pipeline()


def _deny_writes(client: Any) -> None:
    """IAM refuses the tracker's writes from now on: every PutItem and UpdateItem raises
    ``AccessDeniedException`` (a stamp that fails, in either mode)."""

    def deny(model: Any, **_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, model.name
        )

    for operation in ("PutItem", "UpdateItem"):
        client.meta.events.register(f"before-call.dynamodb.{operation}", deny)


@pytest.mark.parametrize("how", ["chain failed", "op id reused", "stamp fails"])
def test_a_record_whose_stamp_is_refused_or_fails_sends_no_child(serverless: _Pipeline, how: str) -> None:
    """Stamp, then send (docs/lambda.md, ``serverless/records.py``): the children of a
    record go out only after its stamp was applied (or found applied). A stamp refused
    because the chain is over, refused because the op id came back with another
    payload (a handler that is not deterministic), or failing outright sends nothing:
    the queue's depth is what it was. With the sends before the stamp, each would have
    sent its children for a chain that never records them."""
    tracker = serverless.pipeline.tracker
    expected: dict[str, Any] = {"batchItemFailures": []}
    if how == "chain failed":
        tracker.fail("job-1", "given up")
    elif how == "op id reused":
        assert serverless.deliver(children=2) == expected  # the first delivery: 2 children sent
    else:
        _deny_writes(serverless.ddb)
        expected = {"batchItemFailures": [{"itemIdentifier": serverless.record["messageId"]}]}
    before, status = serverless.depth(), tracker.status("job-1")
    assert serverless.deliver(children=3) == expected
    assert serverless.depth() == before  # no child sent
    after = tracker.status("job-1")
    if how == "op id reused":
        assert after.state == "failed" and "not deterministic" in (after.reason or "")
    else:
        assert (after.state, after.value, after.version) == (status.state, status.value, status.version)
    events = serverless.pipeline.stats.events
    outcome = {"chain failed": "dropped", "op id reused": "failed_chain", "stamp fails": "retried"}[how]
    assert events[f"records.{outcome}"] == 1


# -- xor mode: a lost response, outrun by more than the window ---------------------------------


@pytest.mark.server
def test_an_xor_stamp_with_a_random_op_id_lost_and_outrun_is_applied_once(moto_server: LocalDynamoDB) -> None:
    """Xor mode, a stamp without an op id (a random one: only its own resends can be
    copies). Its write lands, its response is lost, 60 other stamps land (past the
    window of ``max_ops=8`` and a block of 40: the op moved to history); botocore does
    not resend it (a stamp's write is sent once, resend.py). The retry must look for its
    own op since the chain it based the write on, in the window and the history
    (docs/concepts.md: never a second application): found, a duplicate. Without that
    check the retry's delivery is a first one (nothing to look for) and the stamp is
    applied twice, XOR cancelling it."""
    table = unique_table("guards")
    raw = client(moto_server)
    ack = tracker(moto_server, table, client=raw, max_ops=8)
    ack.create_table()
    other = tracker(moto_server, table, max_ops=8)
    root = ack.new_edge()
    kids = [ack.new_edge() for _ in range(80)]
    ack.create(TAG, root)
    ack.stamp(TAG, finished=[root], started=kids, op_id="root")

    def crowd() -> None:
        for i, kid in enumerate(kids[1:61]):
            other.stamp(TAG, kid, op_id=f"other-{i}")

    script = Script(raw)
    script.lose("PutItem", after=crowd)
    result = ack.stamp(TAG, kids[0])  # no op id: a random one
    assert script.pending == 0
    expected = xor(*kids[61:])
    assert other.status(TAG).value == expected  # kids[0] applied exactly once, by the lost copy
    assert result == expected and result.duplicate and not result.acked
    assert ack.stats.events["history_reads"] >= 1  # found in the history, not the window


def test_a_combined_write_lost_and_outrun_is_found_by_its_marker(moto_server: LocalDynamoDB) -> None:
    """A ``CombiningTracker`` write carrying 8 stamps without op ids (random ones: only
    the write's own copies can exist) lands, its response is lost and 60 other stamps
    push its ops out of the window (``max_ops=4``); botocore does not resend it (a
    stamp's write is sent once, resend.py). The library's retry must find the write's
    marker in the history (docs/concepts.md: a combined write is recognised by its
    marker) and not apply the 8 again, which would cancel them."""
    table = unique_table("guards")
    raw = client(moto_server)
    plain = tracker(moto_server, table, client=raw, max_ops=4)
    plain.create_table()
    other = tracker(moto_server, table, max_ops=4)
    combiner = CombiningTracker(plain)
    root = plain.new_edge()
    kids = [plain.new_edge() for _ in range(9 + 60)]
    plain.create(TAG, root)
    plain.stamp(TAG, xor(root, *kids), op_id="root")
    holding, queued = threading.Event(), threading.Event()

    def hold_the_leader() -> None:  # the leader's write waits until 8 stamps queue behind it
        holding.set()
        deadline = time.monotonic() + 10
        while combiner.waiting(TAG) < 8 and time.monotonic() < deadline:
            time.sleep(0.002)
        queued.set()

    def crowd() -> None:
        for i, kid in enumerate(kids[9:]):
            other.stamp(TAG, kid, op_id=f"other-{i}")

    script = Script(raw)
    script.before("PutItem", hold_the_leader)
    script.lose("PutItem", after=crowd)  # the combined write: lost, and not resent
    results: dict[int, Any] = {}

    def stamp(i: int) -> None:
        try:
            results[i] = combiner.stamp(TAG, kids[i])
        except Exception as exc:  # recorded, asserted below
            results[i] = exc

    leader = threading.Thread(target=stamp, args=(0,))
    leader.start()
    assert holding.wait(10)
    followers = [threading.Thread(target=stamp, args=(i,)) for i in range(1, 9)]
    for t in followers:
        t.start()
    for t in [leader, *followers]:
        t.join(60)
    assert queued.is_set() and script.pending == 0
    assert all(not isinstance(r, Exception) for r in results.values()), results
    assert other.status(TAG).state == "acked"  # every kid applied exactly once
    assert plain.stats.events["history_reads"] >= 1


# -- sum mode: the ADD's sum <> 0 ---------------------------------------------------------------


@pytest.mark.parametrize("backend", ["memory", "inproc"])
def test_a_zero_sum_whose_acked_write_is_missing_refuses_a_stamp(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """Sum mode: the completing writer's ``ADD`` took the sum to zero and it crashed
    before storing ``acked`` (the store holds exactly what that ``ADD`` left: pending,
    sum 0). docs/concepts.md: an acked chain takes no stamps (``TagAcked``), and a zero
    sum reads acked whether or not that write landed. A further stamp (a new op) must
    be refused by the ``ADD``'s own condition, ``sum <> 0``: ``state = pending`` does
    not refuse it here. Without it the stamp reopens a chain whose completer already
    returned ``acked``. The same holds for ``fail`` and ``touch`` (their condition's
    ``sum <> 0``)."""
    ack = sum_tracker(None if backend == "memory" else request.getfixturevalue("inproc_client"), "zero")
    ack.create(TAG, 100)
    ack.stamp(TAG, finished=[100], started=[7, 5], op_id="root")
    assert ack.stamp(TAG, finished=[7], op_id="a") == 5
    # The completer: its ADD lands (sum 0), then it dies before the acked write.
    reply = ack.store.execute(Add(TAG, -5, random_op(), None, int(time.time())))
    assert isinstance(reply, Written) and reply.chain is not None
    assert (reply.chain.state, reply.chain.value) == ("pending", 0)
    assert ack.status(TAG).state == "acked"
    with pytest.raises(errors.TagAcked):
        ack.stamp(TAG, finished=[5], started=[9], op_id="late")
    with pytest.raises(errors.TagAcked):  # nor may it be failed or touched (_LIVE's sum <> 0)
        ack.fail(TAG, "too late")
    with pytest.raises(errors.TagAcked):
        ack.touch(TAG)
    status = ack.status(TAG)
    assert (status.state, status.value) == ("acked", 0)


# -- issue 18's guards the mutation run found undefended ----------------------------------------


def _tracker(request: pytest.FixtureRequest, backend: str, mode: str, **options: Any) -> Any:
    if backend == "memory":
        return MemoryAck(mode=mode, ttl=3600, **options)
    ack = XorAckDynamoDB(
        unique_table("guards"), client=request.getfixturevalue("inproc_client"), mode=mode, **options
    )
    ack.create_table()
    return ack


def _finish(ack: Any, edge: Any, op_id: str, **options: Any) -> Any:
    if ack.mode == "sum":
        return ack.stamp(TAG, finished=[edge], op_id=op_id, **options)
    return ack.stamp(TAG, edge, op_id=op_id, **options)


@pytest.mark.parametrize("backend, mode", [("memory", "sum"), ("inproc", "sum"), ("memory", "xor")])
def test_a_child_sent_again_by_its_parent_is_applied_once(
    request: pytest.FixtureRequest, backend: str, mode: str
) -> None:
    """Every delivery of a child is checked since its parent's position (``after``).
    Here the child's original landed and 60 other stamps pushed its op out of the
    window; the parent is redelivered and sends the child again. The copy must be found
    in history (a duplicate); a check of the window alone applies it twice."""
    ack = _tracker(request, backend, mode)
    root, child = ack.new_edge(), ack.new_edge()
    others = [ack.new_edge() for _ in range(60)]
    ack.create(TAG, root)
    if mode == "sum":
        parent = ack.stamp(TAG, finished=[root], started=[child, *others], op_id="parent")
    else:
        parent = ack.stamp(TAG, xor(root, child, *others), op_id="parent")
    _finish(ack, child, "child", after=parent.position)
    for i, edge in enumerate(others[:-1]):
        _finish(ack, edge, f"other-{i}")
    fresh = (  # another process: it reads the history from the store
        MemoryAck(share=ack, mode=mode, ttl=3600)
        if backend == "memory"
        else XorAckDynamoDB(ack.table, client=ack.client, mode=mode)
    )
    again = _finish(fresh, child, "child", after=parent.position)
    assert again.duplicate and not again.acked
    assert ack.status(TAG).value == others[-1] == again  # the child applied once


@pytest.mark.parametrize("mode", ["xor", "sum"])
def test_a_missing_history_block_raises_outcome_unknown(mode: str) -> None:
    """A duplicate check that needs a history block that is gone (TTL took it, a write
    was lost) cannot tell whether the op landed: ``OutcomeUnknown``, nothing written
    (issue 18: never a guess). Without that, a missing block reads as "not there" and
    the stamp is applied a second time."""
    ack = MemoryAck(mode=mode, ttl=3600)
    root = ack.new_edge()
    kids = [ack.new_edge() for _ in range(61)]
    ack.create(TAG, root)
    if mode == "sum":
        ack.stamp(TAG, finished=[root], started=kids, op_id="root")
    else:
        ack.stamp(TAG, xor(root, *kids), op_id="root")
    for i, kid in enumerate(kids[:60]):
        _finish(ack, kid, f"kid-{i}")  # kid-0 .. kid-39 move to history block 0
    chain = ack.store.peek(TAG)
    assert chain is not None and chain.lineage is not None
    assert ack.store.drop_history(TAG, chain.lineage, 0)
    before = ack.status(TAG)
    with pytest.raises(errors.OutcomeUnknown):  # a redelivery, in a process that never saw the block
        _finish(MemoryAck(share=ack, mode=mode, ttl=3600), kids[0], "kid-0")
    after = ack.status(TAG)
    assert (after.value, after.version) == (before.value, before.version)  # nothing written


def test_create_without_replace_expired_keeps_a_timed_out_chain() -> None:
    """``create(..., replace_expired=False)`` (issue 18; the streaming path uses it): a
    chain that timed out is not overwritten (``TagExists``) and still reads expired,
    where a plain create would take the tag over."""
    from conftest import Clock

    clock = Clock()
    ack = MemoryAck(ttl=60, clock=clock)
    ack.create(TAG, ack.new_edge())
    clock.advance(120)
    with pytest.raises(errors.TagExists):
        ack.create(TAG, ack.new_edge(), replace_expired=False)
    assert ack.status(TAG).state == "expired"
    fresh = ack.new_edge()
    assert ack.create(TAG, fresh) == fresh  # the default replaces it


@pytest.mark.spark  # imports the Spark layer (pyspark)
def test_settle_never_reports_a_chain_of_another_owner_acked() -> None:
    """spark.md: a root is reported ``acked`` only when its chain was made by the run;
    a chain another writer put under one of the run's tags (here acked by it) is
    reported ``failed`` with the reason ``conflict`` and left alone. The executors'
    creates usually see such a chain first (``TagExists``); settle's owner check is
    what holds when the chain was replaced after the run's create (it expired and a
    foreign writer took the tag over). The driver side only: no Spark needed."""
    from xor_ack_dynamodb.spark.chains import settle
    from xor_ack_dynamodb.spark.outcomes import CONFLICT

    ack = MemoryAck(ttl=3600)
    root = ack.new_edge()
    ack.create(TAG, root, owner="intruder")
    assert ack.stamp(TAG, root, owner="intruder").acked
    [attempt] = settle(ack, [TAG], owner="run-1").values()
    assert (attempt.state, attempt.reason) == ("failed", CONFLICT)
    assert ack.status(TAG).state == "acked"  # left as it is
