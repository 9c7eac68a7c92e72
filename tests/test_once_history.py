"""A chain's history items (issue 18): where they live, how long, and that nothing that
lists chains takes them for one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import boto3
import pytest
from botocore.config import Config
from conftest import unique_table
from regression_clients import sum_tracker
from scripted import Script

from xor_ack_dynamodb import LocalDynamoDB, RetryPolicy, XorAckDynamoDB, errors
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
        ack.stamp(TAG, finished=[kid], op_id=f"kid-{i}")
    item: dict[str, Any] = ack.client.get_item(TableName=ack.table, Key={"tagID": {"S": TAG}})["Item"]
    assert item["cutn"] == {"N": "40"}
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


def test_an_xor_write_retried_after_an_error_does_not_write_its_history_block_again(
    moto_server: LocalDynamoDB,
) -> None:
    """The xor stamp whose write moves block 0 writes the block first, then its chain
    write fails (HTTP 500, botocore's three attempts): the call's next attempt moves the
    same block again, and does not write it again (a block's content is fixed by its
    place)."""
    client = boto3.client(
        "dynamodb",
        endpoint_url=moto_server.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "total_max_attempts": 3}),
    )
    ack = XorAckDynamoDB(
        unique_table("hist"), client=client, retry=RetryPolicy(initial_wait=0.001, max_wait=0.01)
    )
    ack.create_table()
    root = ack.new_edge()
    ack.create(TAG, root)
    kids = [ack.new_edge() for _ in range(60)]
    ack.stamp(TAG, finished=[root], started=kids, op_id="fan")
    for i, kid in enumerate(kids[:46]):  # positions 2..47: the list holds 47 op ids
        ack.stamp(TAG, finished=[kid], op_id=f"kid-{i}")
    script = Script(client).before("PutItem", lambda: None).fail("PutItem", times=3)
    ack.stamp(TAG, finished=[kids[46]], op_id="crossing")  # position 48: moves block 0
    assert script.pending == 0
    assert ack.stats.events["history_writes"] == 1
    item = client.get_item(TableName=ack.table, Key={"tagID": {"S": TAG}})["Item"]
    assert item["cutn"] == {"N": "40"} and len(item["ops"]["L"]) == 8


@pytest.mark.parametrize("backend", ["memory", "server"])
def test_a_trim_sent_twice_removes_its_block_once_however_long_the_list(
    backend: str, moto_server: LocalDynamoDB
) -> None:
    """A block's trim resent (botocore) or raced by the next owner, on a list long
    enough that the length check alone would let it pass: ``cutn = :cut`` refuses it;
    a trim of the next block naming another lineage: ``lin = :lineage`` refuses it."""
    from test_trims import LINEAGE, _ops, _seed
    from test_trims import TAG as SEEDED

    from xor_ack_dynamodb.core.chain import BLOCK
    from xor_ack_dynamodb.core.messages import Read, Rejected, Trim, Written

    tracker = sum_tracker(None if backend == "memory" else moto_server.client(), "hist")
    ops = _ops(200)
    _seed(tracker, ops, 777)
    trim = Trim(SEEDED, BLOCK, 32, cut=0, lineage=LINEAGE)
    assert isinstance(tracker.store.execute(trim), Written)
    assert isinstance(tracker.store.execute(trim), Rejected)
    other_lineage = Trim(SEEDED, BLOCK, 32, cut=BLOCK, lineage=b"another1")  # the next block, elsewhere
    assert isinstance(tracker.store.execute(other_lineage), Rejected)
    kept = tracker.store.execute(Read(SEEDED))
    assert (kept.cut_seq, len(kept.ops)) == (BLOCK, 200 - BLOCK)
    assert [op.key for op in kept.ops] == [op.key for op in ops[BLOCK:]]


def _owner_of_block_1(backend: str, moto_server: LocalDynamoDB) -> tuple[Any, Any]:
    """A sum chain of 111 ops (window 32) on ``backend``, none moved yet: the op at
    position 112 owns block 1 (41..80) and finds block 0 (1..40) still in the list.
    The tracker, and its store's own ``execute``."""
    from test_trims import _ops, _seed

    tracker = sum_tracker(None if backend == "memory" else moto_server.client(), "hist")
    _seed(tracker, _ops(111), 10**6)
    return tracker, tracker.store.execute


@pytest.mark.parametrize("backend", ["memory", "server"])
def test_the_owner_of_a_block_moves_its_own_while_a_late_owner_moves_the_one_before(
    backend: str, moto_server: LocalDynamoDB
) -> None:
    """Sum mode, many writers: the owner of block 1 finds block 0 still in the list (its
    owner's move, two round trips, is on its way). It writes and trims its own block
    alone; the late owner's trim of block 0 lands first, then ours: each block written
    to history once and trimmed once, no refused trim (before: the owner of block 1
    wrote block 0's history too and raced the late owner's trim, one request each
    wasted; at 32 processes that took a sum stamp to 1.09 requests)."""
    from test_trims import LINEAGE
    from test_trims import TAG as SEEDED

    from xor_ack_dynamodb.core.chain import BLOCK
    from xor_ack_dynamodb.core.messages import Read, ReadHistory, Trim

    tracker, original = _owner_of_block_1(backend, moto_server)
    late: list[Any] = []
    sent: list[Any] = []

    def execute(request: Any) -> Any:
        if isinstance(request, Trim):
            sent.append(request)
            if not late:  # block 0's owner, late, lands first
                late.append(original(Trim(SEEDED, BLOCK, 32, request.now, 0, LINEAGE)))
        return original(request)

    tracker.store.execute = execute
    tracker.stamp(SEEDED, finished=[1], op_id="owner-of-block-1")
    kept = original(Read(SEEDED))
    assert late and (kept.cut_seq, len(kept.ops)) == (2 * BLOCK, 112 - 2 * BLOCK)
    assert [t.cut for t in sent] == [BLOCK]  # its own block only
    events = tracker.stats.events
    assert (events["trims"], events.get("trims_skipped", 0), events["history_writes"]) == (1, 0, 1)
    assert sorted(original(ReadHistory(SEEDED, LINEAGE, (0, 1))).blocks) == [1]  # block 0: the late owner's


@pytest.mark.parametrize("backend", ["memory", "server"])
def test_the_owner_of_a_block_sends_its_trim_again_when_the_late_owner_lands_after_it(
    backend: str, moto_server: LocalDynamoDB
) -> None:
    """The late owner's trim of block 0 lands just after ours: ours is refused (the list
    still starts at block 0), is sent once more and lands. Block 0's history is left to
    its owner: one refused trim, no history written twice."""
    from test_trims import LINEAGE
    from test_trims import TAG as SEEDED

    from xor_ack_dynamodb.core.chain import BLOCK
    from xor_ack_dynamodb.core.messages import Read, ReadHistory, Trim

    tracker, original = _owner_of_block_1(backend, moto_server)
    sent: list[Any] = []

    def execute(request: Any) -> Any:
        if isinstance(request, Trim):
            sent.append(request)
            if len(sent) == 2:  # block 0's owner lands between our two trims
                original(Trim(SEEDED, BLOCK, 32, request.now, 0, LINEAGE))
        return original(request)

    tracker.store.execute = execute
    tracker.stamp(SEEDED, finished=[1], op_id="owner-of-block-1")
    kept = original(Read(SEEDED))
    assert (kept.cut_seq, len(kept.ops)) == (2 * BLOCK, 112 - 2 * BLOCK)
    assert [t.cut for t in sent] == [BLOCK, BLOCK]
    events = tracker.stats.events
    assert (events["trims"], events["trims_skipped"], events["history_writes"]) == (1, 1, 1)
    assert sorted(original(ReadHistory(SEEDED, LINEAGE, (0, 1))).blocks) == [1]


@pytest.mark.parametrize("backend", ["memory", "server"])
def test_the_owner_of_a_block_moves_the_one_before_when_its_owner_was_lost(
    backend: str, moto_server: LocalDynamoDB
) -> None:
    """The owner of block 0 never moved it (its process died after its stamp): the
    owner of block 1 trims its own block, is refused (the list still starts at block
    0), sends it once more (refused again), and moves block 0 then its own, each with
    its history written first; no op is lost from the window and the history both."""
    from test_trims import LINEAGE
    from test_trims import TAG as SEEDED

    from xor_ack_dynamodb.core.chain import BLOCK
    from xor_ack_dynamodb.core.messages import Read, ReadHistory, Trim

    tracker, original = _owner_of_block_1(backend, moto_server)
    before = original(Read(SEEDED))
    sent: list[Any] = []

    def execute(request: Any) -> Any:
        if isinstance(request, Trim):
            sent.append(request)
        return original(request)

    tracker.store.execute = execute
    tracker.stamp(SEEDED, finished=[1], op_id="owner-of-block-1")
    kept = original(Read(SEEDED))
    assert (kept.cut_seq, len(kept.ops)) == (2 * BLOCK, 112 - 2 * BLOCK)
    assert [t.cut for t in sent] == [BLOCK, BLOCK, 0, BLOCK]  # its own (refused twice), block 0, its own
    events = tracker.stats.events
    assert (events["trims"], events["trims_skipped"], events["history_writes"]) == (2, 2, 2)
    history = original(ReadHistory(SEEDED, LINEAGE, (0, 1))).blocks
    assert [op.key for i in (0, 1) for op in history[i]] == [op.key for op in before.ops[: 2 * BLOCK]]


def test_a_child_finished_before_its_start_landed_fails_a_sum_chain() -> None:
    """Sum mode's negative-sum rule assumes a child is finished only after the stamp
    that started it landed: a finish that races ahead of its start takes the sum below
    zero, and the chain fails (stamps must be ordered, as a child message sent after its
    parent's stamp returned is)."""
    from xor_ack_dynamodb import MemoryAck

    ack = MemoryAck(mode="sum", ttl=3600)
    ack.create("ordered", 100)
    with pytest.raises(errors.TagFailed) as info:
        ack.stamp("ordered", finished=[100, 7], op_id="child-first")  # 7 not started yet
    assert "negative" in (info.value.reason or "")
    assert ack.status("ordered").state == "failed"
