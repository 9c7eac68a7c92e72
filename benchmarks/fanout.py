"""Issue 18's serverless fan-out: what exactness costs when SQS delivers every message
twice and some copies very late.

    python -m benchmarks.fanout [--objects 3] [--children 500] [--late 0.1]
                                [--mode sum|xor|both] [--dynamodb ddblocal|inproc]

Each object is one chain started with ``children`` messages (leaves) on a real SQS queue
(moto: visibility timeouts and ``ApproximateReceiveCount`` as SQS keeps them). Lambda's
poller is played three ways:

* ``once``: every message delivered once (the first-delivery-only run: the issue's
  "today's 1.04 requests per message");
* ``twice``: every message processed and not deleted (its function timed out after its
  work), so SQS delivers it again (receive 2), interleaved with the others' first
  deliveries; the copy is deleted;
* ``twice+late``: as ``twice``, but a ``late`` share of the second deliveries is held
  back until every other message was processed (the chain has moved hundreds of ops on:
  their first copies are in its history, not its item). So that they find their chain
  still pending (a copy that finds it acked is refused whatever its history), each
  object's last child is held back until after them (and delivered once, at the end).

Each run ends with every chain acked and its completion fired once (from the table's
stream). DynamoDB's figures are counted on the tracker's client: requests by operation,
the capacity DynamoDB reported (``ReturnConsumedCapacity``) for successful writes and
reads, and one write unit for each refused conditional write (AWS bills it; its error
carries no figure). Completion requests (the stream handler's claim) are counted apart.
Request counts do not depend on the machine's load; no timing is reported.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: Writes DynamoDB bills write units for.
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")

DELIVERIES = ("once", "twice", "twice+late")


class Meter:
    """A botocore hook on one DynamoDB client: requests by operation, the capacity units
    reported for successful writes and reads, and the refused writes."""

    def __init__(self, client: Any) -> None:
        self.requests: Counter[str] = Counter()
        self.write_units = self.read_units = 0.0
        self.refused = 0
        client.meta.events.register("after-call.dynamodb", self._count)

    def snapshot(self) -> tuple[int, float, float, int]:
        return sum(self.requests.values()), self.write_units, self.read_units, self.refused

    def _count(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        self.requests[model.name] += 1
        if http_response.status_code >= 300:
            if model.name in WRITES:
                self.refused += 1
            return
        found = parsed.get("ConsumedCapacity") or []
        units = sum(
            float(c.get("CapacityUnits") or 0) for c in (found if isinstance(found, list) else [found])
        )
        if model.name in WRITES:
            self.write_units += units
        else:
            self.read_units += units


@dataclass
class Result:
    mode: str
    delivery: str
    objects: int
    children: int
    late: float
    deliveries: int = 0
    requests: Counter[str] = field(default_factory=Counter)
    write_units: float = 0.0
    read_units: float = 0.0
    refused: int = 0
    completion_requests: int = 0
    events: dict[str, int] = field(default_factory=dict)
    states: Counter[str] = field(default_factory=Counter)
    completions: Counter[str] = field(default_factory=Counter)
    tags: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    @property
    def per_message(self) -> float:
        return self.total / self.deliveries

    @property
    def wcu_per_message(self) -> float:
        return (self.write_units + self.refused) / self.deliveries

    @property
    def exact(self) -> bool:
        """Every chain acked, its completion fired exactly once."""
        return self.states == Counter({"acked": self.objects}) and self.completions == Counter(
            {t: 1 for t in self.tags}
        )


def leaf(ctx: Any) -> None:
    """A child's work: nothing to emit (the fan-out is the start's)."""


def run(
    dynamodb: Any,
    streams: Any,
    sqs: Any,
    *,
    mode: str,
    delivery: str,
    objects: int,
    children: int,
    late: float = 0.1,
    seed: int = 18,
) -> Result:
    """One run (see the module doc) on ``dynamodb`` (and its ``streams``) with ``sqs``
    (moto's). Returns its figures; the chains are left in a fresh table."""
    from xor_ack_dynamodb import XorAckDynamoDB
    from xor_ack_dynamodb.serverless import Completion, Pipeline, PipelineConfig
    from xor_ack_dynamodb.testing import records_from_messages

    if delivery not in DELIVERIES:
        raise ValueError(f"delivery must be one of {DELIVERIES}")
    pick = random.Random(seed)
    name = f"fanout-{uuid.uuid4().hex[:12]}"
    queue = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    fired: list[Completion] = []
    tracker = XorAckDynamoDB(name, client=dynamodb, mode=mode)
    pipeline = Pipeline(
        tracker, PipelineConfig(queue_url=queue, metrics_namespace=None), sqs=sqs, on_complete=[fired.append]
    )
    pipeline.create_table()
    meter = Meter(dynamodb)
    out = Result(mode, delivery, objects, children, late if delivery == "twice+late" else 0.0)
    before = meter.snapshot()
    before_requests = Counter(meter.requests)
    for n in range(objects):
        started = pipeline.start(f"object-{n}", [{"i": i} for i in range(children)], start_id=f"upload-{n}")
        out.tags.append(started.tag)
    held: list[str] = []
    closers: list[str] = []

    def hold(handle: str) -> None:
        sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=3600)

    def drain() -> None:
        while True:
            got = sqs.receive_message(
                QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
            ).get("Messages", [])
            if not got:
                return
            records = []
            for record in records_from_messages(got):
                first = record["attributes"]["ApproximateReceiveCount"] == "1"
                if delivery == "twice+late" and first and json.loads(record["body"])["i"] == children - 1:
                    closers.append(record["receiptHandle"])  # unprocessed until the late copies are in
                    hold(record["receiptHandle"])
                else:
                    records.append(record)
            if not records:
                continue
            result = pipeline.process_sqs_batch({"Records": records}, leaf)
            assert result["batchItemFailures"] == [], result
            out.deliveries += len(records)
            delete = []
            for record in records:
                handle = record["receiptHandle"]
                if delivery == "once" or record["attributes"]["ApproximateReceiveCount"] != "1":
                    delete.append({"Id": str(len(delete)), "ReceiptHandle": handle})
                elif delivery == "twice+late" and pick.random() < late:
                    held.append(handle)  # invisible until every other message was processed
                    hold(handle)
                else:  # the function "timed out": visible again at once, received again later
                    sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=0)
            if delete:
                sqs.delete_message_batch(QueueUrl=queue, Entries=delete)

    drain()
    for batch in (held, closers):
        for handle in batch:
            sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=0)
        drain()
    after = meter.snapshot()
    out.requests = Counter(meter.requests) - before_requests
    out.write_units, out.read_units, out.refused = (
        after[1] - before[1],
        after[2] - before[2],
        after[3] - before[3],
    )
    pipeline.stream_poller(streams).drain()
    out.completion_requests = meter.snapshot()[0] - after[0]
    out.completions = Counter(c.tag for c in fired)
    out.states = Counter(s.state for s in tracker.status_many(out.tags).values())
    out.events = dict(pipeline.stats.events)
    sqs.delete_queue(QueueUrl=queue)
    return out



def table(results: list[Result]) -> str:
    head = (
        "| mode | delivery | objects x children | messages | DynamoDB requests | requests / message "
        "| WCU / message | RCU | refused writes | duplicates | completion requests | exact |"
    )
    rows = [head, "|" + "---|" * 12]
    for r in results:
        ops = ", ".join(f"{k} {v}" for k, v in sorted(r.requests.items()))
        rows.append(
            f"| {r.mode} | {r.delivery}{f' ({r.late:.0%} late)' if r.late else ''} "
            f"| {r.objects} x {r.children} | {r.deliveries} | {r.total} ({ops}) | {r.per_message:.3f} "
            f"| {r.wcu_per_message:.3f} | {r.read_units:.1f} | {r.refused} "
            f"| {r.events.get('stamps.duplicate', 0)} | {r.completion_requests} "
            f"| {'yes' if r.exact else 'NO: ' + str(dict(r.states)) + ' ' + str(dict(r.completions))} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=3)
    parser.add_argument("--children", type=int, default=500)
    parser.add_argument("--late", type=float, default=0.1)
    parser.add_argument("--mode", choices=["sum", "xor", "both"], default="both")
    parser.add_argument("--dynamodb", choices=["ddblocal", "inproc"], default="ddblocal")
    args = parser.parse_args(argv)

    import os

    import boto3
    from moto import mock_aws

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
    modes = ["sum", "xor"] if args.mode == "both" else [args.mode]
    results: list[Result] = []

    def runs(dynamodb: Any, streams: Any, sqs: Any) -> None:
        for m in modes:
            for d in DELIVERIES:
                found = run(
                    dynamodb,
                    streams,
                    sqs,
                    mode=m,
                    delivery=d,
                    objects=args.objects,
                    children=args.children,
                    late=args.late,
                )
                results.append(found)
                print(table([found]).splitlines()[-1], flush=True)  # a row as soon as it is known

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        if args.dynamodb == "inproc":
            from xor_ack_dynamodb.serverless.poller import streams_client

            dynamodb = boto3.client("dynamodb", region_name="us-east-1")
            runs(dynamodb, streams_client(dynamodb), sqs)
        else:
            from xor_ack_dynamodb import DynamoDBLocal
            from xor_ack_dynamodb.stores.dynamodb.clients import aws_client
            from xor_ack_dynamodb.testing.endpoint import LOCAL_KEY_ID, LOCAL_REGION, LOCAL_SECRET

            with DynamoDBLocal() as server:
                streams = aws_client(
                    "dynamodbstreams",
                    region=LOCAL_REGION,
                    endpoint_url=server.endpoint_url,
                    aws_access_key_id=LOCAL_KEY_ID,
                    aws_secret_access_key=LOCAL_SECRET,
                )
                runs(server.client(), streams, sqs)
    print(f"\nDynamoDB: {args.dynamodb}; SQS: moto in-process")
    print(table(results))
    return 0 if all(r.exact for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
