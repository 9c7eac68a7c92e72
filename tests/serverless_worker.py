"""One worker process of the serverless process test: the example's ``on_work`` function
pulling from the work queue of a moto server, as one Lambda instance would, or (argument
``stream``) its ``on_chain_stream`` function reading the chain table's stream, until its
parent writes ``stop`` (checked between batches). Configured by the environment
(``AWS_ENDPOINT_URL``, ``XOR_ACK_*``); prints one JSON line of counters at the end."""

from __future__ import annotations

import json
import os
import select
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "serverless"))

import lambda_function as fn  # noqa: E402
from run_local import lambda_records  # noqa: E402


def stopped() -> bool:
    ready, _, _ = select.select([sys.stdin], [], [], 0)
    return bool(ready) and sys.stdin.readline().strip() in ("stop", "")


def stream() -> None:
    from xor_ack_dynamodb.serverless import StreamPoller

    pipeline = fn.pipeline()
    tracker = pipeline.tracker
    poller = StreamPoller.for_table(
        tracker.client, None, tracker.table, fn.on_chain_stream
    )
    print(json.dumps({"ready": True}), flush=True)
    while not stopped():
        if not poller.poll():
            time.sleep(0.05)
    print(
        json.dumps(
            {
                "delivered": poller.delivered,
                "events": pipeline.stats.events,
                "dynamodb": tracker.stats.requests,
                "streams": poller.stats.requests,
            }
        ),
        flush=True,
    )


def main() -> None:
    if sys.argv[1:] == ["stream"]:
        stream()
        return
    pipeline = fn.pipeline()
    sqs, queue = pipeline.sqs, os.environ["XOR_ACK_QUEUE_URL"]
    delivered = 0
    print(json.dumps({"ready": True}), flush=True)
    while not stopped():
        got = sqs.receive_message(
            QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"],
            WaitTimeSeconds=0,  # a long poll would hold the serialized server for everyone
        )  # fmt: skip
        records = lambda_records(got.get("Messages", []))
        if not records:
            time.sleep(0.05)
            continue
        delivered += len(records)
        failed = {f["itemIdentifier"] for f in fn.on_work({"Records": records}, None)["batchItemFailures"]}
        done = [
            {"Id": str(i), "ReceiptHandle": r["receiptHandle"]}
            for i, r in enumerate(records)
            if r["messageId"] not in failed
        ]
        if done:
            sqs.delete_message_batch(QueueUrl=queue, Entries=done)
    print(
        json.dumps(
            {
                "delivered": delivered,
                "events": pipeline.stats.events,
                "dynamodb": pipeline.tracker.stats.requests,
                "conflicts": pipeline.tracker.stats.events.get("conflicts", 0),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
