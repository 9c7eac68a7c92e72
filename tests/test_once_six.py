"""Issue 31's six scenarios, each replayed exactly as it was found on 41ecf98: the
network is real (a moto server, DynamoDB Local, dynalite) and the fault is a botocore
hook on the client (``before-send.<service>.<Operation>``), as DESIGN.md section 16
says: a lost response is the request sent for real, then ``ReadTimeoutError`` (botocore's
own retry handler decides to send it again); a throttle is DynamoDB's HTTP 400.

1. A child whose ``SendMessageBatch`` response was lost is in SQS twice, both copies
   with receive count 1: the second copy, processed after 50 other stamps, is a
   duplicate (it was applied again, both modes).
2. A copy of a child whose first ADD is throttled past botocore's attempts keeps its
   bound (it was retried from the tracker's view, and applied again).
3. A completion claim resent by botocore after its response was lost is the claimant's
   own (it read as another's live claim: nothing fired for a lease). Also: a claim,
   mark or release failing past the whole retry budget waits out the lease, then fires
   (docs/lambda.md's bound, at it and just past it).
4. A negative sum whose fail-write is throttled past botocore's attempts still ends
   failed, and the stamp says so (it stayed pending and returned a duplicate).
5. A redelivered applied op after the chain acked is a duplicate (``TagAcked``).
6. A finish that overtook its start, whose start lands before the fail-write: the
   chain acks and the finishing stamp returns its value (``TagFailed``).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import ClientError, ReadTimeoutError
from botocore.httpsession import URLLib3Session
from conftest import unique_table

from xor_ack_dynamodb import LocalDynamoDB, MemoryAck, RetryPolicy, XorAckDynamoDB, errors
from xor_ack_dynamodb.serverless import Completion, Pipeline, PipelineConfig
from xor_ack_dynamodb.serverless.completion import fire_once
from xor_ack_dynamodb.serverless.errors import CompletionPending, TargetFailed
from xor_ack_dynamodb.serverless.stream import read_change
from xor_ack_dynamodb.stores.dynamodb.clients import dynamodb_client
from xor_ack_dynamodb.stores.dynamodb.codec import error_code
from xor_ack_dynamodb.testing import records_from_messages
from xor_ack_dynamodb.testing.endpoint import LOCAL_KEY_ID, LOCAL_REGION, LOCAL_SECRET

pytestmark = pytest.mark.server

BACKENDS = ("server", "ddblocal", "dynalite")


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_: Any, **__: Any) -> Any:
        yield self._body


@dataclass
class _Fault:
    kind: str  # lose | throttle (every attempt of one request) | outage (every request) | before
    operation: str
    match: Callable[[bytes], bool]
    effect: Callable[[], Any] | None = None
    held: bool = False


class Faults:
    """Faults on one client's next requests (see the module doc), each armed for the
    first request of ``operation`` whose body ``match`` accepts."""

    def __init__(self, client: Any) -> None:
        self._http = URLLib3Session(timeout=30)
        self._armed: list[_Fault] = []
        self.fired: list[str] = []
        service = client.meta.service_model.service_id.hyphenize()
        client.meta.events.register(f"before-send.{service}", self._send)

    def lose(self, operation: str, match: Callable[[bytes], bool] = lambda _: True) -> Faults:
        self._armed.append(_Fault("lose", operation, match))
        return self

    def throttle(self, operation: str, match: Callable[[bytes], bool] = lambda _: True) -> Faults:
        self._armed.append(_Fault("throttle", operation, match))
        return self

    def outage(self, operation: str, match: Callable[[bytes], bool] = lambda _: True) -> Faults:
        """Throttle every request of ``operation`` that ``match`` accepts, each attempt of
        each call, until :meth:`disarm` (one ``fired`` entry per request)."""
        self._armed.append(_Fault("outage", operation, match))
        return self

    def before(self, operation: str, effect: Callable[[], Any], match: Callable[[bytes], bool]) -> Faults:
        self._armed.append(_Fault("before", operation, match, effect))
        return self

    def _send(self, request: AWSPreparedRequest, event_name: str, **_: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        body = request.body if isinstance(request.body, bytes) else str(request.body or "").encode()
        for fault in list(self._armed):
            if fault.operation != operation or not fault.match(body):
                continue
            if fault.held:  # throttled: botocore's later attempts are too, the next call's not
                if _attempt(request) > 1:
                    return _throttled(request.url)
                self._armed.remove(fault)
                return None
            self.fired.append(f"{fault.kind} {operation}")
            if fault.kind == "outage":
                return _throttled(request.url)
            if fault.kind == "throttle":
                fault.held = True
                return _throttled(request.url)
            self._armed.remove(fault)
            if fault.kind == "before":
                assert fault.effect is not None
                fault.effect()
                return None
            self._http.send(request).content  # noqa: B018 - the server applied it
            raise ReadTimeoutError(endpoint_url=request.url)
        return None

    def disarm(self) -> None:
        self._armed.clear()


def _attempt(request: AWSPreparedRequest) -> int:
    """Which of botocore's attempts of one call ``request`` is (its ``amz-sdk-request``)."""
    header = request.headers.get("amz-sdk-request", b"")
    text = header.decode() if isinstance(header, bytes) else str(header)
    fields = dict(part.strip().split("=", 1) for part in text.split(";") if "=" in part)
    assert "attempt" in fields, f"botocore sent no attempt number: {text!r}"
    return int(fields["attempt"])


def _throttled(url: str) -> AWSResponse:
    code = "ProvisionedThroughputExceededException"
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": "injected"}).encode()
    headers = HTTPHeaders()
    headers["Content-Type"] = "application/x-amz-json-1.0"
    return AWSResponse(url, 400, headers, _Raw(body))


class Died(BaseException):
    """The function died here (no ``except Exception`` catches it)."""


def _die() -> None:
    raise Died


def _is_fail_write(body: bytes) -> bool:
    return b'"failed"' in body and b"UpdateExpression" in body


@pytest.fixture(params=BACKENDS)
def dynamodb(request: pytest.FixtureRequest) -> Iterator[Callable[[], Any]]:
    """A factory of clients of one backend (each its own hooks)."""
    server = request.getfixturevalue({"server": "moto_server"}.get(request.param, request.param))
    yield server.client


@pytest.fixture
def sqs(moto_server: LocalDynamoDB) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=moto_server.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def _queue(sqs: Any) -> str:
    found = sqs.create_queue(QueueName=unique_table("six"), Attributes={"VisibilityTimeout": "600"})
    url: str = found["QueueUrl"]
    return url


def _tracker(client: Any, mode: str, table: str | None = None) -> XorAckDynamoDB:
    tracker = XorAckDynamoDB(table or unique_table("six"), client=client, mode=mode)
    if table is None:
        tracker.create_table()
    return tracker


def leaf(ctx: Any) -> None:
    """A child's work: nothing to emit."""


def emit_one(ctx: Any) -> None:
    """A parent's work: one child, the same on every delivery."""
    if json.loads(ctx.body).get("parent"):
        ctx.emit({"i": "child"})


def _receive(sqs: Any, queue: str) -> list[dict[str, Any]]:
    """Every message in the queue (each received once: the visibility is long)."""
    out: list[dict[str, Any]] = []
    while got := sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    ).get("Messages", []):
        out.extend(got)
    return out


def _process(pipeline: Pipeline, messages: list[dict[str, Any]], handler: Any = leaf) -> None:
    for start in range(0, len(messages), 10):
        records = records_from_messages(messages[start : start + 10])
        assert pipeline.process_sqs_batch({"Records": records}, handler)["batchItemFailures"] == []


# -- 1 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sum", "xor"])
def test_1_a_child_sent_twice_by_botocore_is_applied_once(
    dynamodb: Callable[[], Any], sqs: Any, mode: str
) -> None:
    """The start's first ``SendMessageBatch`` (children 0 to 9) is applied by SQS and
    its response lost: botocore sends it again, so SQS holds two copies of each, both
    delivered with receive count 1 and no mark. The second copies, processed after 50
    other stamps (their originals in history), are duplicates; the chain acks once."""
    tracker = _tracker(dynamodb(), mode)
    queue = _queue(sqs)
    pipeline = Pipeline(tracker, PipelineConfig(queue_url=queue, metrics_namespace=None), sqs=sqs)
    Faults(sqs).lose("SendMessageBatch")
    pipeline.start("object-1", [{"i": i} for i in range(61)], start_id="upload-1")
    messages = _receive(sqs, queue)
    counts = Counter(m["Body"] for m in messages)
    assert sorted(counts.values()) == [1] * 51 + [2] * 10  # the lost batch is there twice
    assert all(m["Attributes"]["ApproximateReceiveCount"] == "1" for m in messages)
    seen: set[str] = set()
    firsts, copies, closer = [], [], []
    for m in messages:
        if json.loads(m["Body"])["i"] == 60:
            closer.append(m)
        elif m["Body"] in seen:
            copies.append(m)
        else:
            seen.add(m["Body"])
            firsts.append(m)
    firsts.sort(key=lambda m: json.loads(m["Body"])["i"])  # the lost batch's children first
    _process(pipeline, firsts)
    assert tracker.status("object-1").state == "pending"
    _process(pipeline, copies)
    events = pipeline.stats.events
    assert events["stamps.duplicate"] == 10 and events["stamps.applied"] == 60
    assert tracker.status("object-1").state == "pending"  # nothing applied twice: one edge open
    _process(pipeline, closer)
    status = tracker.status("object-1")
    assert status.state == "acked" and pipeline.stats.events["stamps.applied"] == 61


# -- 2 ------------------------------------------------------------------------------------


def test_2_a_throttled_copy_keeps_its_bound(dynamodb: Callable[[], Any], sqs: Any) -> None:
    """A parent's child is sent, the parent is redelivered and sends it again; the copy
    lands, 50 other stamps move it to history, then the original arrives (receive count
    1) and its first ADD is throttled past every botocore attempt. Its retry is still
    checked from its parent's position: a duplicate, the chain exact (on 41ecf98 the
    retry was bounded by the tracker's view and applied the child again: the sum went
    negative)."""
    client = dynamodb()
    tracker = _tracker(client, "sum")
    queue = _queue(sqs)
    pipeline = Pipeline(tracker, PipelineConfig(queue_url=queue, metrics_namespace=None), sqs=sqs)
    bodies = [{"parent": True}] + [{"i": i} for i in range(51)]
    pipeline.start("object-2", bodies, start_id="upload-2")
    messages = _receive(sqs, queue)
    parent = next(m for m in messages if json.loads(m["Body"]).get("parent"))
    others = [m for m in messages if m is not parent]
    _process(pipeline, [parent], emit_one)  # stamps, sends the child
    child = _receive(sqs, queue)
    assert [json.loads(m["Body"]) for m in child] == [{"i": "child"}]
    _process(pipeline, [parent], emit_one)  # the parent redelivered: a duplicate, sends the child again
    (copy,) = _receive(sqs, queue)
    _process(pipeline, [copy])
    _process(pipeline, others[:50])  # the child's op moves to history
    Faults(client).throttle("UpdateItem")
    _process(pipeline, child)  # the original: its first ADD throttled, then retried
    events = pipeline.stats.events
    assert events["stamps.duplicate"] == 2 and "records.failed_chain" not in events
    assert tracker.status("object-2").state == "pending"
    _process(pipeline, others[50:])
    assert tracker.status("object-2").state == "acked"


# -- 3 ------------------------------------------------------------------------------------


def _completed(client: Any, tag: str) -> tuple[XorAckDynamoDB, Completion]:
    """A sum chain acked by its one stamp, and its completion."""
    tracker = _tracker(client, "sum")
    tracker.create(tag, 5)
    assert tracker.stamp(tag, finished=[5]).acked
    return tracker, Completion(tag, "", "sum", 0.0)


def _fire(tracker: XorAckDynamoDB, fired: list[Completion], completion: Completion, now: float = 1e9) -> str:
    """One stream delivery's firing of ``completion`` (a new claimant, a 300 s lease)."""
    return fire_once(tracker, [fired.append], completion, now=now, lease=300)


def test_3_a_resent_completion_claim_is_its_own(dynamodb: Callable[[], Any]) -> None:
    """The claim's ``UpdateItem`` is applied and its response lost; botocore's resend is
    refused (the claim is there): it is this claimant's own, so the completion fires at
    once, exactly once."""
    client = dynamodb()
    tracker, completion = _completed(client, "done-3")
    fired: list[Completion] = []
    faults = Faults(client).lose("UpdateItem", match=lambda body: b"cmpl" in body)
    assert _fire(tracker, fired, completion) == "fired"
    assert faults.fired == ["lose UpdateItem"] and fired == [completion]
    again = _fire(tracker, fired, completion, now=1e9 + 1)
    assert again == "repeated" and fired == [completion]


def test_3_a_claim_whose_every_attempt_lost_its_response_fires_at_once(dynamodb: Callable[[], Any]) -> None:
    """Every botocore attempt of the claim is applied or refused with its response lost:
    the claim is read back and found this claimant's own, so the completion fires in
    this call, not after the stream's retries have waited out the lease."""
    client = dynamodb()
    tracker, completion = _completed(client, "done-3b")
    fired: list[Completion] = []
    faults = Faults(client)
    for _ in range(20):  # more than any backend's client attempts (the mark carries no :until)
        faults.lose("UpdateItem", match=lambda body: b"cmpl" in body and b":until" in body)
    assert _fire(tracker, fired, completion) == "fired"
    assert len(faults.fired) > 1 and set(faults.fired) == {"lose UpdateItem"} and fired == [completion]
    faults.disarm()
    again = _fire(tracker, fired, completion, now=1e9 + 1)
    assert again == "repeated" and fired == [completion]


def test_3_a_mark_throttled_past_every_attempt_is_sent_again(dynamodb: Callable[[], Any]) -> None:
    """The mark that follows the targets is throttled past every botocore attempt (found
    by tests/test_once_model.py): the guard sends it again under the tracker's retry
    budget, as the tracker does its own writes, so the completion is marked in this call.
    Before, botocore's ``ClientError`` escaped after the targets had run, and the stream's
    retry, a new claimant, got ``CompletionPending`` until the lease ran out, then fired
    a second time."""
    client = dynamodb()
    tracker, completion = _completed(client, "done-3c")
    fired: list[Completion] = []
    faults = Faults(client).throttle("UpdateItem", match=lambda body: b":fired" in body)  # the mark
    assert _fire(tracker, fired, completion) == "fired"
    assert faults.fired == ["throttle UpdateItem"] and fired == [completion]
    faults.disarm()
    again = _fire(tracker, fired, completion, now=1e9 + 1)
    assert again == "repeated" and fired == [completion]


def test_3_a_claim_landed_then_throttled_is_recognised(dynamodb: Callable[[], Any]) -> None:
    """One claim call: its first attempt lands and its response is lost, the second is
    refused (the claim is there) and its response lost too, the last is throttled (found
    by tests/test_once_model.py). The throttle must not hide the landed claim: the guard
    sends the claim again, finds it its own, and fires in this call."""
    client = dynamodb()
    tracker, completion = _completed(client, "done-3d")
    fired: list[Completion] = []

    def claim(body: bytes) -> bool:
        return b"cmpl" in body and b":until" in body

    faults = Faults(client).lose("UpdateItem", claim).lose("UpdateItem", claim).throttle("UpdateItem", claim)
    assert _fire(tracker, fired, completion) == "fired"
    assert faults.fired == ["lose UpdateItem", "lose UpdateItem", "throttle UpdateItem"]
    assert fired == [completion]


#: A retry budget spent in milliseconds: 4 attempts, one HTTP request each (no botocore
#: resend, so its backoff of up to seconds per throttle is not waited out).
SHORT = RetryPolicy(max_attempts=4, max_seconds=10.0, initial_wait=0.001, max_wait=0.01, http_attempts=1)
#: The pipeline's clock at the first delivery, its lease and skew margin. The lease is
#: decided on the numbers the pipeline's clock gives (DynamoDB compares the stored ones),
#: so the clock is moved: the bound is run to the millisecond, nothing is slept.
T0, LEASE, SKEW = 1_000_000_000.0, 60.0, 5.0


@dataclass
class _Stream:
    """A completed chain of a pipeline (short budget, virtual clock) and its stream
    record, delivered by hand as Lambda delivers it (dynalite has no stream)."""

    pipeline: Pipeline
    client: Any
    table: str
    record: dict[str, Any]
    completion: Completion
    fired: list[Completion]
    clock: list[float]
    caplog: pytest.LogCaptureFixture

    def deliver(self, at: float) -> BaseException | None:
        """The record delivered at ``at`` on the pipeline's clock: None when the handler
        reports it done, else the error the handler retries it for (the stream retries
        the shard from this record)."""
        self.clock[0] = at
        self.caplog.clear()
        with self.caplog.at_level(logging.WARNING, logger="xor_ack_dynamodb.serverless"):
            response = self.pipeline.process_chain_stream({"Records": [self.record]})
        if response == {"batchItemFailures": []}:
            return None
        assert response == {"batchItemFailures": [{"itemIdentifier": "7"}]}
        (warned,) = [r for r in self.caplog.records if "not fired yet" in r.getMessage()]
        assert isinstance(warned.args, tuple)
        error = warned.args[1]
        assert isinstance(error, BaseException)
        return error

    def item(self) -> dict[str, Any]:
        key = {"tagID": {"S": self.completion.tag}}
        found: dict[str, Any] = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True)[
            "Item"
        ]
        return found


@pytest.fixture(params=BACKENDS)
def stream(request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture) -> _Stream:
    server = request.getfixturevalue({"server": "moto_server"}.get(request.param, request.param))
    client = dynamodb_client(
        region=LOCAL_REGION,
        endpoint_url=server.endpoint_url,
        aws_access_key_id=LOCAL_KEY_ID,
        aws_secret_access_key=LOCAL_SECRET,
        retry=SHORT,
    )
    tracker = XorAckDynamoDB(unique_table("six"), client=client, mode="sum", retry=SHORT)
    tracker.create_table()
    clock, fired = [T0], []
    pipeline = Pipeline(  # the completion lease's skew margin: the tracker's (SKEW)
        tracker,
        PipelineConfig(completion_lease_seconds=LEASE, metrics_namespace=None),
        on_complete=[fired.append],
        clock=lambda: clock[0],
    )
    started = pipeline.start("done-3e", start_id="upload-3e")  # no children: complete at once
    item = client.get_item(TableName=tracker.table, Key={"tagID": {"S": "done-3e"}}, ConsistentRead=True)
    record = {
        "eventID": "e-7",
        "eventName": "INSERT",
        "dynamodb": {"SequenceNumber": "7", "NewImage": item["Item"]},
    }
    change = read_change(record, pipeline.item_reader())
    assert change is not None and change.chain.owner == started.owner
    completion = Completion("done-3e", started.owner, "sum", float(change.chain.updated_at or 0))
    return _Stream(pipeline, client, tracker.table, record, completion, fired, clock, caplog)


def _throttle(error: BaseException | None) -> bool:
    return isinstance(error, ClientError) and error_code(error) == "ProvisionedThroughputExceededException"


def _is_claim(body: bytes) -> bool:
    return b"cmpl" in body and b":until" in body


@pytest.mark.parametrize("failing", ["mark", "release", "claim"])
def test_3_a_guard_request_failing_past_the_whole_budget_waits_for_the_lease(
    stream: _Stream, failing: str
) -> None:
    """A guard request fails for longer than the tracker's whole retry budget (every
    attempt throttled), after this delivery's claim landed: the mark after the targets
    ran, the release after a target failed, or a claim whose response was lost and
    whose read-back is throttled too. The handler reports the record for retry (the
    throttle's ``ClientError``); the claim is left on the item, so every delivery until
    the lease plus the skew margin has passed on its clock finds it live
    (``CompletionPending``), the first one after takes it over and fires: twice in all
    when the mark failed (the doc's "then fire again"), once otherwise; then never again."""
    calls: list[Completion] = []

    def target(completion: Completion) -> None:
        calls.append(completion)
        if failing == "release" and len(calls) == 1:
            raise TargetFailed("the completion queue is down", tag=completion.tag)
        stream.fired.append(completion)

    stream.pipeline.targets = [target]
    faults = Faults(stream.client)
    spent = ["outage UpdateItem"] * SHORT.max_attempts  # every attempt of the budget
    if failing == "mark":
        faults.outage("UpdateItem", match=lambda body: b":fired" in body)
    elif failing == "release":
        faults.outage("UpdateItem", match=lambda body: b"REMOVE" in body)
    else:  # the first attempt lands unseen, the others and every read-back are throttled
        faults.lose("UpdateItem", _is_claim).outage("UpdateItem", _is_claim).outage("GetItem")
        spent = ["lose UpdateItem", *spent[1:], *["outage GetItem"] * SHORT.max_attempts]

    error = stream.deliver(T0)
    assert _throttle(error) and faults.fired == spent
    assert stream.fired == ([stream.completion] if failing == "mark" else [])
    faults.disarm()  # the outage is over; the claim is still there
    item = stream.item()
    assert (item["cmpl"]["S"], float(item["cmpl_until"]["N"])) == ("claimed", T0 + LEASE)

    for at in (T0 + 1, T0 + LEASE, T0 + LEASE + SKEW):  # the last: exactly at the bound
        assert isinstance(stream.deliver(at), CompletionPending), at
    assert stream.fired == ([stream.completion] if failing == "mark" else [])
    assert stream.deliver(T0 + LEASE + SKEW + 0.01) is None  # just past it
    assert stream.fired == [stream.completion] * (2 if failing == "mark" else 1)
    assert stream.item()["cmpl"]["S"] == "fired"
    assert stream.deliver(T0 + LEASE + SKEW + 1) is None  # a later copy does nothing
    assert len(stream.fired) == (2 if failing == "mark" else 1) and all(
        c.id == stream.completion.id for c in stream.fired
    )
    assert len(calls) == (1 if failing == "claim" else 2)  # the release's first call failed
    events = stream.pipeline.stats.events
    assert (events["completions.fired"], events["completions.repeated"]) == (1, 1)
    assert events["completions.retried"] == 4


def test_3_a_claim_failing_past_the_whole_budget_before_it_landed_fires_at_the_next_delivery(
    stream: _Stream,
) -> None:
    """Every attempt of the claim is throttled, none lands (the read-back finds no
    claim): nothing is left on the item, so the handler's retry fires at once, without
    waiting for any lease, exactly once."""
    faults = Faults(stream.client).outage("UpdateItem", _is_claim)
    assert _throttle(stream.deliver(T0)) and len(faults.fired) == SHORT.max_attempts
    assert stream.fired == [] and "cmpl" not in stream.item()
    faults.disarm()
    assert stream.deliver(T0 + 1) is None and stream.fired == [stream.completion]
    assert stream.deliver(T0 + 2) is None and stream.fired == [stream.completion]


# -- 4 ------------------------------------------------------------------------------------


def test_4_a_negative_sum_ends_failed_when_its_fail_write_is_throttled(dynamodb: Callable[[], Any]) -> None:
    """A finish of an edge never started takes the sum below zero; the fail-write that
    follows is throttled past every botocore attempt. The call sends it again: the chain
    ends failed and the stamp raises ``TagFailed``; a redelivery is a duplicate."""
    client = dynamodb()
    tracker = _tracker(client, "sum")
    tracker.create("neg-4", 5)
    faults = Faults(client).throttle("UpdateItem", match=_is_fail_write)
    with pytest.raises(errors.TagFailed):
        tracker.stamp("neg-4", finished=[7], op_id="overtook")
    assert faults.fired == ["throttle UpdateItem"]
    status = tracker.status("neg-4")
    assert (status.state, status.value) == ("failed", -2)
    again = _tracker(dynamodb(), "sum", tracker.table).stamp("neg-4", finished=[7], op_id="overtook")
    assert again.duplicate and again == -2  # a copy of an applied op: a duplicate


def test_4_a_copy_finding_a_negative_pending_chain_fails_it(dynamodb: Callable[[], Any]) -> None:
    """The writer that took the sum below zero died before its fail-write (a Lambda
    timeout): a copy of its op finds the chain pending below zero and fails it."""
    client = dynamodb()
    tracker = _tracker(client, "sum")
    tracker.create("neg-4b", 5)
    Faults(client).before("UpdateItem", _die, match=_is_fail_write)
    with pytest.raises(Died):
        tracker.stamp("neg-4b", finished=[7], op_id="overtook")
    assert tracker.status("neg-4b").state == "pending"
    again = _tracker(dynamodb(), "sum", tracker.table).stamp("neg-4b", finished=[7], op_id="overtook")
    assert again.duplicate and again == -2
    assert tracker.status("neg-4b").state == "failed"


# -- 5 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["memory", *BACKENDS])
@pytest.mark.parametrize("mode", ["sum", "xor"])
def test_5_a_duplicate_after_completion_is_a_duplicate(
    request: pytest.FixtureRequest, backend: str, mode: str
) -> None:
    """An applied op redelivered after the chain acked, its id moved to history: a
    duplicate (the chain's value, not ``acked``), not ``TagAcked``."""
    if backend == "memory":
        tracker: Any = MemoryAck(mode=mode, ttl=3600)
    else:
        server = request.getfixturevalue({"server": "moto_server"}.get(backend, backend))
        tracker = _tracker(server.client(), mode)
    root = tracker.new_edge()
    tracker.create("acked-5", root)
    kids = [tracker.new_edge() for _ in range(60)]
    start = tracker.stamp("acked-5", finished=[root], started=kids, op_id="root")
    for i, kid in enumerate(kids):
        last = tracker.stamp("acked-5", finished=[kid], op_id=f"kid-{i}", after=start.position)
    assert last.acked
    again = tracker.stamp("acked-5", finished=[kids[0]], op_id="kid-0", after=start.position)
    assert again.duplicate and not again.acked and again == last
    with pytest.raises(errors.TagAcked):  # an op never applied is refused
        tracker.stamp("acked-5", finished=[kids[0]], op_id="new", after=start.position)


# -- 6 ------------------------------------------------------------------------------------


def test_6_a_finish_that_overtook_its_start_reports_the_ack(dynamodb: Callable[[], Any]) -> None:
    """The child's finish lands before its parent's stamp started it (sum -2); the
    parent's stamp lands before the child's fail-write (sum 0: the parent's writer
    completes the chain); the fail-write is refused. The chain acked, and the child's
    stamp returns its value, applied (not ``TagFailed``)."""
    client = dynamodb()
    tracker = _tracker(client, "sum")
    other = _tracker(dynamodb(), "sum", tracker.table)
    tracker.create("race-6", 5)
    done: list[Any] = []
    Faults(client).before(
        "UpdateItem",
        lambda: done.append(other.stamp("race-6", finished=[5], started=[7], op_id="parent")),
        match=_is_fail_write,
    )
    result = tracker.stamp("race-6", finished=[7], op_id="child")
    assert done[0].acked  # the parent's stamp completed it
    assert result == 0 and not result.acked and not result.duplicate
    assert tracker.status("race-6").state == "acked"
