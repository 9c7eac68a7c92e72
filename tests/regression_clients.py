"""Clients and trackers for the regression tests that replay a fault on the real HTTP
path (tests/test_core_regressions.py, tests/test_once_regressions.py)."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB
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
