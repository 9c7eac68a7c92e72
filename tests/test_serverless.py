"""xor_ack_dynamodb.serverless end to end on moto (S3, SQS, DynamoDB and its stream,
EventBridge in one ``mock_aws``), in both modes: the example's S3 -> SQS -> worker ->
stream -> completion flow with every message and stream batch delivered twice, a handler
that raises after emitting its children, a poison message, malformed envelopes,
completion exactly once, starts, ownership, S3-carried children and the replay listing.
Worker processes racing on a moto server are in ``test_serverless_processes.py``;
completions by other completers, the claim's clocks and permanent errors in
``test_serverless_completion.py``."""

from __future__ import annotations

import json
import logging
import pickle
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from conftest import Clock
from moto import mock_aws
from serverless_helpers import example, jsonl, queue_depth, receive_all, summary

from xor_ack_dynamodb import XorAckDynamoDB
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.serverless import (
    Completion,
    Context,
    Pipeline,
    PipelineConfig,
    process_sqs_batch,
    scan_unfinished,
    unfinished,
    unfinished_objects,
)
from xor_ack_dynamodb.serverless.edges import op_id
from xor_ack_dynamodb.serverless.envelope import decode_record

REGION = "us-east-1"


class World:
    """Buckets, queues and a table in moto; the example's functions on them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, mode: str, chunk: int = 6, **env: str) -> None:
        self.s3, self.sqs = boto3.client("s3", region_name=REGION), boto3.client("sqs", region_name=REGION)
        self.ddb = boto3.client("dynamodb", region_name=REGION)
        self.local = example("run_local")
        self.env = self.local.setup(self.s3, self.sqs, self.ddb, mode)
        self.env.update(env)
        for name, value in self.env.items():
            monkeypatch.setenv(name, value)
        self.fn = example("lambda_function")
        monkeypatch.setattr(self.fn, "CHUNK", chunk)
        monkeypatch.setattr(self.fn, "LEAF", 2)
        self.fn.pipeline.cache_clear()
        self.work, self.done = self.env["XOR_ACK_QUEUE_URL"], self.env["XOR_ACK_COMPLETION_QUEUE_URL"]

    @property
    def pipeline(self) -> Pipeline:
        found: Pipeline = self.fn.pipeline()
        return found

    def upload(self, key: str, body: bytes) -> dict[str, Any]:
        event: dict[str, Any] = self.local.upload(self.s3, key, body)
        return event

    def start(self, event: dict[str, Any]) -> list[str]:
        tags: list[str] = self.fn.on_upload(event, None)["started"]
        return tags

    def drain(self, handler: Any = None, **options: Any) -> int:
        delivered: int = self.local.poll(self.sqs, self.work, handler or self.fn.on_work, **options)
        return delivered

    def complete(self, twice: bool = False) -> int:
        """Lambda's poller on the table's stream, handing batches to ``on_chain_stream``."""
        poller = self.local.stream_poller(
            self.ddb, self.env["XOR_ACK_TABLE"], self.fn.on_chain_stream, twice=twice
        )
        delivered: int = poller.drain()
        return delivered

    def tracker(self) -> XorAckDynamoDB:
        tracker: XorAckDynamoDB = self.pipeline.tracker  # type: ignore[assignment]
        return tracker


@pytest.fixture(params=["sum", "xor"])
def mode(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch, mode: str) -> Iterator[World]:
    with mock_aws():
        yield World(monkeypatch, mode)


def clean_versions(monkeypatch: pytest.MonkeyPatch, mode: str, bodies: dict[str, bytes]) -> list[int]:
    """The chains' write counts after a run where nothing is delivered twice."""
    with mock_aws():
        clean = World(monkeypatch, mode, chunk=4)
        tags = [clean.start(clean.upload(key, body))[0] for key, body in bodies.items()]
        clean.drain()
        return [clean.tracker().status(t).version for t in tags]


def test_s3_to_completion_with_every_message_delivered_twice(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    # Small trees: a redelivered message re-sends its children, so copies double per level.
    inputs = {f"in/{i}.jsonl": jsonl(7 + i, seed=i) for i in range(2)}
    bodies = {key: body for key, (body, _) in inputs.items()}
    versions = clean_versions(monkeypatch, mode, bodies)
    with mock_aws():
        world = World(monkeypatch, mode, chunk=4)
        tags = []
        for key, body in bodies.items():
            event = world.upload(key, body)
            [tag] = world.start(event)
            assert world.start(event) == [tag]  # S3 delivers the event again: same chain, no new one
            tags.append(tag)
        deliveries: Counter[str] = Counter()

        def counting(event: dict[str, Any], context: Any) -> Any:
            deliveries.update(r["messageId"] for r in event["Records"])
            return world.fn.on_work(event, context)

        world.drain(counting, twice=True)
        assert deliveries and min(deliveries.values()) >= 2  # every message at least twice
        assert world.complete(twice=True) > 0  # and every stream batch twice
        completions = receive_all(world.sqs, world.done)
        assert Counter(c["tag"] for c in completions) == Counter(tags)  # exactly once per chain
        tracker = world.tracker()
        for tag, clean in zip(tags, versions, strict=True):
            status = tracker.status(tag)
            assert status.state == "acked" and status.mode == mode
            # Nothing applied twice: as many writes as the clean run (every copy, of a
            # message or of a start's children sent again, was a duplicate).
            assert status.version == clean
        stats = world.pipeline.stats.events
        assert stats["completions.fired"] == 2 and stats["completions.repeated"] == 2  # the second copies
        world.fn.on_done({"Records": [{"body": json.dumps(c)} for c in completions]}, None)
        for tag, (_, expected) in zip(tags, inputs.values(), strict=True):
            assert summary(world.s3, world.env["OUTPUT_BUCKET"], tag) == {
                "tag": tag,
                "words": dict(sorted(expected.items())),
            }


def test_poison_message_fails_its_chain_and_the_rest_completes(world: World) -> None:
    bad, _ = jsonl(12, poison_at=7)
    good, _ = jsonl(12, seed=3)
    [bad_tag] = world.start(world.upload("in/bad.jsonl", bad))
    [good_tag] = world.start(world.upload("in/good.jsonl", good))
    poison: Counter[str] = Counter()

    def watching(event: dict[str, Any], context: Any) -> Any:
        for record in event["Records"]:
            if "{not json" in record["body"] and len(json.loads(record["body"])["lines"]) <= 2:
                poison[record["messageId"]] += 1
        return world.fn.on_work(event, context)

    world.drain(watching)
    world.complete()
    assert list(poison.values()) == [3]  # XOR_ACK_MAX_RECEIVES=3: retried, then failed its chain
    status = world.tracker().status(bad_tag)
    assert status.state == "failed" and status.reason is not None
    [message_id] = poison
    assert status.reason.startswith(f"poison message {message_id} (received 3 times): JSONDecodeError")
    assert world.tracker().status(good_tag).state == "acked"
    assert [c["tag"] for c in receive_all(world.sqs, world.done)] == [good_tag]  # no completion for it
    assert queue_depth(world.sqs, world.work) == 0  # nothing left retrying forever
    assert world.pipeline.stats.events["records.failed_chain"] == 1


def library_pipeline(
    mode: str, clock: Any = None, on_complete: Any = (), **settings: Any
) -> tuple[Pipeline, str]:
    """A pipeline built from parts (no example), on a fresh queue and table."""
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName=f"q-{mode}", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    clock = clock or time.time
    tracker = XorAckDynamoDB(
        f"t-{mode}", client=boto3.client("dynamodb", region_name=REGION), mode=mode, clock=clock
    )
    tracker.create_table(stream=True)
    s3 = boto3.client("s3", region_name=REGION)
    config = PipelineConfig(queue_url=queue, **settings)
    return Pipeline(tracker, config, sqs=sqs, s3=s3, on_complete=on_complete, clock=clock), queue


def receive(pipeline: Pipeline, queue: str) -> list[dict[str, Any]]:
    got = pipeline.sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    )
    records: list[dict[str, Any]] = example("run_local").lambda_records(got.get("Messages", []))
    return records


def drain(pipeline: Pipeline, queue: str, handler: Any) -> None:
    """The queue until it is empty, then the table's stream (the completions)."""
    example("run_local").poll(
        pipeline.sqs, queue, lambda e, c: process_sqs_batch(e, handler, pipeline=pipeline)
    )
    pipeline.stream_poller().drain()


@mock_aws
def test_a_handler_that_raises_after_emitting_sends_and_stamps_nothing(mode: str) -> None:
    fired: list[Completion] = []
    pipeline, queue = library_pipeline(mode, on_complete=[fired.append])
    started = pipeline.start("job-1", children=[{"depth": 2}])
    before = pipeline.tracker.status("job-1")
    calls: Counter[str] = Counter()

    def handler(ctx: Context) -> None:
        calls[ctx.edge_id] += 1
        depth = ctx.json()["depth"]
        if depth:
            ctx.emit({"depth": depth - 1})
            ctx.emit({"depth": depth - 1})
            if ctx.receive_count == 1:
                raise RuntimeError("crashed after emitting")

    [root] = receive(pipeline, queue)
    result = process_sqs_batch({"Records": [root]}, handler, pipeline=pipeline)
    assert result == {"batchItemFailures": [{"itemIdentifier": root["messageId"]}]}
    assert queue_depth(pipeline.sqs, queue) == 1  # only the root again: no child was sent
    after = pipeline.tracker.status("job-1")
    assert (after.value, after.version) == (before.value, before.version)  # and nothing stamped
    drain(pipeline, queue, handler)
    assert pipeline.tracker.status("job-1").state == "acked"
    assert [c.tag for c in fired] == ["job-1"] and fired[0].owner == started.owner
    # Internal nodes ran twice (the crash, then the retry), leaves once: no child was
    # ever sent by a failed attempt, so none ran twice.
    assert sorted(calls.values()) == [1, 1, 1, 1, 2, 2, 2]


@mock_aws
def test_malformed_and_missing_envelopes_never_reach_the_handler(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    pipeline, queue = library_pipeline(mode, max_receives=2)
    pipeline.start("job-2", children=["real work"])
    pipeline.sqs.send_message(QueueUrl=queue, MessageBody="not tracked")
    pipeline.sqs.send_message(
        QueueUrl=queue,
        MessageBody="bad",
        MessageAttributes={"xor-ack": {"DataType": "String", "StringValue": '{"v": 1, "tag": "job-2"}'}},
    )
    seen: list[str] = []
    with caplog.at_level(logging.ERROR, logger="xor_ack_dynamodb.serverless"):
        drain(pipeline, queue, lambda ctx: seen.append(ctx.body))
    assert seen == ["real work"]
    assert pipeline.tracker.status("job-2").state == "acked"
    events = pipeline.stats.events
    assert events["records.malformed"] == 2 and events["records.retried"] == 2  # once each, then dropped
    errors = [r.getMessage() for r in caplog.records]
    assert any("MissingEnvelope" in e and "dropped after 2 receives" in e for e in errors)
    assert any("MalformedEnvelope" in e and "mode" in e for e in errors)
    assert queue_depth(pipeline.sqs, queue) == 0


@mock_aws
def test_completion_fires_once_when_the_completing_op_and_its_stream_record_come_again(mode: str) -> None:
    fired: list[Completion] = []
    pipeline, queue = library_pipeline(mode, on_complete=[fired.append])
    pipeline.start("job-3", children=["only child"])
    [record] = receive(pipeline, queue)
    for _ in range(3):  # the completing message, delivered three times
        assert process_sqs_batch({"Records": [record]}, lambda ctx: None, pipeline=pipeline) == {
            "batchItemFailures": []
        }
    assert fired == []  # the worker fires nothing: the stream does
    for _ in range(2):  # the stream read twice from its start: every record delivered twice
        pipeline.stream_poller(twice=True).drain()
    assert [c.tag for c in fired] == ["job-3"]
    assert pipeline.stats.events["completions.repeated"] == 3
    # Why a claim is needed: the tracker reports acked to every copy of the completing op.
    envelope = decode_record(record, mode).envelope
    again = pipeline.tracker.stamp(
        "job-3", finished=[envelope.edge], op_id=op_id(envelope.edge), owner=envelope.owner
    )
    assert again.acked and again.duplicate


@mock_aws
def test_a_live_claim_defers_and_a_failed_target_is_retried(mode: str) -> None:
    clock = Clock()
    calls: list[str] = []

    def flaky(completion: Completion) -> None:
        calls.append(completion.tag)
        if len(calls) == 1:
            raise ConnectionError("target down")

    pipeline, queue = library_pipeline(mode, on_complete=[flaky], completion_lease_seconds=60, clock=clock)
    pipeline.start("job-4", children=["x"])
    example("run_local").poll(
        pipeline.sqs, queue, lambda e, c: pipeline.process_sqs_batch(e, lambda ctx: None)
    )
    poller, events = pipeline.stream_poller(), pipeline.stats.events
    assert poller.poll() > 0  # the stream: the completion's target fails, the claim is released
    assert calls == ["job-4"] and pipeline.stats.events["completions.retried"] == 1
    assert (
        pipeline.guard.claim_completion("job-4", "someone-else", clock(), 60) == "claimed"
    )  # released, so claimable
    assert poller.poll() > 0  # Lambda retries from the failed record: held, retry later
    clock.advance(60 + 5)  # the lease and the skew margin: not yet
    assert poller.poll() > 0
    events = pipeline.stats.events
    assert calls == ["job-4"] and events["completions.retried"] == 3
    clock.advance(1)  # the other claimant died: its lease ran out
    poller.drain()
    pipeline.stream_poller(twice=True).drain()  # everything again, twice: fires nothing more
    events = pipeline.stats.events
    assert (events["completions.fired"], events["completions.repeated"]) == (1, 2)
    assert calls == ["job-4", "job-4"]  # one failed call, one firing


@mock_aws
def test_sqs_and_eventbridge_completion_targets() -> None:
    sqs, events = boto3.client("sqs", region_name=REGION), boto3.client("events", region_name=REGION)
    done = sqs.create_queue(QueueName="done")["QueueUrl"]
    seen = sqs.create_queue(QueueName="bus-seen")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=seen, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.create_event_bus(Name="chains")
    events.put_rule(Name="done", EventBusName="chains", EventPattern=json.dumps({"source": ["xor-ack"]}))
    events.put_targets(Rule="done", EventBusName="chains", Targets=[{"Id": "q", "Arn": arn}])
    pipeline, queue = library_pipeline("sum")
    config = PipelineConfig(queue_url=queue, completion_queue_url=done, completion_bus="chains")
    pipeline = Pipeline(pipeline.tracker, config, sqs=sqs, events=events)
    for tag in ("a", "b"):
        pipeline.start(tag, children=[1, 2, 3])
    drain(pipeline, queue, lambda ctx: None)
    on_queue = receive_all(sqs, done)
    on_bus = [m["detail"] for m in receive_all(sqs, seen)]
    assert sorted(c["tag"] for c in on_queue) == ["a", "b"]
    assert sorted(on_bus, key=lambda d: d["tag"]) == sorted(on_queue, key=lambda d: d["tag"])
    assert len({c["id"] for c in on_queue}) == 2
    assert pipeline.stats.requests == {"sqs.SendMessageBatch": 2, "sqs.SendMessage": 2, "events.PutEvents": 2}


@mock_aws
def test_starts_are_idempotent_and_a_new_incarnation_owns_its_chain(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    pipeline, queue = library_pipeline(mode, clock=clock)
    first = pipeline.start("order-7", children=["a", "b"], start_id="upload-1")
    again = pipeline.start("order-7", children=["a", "b"], start_id="upload-1")
    assert (first.created, again.created, again.sent) == (True, False, True)  # re-sent: maybe lost
    assert again.owner == first.owner
    late = receive(pipeline, queue)  # incarnation 1's four messages (two copies of each child)
    assert len(late) == 4
    clock.advance(3600 + 10)  # incarnation 1 times out
    assert pipeline.tracker.status("order-7").state == "expired"
    second = pipeline.start("order-7", children=["c"], start_id="upload-2")
    assert second.created and second.owner != first.owner
    value = pipeline.tracker.status("order-7").value
    handled: list[str] = []
    with caplog.at_level(logging.INFO, logger="xor_ack_dynamodb.serverless"):
        result = process_sqs_batch({"Records": late}, lambda ctx: handled.append(ctx.body), pipeline=pipeline)
    assert result == {"batchItemFailures": []} and pipeline.stats.events["records.dropped"] == 4
    assert sum("dropped: NotOwner" in r.getMessage() for r in caplog.records) == 4
    assert pipeline.tracker.status("order-7").value == value  # NotOwner: the old messages touched nothing
    drain(pipeline, queue, lambda ctx: handled.append(ctx.body))
    assert pipeline.tracker.status("order-7").state == "acked"
    assert handled.count("c") == 1
    done = pipeline.start("order-7", children=["c"], start_id="upload-2")
    assert (done.created, done.sent, done.state) == (False, False, "acked")


@mock_aws
def test_a_start_without_children_completes_once(mode: str) -> None:
    fired: list[Completion] = []
    pipeline, _ = library_pipeline(mode, on_complete=[fired.append])
    for _ in range(2):
        pipeline.start("empty", start_id="e-1")
    assert pipeline.tracker.status("empty").state == "acked"
    pipeline.stream_poller(twice=True).drain()
    assert [c.tag for c in fired] == ["empty"]


@mock_aws
def test_children_carried_by_s3_objects_continue_the_chain(mode: str) -> None:
    fired: list[Completion] = []
    pipeline, queue = library_pipeline(mode, on_complete=[fired.append])
    pipeline.s3.create_bucket(Bucket="stage-2")
    pipeline.start("doc-1", children=["render"])
    drain(pipeline, queue, lambda ctx: ctx.emit_object("stage-2", "page-1.txt", "rendered"))
    head = pipeline.s3.head_object(Bucket="stage-2", Key="page-1.txt")
    assert json.loads(head["Metadata"]["xor-ack"])["tag"] == "doc-1"
    assert pipeline.tracker.status("doc-1").state == "pending"
    s3_info = {"bucket": {"name": "stage-2"}, "object": {"key": "page-1.txt", "eTag": head["ETag"]}}
    event = {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": s3_info}]}
    seen: list[str | None] = []
    for _ in range(2):  # the upload event, delivered twice
        out = pipeline.process_s3_event(event, lambda ctx: seen.append(ctx.source and ctx.source.key))
        assert out == {"started": [], "continued": ["doc-1"], "skipped": []}
    assert seen == ["page-1.txt", "page-1.txt"]
    assert pipeline.tracker.status("doc-1").state == "acked"
    pipeline.stream_poller().drain()
    assert [c.tag for c in fired] == ["doc-1"]


@mock_aws
def test_chains_to_replay_are_found() -> None:
    clock = Clock()
    pipeline, queue = library_pipeline("sum", clock=clock, max_receives=1)
    pipeline.start("ok", children=["fine"])
    pipeline.start("bad", children=["boom"])
    drain(pipeline, queue, lambda ctx: ctx.body == "boom" and 1 / 0)
    pipeline.start("slow", children=["never handled"])
    clock.advance(3600 + 10)
    found = unfinished(pipeline.tracker, ["ok", "bad", "slow", "never-started"])
    assert list(found.failed) == ["bad"] and "ZeroDivisionError" in (found.failed["bad"].reason or "")
    assert list(found.expired) == ["slow"] and found.missing == ["never-started"]
    tracker = pipeline.tracker
    assert {s.tag: s.state for s in scan_unfinished(tracker)} == {"bad": "failed", "slow": "expired"}
    assert [s.tag for s in scan_unfinished(tracker, prefix="sl")] == ["slow"]
    s3 = pipeline.s3
    s3.create_bucket(Bucket="inbox")
    etag = s3.put_object(Bucket="inbox", Key="a.csv", Body=b"1")["ETag"].strip('"')
    found_objects, objects = unfinished_objects(tracker, s3, "inbox")
    assert (
        found_objects.missing == [f"s3://inbox/a.csv@etag:{etag}"] and list(objects) == found_objects.missing
    )


@mock_aws
def test_powertools_batch_processor_composes(mode: str) -> None:
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    pipeline, queue = library_pipeline(mode)
    pipeline.start("pt", children=["good", "flaky"])
    records = receive(pipeline, queue)

    def handler(ctx: Context) -> None:
        if ctx.body == "flaky" and ctx.receive_count == 1:
            raise RuntimeError("first time")

    response = process_partial_response(
        event={"Records": records},
        record_handler=pipeline.record_handler(handler),
        processor=BatchProcessor(EventType.SQS),
    )
    flaky = [r["messageId"] for r in records if r["body"] == "flaky"]
    assert response == {"batchItemFailures": [{"itemIdentifier": flaky[0]}]}
    assert pipeline.tracker.status("pt").state == "pending"
    drain(pipeline, queue, handler)
    assert pipeline.tracker.status("pt").state == "acked"


def test_config_from_the_environment() -> None:
    config = PipelineConfig.from_env(
        {"XOR_ACK_TABLE": "chains", "XOR_ACK_QUEUE_URL": "https://q", "XOR_ACK_MAX_RECEIVES": "4"}
    )
    assert (config.mode, config.max_receives, config.queue_url) == ("sum", 4, "https://q")
    assert pickle.loads(pickle.dumps(config)) == config
    bad = [
        ({}, "XOR_ACK_TABLE"),
        ({"XOR_ACK_TABLE": "t", "XOR_ACK_MODE": "avg"}, "XOR_ACK_MODE"),
        ({"XOR_ACK_TABLE": "t", "XOR_ACK_TTL_SECONDS": "soon"}, "XOR_ACK_TTL_SECONDS"),
    ]
    for env, what in bad:
        with pytest.raises(InvalidConfig, match=what):
            PipelineConfig.from_env(env)
    with mock_aws():
        tracker = XorAckDynamoDB(
            "ttt", client=boto3.client("dynamodb", region_name=REGION), delete_on_ack=True
        )
        with pytest.raises(InvalidConfig, match="delete_on_ack"):
            Pipeline(tracker)
        with pytest.raises(InvalidConfig, match="max_receives"):
            PipelineConfig(max_receives=0)


def test_a_pipeline_takes_its_settings_as_one_config() -> None:
    """``Pipeline(tracker, config)``: the settings are a ``PipelineConfig``, whose table is
    needed only to build a tracker; the completion lease's skew margin is the tracker's."""
    from xor_ack_dynamodb import MemoryAck

    config = PipelineConfig(queue_url="https://q", max_receives=2, edge_size=32, metrics_namespace=None)
    pipeline = Pipeline(MemoryAck(mode="xor"), config)
    assert (pipeline.mode, pipeline.queue_url, pipeline.max_receives, pipeline.edge_size) == (
        "xor",
        "https://q",
        2,
        32,
    )
    assert pipeline.config is config and not pipeline.metrics.enabled
    assert Pipeline(MemoryAck()).config == PipelineConfig()  # every default
    for build in (config.tracker, config.ack_config, config.build):
        with pytest.raises(InvalidConfig, match="names no table"):
            build()
    with pytest.raises(InvalidConfig, match="table"):
        PipelineConfig("")  # a table's name, when given, is checked as before
    with pytest.raises(InvalidConfig, match="config must be a PipelineConfig"):
        Pipeline(MemoryAck(), {"queue_url": "https://q"})  # type: ignore[arg-type]
    with mock_aws():
        tracker = XorAckDynamoDB("ttt", client=boto3.client("dynamodb", region_name=REGION), skew=9)
        assert Pipeline(tracker, PipelineConfig("ttt", skew_seconds=5)).guard is tracker


def test_a_memory_tracker_pipeline_fires_once() -> None:
    """Unit tests of handlers need no AWS: the same pipeline on a MemoryAck."""
    from xor_ack_dynamodb import MemoryAck

    fired: list[Completion] = []
    pipeline = Pipeline(MemoryAck(mode="sum"), on_complete=[fired.append])
    for _ in range(2):
        started = pipeline.start("unit", start_id="s-1")
    assert started.state == "acked" and [c.tag for c in fired] == ["unit"]


@mock_aws
def test_a_fifo_batch_stops_at_its_first_failure() -> None:
    pipeline, queue = library_pipeline("sum")
    pipeline.start("fifo", children=["a", "b", "c"])
    records = sorted(receive(pipeline, queue), key=lambda r: r["body"])
    for record in records:
        record["eventSourceARN"] = "arn:aws:sqs:us-east-1:123456789012:work.fifo"
    seen: list[str] = []

    def handler(ctx: Context) -> None:
        seen.append(ctx.body)
        if ctx.body == "b":
            raise RuntimeError("b fails")

    result = process_sqs_batch({"Records": records}, handler, pipeline=pipeline)
    assert seen == ["a", "b"]  # c waits behind b
    assert [f["itemIdentifier"] for f in result["batchItemFailures"]] == [r["messageId"] for r in records[1:]]


def test_clients_for_other_services_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from xor_ack_dynamodb.stores.dynamodb.clients import aws_client

    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9")
    sqs = aws_client("sqs")
    assert sqs.meta.region_name == "eu-west-3" and sqs.meta.endpoint_url == "http://127.0.0.1:9"
    assert aws_client("events").meta.region_name == "eu-west-3"
    with pytest.raises(InvalidConfig, match="unknown AWS service"):
        aws_client("no-such-service")
    config = PipelineConfig("chains", region="ap-south-1")
    assert config.client("s3").meta.region_name == "ap-south-1"


def test_the_completion_claim_on_every_backend(client: Any) -> None:
    """The claim's conditions on moto, the moto server and dynalite (which returns no
    item on a failed condition: the guard reads it instead)."""
    from conftest import unique_table

    tracker = XorAckDynamoDB(unique_table("claims"), client=client, mode="sum")
    tracker.create_table()
    guard = tracker  # the claim on the chain's item (the pipeline's guard)
    tracker.create("c", 5)
    assert guard.claim_completion("c", "a", 1000, 60) == "gone"  # pending: nothing to claim
    tracker.stamp("c", finished=[5])
    assert guard.claim_completion("c", "a", 1000, 60) == "claimed"
    assert guard.claim_completion("c", "b", 1030, 60) == "held"
    assert (
        guard.claim_completion("c", "b", 1065, 60) == "held"
    )  # the lease (to 1060) plus the skew margin (5)
    assert guard.claim_completion("c", "b", 1066, 60) == "claimed"  # a's lease ran out
    assert not guard.mark_completion_fired("c", "a", 1067)  # a was overtaken
    guard.release_completion("c", "a")  # not a's to release: nothing happens
    assert guard.mark_completion_fired("c", "b", 1067)
    assert guard.claim_completion("c", "d", 9999, 60) == "fired"
    status = tracker.status("c")
    assert (status.state, status.value) == ("acked", 0)  # the chain itself is as it was
