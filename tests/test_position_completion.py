"""Issue 39 (3): a sum stamp whose own ``ADD`` took the chain to zero, and whose
completion write (the ``acked`` tombstone) then met a transient error, finishes that
write in its next round and returns its own result: ``acked``, not a duplicate of
itself. Before, the next round sent the ``ADD`` again, found its own op in the window
and reported ``duplicate`` (the state machine of ``test_once_model.py`` excused it).

On the memory store and on moto in process (DynamoDB's ``ThrottlingException``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from xor_ack_dynamodb import MemoryAck, XorAckDynamoDB
from xor_ack_dynamodb.core.messages import Put
from xor_ack_dynamodb.retry import RetryPolicy

TAG = "database/file39"
RETRY = RetryPolicy(max_attempts=4, initial_wait=0.001, max_wait=0.01)


class Throttled(Exception):
    """The memory store's stand-in for a throttle: transient, nothing applied."""


def _memory() -> tuple[Any, list[str]]:
    """A sum-mode memory tracker whose first completion write is throttled."""
    ack = MemoryAck(mode="sum", retry=RETRY)
    store, execute, fired = ack.store, ack.store.execute, []

    def throttled(request: Any) -> Any:
        if isinstance(request, Put) and request.new.state == "acked" and not fired:
            fired.append("throttle completion")
            raise Throttled("throttled")
        return execute(request)

    store.execute = throttled  # type: ignore[method-assign]
    store.is_transient = lambda error: isinstance(error, Throttled)  # type: ignore[method-assign]
    return ack, fired


def _dynamodb() -> tuple[Any, list[str]]:
    """A sum-mode tracker on moto whose first completion PutItem is throttled."""
    client = boto3.client("dynamodb", region_name="us-east-1")
    ack = XorAckDynamoDB("position39", client=client, mode="sum", retry=RETRY)
    ack.create_table()
    fired: list[str] = []

    def throttle(params: dict[str, Any], **_: Any) -> None:
        item = params.get("Item", {})
        if item.get("state", {}).get("S") == "acked" and not fired:
            fired.append("throttle completion")
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "PutItem")

    client.meta.events.register("before-parameter-build.dynamodb.PutItem", throttle)
    return ack, fired


@pytest.fixture(params=["memory", "inproc"])
def throttled(request: pytest.FixtureRequest) -> Iterator[tuple[Any, list[str]]]:
    if request.param == "memory":
        yield _memory()
        return
    with mock_aws():
        yield _dynamodb()


def test_a_completion_write_throttled_after_its_own_add_is_not_a_duplicate(
    throttled: tuple[Any, list[str]],
) -> None:
    ack, fired = throttled
    ack.create(TAG, 7)
    done = ack.stamp(TAG, finished=[7], op_id="the-last-one")
    assert fired == ["throttle completion"]
    assert done.acked and not done.duplicate, done  # its own op: it completed the chain
    assert done == 0 and done.position is not None and done.position.seq == 1
    status = ack.status(TAG)
    assert status.state == "acked"
    again = ack.stamp(TAG, finished=[7], op_id="the-last-one")  # a real redelivery: a duplicate
    assert again.duplicate and again.acked


def test_a_drawn_op_whose_completion_write_is_throttled_reports_its_own_ack(
    throttled: tuple[Any, list[str]],
) -> None:
    """The same with an op id the library drew: the retry round is guarded from the
    chain as the call saw it, and still returns the call's own result."""
    ack, fired = throttled
    ack.create(TAG, 5)
    done = ack.stamp(TAG, finished=[5])
    assert fired == ["throttle completion"]
    assert done.acked and not done.duplicate, done
