"""Completion from the chain table's DynamoDB stream, whoever completes the chain, on moto
(in-process) and Amazon's DynamoDB Local (SQS and S3 from moto in both): the serverless
layer, a plain ``stamp`` by another tracker, ``xor-ack stamp``; every stream record
delivered twice and the stream read again from its start. Also: a completer that dies
between its ``ADD`` and its ``acked`` write, the claim's lease on two clocks (both sides
of the skew bound), stale records of a tag created again, the chain filter, failed and
expired chains counted, the permanent errors of the SQS handler, the pipeline's
settings, and the EMF metrics. The Spark completer is in ``test_spark_completion.py``."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from conftest import unique_table
from hypothesis import example as hypothesis_example
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws
from serverless_helpers import example

from xor_ack_dynamodb import AckConfig, MemoryAck, XorAckDynamoDB, xor
from xor_ack_dynamodb.cli import main as cli
from xor_ack_dynamodb.errors import InvalidConfig, InvalidStamp, TagNotFound, ZeroBufferNoOp
from xor_ack_dynamodb.serverless import Completion, Envelope, Pipeline, PipelineConfig, StreamPoller
from xor_ack_dynamodb.serverless.edges import child_edge, op_id, owner_for
from xor_ack_dynamodb.serverless.envelope import MalformedEnvelope, decode_record, from_json
from xor_ack_dynamodb.serverless.poller import streams_client
from xor_ack_dynamodb.serverless.stream import read_change
from xor_ack_dynamodb.stores.dynamodb.clients import aws_client
from xor_ack_dynamodb.testing.endpoint import LOCAL_KEY_ID, LOCAL_REGION, LOCAL_SECRET

REGION = "us-east-1"


@dataclass
class Aws:
    """DynamoDB and its stream on one backend; SQS and S3 from moto in-process."""

    backend: str
    dynamodb: Any
    streams: Any
    sqs: Any
    s3: Any
    endpoint: str | None = None

    def tracker(self, table: str, **options: Any) -> XorAckDynamoDB:
        return XorAckDynamoDB(table, client=self.dynamodb, **options)

    def other_client(self) -> Any:
        """A second DynamoDB client on the same backend (another process's)."""
        if self.endpoint is None:
            return boto3.client("dynamodb", region_name=REGION)
        return aws_client(
            "dynamodb",
            region=LOCAL_REGION,
            endpoint_url=self.endpoint,
            aws_access_key_id=LOCAL_KEY_ID,
            aws_secret_access_key=LOCAL_SECRET,
        )

    def cli_connection(self, table: str) -> list[str]:
        found = ["--table", table, "--region", LOCAL_REGION if self.endpoint else REGION]
        return found + (["--endpoint-url", self.endpoint] if self.endpoint else [])


@pytest.fixture(params=["inproc", "ddblocal"])
def aws(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    with mock_aws():
        sqs, s3 = boto3.client("sqs", region_name=REGION), boto3.client("s3", region_name=REGION)
        if request.param == "inproc":
            dynamodb = boto3.client("dynamodb", region_name=REGION)
            yield Aws("inproc", dynamodb, streams_client(dynamodb), sqs, s3)
            return
        server = request.getfixturevalue("ddblocal")
        # The CLI signs with the environment's keys: DynamoDB Local keeps one database per key.
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", LOCAL_KEY_ID)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", LOCAL_SECRET)
        streams = aws_client(
            "dynamodbstreams",
            region=LOCAL_REGION,
            endpoint_url=server.endpoint_url,
            aws_access_key_id=LOCAL_KEY_ID,
            aws_secret_access_key=LOCAL_SECRET,
        )
        yield Aws("ddblocal", server.client(), streams, sqs, s3, server.endpoint_url)


def pipeline_on(aws: Aws, mode: str, fired: list[Completion], **settings: Any) -> tuple[Pipeline, str]:
    table = unique_table("cmpl")
    tracker = aws.tracker(table, mode=mode)
    queue = aws.sqs.create_queue(QueueName=f"work-{table}", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    config = PipelineConfig(queue_url=queue, **settings)
    pipeline = Pipeline(tracker, config, sqs=aws.sqs, s3=aws.s3, on_complete=[fired.append])
    assert pipeline.create_table()
    return pipeline, queue


def receive(aws: Aws, queue: str) -> list[dict[str, Any]]:
    got = aws.sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    )
    records: list[dict[str, Any]] = example("run_local").lambda_records(got.get("Messages", []))
    return records


def read_stream_twice(aws: Aws, pipeline: Pipeline) -> None:
    """Every stream record delivered twice, and then the whole stream again from its
    start: what Lambda's retries and a re-created event source mapping can do."""
    pipeline.stream_poller(aws.streams, twice=True).drain()
    pipeline.stream_poller(aws.streams, twice=True).drain()


COMPLETERS = ["serverless", "stamp", "cli"]


@pytest.mark.parametrize("completer", COMPLETERS)
@pytest.mark.parametrize("mode", ["sum", "xor"])
def test_the_completion_fires_once_whoever_completes_the_chain(aws: Aws, mode: str, completer: str) -> None:
    fired: list[Completion] = []
    pipeline, queue = pipeline_on(aws, mode, fired)
    started = pipeline.start("order-1", children=["the only piece"], start_id="upload-1")
    [record] = receive(aws, queue)
    envelope = decode_record(record, mode).envelope
    edge_text = json.loads(record["messageAttributes"]["xor-ack"]["stringValue"])["edge"]
    if completer == "serverless":
        result = pipeline.process_sqs_batch({"Records": [record]}, lambda ctx: None)
        assert result == {"batchItemFailures": []}
    elif completer == "stamp":  # another process's tracker, knowing nothing of the pipeline
        other = XorAckDynamoDB(pipeline.tracker.table, client=aws.other_client(), mode=mode)  # type: ignore[attr-defined]
        assert other.stamp("order-1", finished=[envelope.edge], owner=envelope.owner).acked
    else:
        table = pipeline.tracker.table  # type: ignore[attr-defined]
        argv = ["stamp", "order-1", "--finish", edge_text, "--mode", mode, "--owner", envelope.owner]
        assert cli([*argv, *aws.cli_connection(table)]) == 0
    assert fired == []  # nothing fires from the completer
    assert pipeline.tracker.status("order-1").state == "acked"
    read_stream_twice(aws, pipeline)
    assert [(c.tag, c.owner, c.mode) for c in fired] == [("order-1", started.owner, mode)]
    events = pipeline.stats.events
    assert events["completions.fired"] == 1 and events["completions.repeated"] == 3
    assert fired[0].id == Completion("order-1", started.owner, mode, 0).id  # the dedup id: tag and owner
    item = aws.dynamodb.get_item(TableName=pipeline.tracker.table, Key={"tagID": {"S": "order-1"}})["Item"]  # type: ignore[attr-defined]
    assert (item["state"]["S"], item["cmpl"]["S"]) == ("acked", "fired")


class Crash(BaseException):
    """The completer's process dies (not an error anything catches)."""


@pytest.mark.parametrize("order", ["stream first", "redelivery first"])
def test_a_completer_that_dies_between_its_add_and_its_acked_write(aws: Aws, order: str) -> None:
    """Sum mode: the completing ADD lands, then its writer dies before storing acked. The
    stream record of the ADD fires the completion; the claim stores acked, so whichever
    comes first (the stream or the completing message's redelivery), the chain ends
    acked, claimed once, fired once."""
    fired: list[Completion] = []
    pipeline, queue = pipeline_on(aws, "sum", fired)
    pipeline.start("job", children=["x"], start_id="s-1")
    [record] = receive(aws, queue)
    envelope = decode_record(record, "sum").envelope
    dying = XorAckDynamoDB(pipeline.tracker.table, client=aws.other_client(), mode="sum")  # type: ignore[attr-defined]

    def die(**kwargs: Any) -> None:
        raise Crash("killed before the acked write")

    dying.client.meta.events.register("before-call.dynamodb.PutItem", die)
    with pytest.raises(Crash):
        dying.stamp("job", finished=[envelope.edge], op_id=op_id(envelope.edge), owner=envelope.owner)
    item = aws.dynamodb.get_item(TableName=dying.table, Key={"tagID": {"S": "job"}})["Item"]
    assert (item["state"]["S"], item["sum"]["N"]) == ("pending", "0")  # the ADD landed, acked did not
    assert pipeline.tracker.status("job").state == "acked"  # and reads acked anyway

    def redeliver() -> None:
        result = pipeline.process_sqs_batch({"Records": [record]}, lambda ctx: None)
        assert result == {"batchItemFailures": []}

    if order == "redelivery first":
        redeliver()
        read_stream_twice(aws, pipeline)
    else:
        read_stream_twice(aws, pipeline)
        redeliver()
        read_stream_twice(aws, pipeline)
    assert [c.tag for c in fired] == ["job"]
    item = aws.dynamodb.get_item(TableName=dying.table, Key={"tagID": {"S": "job"}})["Item"]
    assert (item["state"]["S"], item["sum"]["N"], item["cmpl"]["S"]) == ("acked", "0", "fired")


def test_the_claim_lease_holds_while_clocks_disagree_by_at_most_the_skew_margin(aws: Aws) -> None:
    """A claims at its clock's 1000 with a 60 s lease: it may fire until real time 1060.
    B's clock runs ahead. Within the bound (5 s ahead, the default skew) B never takes
    the claim over before 1060 real; just past it (5.5 s ahead) it can, while A may
    still be firing: the bound the documentation states."""
    tracker = aws.tracker(unique_table("lease"), mode="sum")
    tracker.create_table()
    assert tracker.rules.skew == 5  # the claim's skew margin: the tracker's
    for tag in ("within", "past"):
        tracker.create(tag, 7)
        tracker.stamp(tag, finished=[7])
        assert tracker.claim_completion(tag, "a", 1000.0, 60) == "claimed"
    real = 1059.9  # A is still within its lease
    assert tracker.claim_completion("within", "b", real + 5.0, 60) == "held"
    assert tracker.claim_completion("within", "b", 1060.1 + 5.0, 60) == "claimed"  # once the lease ran out
    assert (
        tracker.claim_completion("past", "b", real + 5.5, 60) == "claimed"
    )  # past the bound: overtaken early


def test_a_stale_record_of_a_tag_created_again_fires_nothing(
    aws: Aws, caplog: pytest.LogCaptureFixture
) -> None:
    fired: list[Completion] = []
    pipeline, queue = pipeline_on(aws, "sum", fired)
    pipeline.start("t", start_id="first")  # no children: completes at once
    first = pipeline.stream_poller(aws.streams)
    records: list[dict[str, Any]] = []
    first.handler = lambda event, context: (
        records.extend(event["Records"]) or pipeline.process_chain_stream(event)
    )
    first.drain()
    assert [c.owner for c in fired] == [owner_for("t", "first")]
    pipeline.tracker.delete("t")
    pipeline.start("t", start_id="second")  # the tag again, another incarnation, completed
    [completed] = [
        r for r in records if (c := read_change(r, pipeline.item_reader())) and c.kind == "completed"
    ]
    with caplog.at_level(logging.ERROR, logger="xor_ack_dynamodb.serverless"):
        assert pipeline.process_chain_stream({"Records": [completed]}) == {"batchItemFailures": []}
    assert len(fired) == 1 and pipeline.stats.events["completions.missed"] == 1
    assert any("NOT fired" in r.getMessage() for r in caplog.records)
    first.drain()  # the second incarnation's own records
    assert [c.owner for c in fired] == [owner_for("t", "first"), owner_for("t", "second")]


def test_only_the_pipelines_chains_fire_and_failures_and_expiries_are_counted(aws: Aws) -> None:
    fired: list[Completion] = []
    pipeline, queue = pipeline_on(aws, "sum", fired)
    tracker = pipeline.tracker
    tracker.create("foreign", 3, owner="another-service")
    tracker.stamp("foreign", finished=[3], owner="another-service")
    pipeline.start("doomed", children=["x"])
    table = tracker.table  # type: ignore[attr-defined]
    assert cli(["fail", "doomed", "--reason", "operator", *aws.cli_connection(table)]) == 0
    pipeline.start("slow", children=["y"])
    records: list[dict[str, Any]] = []
    poller = pipeline.stream_poller(aws.streams)
    poller.handler = lambda event, context: (
        records.extend(event["Records"]) or pipeline.process_chain_stream(event)
    )
    poller.drain()
    assert fired == []  # another service's chain completed: not this pipeline's
    assert pipeline.stats.events["chains.failed"] == 1
    # DynamoDB's TTL deletes an expired chain as the service principal; a user's delete
    # is not an expiry. (TTL never runs on the local backends: the deletion is a real one,
    # marked as TTL marks it.)
    tracker.delete("slow")
    removed: list[dict[str, Any]] = []
    poller.handler = lambda event, context: removed.extend(event["Records"])
    poller.drain()
    [removal] = [r for r in removed if r["eventName"] == "REMOVE"]
    assert pipeline.process_chain_stream({"Records": [removal]}) == {"batchItemFailures": []}
    assert "chains.expired" not in pipeline.stats.events
    by_ttl = {**removal, "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"}}
    assert pipeline.process_chain_stream({"Records": [by_ttl]}) == {"batchItemFailures": []}
    assert pipeline.stats.events["chains.expired"] == 1
    everything = Pipeline(tracker, chains=lambda tag, owner: True, on_complete=[fired.append])
    assert everything.process_chain_stream({"Records": records}) == {"batchItemFailures": []}
    assert [c.tag for c in fired] == ["foreign"]


def test_the_poller_needs_a_stream_and_dynalite_has_none(dynalite_client: Any) -> None:
    tracker = XorAckDynamoDB(unique_table("nostream"), client=dynalite_client, mode="sum")
    with pytest.raises(InvalidConfig, match="serves no DynamoDB Streams"):
        tracker.create_table(stream=True)  # dynalite takes the specification and ignores it
    with pytest.raises(InvalidConfig, match="dynalite does not"):
        StreamPoller.for_table(dynalite_client, None, tracker.table, lambda e, c: None)


# -- permanent errors in the SQS handler ---------------------------------------------------


def envelope_record(aws: Aws, queue: str, envelope: Envelope, receive_count: int) -> dict[str, Any]:
    aws.sqs.send_message(
        QueueUrl=queue,
        MessageBody="work",
        MessageAttributes={"xor-ack": {"DataType": "String", "StringValue": envelope.to_json()}},
    )
    [record] = receive(aws, queue)
    aws.sqs.delete_message(QueueUrl=queue, ReceiptHandle=record["receiptHandle"])  # played by hand
    record["attributes"]["ApproximateReceiveCount"] = str(receive_count)
    return record


def test_a_chain_of_the_other_mode_fails_at_once(aws: Aws) -> None:
    """ChainModeMismatch can never be cured by a redelivery: the chain is failed with the
    reason at the first delivery (today: retried until the queue drops it)."""
    fired: list[Completion] = []
    pipeline, queue = pipeline_on(aws, "sum", fired, max_receives=3)
    owner = owner_for("mixed", "i-1")
    XorAckDynamoDB(pipeline.tracker.table, client=aws.dynamodb).create("mixed", b"\x01" * 16, owner=owner)  # type: ignore[attr-defined]
    record = envelope_record(aws, queue, Envelope("mixed", 12345, owner, "sum"), 1)
    assert pipeline.process_sqs_batch({"Records": [record]}, lambda ctx: None) == {"batchItemFailures": []}
    status = pipeline.tracker.status("mixed")
    assert status.state == "failed" and "ChainModeMismatch" in (status.reason or "")


def test_a_stamp_of_another_length_fails_at_once(aws: Aws) -> None:
    fired: list[Completion] = []
    pipeline, queue = pipeline_on(aws, "xor", fired, max_receives=3)
    owner = owner_for("short", "i-1")
    pipeline.tracker.create("short", b"\x07" * 8, owner=owner)  # an 8-byte chain
    record = envelope_record(aws, queue, Envelope("short", b"\x05" * 16, owner, "xor"), 1)
    assert pipeline.process_sqs_batch({"Records": [record]}, lambda ctx: None) == {"batchItemFailures": []}
    status = pipeline.tracker.status("short")
    assert status.state == "failed" and "BufferLengthsUnequal" in (status.reason or "")


def test_an_unreadable_chain_is_retried_then_dropped_with_an_error(
    aws: Aws, caplog: pytest.LogCaptureFixture
) -> None:
    fired: list[Completion] = []
    pipeline, queue = pipeline_on(aws, "sum", fired, max_receives=3)
    owner = owner_for("corrupt", "i-1")
    table = pipeline.tracker.table  # type: ignore[attr-defined]
    aws.dynamodb.put_item(
        TableName=table,
        Item={
            "tagID": {"S": "corrupt"},
            "sum": {"N": "5"},
            "state": {"S": "half-written"},
            "owner": {"S": owner},
        },
    )
    envelope = Envelope("corrupt", 5, owner, "sum")
    first = envelope_record(aws, queue, envelope, 1)
    assert pipeline.process_sqs_batch({"Records": [first]}, lambda ctx: None) == {
        "batchItemFailures": [{"itemIdentifier": first["messageId"]}]
    }  # an operator may repair the item: retried
    last = envelope_record(aws, queue, envelope, 3)
    with caplog.at_level(logging.ERROR, logger="xor_ack_dynamodb.serverless"):
        assert pipeline.process_sqs_batch({"Records": [last]}, lambda ctx: None) == {"batchItemFailures": []}
    assert pipeline.stats.events["records.dropped"] == 1
    assert any("cannot be read" in r.getMessage() and "corrupt" in r.getMessage() for r in caplog.records)


edges = st.one_of(
    st.tuples(st.just("sum"), st.integers(1, 2**64 - 1)),
    st.tuples(st.just("xor"), st.binary(min_size=1, max_size=64).filter(any)),
)


@settings(max_examples=200, deadline=None)
@given(edge=edges, children=st.integers(0, 40))
@hypothesis_example(edge=("xor", b"B"), children=35)  # found by a run: B and its 35 children cancel out
def test_no_envelope_the_handler_accepts_makes_an_invalid_stamp(edge: tuple[str, Any], children: int) -> None:
    """InvalidStamp in the SQS handler is refuted: every edge an envelope can carry (sum:
    [1, 2**64); xor: 1 to 64 bytes, not all zero), with any number of children derived
    from it, makes a valid stamp (it reaches the store, which has no such chain). (The
    handler still fails the chain at once on InvalidStamp, as on ChainModeMismatch and
    BufferLengthsUnequal.) The one other refusal: an xor edge of n bytes and its
    children cancel out with probability 2**-8n (1 in 256 for one byte, never seen at
    the default 16), and a stamp that changes nothing is ZeroBufferNoOp."""
    mode, value = edge
    envelope = from_json(Envelope("t", value, "o", mode).to_json(), mode)  # type: ignore[arg-type]
    started = [child_edge(envelope.edge, i) for i in range(children)]
    cancel = mode == "xor" and children > 0 and xor(envelope.edge, *started).acked
    with pytest.raises(ZeroBufferNoOp if cancel else TagNotFound):
        MemoryAck(mode=mode).stamp("t", finished=[envelope.edge], started=started, op_id=op_id(envelope.edge))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "mode, text, refused",
    [
        ("sum", "0", 0),
        ("sum", str(2**64), 2**64),
        ("xor", "00" * 16, b"\x00" * 16),
        ("xor", "", b""),
    ],
)
def test_the_envelope_refuses_the_edges_a_stamp_would_refuse(mode: str, text: str, refused: Any) -> None:
    good = Envelope("t", 7 if mode == "sum" else b"\x07" * 16, "o", mode).to_dict()  # type: ignore[arg-type]
    with pytest.raises(MalformedEnvelope):
        from_json(json.dumps({**good, "edge": text}), mode)  # type: ignore[arg-type]
    with pytest.raises((InvalidStamp, ZeroBufferNoOp)):  # the stamp's own refusal, kept out
        MemoryAck(mode=mode).stamp("t", finished=[refused])  # type: ignore[arg-type]


# -- settings -------------------------------------------------------------------------------


def test_a_pipeline_keeps_the_trackers_default_window() -> None:
    """Unset, the pipeline's tracker options are the library's own (an item of about 1 KB
    at its largest: a wider window would make every write of a busy chain 2 WCU)."""
    config = PipelineConfig.from_env({"XOR_ACK_TABLE": "chains"})
    defaults = AckConfig(table="chains", mode=config.mode)  # the pipeline defaults to sum mode
    assert config == PipelineConfig(table="chains")
    assert config.ack_config().options() == defaults.options()


def test_the_environment_sets_the_trackers_options(aws: Aws) -> None:
    table = unique_table("settings")
    queue = aws.sqs.create_queue(QueueName=table)["QueueUrl"]
    env = {
        "XOR_ACK_TABLE": table,
        "XOR_ACK_QUEUE_URL": queue,
        "XOR_ACK_MAX_OPS": "100",
        "XOR_ACK_RETENTION_SECONDS": "172800",
        "XOR_ACK_SKEW_SECONDS": "2",
        "XOR_ACK_EDGE_SIZE": "32",
        "XOR_ACK_MODE": "xor",
    }
    config = PipelineConfig.from_env(env)
    assert (config.max_ops, config.retention_seconds, config.skew_seconds, config.edge_size) == (
        100,
        172800,
        2,
        32,
    )
    assert config.ack_config().max_ops == 100
    pipeline = config.build(tracker=config.tracker(aws.dynamodb), sqs=aws.sqs)
    tracker = pipeline.tracker
    assert (tracker.max_ops, tracker.retention_seconds, tracker.rules.skew) == (100, 172800, 2)  # type: ignore[attr-defined]
    assert pipeline.guard is tracker  # its claim, with its skew margin (2)
    pipeline.create_table()
    pipeline.start("wide", children=["a"])
    item = aws.dynamodb.get_item(TableName=table, Key={"tagID": {"S": "wide"}})["Item"]
    assert item["win"]["N"] == "100"  # the chain keeps the window it was created with
    assert len(bytes(item["stamp"]["B"])) == 32  # the start's edges are 32 bytes
    bad = {
        "XOR_ACK_MAX_OPS": ("5000", "XOR_ACK_MAX_OPS"),
        "XOR_ACK_SKEW_SECONDS": ("-1", "XOR_ACK_SKEW_SECONDS"),
        "XOR_ACK_RETENTION_SECONDS": ("soon", "XOR_ACK_RETENTION_SECONDS"),
        "XOR_ACK_EDGE_SIZE": ("2.5", "XOR_ACK_EDGE_SIZE"),
        "XOR_ACK_MAX_RECEIVES": ("0", "XOR_ACK_MAX_RECEIVES"),
    }
    for name, (value, named) in bad.items():
        with pytest.raises(InvalidConfig, match=named):
            PipelineConfig.from_env({"XOR_ACK_TABLE": table, name: value})


# -- metrics --------------------------------------------------------------------------------


def emf_documents(text: str) -> list[dict[str, Any]]:
    return [doc for line in text.splitlines() if line.startswith("{") and "_aws" in (doc := json.loads(line))]


@mock_aws
def test_a_batch_publishes_its_metrics_as_emf(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "wordcount")
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    dynamodb, sqs, s3 = (boto3.client(s, region_name=REGION) for s in ("dynamodb", "sqs", "s3"))
    aws = Aws("inproc", dynamodb, streams_client(dynamodb), sqs, s3)
    fired: list[Completion] = []
    pipeline, queue = pipeline_on(aws, "sum", fired, max_receives=2, metrics_namespace="pipelines")
    pipeline.start("m", children=["ok", "bad", "ok too"])
    pipeline.start("n", children=["fine"])
    capsys.readouterr()
    records = receive(aws, queue)
    assert len(records) == 4

    def handler(ctx: Any) -> None:
        if ctx.body == "bad":
            raise ValueError("cannot parse")

    pipeline.process_sqs_batch({"Records": records}, handler)  # 3 stamps, 1 retry
    pipeline.process_sqs_batch({"Records": records}, handler)  # 3 duplicates, 1 retry
    [bad] = [r for r in records if r["body"] == "bad"]
    bad["attributes"]["ApproximateReceiveCount"] = "2"
    pipeline.process_sqs_batch({"Records": [bad]}, handler)  # a poison message: chain m failed
    pipeline.stream_poller(aws.streams).drain()  # n completes, m failed
    docs = emf_documents(capsys.readouterr().out)
    assert len(docs) == 4  # one document per batch (the stream's in one batch)
    totals: dict[str, float] = {}
    for doc in docs:
        [directive] = doc["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "pipelines" and directive["Dimensions"] == [["service"]]
        assert doc["service"] == "wordcount"
        for metric in directive["Metrics"]:
            assert metric["Unit"] == "Count"
            value = doc[metric["Name"]]
            totals[metric["Name"]] = totals.get(metric["Name"], 0) + sum(
                value if isinstance(value, list) else [value]
            )
    assert totals == {
        "Stamps": 3,
        "DuplicatesRecognised": 3,
        "Retries": 2,
        "PoisonMessages": 1,
        "Completions": 1,
        "ChainsFailed": 1,
    }


def test_without_powertools_nothing_is_printed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "aws_lambda_powertools.metrics", None)
    fired: list[Completion] = []
    pipeline = Pipeline(MemoryAck(mode="sum"), on_complete=[fired.append])
    assert not pipeline.metrics.enabled
    pipeline.start("quiet", start_id="q")
    assert [c.tag for c in fired] == ["quiet"]
    assert pipeline.publish_metrics() == {"Completions": 1}  # counted, just not printed
    assert capsys.readouterr().out == ""


def test_a_memory_pipeline_fires_from_the_trackers_hook_and_retries_a_failed_target() -> None:
    calls: list[str] = []

    def flaky(completion: Completion) -> None:
        calls.append(completion.tag)
        if len(calls) == 1:
            raise ConnectionError("target down")

    tracker = MemoryAck(mode="sum")
    pipeline = Pipeline(tracker, on_complete=[flaky])
    pipeline.start("unit", start_id="u")  # completes at once: the hook fires, the target fails
    assert calls == ["unit"] and pipeline.unfired == ["unit"]
    assert pipeline.retry_completions() == 0
    assert calls == ["unit", "unit"] and pipeline.stats.events["completions.fired"] == 1
    tracker.create("plain", 4, owner=owner_for("plain", "x"))
    tracker.stamp("plain", finished=[4])  # any caller's completing stamp on the tracker
    assert calls[-1] == "plain"


def test_create_table_adds_the_stream_to_a_table_without_one(inproc_client: Any) -> None:
    tracker = XorAckDynamoDB(unique_table("later"), client=inproc_client)
    assert tracker.create_table()
    assert "StreamSpecification" not in inproc_client.describe_table(TableName=tracker.table)["Table"]
    assert not tracker.create_table(stream=True)  # existed: the stream is added
    spec = inproc_client.describe_table(TableName=tracker.table)["Table"]["StreamSpecification"]
    assert spec == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    other = unique_table("keys")
    inproc_client.create_table(
        TableName=other,
        AttributeDefinitions=[{"AttributeName": "tagID", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "tagID", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
    )
    with pytest.raises(InvalidConfig, match="KEYS_ONLY"):
        XorAckDynamoDB(other, client=inproc_client).create_table(stream=True)
