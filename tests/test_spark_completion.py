"""A chain started by the serverless layer and completed by a Spark handed run fires its
completion exactly once, from the chain table's stream: the Spark job (``run_handed_frames``
and ``run_handed_rdd``, which end in ``apply_acks`` on the executors) knows nothing of the
pipeline's targets. On a moto server and on DynamoDB Local (SQS from moto in-process),
every stream record delivered twice and the stream read again from its start."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from conftest import unique_table
from moto import mock_aws

from xor_ack_dynamodb import AckConfig, XorAckDynamoDB
from xor_ack_dynamodb.serverless import Completion, Pipeline, PipelineConfig
from xor_ack_dynamodb.serverless.envelope import decode_record
from xor_ack_dynamodb.spark import (
    CsvPartitionWriter,
    FrameTracking,
    Handed,
    Tracking,
    read_csv_parts,
    run_handed_frames,
    run_handed_rdd,
)
from xor_ack_dynamodb.stores.dynamodb.clients import aws_client

pytestmark = pytest.mark.spark

REGION = "us-east-1"


@pytest.fixture(params=["moto_server", "ddblocal"])
def config(request: pytest.FixtureRequest) -> Iterator[AckConfig]:
    server = request.getfixturevalue(request.param)
    with mock_aws():  # SQS here; DynamoDB on the server, which the executors reach too
        yield server.config(unique_table("sparkdone"))


def started(config: AckConfig, text: str) -> tuple[Pipeline, Handed, list[Completion], Any]:
    """A pipeline (xor mode: Spark continues xor chains) starts a chain with one child;
    its message is handed to Spark instead of a worker."""
    fired: list[Completion] = []
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName=config.table)["QueueUrl"]
    tracker = XorAckDynamoDB.from_config(config)
    pipeline = Pipeline(tracker, PipelineConfig(queue_url=queue), sqs=sqs, on_complete=[fired.append])
    pipeline.create_table()
    pipeline.start("doc-1", children=[text], start_id="upload-1")
    got = sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["All"])["Messages"]
    record = {
        "messageId": got[0]["MessageId"],
        "body": got[0]["Body"],
        "messageAttributes": {
            "xor-ack": {"stringValue": got[0]["MessageAttributes"]["xor-ack"]["StringValue"]}
        },
    }
    message = decode_record(record, "xor")
    handed = Handed.from_envelope(message.envelope, root=message.body)
    streams = aws_client(
        "dynamodbstreams",
        region=config.region,
        endpoint_url=config.endpoint_url,
        aws_access_key_id=config.aws_access_key_id,
        aws_secret_access_key=config.aws_secret_access_key,
    )
    return pipeline, handed, fired, streams


def fires_once(pipeline: Pipeline, fired: list[Completion], streams: Any) -> None:
    assert pipeline.tracker.status("doc-1").state == "acked"
    assert fired == []  # the Spark job fired nothing
    pipeline.stream_poller(streams, twice=True).drain()
    pipeline.stream_poller(streams, twice=True).drain()
    assert [c.tag for c in fired] == ["doc-1"]
    assert pipeline.stats.events["completions.fired"] == 1


def test_a_dataframe_handed_run_completes_and_the_stream_fires_once(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    pipeline, handed, fired, streams = started(config, "apple banana apple")
    rows = spark.createDataFrame([(handed.tag, handed.root)], "xor_ack_tag string, item string")

    def job(attempt: Any) -> Any:
        frame = attempt.start(rows, "xor_ack_tag").select("xor_ack_tag", "item")
        words = frame.explode(F.split("item", " "), "word")
        return words.group_by("word").count().write(tmp_path / "out", tag_column="chain")

    report = run_handed_frames(FrameTracking(spark, config), [handed], job)
    assert [(o.key, o.state) for o in report.outcomes] == [("doc-1", "acked")]
    written = sorted((r["word"], r["count"]) for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert written == [("apple", 2), ("banana", 1)]
    fires_once(pipeline, fired, streams)


def test_an_rdd_handed_run_completes_and_the_stream_fires_once(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    pipeline, handed, fired, streams = started(config, "cherry cherry")
    out = tmp_path / "out"

    def job(started: Any, attempt: int) -> Any:
        return (
            started.fan_out(lambda text: text.split())
            .map(lambda w: (w, 1))
            .reduce_by_key(operator.add, 1)
            .sink(CsvPartitionWriter(str(out), header=("word", "count"), to_row=lambda r: r))
        )

    report = run_handed_rdd(Tracking(spark.sparkContext, config, edge_size=16), [handed], job)
    assert [(o.key, o.state) for o in report.outcomes] == [("doc-1", "acked")]
    assert [(r["word"], int(r["count"])) for r in read_csv_parts(out)] == [("cherry", 2)]
    fires_once(pipeline, fired, streams)
