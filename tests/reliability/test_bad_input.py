"""Bad input: each case raises its typed error and writes nothing (checked with a scan
and the tracker's request counter). Runs on every backend of the ``client`` fixture
(in-process moto, moto server, dynalite, DynamoDB Local)."""

from __future__ import annotations

from typing import Any

import pytest

from xor_ack_dynamodb import XorAckDynamoDB, new_stamp, xor
from xor_ack_dynamodb.errors import (
    BufferLengthsUnequal,
    CorruptItem,
    InvalidConfig,
    InvalidStamp,
    InvalidStampType,
    InvalidTag,
    InvalidTagType,
    TableNotFound,
    TableSchemaMismatch,
    ZeroBufferNoOp,
)

from .runner import unique_table


def _scan(client: Any, table: str) -> list[dict[str, Any]]:
    return sorted(client.scan(TableName=table, ConsistentRead=True).get("Items", []), key=repr)


BAD_TAGS: list[tuple[object, type[Exception]]] = [
    ("", InvalidTag),
    (b"bytes-tag", InvalidTagType),
    (42, InvalidTagType),
    (None, InvalidTagType),
    ("x" * 2049, InvalidTag),
    ("é" * 1025, InvalidTag),  # 2050 bytes of UTF-8 in 1025 characters
    ("lone \ud800 surrogate", InvalidTag),
    ("\udfff", InvalidTag),
]

BAD_STAMPS: list[tuple[object, type[Exception]]] = [
    (b"", InvalidStamp),
    (bytes(16), ZeroBufferNoOp),
    ("a str", InvalidStampType),
    (12345, InvalidStampType),
    ([1, 2, 3], InvalidStampType),
    (None, InvalidStampType),
    (b"\x01" * 1025, InvalidStamp),  # over MAX_STAMP_BYTES: too large for a lean item
    (b"\x01" * 400_000, InvalidStamp),  # over DynamoDB's 400 KB item limit
]


@pytest.mark.parametrize(("tag", "error"), BAD_TAGS, ids=lambda v: repr(v)[:16])
def test_bad_tags(ack: XorAckDynamoDB, client: Any, tag: object, error: type[Exception]) -> None:
    before = _scan(client, ack.table)
    ack.stats.reset()
    for call in (
        lambda: ack.create(tag, new_stamp()),  # type: ignore[arg-type]
        lambda: ack.stamp(tag, new_stamp()),  # type: ignore[arg-type]
        lambda: ack.status(tag),  # type: ignore[arg-type]
        lambda: ack.fail(tag),  # type: ignore[arg-type]
        lambda: ack.touch(tag),  # type: ignore[arg-type]
        lambda: ack.delete(tag),  # type: ignore[arg-type]
        lambda: ack.status_many(["fine", tag]),  # type: ignore[list-item]
    ):
        with pytest.raises(error):
            call()
    assert ack.stats.total_requests == 0
    assert _scan(client, ack.table) == before


@pytest.mark.parametrize(("stamp", "error"), BAD_STAMPS, ids=lambda v: repr(v)[:24])
def test_bad_stamps(ack: XorAckDynamoDB, client: Any, stamp: object, error: type[Exception]) -> None:
    ack.create("live", new_stamp())
    before = _scan(client, ack.table)
    ack.stats.reset()
    with pytest.raises(error):
        ack.create("other", stamp)  # type: ignore[arg-type]
    # stamp(tag, None) is the keyword form with no edges: InvalidStamp, not a type error.
    with pytest.raises(InvalidStamp if stamp is None else error):
        ack.stamp("live", stamp)  # type: ignore[arg-type]
    assert ack.stats.total_requests == 0
    assert _scan(client, ack.table) == before


def test_stamp_of_another_length_than_the_stored_one(ack: XorAckDynamoDB, client: Any) -> None:
    ack.create("live", new_stamp(16))
    before = _scan(client, ack.table)
    for size in (8, 17, 32):
        with pytest.raises(BufferLengthsUnequal):
            ack.stamp("live", new_stamp(size))
    fresh = XorAckDynamoDB(ack.table, client=client)  # no cached value: it must read first
    with pytest.raises(BufferLengthsUnequal):
        fresh.stamp("live", new_stamp(8))
    assert fresh.stats.requests == {"GetItem": 1}  # the read, and no write
    assert _scan(client, ack.table) == before


@pytest.mark.parametrize(
    "tag",
    [
        "emoji 🎉🧵",
        "עברית RTL \u200f mark",
        "nul\x00inside",
        "combining e\u0301",
        "\u2028line sep",
        "x" * 2048,
        "é" * 1024,
    ],
    ids=["emoji", "rtl", "nul", "combining", "line-separator", "2048-ascii", "2048-bytes-utf8"],
)
def test_legal_odd_unicode_tags_work(ack: XorAckDynamoDB, tag: str) -> None:
    root, child = new_stamp(), new_stamp()
    ack.create(tag, root)
    assert not ack.stamp(tag, xor(root, child)).acked
    assert ack.stamp(tag, child).acked
    assert ack.status(tag).state == "acked"
    assert ack.status_many([tag])[tag].state == "acked"


@pytest.mark.parametrize("name", ["ab", "", "has space", "slash/name", "x" * 256, "tábla", None, 7])
def test_table_names_dynamodb_rejects(client: Any, name: object) -> None:
    with pytest.raises(InvalidConfig):
        XorAckDynamoDB(name, client=client)  # type: ignore[arg-type]


def test_missing_table(client: Any) -> None:
    ack = XorAckDynamoDB(unique_table("missing"), client=client)
    for call in (
        lambda: ack.create("t", new_stamp()),
        lambda: ack.stamp("t", new_stamp()),
        lambda: ack.status("t"),
    ):
        with pytest.raises(TableNotFound):
            call()
    assert ack.table not in client.list_tables()["TableNames"]


def test_table_with_the_wrong_key_schema(client: Any) -> None:
    table = unique_table("wrongkey")
    client.create_table(
        TableName=table,
        AttributeDefinitions=[
            {"AttributeName": "id", "AttributeType": "S"},
            {"AttributeName": "n", "AttributeType": "N"},
        ],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}, {"AttributeName": "n", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    ack = XorAckDynamoDB(table, partition_key="tagID", client=client)
    with pytest.raises(TableSchemaMismatch):
        ack.create_table()
    for call in (
        lambda: ack.create("t", new_stamp()),
        lambda: ack.stamp("t", new_stamp()),
        lambda: ack.status("t"),
    ):
        with pytest.raises(TableSchemaMismatch):
            call()
    assert _scan(client, table) == []


@pytest.mark.parametrize(
    "bad",
    [{"S": "tomorrow"}, {"N": "1.5"}, {"B": b"\x01"}, {"SS": ["1"]}],
    ids=["string", "fraction", "binary", "string-set"],
)
def test_unreadable_ttl_written_by_someone_else(
    ack: XorAckDynamoDB, client: Any, bad: dict[str, Any]
) -> None:
    ack.create("t", new_stamp())
    client.update_item(
        TableName=ack.table,
        Key={"tagID": {"S": "t"}},
        UpdateExpression="SET expires_at = :bad",
        ExpressionAttributeValues={":bad": bad},
    )
    before = _scan(client, ack.table)
    fresh = XorAckDynamoDB(ack.table, client=client)
    with pytest.raises(CorruptItem):
        fresh.stamp("t", new_stamp())
    with pytest.raises(CorruptItem):
        fresh.status("t")
    assert _scan(client, ack.table) == before


def test_item_written_by_the_node_package_keeps_working(ack: XorAckDynamoDB, client: Any) -> None:
    """The Node package writes only the key and ``stamp``: no state, version, expiry or
    op ids. It reads as a pending chain and can be stamped to completion."""
    root, child = new_stamp(), new_stamp()
    client.put_item(TableName=ack.table, Item={"tagID": {"S": "from-node"}, "stamp": {"B": bytes(root)}})
    status = ack.status("from-node")
    assert (status.state, status.version, status.expires_at) == ("pending", 0, None)
    assert not ack.stamp("from-node", xor(root, child), op_id="parent").acked
    assert ack.stamp("from-node", xor(root, child), op_id="parent") == xor(child, bytes(16))  # duplicate
    assert ack.stamp("from-node", child).acked
    assert ack.status("from-node").state == "acked"
