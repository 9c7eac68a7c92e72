"""The serverless example end to end: S3, SQS and DynamoDB from moto under one mock_aws,
the real Lambda entry points built from their environment, Lambda's SQS poller played
by ``run_local.poll``."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from moto import mock_aws

from xor_ack_dynamodb import XorAckDynamoDB

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "serverless"

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]


def jsonl(lines: int, poison_at: int | None = None) -> tuple[bytes, Counter[str]]:
    """An input of ``lines`` JSON lines, and the word counts it should produce."""
    out, counts = [], Counter[str]()
    for i in range(lines):
        if i == poison_at:
            out.append("{not json")
            continue
        text = " ".join(WORDS[: 1 + i % len(WORDS)]) + f" w{i % 7}"
        counts.update(text.split())
        out.append(json.dumps({"text": text}))
    return "\n".join(out).encode(), counts


class World:
    """The AWS side of the example, in-process, and the Lambda functions on it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, **settings: str) -> None:
        self.s3 = boto3.client("s3", region_name="us-east-1")
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        self.env = run_local().setup(
            self.s3, self.sqs, XorAckDynamoDB("serverless-chains", client=boto3.client("dynamodb"))
        )
        self.env.update(CHUNK_LINES="6", LEAF_LINES="2", **settings)
        for name, value in self.env.items():
            monkeypatch.setenv(name, value)
        self.handlers = _import("lambda_function")
        self.handlers.pipeline.cache_clear()

    @property
    def tracker(self) -> XorAckDynamoDB:
        tracker: XorAckDynamoDB = self.handlers.pipeline().tracker
        return tracker

    def upload(self, key: str, body: bytes) -> dict[str, Any]:
        event: dict[str, Any] = run_local().upload(self.s3, key, body)
        return event

    def drain(self, handler: Any = None, **kwargs: Any) -> int:
        batches: int = run_local().poll(
            self.sqs, self.env["WORK_QUEUE_URL"], handler or self.handlers.on_work, **kwargs
        )
        return batches

    def completions(self) -> list[dict[str, Any]]:
        messages = []
        while True:
            got = self.sqs.receive_message(QueueUrl=self.env["COMPLETION_QUEUE_URL"], MaxNumberOfMessages=10)
            if not got.get("Messages"):
                return messages
            for m in got["Messages"]:
                messages.append(json.loads(m["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.env["COMPLETION_QUEUE_URL"], ReceiptHandle=m["ReceiptHandle"]
                )

    def marker(self, key: str) -> dict[str, Any] | None:
        try:
            body = self.s3.get_object(Bucket=self.env["OUTPUT_BUCKET"], Key=f"done/{key}.json")["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return None
        marker: dict[str, Any] = json.loads(body)
        return marker


def _import(name: str) -> ModuleType:
    if str(EXAMPLE) not in sys.path:
        sys.path.insert(0, str(EXAMPLE))
    __import__(name)
    return sys.modules[name]


def run_local() -> Any:
    return _import("run_local")


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    with mock_aws():
        yield World(monkeypatch)


def test_happy_path(world: World) -> None:
    body, expected = jsonl(40)
    result = world.handlers.on_object_created(world.upload("in/a.jsonl", body), None)
    [tag] = result["tags"]
    assert world.tracker.status(tag).state == "pending"

    batches = world.drain()
    assert batches >= 2

    status = world.tracker.status(tag)
    assert status.state == "acked" and status.stamp.acked
    marker = world.marker("in/a.jsonl")
    assert marker is not None and marker["tag"] == tag
    assert marker["words"] == dict(expected)
    assert world.completions() == [marker]
    # 40 lines in chunks of 6 (7 chunks), split down to leaves of at most 2 lines:
    # every message stamps once, on top of the create.
    leaves = len(world.s3.list_objects_v2(Bucket=world.env["OUTPUT_BUCKET"], Prefix="results/")["Contents"])
    assert leaves >= 20
    assert world.tracker.stats.events.get("duplicates", 0) == 0


def clean_run_version(monkeypatch: pytest.MonkeyPatch, body: bytes) -> int:
    """The chain's version after a run with no duplicates: 1 + one write per message."""
    with mock_aws():
        clean = World(monkeypatch)
        [tag] = clean.handlers.on_object_created(clean.upload("in/r.jsonl", body), None)["tags"]
        clean.drain()
        return clean.tracker.status(tag).version


def test_redelivered_messages_are_applied_once(monkeypatch: pytest.MonkeyPatch) -> None:
    body, expected = jsonl(14)
    clean_version = clean_run_version(monkeypatch, body)
    with mock_aws():
        world = World(monkeypatch)
        event = world.upload("in/r.jsonl", body)
        [tag] = world.handlers.on_object_created(event, None)["tags"]
        [again] = world.handlers.on_object_created(event, None)["tags"]  # S3 delivers twice: chunks re-sent
        assert again == tag

        seen: Counter[str] = Counter()
        receives: dict[str, list[str]] = {}

        def lossy_lambda(event: dict[str, Any], context: Any) -> dict[str, Any]:
            """Processes every message, but the first time the function 'times out'
            after its work: SQS never hears of it and delivers the same message id again."""
            result: dict[str, Any] = world.handlers.on_work(event, context)
            failures = list(result["batchItemFailures"])
            for record in event["Records"]:
                seen[record["messageId"]] += 1
                receives.setdefault(record["messageId"], []).append(
                    record["attributes"]["ApproximateReceiveCount"]
                )
                if seen[record["messageId"]] == 1:
                    failures.append({"itemIdentifier": record["messageId"]})
            return {"batchItemFailures": failures}

        world.drain(lossy_lambda)

        assert seen and all(n == 2 for n in seen.values())  # every message id delivered twice
        assert all(r == ["1", "2"] for r in receives.values())
        status = world.tracker.status(tag)
        assert status.state == "acked" and status.stamp.acked
        # Nothing applied twice: the same number of writes as the clean run.
        assert status.version == clean_version
        assert world.tracker.stats.events["duplicates"] >= len(seen) // 2
        marker = world.marker("in/r.jsonl")
        assert marker is not None and marker["words"] == dict(expected)
        assert len(world.completions()) == 1  # the redelivered last message did not complete again


def test_poison_message_fails_the_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    with mock_aws():
        world = World(monkeypatch, POISON_AFTER_RECEIVES="3")
        body, _ = jsonl(24, poison_at=13)
        [tag] = world.handlers.on_object_created(world.upload("in/p.jsonl", body), None)["tags"]
        deliveries: Counter[str] = Counter()

        def count(records: list[dict[str, Any]]) -> None:
            for record in records:
                lines = json.loads(record["body"])["lines"]
                if len(lines) <= 2 and "{not json" in lines:  # the leaf that holds the bad line
                    deliveries[record["messageId"]] += 1

        world.drain(on_batch=count)

        assert list(deliveries.values()) == [3]  # retried, then given up on at the limit
        status = world.tracker.status(tag)
        assert status.state == "failed"
        assert status.reason is not None
        assert "poison message" in status.reason and "JSONDecodeError" in status.reason
        assert next(iter(deliveries)) in status.reason  # names the message
        assert world.marker("in/p.jsonl") is None
        assert world.completions() == []
        # The queue is drained: messages of the failed chain were dropped, not retried forever.
        assert world.sqs.receive_message(QueueUrl=world.env["WORK_QUEUE_URL"]).get("Messages") is None


def test_empty_object_completes_at_once(world: World) -> None:
    [tag] = world.handlers.on_object_created(world.upload("in/empty.jsonl", b"\n"), None)["tags"]
    assert world.drain() == 0
    marker = world.marker("in/empty.jsonl")
    assert marker is not None and marker["words"] == {} and marker["tag"] == tag
    assert len(world.completions()) == 1


def test_handlers_build_nothing_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing the entry points needs no environment; the pipeline is built on first use
    from it, once per warm container."""
    for name in ("XOR_ACK_TABLE", "WORK_QUEUE_URL", "OUTPUT_BUCKET"):
        monkeypatch.delenv(name, raising=False)
    handlers = _import("lambda_function")
    handlers.pipeline.cache_clear()
    with pytest.raises(KeyError, match="XOR_ACK_TABLE"):
        handlers.pipeline()
    with mock_aws():
        world = World(monkeypatch)
        assert world.handlers.pipeline() is world.handlers.pipeline()
        settings = world.handlers.pipeline().settings
        assert (settings.chunk_lines, settings.leaf_lines) == (6, 2)
        assert settings.table == "serverless-chains"
