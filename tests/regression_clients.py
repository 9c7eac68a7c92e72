"""Clients and trackers for the regression and guard tests: clients that replay a fault
on the real HTTP path, and sum-mode trackers in memory or on a DynamoDB backend
(tests/test_core_regressions.py, test_once_regressions.py, test_once_history.py,
test_guards.py, test_trims.py)."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from conftest import unique_table

from xor_ack_dynamodb import LocalDynamoDB, MemoryAck, XorAckDynamoDB
from xor_ack_dynamodb.retry import RetryPolicy


def client(server: LocalDynamoDB, attempts: int = 3) -> Any:
    """A client with botocore's standard retries: ``attempts`` in all per request."""
    return boto3.client(
        "dynamodb",
        endpoint_url=server.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "total_max_attempts": attempts}),
    )


def tracker(server: LocalDynamoDB, table: str, **options: Any) -> XorAckDynamoDB:
    """A tracker on ``table`` with a quick retry policy (unless ``options`` give one)."""
    options.setdefault("retry", RetryPolicy(max_attempts=10, initial_wait=0.001, max_wait=0.01))
    return XorAckDynamoDB(table, client=options.pop("client", None) or client(server), **options)


def sum_tracker(client: Any | None, prefix: str) -> Any:
    """A sum-mode tracker: a ``MemoryAck`` (TTL one hour) when ``client`` is None, else an
    ``XorAckDynamoDB`` on a new table of ``client``, its name from ``prefix``."""
    if client is None:
        return MemoryAck(mode="sum", ttl=3600)
    ack = XorAckDynamoDB(unique_table(prefix), client=client, mode="sum")
    ack.create_table()
    return ack
