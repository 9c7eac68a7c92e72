"""xor_ack_dynamodb.testing's SQS events: the records Lambda builds, read by Powertools and
by a pipeline as Lambda's own; messages received from a queue turned into them; and the
local event source (deliver_sqs) deleting only what the handler did not report."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes import SQSEvent
from moto import mock_aws

from xor_ack_dynamodb import MemoryAck
from xor_ack_dynamodb.serverless import Envelope, Pipeline
from xor_ack_dynamodb.testing import deliver_sqs, records_from_messages, sqs_event, sqs_record


def test_a_record_has_lambdas_shape_and_powertools_reads_it() -> None:
    record = sqs_record(
        {"n": 1},
        message_attributes={
            "kind": "word",
            "size": 3,
            "raw": b"\x01",
            "api": {"DataType": "String", "StringValue": "x"},
        },
        receive_count=3,
        queue_arn="arn:aws:sqs:eu-west-1:111122223333:jobs",
    )
    event = SQSEvent(sqs_event(record))
    (parsed,) = list(event.records)
    assert json.loads(parsed.body) == {"n": 1}
    assert parsed.message_id == record["messageId"]
    assert parsed.attributes.approximate_receive_count == "3"
    assert parsed.message_attributes["kind"].string_value == "word"
    assert parsed.message_attributes["size"].data_type == "Number"
    assert parsed.message_attributes["api"].string_value == "x"
    assert parsed.aws_region == "eu-west-1" and parsed.event_source == "aws:sqs"
    assert parsed.queue_url.endswith("/111122223333/jobs")
    assert sqs_event("a", "b")["Records"][0]["messageId"] != sqs_event("a")["Records"][0]["messageId"]


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="receive_count"):
        sqs_record("x", receive_count=0)
    with pytest.raises(ValueError, match="message_group_id"):
        sqs_record("x", queue_arn="arn:aws:sqs:us-east-1:123456789012:q.fifo")
    with pytest.raises(TypeError, match="message attribute"):
        sqs_record("x", message_attributes={"bad": [1]})
    fifo = sqs_record("x", queue_arn="arn:aws:sqs:us-east-1:123456789012:q.fifo", message_group_id="g")
    assert fifo["attributes"]["MessageGroupId"] == "g"


def _pipeline() -> tuple[MemoryAck, Pipeline, dict[str, Any]]:
    ack = MemoryAck(mode="sum")
    pipeline = Pipeline(ack)
    edge = ack.new_edge()
    ack.create("doc", edge, owner="up")
    return ack, pipeline, Envelope("doc", edge, "up", "sum").sqs_attributes()


def test_a_pipeline_and_powertools_process_the_event_as_lambdas() -> None:
    ack, pipeline, envelope = _pipeline()
    first = sqs_record("w", message_attributes=envelope)
    processor = BatchProcessor(event_type=EventType.SQS)
    result = process_partial_response(
        event=sqs_event(first), record_handler=pipeline.record_handler(lambda ctx: None), processor=processor
    )
    assert result == {"batchItemFailures": []}
    assert ack.status("doc").state == "acked"
    again = sqs_record("w", message_attributes=envelope, message_id=first["messageId"], receive_count=2)
    assert pipeline.process_sqs_batch(sqs_event(again), lambda ctx: None) == {"batchItemFailures": []}
    assert ack.stats.events["duplicates"] == 1


@mock_aws
def test_deliver_sqs_receives_invokes_and_deletes_what_did_not_fail() -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="work", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    for n in range(12):
        sqs.send_message(
            QueueUrl=url,
            MessageBody=str(n),
            MessageAttributes={"n": {"DataType": "Number", "StringValue": str(n)}},
        )
    seen: list[tuple[str, str, str]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        failures = []
        for r in event["Records"]:
            seen.append(
                (
                    r["body"],
                    r["attributes"]["ApproximateReceiveCount"],
                    r["messageAttributes"]["n"]["stringValue"],
                )
            )
            if r["body"] == "7" and r["attributes"]["ApproximateReceiveCount"] == "1":
                failures.append({"itemIdentifier": r["messageId"]})  # fails once: delivered again
        return {"batchItemFailures": failures}

    delivered = deliver_sqs(sqs, url, handler)
    assert delivered == 13
    assert sorted(b for b, _, _ in seen) == sorted([str(n) for n in range(12)] + ["7"])
    assert ("7", "2", "7") in seen  # the redelivery carries its receive count
    left = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert left["Attributes"]["ApproximateNumberOfMessages"] == "0"

    # records_from_messages keeps the queue's ARN and the message's attributes
    sqs.send_message(QueueUrl=url, MessageBody="x")
    got = sqs.receive_message(QueueUrl=url, AttributeNames=["All"], MessageAttributeNames=["All"])
    (record,) = records_from_messages(got["Messages"], "arn:aws:sqs:us-east-1:123456789012:work")
    assert (
        record["eventSourceARN"].endswith(":work") and record["attributes"]["ApproximateReceiveCount"] == "1"
    )


@mock_aws
def test_deliver_sqs_stops_on_a_message_that_keeps_failing() -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="poison", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="bad")

    def fail_all(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]}

    with pytest.raises(RuntimeError, match="not drained after 3 batches"):
        deliver_sqs(sqs, url, fail_all, max_batches=3)
