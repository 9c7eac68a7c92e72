"""Worker processes racing on one queue: the example's ``on_work`` in three separate
processes pulling concurrently from a moto server (S3, SQS and DynamoDB over HTTP, each
request atomic: ``LocalDynamoDB`` serializes them), both modes, while two processes run
``on_chain_stream`` on the chain table's stream, each reading all of it (so every
completion record reaches two firers at once). Every chain ends acked, or failed with its
reason; each acked chain's completion fires exactly once; the objects' word counts are
exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest
from serverless_helpers import example, jsonl, queue_depth, receive_all, summary

from xor_ack_dynamodb import LocalDynamoDB

pytestmark = pytest.mark.server

WORKER = Path(__file__).resolve().parent / "serverless_worker.py"
ROOT = Path(__file__).resolve().parent.parent


class Worker:
    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), *args],
            env=env,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.lines: list[dict[str, Any]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(json.loads(line))

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the process polls (its imports and clients done): a worker still
        starting when the queue fills would find nothing left on a busy machine."""
        deadline = time.monotonic() + timeout
        while not self.lines and time.monotonic() < deadline:
            assert self.process.poll() is None, "the worker process ended before it was ready"
            time.sleep(0.05)
        assert self.lines and self.lines[0] == {"ready": True}

    def stop(self) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write("stop\n")
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0
        self.reader.join(10)
        return self.lines[-1]


@pytest.mark.parametrize("mode", ["sum", "xor"])
def test_worker_processes_pull_concurrently(
    moto_server: LocalDynamoDB, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    endpoint = moto_server.endpoint_url
    assert endpoint is not None
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    s3, sqs, ddb = (boto3.client(s, region_name="us-east-1") for s in ("s3", "sqs", "dynamodb"))
    local, fn = example("run_local"), example("lambda_function")
    env = local.setup(s3, sqs, ddb, mode, visibility=2, suffix=f"-{mode}-{os.getpid()}")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CHUNK_LINES", "6")
    monkeypatch.setenv("LEAF_LINES", "2")
    monkeypatch.setattr(fn, "CHUNK", 6)
    monkeypatch.setattr(fn, "LEAF", 2)
    fn.pipeline.cache_clear()

    workers = [Worker(dict(os.environ, PYTHONPATH=str(ROOT))) for _ in range(3)]
    firers = [Worker(dict(os.environ, PYTHONPATH=str(ROOT)), "stream") for _ in range(2)]
    for process in workers + firers:
        process.wait_ready()
    inputs = {f"in/{i}.jsonl": jsonl(10 + i, seed=i) for i in range(3)}
    bad, _ = jsonl(6, poison_at=5)
    tags: dict[str, Counter[str] | None] = {}
    for key, (body, expected) in inputs.items():
        [tag] = fn.on_upload(local.upload(s3, key, body, env["INPUT_BUCKET"]), None)["started"]
        tags[tag] = expected
    [bad_tag] = fn.on_upload(local.upload(s3, "in/bad.jsonl", bad, env["INPUT_BUCKET"]), None)["started"]
    tags[bad_tag] = None

    tracker = fn.pipeline().tracker
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        states = {t: s.state for t, s in tracker.status_many(tags).items()}
        if all(state != "pending" for state in states.values()):
            break
        time.sleep(0.5)
    reports = [w.stop() for w in workers]
    while time.monotonic() < deadline and queue_depth(sqs, env["XOR_ACK_COMPLETION_QUEUE_URL"]) < len(inputs):
        time.sleep(0.5)
    time.sleep(2)  # a second firing, were there one, would land now
    fired = [w.stop() for w in firers]

    assert all(r["delivered"] > 0 for r in reports)  # all three took part
    assert all(r["delivered"] > 0 for r in fired)  # and both firers read the stream
    completions = Counter(c["tag"] for c in receive_all(sqs, env["XOR_ACK_COMPLETION_QUEUE_URL"]))
    for tag, expected in tags.items():
        status = tracker.status(tag)
        if expected is None:
            assert status.state == "failed" and status.reason is not None
            assert "poison message" in status.reason and "JSONDecodeError" in status.reason
            assert completions[tag] == 0
        else:
            assert status.state == "acked", (tag, status)
            assert completions[tag] == 1
    assert sum(r["events"].get("completions.fired", 0) for r in fired) == len(inputs)
    assert sum(r["events"].get("completions.fired", 0) for r in reports) == 0  # workers fire nothing
    fn.on_done(
        {"Records": [{"body": json.dumps({"tag": t})} for t, e in tags.items() if e is not None]}, None
    )
    for tag, expected in tags.items():
        if expected is not None:
            assert summary(s3, env["OUTPUT_BUCKET"], tag) == {
                "tag": tag,
                "words": dict(sorted(expected.items())),
            }
    delivered = sum(r["delivered"] for r in reports)
    mine = ("GetItem", "BatchGetItem")  # this test's own polling
    starts = {k: v for k, v in tracker.stats.requests.items() if k not in mine}
    requests = sum(sum(r["dynamodb"].values()) for r in reports) + sum(starts.values())
    conflicts = sum(r["conflicts"] for r in reports)
    claims = sum(sum(r["dynamodb"].values()) for r in fired)  # two firers: every claim tried twice
    streams = sum(sum(r["streams"].values()) for r in fired)
    per = requests / delivered
    print(
        f"\n{mode}: {delivered} deliveries, {requests} DynamoDB requests ({per:.2f} each), {conflicts} races;"
        f" firers: {claims} claim requests, {streams} stream requests"
    )
