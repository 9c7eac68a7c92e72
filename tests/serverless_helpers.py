"""Shared pieces of the serverless tests: the example's modules, inputs and their
expected word counts, reading queues and outputs."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "serverless"
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon"]


def example(name: str) -> ModuleType:
    """``lambda_function`` or ``run_local`` from the example, imported as Lambda does."""
    if str(EXAMPLE) not in sys.path:
        sys.path.insert(0, str(EXAMPLE))
    __import__(name)
    return sys.modules[name]


def jsonl(lines: int, seed: int = 0, poison_at: int | None = None) -> tuple[bytes, Counter[str]]:
    """An input of ``lines`` JSON lines and the word counts it should produce."""
    out, counts = [], Counter[str]()
    for i in range(lines):
        if i == poison_at:
            out.append("{not json")
            continue
        text = " ".join(WORDS[: 1 + (i + seed) % len(WORDS)]) + f" w{(i + seed) % 7}"
        counts.update(text.lower().split())
        out.append(json.dumps({"text": text}))
    return "\n".join(out).encode(), counts


def receive_all(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """Every message now in ``queue_url`` (received and deleted), bodies parsed."""
    found = []
    while True:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return found
        for message in got:
            found.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def queue_depth(sqs: Any, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def summary(s3: Any, bucket: str, tag: str) -> dict[str, Any] | None:
    """The example's ``done/`` summary for ``tag``, or None."""
    key = f"done/{example('lambda_function').chain_dir(tag)}.json"
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    found: dict[str, Any] = json.loads(body)
    return found
