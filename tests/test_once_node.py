"""What the library does with a chain the Node package writes to (docs/node-interop.md,
the ``stamp()`` docstring's foreign-writer caveat): the writes are made exactly as the
Node package makes them (``node_package``), on the moto server.
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from conftest import unique_table
from node_package import NodeConflict, node_create, node_delete, node_stamp

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB, errors, new_stamp, xor
from xor_ack_dynamodb.stores.dynamodb.item import ItemCodec

TAG = "node/shared-chain"

pytestmark = pytest.mark.server


@pytest.fixture
def raw(moto_server: LocalDynamoDB) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=moto_server.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


@pytest.fixture
def ack(raw: Any) -> XorAckDynamoDB:
    tracker = XorAckDynamoDB(unique_table("node"), client=raw)
    tracker.create_table()
    return tracker


def item(ack: XorAckDynamoDB) -> dict[str, Any] | None:
    got = ack.client.get_item(TableName=ack.table, Key={"tagID": {"S": TAG}}, ConsistentRead=True)
    return got.get("Item")


def fan(ack: XorAckDynamoDB, children: int) -> tuple[Any, list[bytes]]:
    root, kids = new_stamp(), [new_stamp() for _ in range(children)]
    ack.create(TAG, root)
    return ack.stamp(TAG, xor(root, *kids), op_id="fan"), kids


def test_a_node_stamp_that_reaches_zero_deletes_the_chain(ack: XorAckDynamoDB) -> None:
    """Node's ``stamp()`` deletes the item (a conditional DeleteItem) when its XOR is all
    zeros: Python then reads ``TagNotFound``, not an ``acked`` tombstone."""
    _, (kid,) = fan(ack, 1)
    assert not any(node_stamp(ack.client, ack.table, TAG, kid))
    assert item(ack) is None
    with pytest.raises(errors.TagNotFound):
        ack.status(TAG)
    with pytest.raises(errors.TagNotFound):
        ack.stamp(TAG, kid, op_id="late")  # this tracker's cached value is not trusted
    with pytest.raises(NodeConflict):
        node_delete(ack.client, ack.table, TAG)


def test_a_node_create_is_refused_on_any_python_item(ack: XorAckDynamoDB) -> None:
    fan(ack, 2)
    with pytest.raises(NodeConflict):
        node_create(ack.client, ack.table, TAG, new_stamp())


def test_node_writes_keep_two_attributes_and_leave_the_history_items(ack: XorAckDynamoDB) -> None:
    """A Node stamp replaces the item with ``{tag, stamp}``: the op list, lineage and
    the rest are gone; the history items beside it (other keys) are not touched, by
    that stamp nor by a Node delete. The next Python write starts a lineage marked
    adopted."""
    _, kids = fan(ack, 70)
    for i, kid in enumerate(kids[:60]):
        ack.stamp(TAG, kid, op_id=f"kid-{i}")
    before = item(ack)
    assert before is not None and {"lin", "ops", "oph", "cutn", "tok", "seq", "win"} <= set(before)
    lineage = before["lin"]["B"]
    block = ack.client.get_item(TableName=ack.table, Key=ItemCodec("tagID").history_key(TAG, lineage, 0))
    assert "hist" in block["Item"] and "state" not in block["Item"]
    node_stamp(ack.client, ack.table, TAG, kids[60])
    after = item(ack)
    assert after is not None and set(after) == {"tagID", "stamp"}
    again = ack.client.get_item(TableName=ack.table, Key=ItemCodec("tagID").history_key(TAG, lineage, 0))
    assert again["Item"] == block["Item"]
    status = ack.status(TAG)
    assert status.state == "pending" and status.expires_at is None
    ack.stamp(TAG, kids[61], op_id="after-node")  # a new lineage, adopted over the Node item
    adopted = item(ack)
    assert adopted is not None and adopted["adp"] == {"N": "1"} and adopted["lin"]["B"] != lineage
    node_delete(ack.client, ack.table, TAG)  # Node's delete: the chain goes, its history stays
    assert item(ack) is None
    left = ack.client.get_item(TableName=ack.table, Key=ItemCodec("tagID").history_key(TAG, lineage, 0))
    assert left["Item"] == block["Item"]


def test_a_bare_op_id_sent_again_after_a_node_write_is_applied_again(ack: XorAckDynamoDB) -> None:
    """The documented limit: a stamp that names only its op id is checked against the
    chain's lineage, which a Node write ends. Sent again after one, it is applied a
    second time (XOR: the edge is back in the chain, which will not ack)."""
    fanned, (a, b) = fan(ack, 2)
    ack.stamp(TAG, a, op_id="m")
    node_value = node_stamp(ack.client, ack.table, TAG, new_stamp())
    again = ack.stamp(TAG, a, op_id="m")
    assert not again.duplicate
    assert ack.status(TAG).value == xor(node_value, a)


def test_a_copy_that_names_a_position_before_the_node_write_is_refused(ack: XorAckDynamoDB) -> None:
    """A stamp sent with ``after=`` a position of the lineage a Node write ended: the
    ops after that position that were in the item's own list were dropped by the Node
    write, so whether it landed cannot be told: ``OutcomeUnknown``, nothing written
    (whether or not its op had moved to the old lineage's history: that is not
    searched, one answer for every op past the window)."""
    fanned, kids = fan(ack, 70)
    ack.stamp(TAG, kids[0], op_id="moved", after=fanned.position)
    for i, kid in enumerate(kids[1:60]):
        ack.stamp(TAG, kid, op_id=f"kid-{i}")
    recent = ack.stamp(TAG, kids[60], op_id="recent")
    assert ack.status(TAG).value == xor(*kids[61:])
    node_value = node_stamp(ack.client, ack.table, TAG, new_stamp())
    for tracker in (ack, XorAckDynamoDB(ack.table, client=ack.client)):
        with pytest.raises(errors.OutcomeUnknown):
            tracker.stamp(TAG, kids[0], op_id="moved", after=fanned.position)
        with pytest.raises(errors.OutcomeUnknown) as info:
            tracker.stamp(TAG, kids[60], op_id="recent", after=fanned.position)
        assert info.value.tag == TAG and "Node" in str(info.value)
    assert recent.position is not None
    assert ack.status(TAG).value == node_value  # nothing more was written
