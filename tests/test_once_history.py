"""A chain's history items (issue 18): where they live, how long, and that nothing that
lists chains takes them for one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from conftest import unique_table

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB, errors
from xor_ack_dynamodb.serverless.replay import scan_unfinished
from xor_ack_dynamodb.stamps import RESERVED_PREFIX
from xor_ack_dynamodb.stores.dynamodb.item import ItemCodec

pytestmark = pytest.mark.server

TAG = "history/chain"


@pytest.fixture
def ack(moto_server: LocalDynamoDB) -> XorAckDynamoDB:
    tracker = XorAckDynamoDB(unique_table("hist"), client=moto_server.client(), mode="sum", ttl=600)
    tracker.create_table()
    return tracker


def with_history(ack: XorAckDynamoDB) -> dict[str, Any]:
    """A chain whose first block (positions 1..40) moved to history; its item."""
    root = ack.new_edge()
    ack.create(TAG, root)
    kids = [ack.new_edge() for _ in range(60)]
    ack.stamp(TAG, finished=[root], started=kids, op_id="fan")
    for i, kid in enumerate(kids[:50]):
        ack.stamp(TAG, finished=[kid], op_id=f"kid-{i}", first=True)
    item: dict[str, Any] = ack.client.get_item(TableName=ack.table, Key={"tagID": {"S": TAG}})["Item"]
    assert item["cutn"] == {"N": "40"} and item["trims"] == {"N": "1"}
    return item


def test_a_history_block_outlives_its_chain_and_is_keyed_apart(ack: XorAckDynamoDB) -> None:
    """Block 0 sits under a reserved key (no tag can start with it) and may be purged a
    retention after the chain's own purge time; it holds 40 ops of 12 bytes."""
    item = with_history(ack)
    key = ItemCodec("tagID").history_key(TAG, item["lin"]["B"], 0)
    assert key["tagID"]["S"].startswith(RESERVED_PREFIX)
    block = ack.client.get_item(TableName=ack.table, Key=key)["Item"]
    assert set(block) == {"tagID", "hist", "expires_at"}
    assert len(block["hist"]["B"]) == 40 * 12
    assert int(block["expires_at"]["N"]) == int(item["expires_at"]["N"]) + ack.rules.retention
    ack.touch(TAG, ttl=7200)  # the chain lives longer; blocks already written are not rewritten
    assert ack.client.get_item(TableName=ack.table, Key=key)["Item"] == block
    with pytest.raises(errors.InvalidTag):
        ack.create(key["tagID"]["S"], ack.new_edge())


def test_nothing_that_lists_chains_lists_history(ack: XorAckDynamoDB, moto_server: LocalDynamoDB) -> None:
    with_history(ack)
    scanned = ack.client.scan(TableName=ack.table)["Items"]
    assert len(scanned) == 2  # the chain and its block
    ack.fail(TAG, "given up")
    assert [s.tag for s in scan_unfinished(ack)] == [TAG]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "XOR_ACK_"))}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_REGION="us-east-1")
    assert moto_server.endpoint_url is not None
    proc = subprocess.run(
        [sys.executable, "-m", "xor_ack_dynamodb", "list", "--json"]
        + ["--endpoint-url", moto_server.endpoint_url, "--table", ack.table],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert [r["tag"] for r in json.loads(proc.stdout)] == [TAG]
    assert "CorruptItem" not in proc.stderr
