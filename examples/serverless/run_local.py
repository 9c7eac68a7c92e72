"""Run the serverless example end to end on this machine: S3, SQS, DynamoDB and its
stream from moto.

    python examples/serverless/run_local.py [--mode sum|xor] [--objects N] [--lines N]
                                            [--twice] [--poison] [--metrics]

It creates the buckets, queues and table (with its stream), uploads the objects, hands
their S3 events to ``on_upload``, then plays Lambda's SQS poller (receive up to 10,
invoke, delete what was not reported failed) on the work queue until it is empty, then
Lambda's stream poller on the table's stream (``on_chain_stream`` fires each completion),
then the SQS poller on the completion queue (``on_done``). ``--twice`` delivers every S3
event, every SQS message and every stream batch twice; ``--poison`` adds an object with
a bad line; ``--metrics`` prints each batch's CloudWatch metrics (EMF). It prints each
chain's end, and the requests per message.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Runnable from anywhere: the handlers are imported by module name, as Lambda does.
sys.path.insert(0, str(Path(__file__).resolve().parent))

INPUT_BUCKET, OUTPUT_BUCKET, TABLE = "xor-ack-input", "xor-ack-output", "xor-ack-chains"


def setup(
    s3: Any, sqs: Any, dynamodb: Any, mode: str = "sum", visibility: int = 0, suffix: str = ""
) -> dict[str, str]:
    """Create the buckets, queues and table (names ending in ``suffix``); returns the
    functions' environment (and ``INPUT_BUCKET``). Visibility timeout 0 (default): a
    message not deleted is visible again at once."""
    from xor_ack_dynamodb import XorAckDynamoDB

    for bucket in (INPUT_BUCKET + suffix, OUTPUT_BUCKET + suffix):
        s3.create_bucket(Bucket=bucket)
    attributes = {"VisibilityTimeout": str(visibility)}
    work = sqs.create_queue(QueueName=f"xor-ack-work{suffix}", Attributes=attributes)["QueueUrl"]
    done = sqs.create_queue(QueueName=f"xor-ack-done{suffix}", Attributes=attributes)["QueueUrl"]
    XorAckDynamoDB(TABLE + suffix, client=dynamodb).create_table(stream=True)  # completions come from it
    return {
        "INPUT_BUCKET": INPUT_BUCKET + suffix,
        "XOR_ACK_TABLE": TABLE + suffix,
        "XOR_ACK_MODE": mode,
        "XOR_ACK_QUEUE_URL": work,
        "XOR_ACK_COMPLETION_QUEUE_URL": done,
        "XOR_ACK_MAX_RECEIVES": "3",
        "OUTPUT_BUCKET": OUTPUT_BUCKET + suffix,
    }


def upload(s3: Any, key: str, body: bytes, bucket: str = INPUT_BUCKET) -> dict[str, Any]:
    """Put an object and return the S3 event notification Lambda would get for it."""
    etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"]
    obj = {"key": key, "size": len(body), "eTag": etag.strip('"'), "sequencer": f"{time.time_ns():020X}"}
    record = {
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": bucket}, "object": obj},
    }
    return {"Records": [record]}


def lambda_records(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """boto3's received messages as the records of Lambda's SQS event."""
    return [
        {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": m.get("Attributes", {}),
            "messageAttributes": {
                name: {"stringValue": a.get("StringValue"), "dataType": a["DataType"]}
                for name, a in m.get("MessageAttributes", {}).items()
            },
            "eventSource": "aws:sqs",
        }
        for m in messages
    ]


def poll(
    sqs: Any,
    queue_url: str,
    handler: Callable[[dict[str, Any], Any], Any],
    *,
    twice: bool = False,
    idle_receives: int = 1,
    max_batches: int = 5000,
) -> int:
    """Lambda's SQS event source, locally: receive up to 10 messages, invoke ``handler``,
    delete the records it did not report as failures. With ``twice``, a message's first
    delivery is processed but not deleted (as if the function timed out after its work),
    so every message is delivered at least twice. Stops after ``idle_receives`` empty
    receives in a row. Returns the number of records delivered."""
    delivered = idle = batches = 0
    while idle < idle_receives:
        if batches >= max_batches:
            raise RuntimeError(f"queue not drained after {max_batches} batches")
        got = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
        )
        records = lambda_records(got.get("Messages", []))
        if not records:
            idle += 1
            continue
        idle, batches, delivered = 0, batches + 1, delivered + len(records)
        result = handler({"Records": records}, None) or {}
        failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        if twice:
            failed |= {
                r["messageId"] for r in records if r["attributes"].get("ApproximateReceiveCount") == "1"
            }
        finished = [r for r in records if r["messageId"] not in failed]
        if finished:
            entries = [{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(finished)]
            sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)
    return delivered


def sample(index: int, lines: int, poison: bool = False) -> bytes:
    words = ["ack", "chain", "edge", "stamp", "zero"]
    rows = [json.dumps({"text": " ".join(words[: 1 + (i + index) % 5])}) for i in range(lines)]
    if poison:
        rows[lines // 2] = "{not json"
    return "\n".join(rows).encode()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=["sum", "xor"], default="sum")
    parser.add_argument("--objects", type=int, default=3)
    parser.add_argument("--lines", type=int, default=60)
    parser.add_argument("--twice", action="store_true", help="deliver every event and message twice")
    parser.add_argument("--poison", action="store_true", help="add an object with a bad line")
    parser.add_argument("--metrics", action="store_true", help="print each batch's metrics (EMF)")
    args = parser.parse_args(argv)

    import boto3
    from moto import mock_aws

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        os.environ.setdefault(name, value)
    os.environ.setdefault("AWS_REGION", "us-east-1")
    if not args.metrics:
        os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
    with mock_aws():
        s3, sqs = boto3.client("s3", region_name="us-east-1"), boto3.client("sqs", region_name="us-east-1")
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        os.environ.update(setup(s3, sqs, dynamodb, args.mode))
        import lambda_function as fn

        fn.pipeline.cache_clear()
        bodies = {f"in/object-{i}.jsonl": sample(i, args.lines) for i in range(args.objects)}
        if args.poison:
            bodies["in/poison.jsonl"] = sample(99, args.lines, poison=True)
        tags = []
        for key, body in bodies.items():
            event = upload(s3, key, body)
            for _ in range(2 if args.twice else 1):
                tags += fn.on_upload(event, None)["started"]
        work = poll(sqs, os.environ["XOR_ACK_QUEUE_URL"], fn.on_work, twice=args.twice)
        stream = stream_poller(dynamodb, os.environ["XOR_ACK_TABLE"], fn.on_chain_stream, twice=args.twice)
        stream.drain()
        done = poll(sqs, os.environ["XOR_ACK_COMPLETION_QUEUE_URL"], fn.on_done)
        report(fn.pipeline(), sorted(set(tags)), work, done, stream)
    return 0


def stream_poller(dynamodb: Any, table: str, handler: Any, *, twice: bool = False) -> Any:
    """Lambda's event source on the table's stream, locally (``twice``: every batch
    handed over twice)."""
    from xor_ack_dynamodb.serverless import StreamPoller

    # streams=None: the library's streams client beside dynamodb (its region, endpoint, keys)
    return StreamPoller.for_table(dynamodb, None, table, handler, twice=twice)


def report(pipeline: Any, tags: list[str], work: int, completions: int, stream: Any) -> None:
    statuses = pipeline.tracker.status_many(tags)
    for tag in tags:
        status = statuses[tag]
        print(f"{status.state:8} {tag}" + (f"  ({status.reason})" if status.reason else ""))
    dynamo = pipeline.tracker.stats.requests
    dynamo.pop("BatchGetItem", None)  # this report's own read
    total = sum(dynamo.values())
    other = pipeline.stats.requests
    print(
        f"mode {pipeline.mode}: {len(tags)} chains, {work} work messages delivered, {completions} completions"
    )
    print(f"DynamoDB requests: {total} ({', '.join(f'{k} {v}' for k, v in sorted(dynamo.items()))})")
    print(f"DynamoDB requests per work message: {total / max(1, work):.2f}")
    print(f"stream poller: {stream.delivered} records, requests {stream.stats.requests}")
    print(f"SQS/S3 requests by the library: {other}")
    print(f"records: { {k: v for k, v in pipeline.stats.events.items()} }")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
