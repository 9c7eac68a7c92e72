"""Issue 18's serverless scenarios, through real SQS (moto) and each DynamoDB backend
(moto in-process and over HTTP, dynalite, DynamoDB Local), in both modes: a copy of a
message, however late, is applied once.

* a child redelivered by SQS (same message id, ``ApproximateReceiveCount`` 2) after more
  than a window of other stamps on its chain;
* a redelivered S3 start event (same object) after most children were processed: every
  child is sent again, and the originals still in flight arrive after their copies;
* an original child arriving after its re-sent twin and more than a window of other ops
  (its parent's first attempt stalled after its stamp and sent late).

Each ends with the chain acked (its value exact: one stray application leaves it
pending, or failed by a negative sum) and every copy counted as a duplicate. A parent
whose first attempt "stalls" sends through :class:`Stalled`, which holds its
``SendMessageBatch`` calls until the test lets them through (the real queue's; nothing
is faked but the delay). Completions are not in scope here (test_serverless_completion).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import boto3
import pytest
from conftest import unique_table
from moto import mock_aws
from serverless_helpers import example

from xor_ack_dynamodb import XorAckDynamoDB
from xor_ack_dynamodb.serverless import Context, Pipeline, PipelineConfig
from xor_ack_dynamodb.serverless.envelope import decode_record
from xor_ack_dynamodb.serverless.poller import streams_client
from xor_ack_dynamodb.serverless.starts import start

REGION = "us-east-1"
Route = Literal["process", "keep", "hold", "drop"]


@pytest.fixture(params=["inproc", "server", "dynalite", "ddblocal"])
def dynamodb(request: pytest.FixtureRequest) -> Iterator[Any]:
    """DynamoDB on each backend, inside one ``mock_aws`` that serves SQS and S3."""
    with mock_aws():
        if request.param == "inproc":
            yield boto3.client("dynamodb", region_name=REGION)
        else:
            yield request.getfixturevalue(f"{request.param}_client")


@pytest.fixture(params=["sum", "xor"])
def mode(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


class Stalled:
    """The SQS client of a Lambda attempt that stalls after its stamp: its sends are held
    (and reported sent) until :meth:`release` passes the chosen ones to the real queue."""

    def __init__(self, sqs: Any) -> None:
        self.sqs = sqs
        self.held: list[tuple[str, dict[str, Any]]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.held += [(QueueUrl, dict(e)) for e in Entries]
        return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}

    def release(self, pick: Callable[[dict[str, Any]], bool] = lambda body: True) -> int:
        go = [(q, e) for q, e in self.held if pick(json.loads(e["MessageBody"]))]
        self.held = [(q, e) for q, e in self.held if not pick(json.loads(e["MessageBody"]))]
        for first in range(0, len(go), 10):
            batch = [dict(e, Id=str(i)) for i, (_, e) in enumerate(go[first : first + 10])]
            assert not self.sqs.send_message_batch(QueueUrl=go[0][0], Entries=batch).get("Failed")
        return len(go)


@dataclass
class Flow:
    """A pipeline on ``dynamodb`` with a real queue; the handler fans out ``{"fan": n}``
    bodies into ``n`` leaves ``{"i": ...}`` and does nothing for a leaf."""

    dynamodb: Any
    mode: str
    sqs: Any = field(init=False)
    s3: Any = field(init=False)
    queue: str = field(init=False)
    tracker: XorAckDynamoDB = field(init=False)
    pipeline: Pipeline = field(init=False)
    held: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sqs, self.s3 = boto3.client("sqs", region_name=REGION), boto3.client("s3", region_name=REGION)
        table = unique_table("redeliver")
        self.queue = self.sqs.create_queue(QueueName=f"q-{table}")["QueueUrl"]
        self.tracker = XorAckDynamoDB(table, client=self.dynamodb, mode=self.mode)
        self.tracker.create_table()
        self.pipeline = self.with_sqs(self.sqs)

    def with_sqs(self, sqs: Any) -> Pipeline:
        config = PipelineConfig(queue_url=self.queue, metrics_namespace=None)
        return Pipeline(self.tracker, config, sqs=sqs, s3=self.s3)

    @staticmethod
    def handler(ctx: Context) -> None:
        for i in range(ctx.json().get("fan", 0)):
            ctx.emit({"i": i})

    def pump(
        self,
        route: Callable[[dict[str, Any], dict[str, Any]], Route] = lambda b, r: "process",
        pipeline: Pipeline | None = None,
    ) -> int:
        """Lambda's SQS poller until the queue shows nothing: ``route`` says per record
        (body, record) whether to process it (then delete it), ``keep`` it (process it and
        leave it undeleted: its function timed out after its work), ``hold`` it (not
        processed) or ``drop`` it (deleted unprocessed). Kept and held records stay
        invisible until :meth:`release`. Returns the records processed."""
        done = 0
        while True:
            got = self.sqs.receive_message(
                QueueUrl=self.queue,
                MaxNumberOfMessages=10,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
                VisibilityTimeout=3600,
            ).get("Messages", [])
            if not got:
                return done
            chosen, finished = [], []
            for record in example("run_local").lambda_records(got):
                what = route(json.loads(record["body"]), record)
                handle = record["receiptHandle"]
                if what in ("process", "keep"):
                    chosen.append(record)
                    (finished if what == "process" else self.held).append(handle)
                elif what == "hold":
                    self.held.append(handle)
                else:
                    finished.append(handle)
            if chosen:
                result = (pipeline or self.pipeline).process_sqs_batch({"Records": chosen}, self.handler)
                assert result["batchItemFailures"] == []
                done += len(chosen)
            if finished:
                entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(finished)]
                self.sqs.delete_message_batch(QueueUrl=self.queue, Entries=entries)

    def release(self) -> None:
        """The held records become visible again (as at their visibility timeout)."""
        for handle in self.held:
            self.sqs.change_message_visibility(QueueUrl=self.queue, ReceiptHandle=handle, VisibilityTimeout=0)
        self.held = []

    def events(self) -> Counter[str]:
        return Counter(self.pipeline.stats.events)

    def value(self, tag: str) -> Any:
        return self.tracker.status(tag).stamp


def resent(record: dict[str, Any]) -> bool:
    """The envelope's re-sent flag (False where the envelope has none: older versions)."""
    return bool(getattr(decode_record(record).envelope, "resent", False))


#: Other stamps between a leaf's two deliveries. The issue's 34 (xor) and 60 (sum) were
#: past the old 32-op window; a chain's item now keeps up to 8 + 40 op ids, so 60 puts the
#: first copy's op in the chain's history in both modes.
OTHERS = 60
#: The moto server is the in-process moto over HTTP: the first scenario runs on it too.
WITHOUT_SERVER = ["inproc", "dynalite", "ddblocal"]


def test_a_child_redelivered_by_sqs_after_many_other_stamps_is_applied_once(dynamodb: Any, mode: str) -> None:
    """:data:`OTHERS` other stamps between a leaf's two deliveries (500: the benchmark,
    ``benchmarks/fanout.py``, whose late copies come after every other message of a
    500-children chain, and which fails unless every chain ends exact)."""
    others = OTHERS
    flow = Flow(dynamodb, mode)
    started = flow.pipeline.start("order-1", [{"i": i} for i in range(others + 2)], start_id="s1")
    assert started.created
    last = others + 1
    # Leaf 0 is processed and its function times out before deleting it; the last leaf
    # waits; the others are processed in between (each on its first receive).
    flow.pump(lambda b, r: "keep" if b["i"] == 0 else "hold" if b["i"] == last else "process")
    assert flow.events()["stamps.applied"] == 1 + others
    flow.release()
    counts: list[str] = []

    def leaf_0(body: dict[str, Any], record: dict[str, Any]) -> Route:
        if body["i"] != 0:
            return "hold"
        counts.append(record["attributes"]["ApproximateReceiveCount"])
        return "process"

    assert flow.pump(leaf_0) == 1
    assert counts == ["2"]  # SQS's redelivery of the same message
    assert flow.events()["stamps.duplicate"] == 1, (flow.events(), flow.tracker.status("order-1"))
    assert flow.tracker.status("order-1").state == "pending"
    flow.release()
    assert flow.pump() == 1
    status = flow.tracker.status("order-1")
    assert status.state == "acked", status
    assert flow.events()["stamps.applied"] == others + 2


@pytest.mark.parametrize("dynamodb", WITHOUT_SERVER, indirect=True)
def test_a_redelivered_s3_start_after_most_children_resends_them_all_once(dynamodb: Any, mode: str) -> None:
    """70 children processed, then S3 delivers the start's event again: every child is
    sent again (flagged re-sent); the 50 originals the start's first run had not yet
    got out arrive after their copies and more than a window of other ops."""
    flow = Flow(dynamodb, mode)
    flow.s3.create_bucket(Bucket="redeliver-in")
    event = example("run_local").upload(flow.s3, "a.jsonl", b"x", bucket="redeliver-in")
    done, late = 70, 50
    total = done + late + 1  # and one that only ever arrives last, as its original

    def split(ctx: Context) -> None:
        for i in range(total):
            ctx.emit({"i": i})

    stalled = Stalled(flow.sqs)
    [tag] = flow.with_sqs(stalled).process_s3_event(event, split)["started"]
    assert stalled.release(lambda b: b["i"] < done) == done
    assert flow.pump() == done
    assert flow.pipeline.process_s3_event(event, split) == {"started": [tag], "continued": [], "skipped": []}
    assert flow.pump(lambda b, r: "drop" if b["i"] == total - 1 else "process") == total - 1
    events = flow.events()
    assert (events["stamps.applied"], events["stamps.duplicate"]) == (done + late, done), (
        events,
        flow.tracker.status(tag),
    )
    assert stalled.release() == late + 1  # the first run's late originals, and the last one
    assert flow.pump() == late + 1
    events = flow.events()
    assert (events["stamps.applied"], events["stamps.duplicate"]) == (total, done + late)
    status = flow.tracker.status(tag)
    assert status.state == "acked", status


@pytest.mark.parametrize("dynamodb", WITHOUT_SERVER, indirect=True)
def test_an_original_child_after_its_resent_twin_and_a_window_of_ops_is_applied_once(
    dynamodb: Any, mode: str
) -> None:
    """A parent's first attempt stamps, then stalls before sending; its redelivery finds
    its stamp a duplicate, marks itself and re-sends; the copies are processed (more than
    a window of ops); then the stalled attempt's original sends arrive, with a receive
    count of 1: each must find its parent marked and be checked, not trusted."""
    fan = 60
    flow = Flow(dynamodb, mode)
    flow.pipeline.start("order-2", [{"fan": fan}, {"i": -1}], start_id="s2")
    stalled = Stalled(flow.sqs)
    # First attempt of the parent: stamped, children held, message left undeleted.
    first = flow.with_sqs(stalled)
    flow.pump(lambda b, r: "keep" if "fan" in b else "hold", pipeline=first)
    assert first.stats.events["stamps.applied"] == 1 and len(stalled.held) == fan
    flow.release()
    # Its redelivery (receive 2): a duplicate stamp; mark, re-send. Then every copy.
    flow.pump(lambda b, r: "hold" if b.get("i") == -1 else "process")
    assert flow.events()["stamps.duplicate"] == 1
    assert flow.events()["stamps.applied"] == fan, flow.events()  # each copy once
    # The stalled attempt's originals: receive count 1, not flagged re-sent.
    assert stalled.release() == fan
    seen: list[bool] = []

    def originals(body: dict[str, Any], record: dict[str, Any]) -> Route:
        if body.get("i") == -1:
            return "hold"
        assert record["attributes"]["ApproximateReceiveCount"] == "1"
        seen.append(resent(record))
        return "process"

    assert flow.pump(originals) == fan
    assert seen == [False] * fan
    assert flow.events()["stamps.applied"] == fan, (flow.events(), flow.tracker.status("order-2"))
    assert flow.events()["stamps.duplicate"] == 1 + fan
    assert flow.tracker.status("order-2").state == "pending"
    flow.release()
    flow.pump()
    status = flow.tracker.status("order-2")
    assert status.state == "acked", status


def test_a_fan_out_with_every_message_delivered_twice_ends_exact(mode: str) -> None:
    """The benchmark's run (``benchmarks/fanout.py``), small: every message delivered
    twice (a share of the copies after every other message), through moto's SQS and
    DynamoDB with its stream: every chain acked, its completion fired once, each copy a
    duplicate."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.fanout import run

    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        streams = streams_client(client)
        sqs = boto3.client("sqs", region_name=REGION)
        result = run(
            client, streams, sqs, mode=mode, delivery="twice+late", objects=1, children=60, late=0.25
        )
    assert result.exact, (result.states, result.completions)
    assert result.deliveries == 2 * 60 - 1  # the closer (held back past the late copies) once
    assert result.events["stamps.applied"] == 60  # each child once; every copy refused
    # The late copies were found in history blocks this process wrote and kept (blocks
    # never change once written): no read.
    assert "BatchGetItem" not in result.requests
    assert "records.failed_chain" not in result.events


@pytest.mark.parametrize("dynamodb", ["inproc"], indirect=True)
def test_an_envelope_of_an_older_version_is_checked_on_its_first_receive(dynamodb: Any, mode: str) -> None:
    """A message written by a version without ``parent``/``after`` in the envelope (in
    flight during an upgrade) may be a copy its old parent re-sent, with a receive count
    of 1: it is checked against the chain's whole lineage, not trusted."""
    flow = Flow(dynamodb, mode)
    flow.pipeline.start("order-3", [{"i": i} for i in range(OTHERS + 2)], start_id="s3")
    last = OTHERS + 1
    copies: list[dict[str, Any]] = []

    def first_pass(body: dict[str, Any], record: dict[str, Any]) -> Route:
        if body["i"] == 0:  # an old parent's re-send of leaf 0: same edge, no new fields
            env = decode_record(record).envelope
            old = {k: v for k, v in env.to_dict().items() if k != "after"}
            copies.append({"xor-ack": {"DataType": "String", "StringValue": json.dumps(old)}})
        return "hold" if body["i"] == last else "process"

    assert flow.pump(first_pass) == OTHERS + 1
    flow.sqs.send_message(QueueUrl=flow.queue, MessageBody=json.dumps({"i": 0}), MessageAttributes=copies[0])
    assert flow.pump(lambda b, r: "process") == 1
    assert flow.events()["stamps.duplicate"] == 1, (flow.events(), flow.tracker.status("order-3"))
    flow.release()
    flow.pump()
    status = flow.tracker.status("order-3")
    assert status.state == "acked", status


@pytest.mark.parametrize("dynamodb", ["inproc"], indirect=True)
def test_an_s3_carried_child_whose_event_comes_again_late_is_applied_once(dynamodb: Any, mode: str) -> None:
    """An object written as a child (``ctx.emit_object``) continues its chain from its
    upload event; S3 and Lambda's asynchronous retries can deliver that event again with
    no receive count to tell, so its stamp is always checked."""
    flow = Flow(dynamodb, mode)
    flow.s3.create_bucket(Bucket="redeliver-objects")

    def fan(ctx: Context) -> None:
        ctx.emit_object("redeliver-objects", "part-0.txt", "x")
        for i in range(1, OTHERS + 2):
            ctx.emit({"i": i})

    start("order-4", pipeline=flow.pipeline, start_id="s4", handler=fan)
    obj = {"key": "part-0.txt", "eTag": "e", "sequencer": "0A"}
    event = {
        "Records": [
            {
                "eventSource": "aws:s3",
                "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": "redeliver-objects"}, "object": obj},
            }
        ]
    }
    assert flow.pipeline.process_s3_event(event, lambda ctx: None)["continued"] == ["order-4"]
    last = OTHERS + 1
    assert flow.pump(lambda b, r: "hold" if b["i"] == last else "process") == OTHERS
    assert flow.pipeline.process_s3_event(event, lambda ctx: None)["continued"] == ["order-4"]  # again
    assert flow.events()["stamps.duplicate"] == 1, (flow.events(), flow.tracker.status("order-4"))
    flow.release()
    flow.pump()
    status = flow.tracker.status("order-4")
    assert status.state == "acked", status
