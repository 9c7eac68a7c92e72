"""docs/async.md's SQS consumer, run as written: four consumer tasks, one tracker, SQS
and DynamoDB served by moto servers over HTTP (SQS by a server of its own: the
``LocalDynamoDB`` server serializes requests, and a long poll would hold it)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from conftest import unique_table
from moto.server import ThreadedMotoServer

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB

pytestmark = pytest.mark.server

DOCS = Path(__file__).resolve().parents[1] / "docs" / "async.md"


def example() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    source = next(b for b in blocks if "async def consume" in b)
    namespace: dict[str, Any] = {}
    exec(compile(source, str(DOCS), "exec"), namespace)
    return namespace


@pytest.fixture
def sqs_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def test_the_sqs_consumer_in_the_docs(
    moto_server: LocalDynamoDB, sqs_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", str(moto_server.endpoint_url))
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", sqs_endpoint)
    table = unique_table("docs")
    sync = XorAckDynamoDB(table, client=moto_server.client())
    sync.create_table()
    sqs = boto3.client("sqs", endpoint_url=sqs_endpoint, region_name="us-east-1")
    queue_url = sqs.create_queue(QueueName=table)["QueueUrl"]

    done = asyncio.run(asyncio.wait_for(example()["main"](queue_url, table), 60))

    assert done == ["order-1"]  # one message of the six saw the chain complete
    status = sync.status("order-1")
    assert status.state == "acked"
    assert status.version == 7  # the create and six stamps: each applied once
    left = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    assert left["Attributes"]["ApproximateNumberOfMessages"] == "0"
