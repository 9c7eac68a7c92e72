"""The one-time migration of chain items of the 0.1 layout (issue 31, "fewer concepts":
it replaces adopting them on every write, ``hb``, ``Chain.base`` and ``Trim.adopt``).

Items are written exactly as 0.1.0 wrote them (its codec at commit 326bcce: ``tok``,
``seq``, ``ops``/``oph``, ``cutn``, no ``lin``; the first layout: hex op keys, no
``tok``, ``expires_at`` as the deadline), on every DynamoDB backend. Until migrated
every call refuses them with ``UnmigratedItem`` and writes nothing; after
``migrate_table`` (``xor-ack migrate``) the chain keeps its value, deadline and the op
ids still in its item, an op 0.1 dropped without history is ``OutcomeUnknown`` (never
applied twice), and its blocks move to history at their places again.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import pytest
from conftest import unique_table

from xor_ack_dynamodb import XorAckDynamoDB
from xor_ack_dynamodb.cli import main
from xor_ack_dynamodb.core.chain import BLOCK, op_key
from xor_ack_dynamodb.errors import OutcomeUnknown, UnmigratedItem
from xor_ack_dynamodb.stamps import Position
from xor_ack_dynamodb.stores.dynamodb.item import ItemCodec
from xor_ack_dynamodb.stores.dynamodb.migrate import migrate_item, migrate_table

TAG = "legacy/part-0001"
SEQ, CUT = 50, 13  # 0.1 dropped positions 1..13 without history; the item holds 14..50


def _tracker(client: Any, mode: str) -> XorAckDynamoDB:
    ack = XorAckDynamoDB(unique_table("migrate"), partition_key="tagID", client=client, mode=mode)
    ack.create_table()
    return ack


def _key(i: int) -> bytes:
    return op_key(f"s{i}", "stamp")


def _value(mode: str) -> dict[str, Any]:
    return {"sum": {"N": str(10**9)}} if mode == "sum" else {"stamp": {"B": secrets.token_bytes(16)}}


def _item_0_1(mode: str) -> dict[str, Any]:
    """A pending chain as 0.1.0 left it after SEQ stamps (op ids s1..sSEQ), CUT of them
    trimmed out of its list without history."""
    now = int(time.time())
    kept = range(CUT + 1, SEQ + 1)
    return {
        "tagID": {"S": TAG},
        **_value(mode),
        "state": {"S": "pending"},
        "deadline": {"N": str(now + 3600)},
        "expires_at": {"N": str(now + 3600 + 5 + 86400)},
        "tok": {"B": secrets.token_bytes(8)},
        "version": {"N": str(SEQ + 1)},
        "seq": {"N": str(SEQ)},
        "ops": {"L": [{"B": _key(i)} for i in kept]},
        "oph": {"L": [{"B": b"\x00" * 4} for _ in kept]},
        "win": {"N": "8"},
        "trims": {"N": "1"},
        "cutn": {"N": str(CUT)},
        "cut": {"N": str(now - 60)},
        "cop": {"B": secrets.token_bytes(12)},
        "created_at": {"N": str(now - 600)},
        "updated_at": {"N": str(now - 60)},
    }


def _item_first_layout(deadline: int) -> dict[str, Any]:
    """An xor chain of the first layout: hex op keys, no token, no seq, ``expires_at``
    its deadline."""
    return {
        "tagID": {"S": TAG},
        "stamp": {"B": secrets.token_bytes(16)},
        "state": {"S": "pending"},
        "expires_at": {"N": str(deadline)},
        "version": {"N": "3"},
        "ops": {"L": [{"S": _key(i).hex()} for i in (1, 2, 3)]},
    }


def _stored(ack: XorAckDynamoDB) -> dict[str, Any]:
    item = ack.client.get_item(TableName=ack.table, Key={"tagID": {"S": TAG}}, ConsistentRead=True)["Item"]
    return item  # type: ignore[no-any-return]


def _edge(mode: str) -> Any:
    return 7 if mode == "sum" else secrets.token_bytes(16)


@pytest.mark.parametrize("mode", ["xor", "sum"])
def test_an_item_of_the_0_1_layout_is_refused_until_it_is_migrated(client: Any, mode: str) -> None:
    ack = _tracker(client, mode)
    ack.client.put_item(TableName=ack.table, Item=_item_0_1(mode))
    before = _stored(ack)
    for call in (
        lambda: ack.stamp(TAG, finished=[_edge(mode)], op_id="new"),
        lambda: ack.status(TAG),
        lambda: ack.touch(TAG),
        lambda: ack.fail(TAG, "no"),
    ):
        with pytest.raises(UnmigratedItem, match="xor-ack migrate") as caught:
            call()
        assert caught.value.code == "UnmigratedItem" and caught.value.tag == TAG
    assert _stored(ack) == before  # nothing written


@pytest.mark.parametrize("mode", ["xor", "sum"])
def test_a_migrated_chain_keeps_its_value_and_window_and_never_applies_a_dropped_op(
    client: Any, mode: str
) -> None:
    ack = _tracker(client, mode)
    old = _item_0_1(mode)
    ack.client.put_item(TableName=ack.table, Item=old)
    done = migrate_table(ack.client, ack.table, ack.codec, int(time.time()))
    assert (done.migrated, done.failed) == (1, {})
    item = _stored(ack)
    kept = SEQ - CUT
    # Positions move up to the next block boundary: positions 1..40 have no history block.
    assert (item["cutn"], item["seq"]) == ({"N": str(BLOCK)}, {"N": str(BLOCK + kept)})
    assert len(item["lin"]["B"]) == 8 and "adp" not in item and "cut" not in item
    for name in ("deadline", "expires_at", "ops", "oph", "win", "cop", "state", "stamp", "sum"):
        assert item.get(name) == old.get(name), name
    value = ack.status(TAG).value
    assert ack.stamp(TAG, finished=[_edge(mode)], op_id=f"s{SEQ}").duplicate  # in the window
    with pytest.raises(OutcomeUnknown):  # dropped by 0.1: it cannot be told, never applied again
        ack.stamp(TAG, finished=[_edge(mode)], op_id=f"s{CUT}")
    assert ack.status(TAG).value == value
    applied = ack.stamp(TAG, finished=[_edge(mode)])  # a drawn op id: nothing to check
    assert not applied.duplicate and applied.position.seq == BLOCK + kept + 1
    edge = _edge(mode)
    assert not ack.stamp(TAG, finished=[edge], op_id="child", after=applied.position).duplicate
    assert ack.stamp(TAG, finished=[edge], op_id="child", after=applied.position).duplicate
    assert migrate_table(ack.client, ack.table, ack.codec, int(time.time())).migrated == 0  # once


def test_a_migrated_sum_chain_moves_its_blocks_to_their_places(client: Any) -> None:
    """After the padding, the block owner's arithmetic holds again: the stamp at position
    window + 2 * BLOCK moves block 1 (positions 41..80, the migrated window among them)
    and a copy of a migrated op is found there from its bound."""
    ack = _tracker(client, "sum")
    ack.client.put_item(TableName=ack.table, Item=_item_0_1("sum"))
    migrate_table(ack.client, ack.table, ack.codec, int(time.time()))
    lineage = _stored(ack)["lin"]["B"]
    while int(_stored(ack)["seq"]["N"]) < 8 + 2 * BLOCK:
        ack.stamp(TAG, finished=[1])
    assert ack.stats.events.get("trims") == 1
    assert int(_stored(ack)["cutn"]["N"]) == 2 * BLOCK
    copy = ack.stamp(TAG, finished=[1], op_id=f"s{CUT + 1}", after=Position(lineage, BLOCK))
    assert copy.duplicate and copy.position == Position(lineage, BLOCK + 1)


def test_the_first_layout_is_migrated_like_a_node_item_python_writes(client: Any) -> None:
    ack = _tracker(client, "xor")
    deadline = int(time.time()) + 600
    ack.client.put_item(TableName=ack.table, Item=_item_first_layout(deadline))
    assert migrate_table(ack.client, ack.table, ack.codec, int(time.time())).migrated == 1
    item = _stored(ack)
    assert item["deadline"] == {"N": str(deadline)} and item["adp"] == {"N": "1"}
    assert [op["B"] for op in item["ops"]["L"]] == [_key(i) for i in (1, 2, 3)]
    assert ack.stamp(TAG, finished=[secrets.token_bytes(16)], op_id="s2").duplicate
    assert not ack.stamp(TAG, finished=[secrets.token_bytes(16)], op_id="s9").duplicate


def test_xor_ack_migrate(server_client: Any, moto_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ack = _tracker(server_client, "sum")
    ack.client.put_item(TableName=ack.table, Item=_item_0_1("sum"))
    ack.client.put_item(TableName=ack.table, Item={**_item_0_1("sum"), "tagID": {"S": "legacy/2"}})
    ack.create(TAG + "-new", 5)
    argv = ["migrate", "--endpoint-url", moto_server.endpoint_url, "--table", ack.table]
    assert main(argv) == 0
    assert "2 chains migrated, 0 not (3 items scanned)" in capsys.readouterr().out
    assert ack.status(TAG).value == 10**9
    assert main([*argv, "--json"]) == 0
    assert '"migrated": 0' in capsys.readouterr().out


def test_an_item_a_pre_release_adopted_is_migrated_too() -> None:
    """A 0.1 sum chain that a pre-release of 0.2 adopted (a lineage, ``hb`` = 13: the
    positions below it have no history, blocks counted from there): refused, then
    rewritten on a lineage of its own whose blocks start at position 1, every position it
    has no block for below the window."""
    codec, now = ItemCodec("tagID"), int(time.time())
    item = {**_item_0_1("sum"), "lin": {"B": b"lineage1"}, "hb": {"N": "13"}, "cutn": {"N": "53"}}
    item["seq"] = {"N": str(53 + SEQ - CUT)}
    with pytest.raises(UnmigratedItem):
        codec.parse(item)
    chain = migrate_item(codec, item, now)
    assert chain.lineage not in (None, b"lineage1") and not chain.adopted
    assert (chain.cut_seq, chain.seq, len(chain.ops)) == (2 * BLOCK, 2 * BLOCK + SEQ - CUT, SEQ - CUT)
    assert "hb" not in codec.encode(chain) and codec.parse(codec.encode(chain)) == chain
