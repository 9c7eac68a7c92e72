"""Run the serverless example on this machine: S3, SQS and DynamoDB from moto, in-process.

    python examples/serverless/run_local.py [FILE.jsonl]

It creates the bucket, queues and table, uploads the file (or a generated one), delivers
the S3 event to ``on_object_created``, then plays Lambda's SQS poller: receive a batch,
invoke ``on_work``, delete what succeeded, until the queue is empty. It prints the done
marker, the chain's status and the tracker's request counts.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Runnable as a script from anywhere: the handlers import ``fanout`` by name, as on Lambda.
sys.path.insert(0, str(Path(__file__).resolve().parent))

INPUT_BUCKET = "xor-ack-input"
OUTPUT_BUCKET = "xor-ack-output"


def s3_event(bucket: str, key: str, etag: str) -> dict[str, Any]:
    """The event S3 sends a function for one new object (the fields the handler reads)."""
    return {
        "Records": [
            {
                "eventSource": "aws:s3",
                "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": bucket}, "object": {"key": key, "eTag": etag}},
            }
        ]
    }


def setup(s3: Any, sqs: Any, tracker: Any) -> dict[str, str]:
    """Create the buckets, queues and table; returns the handlers' environment."""
    for bucket in (INPUT_BUCKET, OUTPUT_BUCKET):
        s3.create_bucket(Bucket=bucket)
    # Visibility timeout 0: a message not deleted is visible again at once (a redelivery).
    work = sqs.create_queue(QueueName="xor-ack-work", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    done = sqs.create_queue(QueueName="xor-ack-done")["QueueUrl"]
    tracker.create_table()
    return {
        "XOR_ACK_TABLE": tracker.table,
        "WORK_QUEUE_URL": work,
        "COMPLETION_QUEUE_URL": done,
        "OUTPUT_BUCKET": OUTPUT_BUCKET,
    }


def upload(s3: Any, key: str, body: bytes) -> dict[str, Any]:
    etag = s3.put_object(Bucket=INPUT_BUCKET, Key=key, Body=body)["ETag"]
    return s3_event(INPUT_BUCKET, key, etag)


def poll(
    sqs: Any,
    queue_url: str,
    handler: Callable[[dict[str, Any], Any], dict[str, Any]],
    *,
    max_batches: int = 1000,
    on_batch: Callable[[list[dict[str, Any]]], None] | None = None,
) -> int:
    """Lambda's SQS event source, locally: receive up to 10 messages, invoke ``handler``
    with them as an SQS event, delete those not reported as failures. Stops when a
    receive comes back empty. Returns the number of batches delivered."""
    batches = 0
    while batches < max_batches:
        response = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
        )
        messages = response.get("Messages", [])
        if not messages:
            return batches
        records = [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "eventSource": "aws:sqs",
            }
            for m in messages
        ]
        if on_batch is not None:
            on_batch(records)
        result = handler({"Records": records}, None)
        failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        done = [r for r in records if r["messageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(done)],
            )
        batches += 1
    raise RuntimeError(f"queue not drained after {max_batches} batches")


def main(argv: list[str]) -> int:
    import boto3
    from moto import mock_aws

    from xor_ack_dynamodb import XorAckDynamoDB

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    if argv:
        body = Path(argv[0]).read_bytes()
    else:
        body = "\n".join(
            json.dumps({"text": f"line {i} of the quick brown fox"}) for i in range(100)
        ).encode()
    with mock_aws():
        s3, sqs = boto3.client("s3"), boto3.client("sqs")
        env = setup(s3, sqs, XorAckDynamoDB("xor-ack-serverless"))
        env.update(CHUNK_LINES="20", LEAF_LINES="5")
        os.environ.update(env)
        import lambda_function

        print(lambda_function.on_object_created(upload(s3, "input/example.jsonl", body), None))
        batches = poll(sqs, env["WORK_QUEUE_URL"], lambda_function.on_work)
        tracker = lambda_function.pipeline().tracker
        done = s3.get_object(Bucket=OUTPUT_BUCKET, Key="done/input/example.jsonl.json")
        marker = json.loads(done["Body"].read())
        print(f"{batches} SQS batches; done marker: {json.dumps(marker)[:300]}")
        print(f"chain: {tracker.status(marker['tag'])}")
        print(f"tracker requests: {tracker.stats.snapshot()}")
        print(f"capacity units reported: {tracker.stats.capacity_units}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
