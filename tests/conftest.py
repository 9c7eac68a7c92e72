"""Shared fixtures: DynamoDB through moto, in-process (fast) and over HTTP (real path)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB

_names = itertools.count()


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and a region, so nothing ever reaches for real ones."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def unique_table(prefix: str = "acks") -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


@pytest.fixture
def inproc_client() -> Iterator[Any]:
    """A DynamoDB client served by moto inside this process (no HTTP)."""
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[LocalDynamoDB]:
    """A moto server on 127.0.0.1 and a free port, for the whole session."""
    with LocalDynamoDB() as server:
        yield server


@pytest.fixture
def server_client(moto_server: LocalDynamoDB) -> Any:
    """A DynamoDB client that talks HTTP to the moto server."""
    return moto_server.client()


@pytest.fixture(params=["inproc", "server"])
def client(request: pytest.FixtureRequest) -> Any:
    """Each test using it runs twice: against in-process moto and the moto server."""
    if request.param == "inproc":
        return request.getfixturevalue("inproc_client")
    return request.getfixturevalue("server_client")


@pytest.fixture
def table_name() -> str:
    return unique_table()


@pytest.fixture
def ack(client: Any, table_name: str) -> XorAckDynamoDB:
    """A tracker on a fresh table, on both backends."""
    tracker = XorAckDynamoDB(table_name, partition_key="tagID", client=client)
    tracker.create_table()
    return tracker
