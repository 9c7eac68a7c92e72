"""The one-time migration of chain items of the 0.1 layout (issue 31, "fewer concepts":
it replaces adopting them on every write, ``hb``, ``Chain.base`` and ``Trim.adopt``).

Items are written as 0.1.0 wrote them (its codec at commit 326bcce: ``tok``, ``seq``,
``ops``/``oph``, ``cutn``, no ``lin``; the first layout: hex op keys of the op id without
its call's namespace, no ``tok`` nor ``seq``, ``expires_at`` as the deadline), on every
DynamoDB backend. Until migrated every call refuses them with ``UnmigratedItem``; after
``migrate_table`` (``xor-ack migrate``) the chain keeps its value and deadline, a 0.1
chain the op ids in its item, an op 0.1 dropped without history is ``OutcomeUnknown``
(never applied twice), and its blocks move to history at their places again; a
first-layout chain, whose op keys are not today's, answers ``OutcomeUnknown`` to every
named op and is listed for replay (issue 39). Items written by the real code of each
earlier layout, from the repository's history: tests/test_migrate_history.py.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any, cast

import pytest
from conftest import unique_table

from xor_ack_dynamodb import XorAckDynamoDB
from xor_ack_dynamodb.cli import main
from xor_ack_dynamodb.core.algebra import Mode
from xor_ack_dynamodb.core.chain import BLOCK, op_key
from xor_ack_dynamodb.errors import OutcomeUnknown, TagExists, UnmigratedItem
from xor_ack_dynamodb.stamps import Position
from xor_ack_dynamodb.stores.dynamodb.item import ItemCodec
from xor_ack_dynamodb.stores.dynamodb.migrate import (
    DROPPED,
    _rewrite,
    migrate_item,
    migrate_table,
    unreadable,
)

TAG = "legacy/part-0001"
SEQ, CUT = 50, 13  # 0.1 dropped positions 1..13 without history; the item holds 14..50


def _tracker(client: Any, mode: str) -> XorAckDynamoDB:
    assert mode in ("xor", "sum")
    ack = XorAckDynamoDB(unique_table("migrate"), partition_key="tagID", client=client, mode=cast(Mode, mode))
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
        "owner": {"S": "job-1"},
        "created_at": {"N": str(now - 600)},
        "updated_at": {"N": str(now - 60)},
    }


def _first_key(op_id: str, namespace: str = "") -> str:
    """An op key as the first layout wrote it: 16 hex digits of ``blake2b(op_id)``, a
    stamp's without a namespace (a create's in ``create``, as today's)."""
    data = f"{namespace}\x00{op_id}" if namespace else op_id
    return hashlib.blake2b(data.encode(), digest_size=8).hexdigest()


def _item_first_layout(deadline: int) -> dict[str, Any]:
    """An xor chain of the first layout after its create (op id ``c``) and stamps s1, s2:
    hex op keys, no token, no seq, ``expires_at`` its deadline."""
    return {
        "tagID": {"S": TAG},
        "stamp": {"B": secrets.token_bytes(16)},
        "state": {"S": "pending"},
        "expires_at": {"N": str(deadline)},
        "version": {"N": "3"},
        "ops": {"L": [{"S": _first_key("c", "create")}, {"S": _first_key("s1")}, {"S": _first_key("s2")}]},
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
    assert (done.migrated, done.failed, done.replay) == (1, {}, {TAG: DROPPED})  # named ops: unknown
    item = _stored(ack)
    kept = SEQ - CUT
    # Positions move up to the next block boundary: positions 1..40 have no history block.
    assert (item["cutn"], item["seq"]) == ({"N": str(BLOCK)}, {"N": str(BLOCK + kept)})
    assert len(item["lin"]["B"]) == 8 and "adp" not in item and "cut" not in item
    for name in ("deadline", "expires_at", "ops", "oph", "win", "cop", "owner", "state", "stamp", "sum"):
        assert item.get(name) == old.get(name), name
    value = ack.status(TAG).value
    assert ack.stamp(TAG, finished=[_edge(mode)], op_id=f"s{SEQ}").duplicate  # in the window
    with pytest.raises(OutcomeUnknown):  # dropped by 0.1: it cannot be told, never applied again
        ack.stamp(TAG, finished=[_edge(mode)], op_id=f"s{CUT}")
    assert ack.status(TAG).value == value
    applied = ack.stamp(TAG, finished=[_edge(mode)])  # a drawn op id: nothing to check
    assert not applied.duplicate and applied.position is not None
    assert applied.position.seq == BLOCK + kept + 1
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


def test_the_first_layout_is_rewritten_so_that_no_op_it_named_is_applied_again(client: Any) -> None:
    """Its op keys hash the op id without the call's namespace: no key of today's
    matches them, and how many ops it dropped was never counted. Every named op then
    answers OutcomeUnknown (on HEAD: a copy of s2 was applied a second time); its create,
    whose key is today's, is a duplicate; the chain is listed for replay and completes
    with drawn op ids."""
    ack = _tracker(client, "xor")
    deadline = int(time.time()) + 600
    old = _item_first_layout(deadline)
    ack.client.put_item(TableName=ack.table, Item=old)
    assert unreadable(old) is not None
    done = migrate_table(ack.client, ack.table, ack.codec, int(time.time()))
    value = old["stamp"]["B"]
    for op_id in ("s2", "s1", "s9"):  # in the item, in it too, never applied: none can be told
        with pytest.raises(OutcomeUnknown):
            ack.stamp(TAG, finished=[secrets.token_bytes(16)], op_id=op_id)
    assert ack.create(TAG, secrets.token_bytes(16), op_id="c").duplicate
    assert (done.migrated, done.failed, list(done.replay)) == (1, {}, [TAG])
    item = _stored(ack)
    assert item["deadline"] == {"N": str(deadline)} and item["adp"] == {"N": "1"}
    assert item["ops"] == {"L": []} and (item["cutn"], item["seq"]) == ({"N": str(BLOCK)}, {"N": str(BLOCK)})
    assert item["cop"]["B"] == bytes.fromhex(_first_key("c", "create")) + b"\x00" * 4
    with pytest.raises(TagExists):  # another create's op id: the tag is taken
        ack.create(TAG, secrets.token_bytes(16), op_id="c2")
    assert ack.status(TAG).value == value
    applied = ack.stamp(TAG, finished=[secrets.token_bytes(16)], started=[secrets.token_bytes(16)])
    assert not applied.duplicate and applied.position is not None and applied.position.seq == BLOCK + 1
    last = ack.stamp(TAG, finished=[applied], op_id="last", after=applied.position)
    assert last.acked and ack.status(TAG).state == "acked"
    assert migrate_table(ack.client, ack.table, ack.codec, int(time.time())).migrated == 0  # once


@pytest.mark.parametrize("state", ["acked", "failed"])
def test_a_finished_first_layout_chain_is_not_listed_for_replay(inproc_client: Any, state: str) -> None:
    """Only pending chains are listed: a finished one has nothing left to replay (a copy
    of one of its ops answers OutcomeUnknown, never a second application). Its reason
    is kept."""
    ack = _tracker(inproc_client, "xor")
    ended = int(time.time()) + 86400
    item = {**_item_first_layout(ended), "state": {"S": state}, "reason": {"S": "no"}}
    ack.client.put_item(TableName=ack.table, Item=item)
    done = migrate_table(ack.client, ack.table, ack.codec, int(time.time()))
    assert (done.migrated, done.replay) == (1, {}) and ack.status(TAG).state == state
    stored = _stored(ack)
    assert "deadline" not in stored and stored["reason"] == {"S": "no"}  # expires_at: its purge time
    with pytest.raises(OutcomeUnknown):
        ack.stamp(TAG, finished=[secrets.token_bytes(16)], op_id="s2")


def test_an_item_changed_since_the_scan_is_read_again(inproc_client: Any) -> None:
    """Each rewrite is conditioned on the item as it was read: one that changed since
    (an old writer's stamp) is refused, read again and rewritten from what it holds."""
    ack = _tracker(inproc_client, "xor")
    seen = _item_first_layout(int(time.time()) + 600)
    now = {**seen, "stamp": {"B": secrets.token_bytes(16)}, "version": {"N": "4"}}
    ack.client.put_item(TableName=ack.table, Item=now)
    done = _rewrite(ack.client, ack.table, ack.codec, seen, int(time.time()))
    assert isinstance(done, tuple) and done[1] is not None  # written, and not read exactly
    assert done[0].value == now["stamp"]["B"] == _stored(ack)["stamp"]["B"]


def test_xor_ack_migrate(server_client: Any, moto_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ack = _tracker(server_client, "sum")
    ack.client.put_item(TableName=ack.table, Item=_item_0_1("sum"))
    ack.client.put_item(TableName=ack.table, Item={**_item_0_1("sum"), "tagID": {"S": "legacy/2"}})
    ack.create(TAG + "-new", 5)
    argv = ["migrate", "--endpoint-url", moto_server.endpoint_url, "--table", ack.table]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "2 chains migrated, 0 not (3 items scanned)" in out
    assert f"replay legacy/2: {DROPPED}" in out and f"replay {TAG}: {DROPPED}" in out  # the chains to replay
    assert ack.status(TAG).value == 10**9
    assert main([*argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert '"migrated": 0' in out and '"replay": {}' in out


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
