"""Configuration: AckConfig (picklable, builds its own client), a client built from the
environment, RetryPolicy, and constructor arguments refused as InvalidConfig."""

from __future__ import annotations

import pickle
from datetime import timedelta
from typing import Any

import pytest
from conftest import unique_table

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, MemoryAck, RetryPolicy, XorAckDynamoDB, errors
from xor_ack_dynamodb.aio import AsyncMemoryAck, AsyncXorAckDynamoDB


def test_client_from_the_environment(moto_server: LocalDynamoDB, monkeypatch: pytest.MonkeyPatch) -> None:
    """No client given: botocore's own configuration (AWS_ENDPOINT_URL_DYNAMODB,
    AWS_REGION, credentials) decides where the tracker talks to."""
    assert moto_server.endpoint_url is not None
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_server.endpoint_url)
    table = unique_table("env")
    ack = XorAckDynamoDB(table)
    assert ack.client.meta.endpoint_url == moto_server.endpoint_url
    assert ack.client.meta.region_name == "us-east-1"
    ack.create_table()
    ack.create("from-env", b"\x29")
    # The chain is on the moto server, seen through a client built without the variable.
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB")
    item = moto_server.client().get_item(TableName=table, Key={"tagID": {"S": "from-env"}})["Item"]
    assert item["stamp"] == {"B": b"\x29"}
    # AckConfig without an endpoint defers to the environment the same way.
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", moto_server.endpoint_url)
    assert XorAckDynamoDB.from_config(AckConfig(table)).status("from-env").state == "pending"


def test_ack_config_pickles_and_hides_keys(moto_server: LocalDynamoDB) -> None:
    config = moto_server.config("acks", ttl_seconds=60, retention_seconds=120, delete_on_ack=True, max_ops=40)
    copy = pickle.loads(pickle.dumps(config))
    assert copy == config
    assert "testing" not in repr(config)
    assert "aws_secret_access_key" not in repr(config)
    assert config.endpoint_url is not None and config.endpoint_url in repr(config)


def test_connect_builds_a_tracker_with_its_own_client(moto_server: LocalDynamoDB) -> None:
    retry = RetryPolicy(max_attempts=7, max_seconds=3.0)
    config = moto_server.config(
        unique_table("cfg"),
        ttl_seconds=60,
        retention_seconds=120,
        delete_on_ack=True,
        max_ops=40,
        retry=retry,
    )
    first, second = XorAckDynamoDB.from_config(config), XorAckDynamoDB.from_config(config)
    assert first.client is not second.client
    assert (first.table, first.partition_key) == (config.table, "tagID")
    settings = (first.ttl_seconds, first.retention_seconds, first.delete_on_ack, first.max_ops)
    assert settings == (60, 120, True, 40)
    assert first.retry == retry
    assert first.client.meta.endpoint_url == moto_server.endpoint_url
    first.create_table()
    first.create("t", b"\x29")
    assert second.stamp("t", b"\x29").acked  # delete_on_ack: the chain is gone
    with pytest.raises(errors.TagNotFound):
        first.status("t")
    shared = moto_server.client()
    assert XorAckDynamoDB.from_config(config, shared).client is shared


def test_local_dynamodb_config_needs_a_started_server() -> None:
    with pytest.raises(RuntimeError):
        LocalDynamoDB().config("acks")


def test_retry_policy() -> None:
    policy = RetryPolicy(max_attempts=3, max_seconds=1.0, initial_wait=0.0, max_wait=0.0)
    assert pickle.loads(pickle.dumps(policy)) == policy
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise KeyError("again")
        return "done"

    import tenacity

    assert policy.retrying(tenacity.retry_if_exception_type(KeyError))(flaky) == "done"
    assert len(calls) == 3
    for bad in (
        dict(max_attempts=0),
        dict(max_seconds=0),
        dict(initial_wait=-1),
        dict(max_wait=-0.1),
    ):
        with pytest.raises(errors.InvalidConfig):
            RetryPolicy(**bad)


@pytest.mark.parametrize(
    "options",
    [
        dict(partition_key=""),
        dict(partition_key="stamp"),
        dict(partition_key="version"),
        dict(partition_key=7),
        dict(max_ops=0),
        dict(max_ops=2.5),
        dict(ttl=0),
        dict(ttl=-5),
        dict(ttl=timedelta(0)),
        dict(retention=timedelta(seconds=-1)),
        dict(ttl=None),  # chains in DynamoDB always have a deadline
    ],
)
def test_tracker_arguments_out_of_range(options: dict[str, Any]) -> None:
    with pytest.raises(errors.InvalidConfig) as info:
        XorAckDynamoDB("acks", client=object(), **options)
    assert info.value.code == "InvalidConfig" and isinstance(info.value, ValueError)


def test_tracker_accepts_timedelta_and_seconds() -> None:
    ack = XorAckDynamoDB("acks", client=object(), ttl=timedelta(minutes=2), retention=90.4)
    assert (ack.ttl_seconds, ack.retention_seconds) == (120, 90)
    assert repr(ack) == "XorAckDynamoDB(table='acks', partition_key='tagID', mode='xor')"


def test_every_tracker_takes_the_same_options() -> None:
    """One set of keywords (``TrackerOptions``) for the four trackers' constructors, and
    ``from_config`` takes them too, over the config's."""
    retry = RetryPolicy(max_attempts=3)
    options: dict[str, Any] = dict(
        mode="xor", ttl=120, retention=300, skew=7, delete_on_ack=True, max_ops=9, edge_size=8
    )
    options.update(retry=retry, cache_size=5, clock=lambda: 1000.0)
    trackers = [
        XorAckDynamoDB("acks", client=object(), **options),
        AsyncXorAckDynamoDB("acks", client=object(), **options),
        MemoryAck(**options),
        AsyncMemoryAck(**options),
    ]
    for tracker in trackers:
        rules = tracker.rules
        assert (rules.mode, rules.ttl, rules.retention, rules.skew) == ("xor", 120, 300, 7), tracker
        assert (rules.delete_on_ack, rules.window, len(tracker.new_edge())) == (True, 9, 8), tracker
        assert tracker.driver.retry == retry and tracker.driver.now() == 1000, tracker
        assert tracker.driver.cache._size == 5, tracker
    # The memory trackers' own defaults: no clock deadline, no cache.
    for memory in (MemoryAck(), AsyncMemoryAck()):
        assert memory.rules.ttl is None and memory.driver.cache._size == 0
    config = AckConfig("acks", ttl_seconds=60, max_ops=40)
    built = XorAckDynamoDB.from_config(config, object(), ttl=30, cache_size=0)
    assert (built.ttl_seconds, built.max_ops, built.driver.cache._size) == (30, 40, 0)
