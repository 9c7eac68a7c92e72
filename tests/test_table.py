"""The chains table: create_table(), a missing table, a table with another key schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import unique_table

from xor_ack_dynamodb import XorAckDynamoDB, errors
from xor_ack_dynamodb.config import check_table_name


@pytest.fixture(params=["inproc", "server", "ddblocal"])
def moto_client(request: pytest.FixtureRequest) -> Any:
    """The backends that implement the TTL API: moto in-process and over HTTP, and
    DynamoDB Local (dynalite has none, so TTL cannot be checked there)."""
    return request.getfixturevalue(f"{request.param}_client")


def ttl_of(client: Any, table: str) -> dict[str, Any]:
    return client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]  # type: ignore[no-any-return]


def calls(tag: str = "t") -> dict[str, Callable[[XorAckDynamoDB], Any]]:
    return {
        "create": lambda ack: ack.create(tag, b"\x29"),
        "stamp": lambda ack: ack.stamp(tag, b"\x29"),
        "fail": lambda ack: ack.fail(tag),
        "touch": lambda ack: ack.touch(tag),
        "status": lambda ack: ack.status(tag),
        "delete": lambda ack: ack.delete(tag),
        "status_many": lambda ack: ack.status_many([tag]),
    }


def test_create_table_creates_it_with_ttl(moto_client: Any) -> None:
    table = unique_table()
    ack = XorAckDynamoDB(table, client=moto_client)
    assert ack.create_table() is True
    description = moto_client.describe_table(TableName=table)["Table"]
    assert description["KeySchema"] == [{"AttributeName": "tagID", "KeyType": "HASH"}]
    assert description["AttributeDefinitions"] == [{"AttributeName": "tagID", "AttributeType": "S"}]
    assert description["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert description["TableStatus"] == "ACTIVE"
    assert ttl_of(moto_client, table) == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}
    # Again: a no-op.
    assert ack.create_table() is False
    assert XorAckDynamoDB(table, client=moto_client).create_table() is False
    assert ttl_of(moto_client, table)["TimeToLiveStatus"] == "ENABLED"


def test_create_table_enables_ttl_on_an_existing_table(moto_client: Any) -> None:
    table = unique_table()
    moto_client.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "tagID", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "tagID", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    assert ttl_of(moto_client, table)["TimeToLiveStatus"] == "DISABLED"
    assert XorAckDynamoDB(table, client=moto_client).create_table() is False
    assert ttl_of(moto_client, table) == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}


def test_ttl_on_another_attribute_is_refused(moto_client: Any) -> None:
    table = unique_table()
    XorAckDynamoDB(table, client=moto_client, ttl_attribute="ttl").create_table()
    with pytest.raises(errors.InvalidConfig) as info:
        XorAckDynamoDB(table, client=moto_client).create_table()
    assert "'ttl'" in str(info.value) and "'expires_at'" in str(info.value)


def test_custom_partition_key_and_ttl_attribute(client: Any) -> None:
    table = unique_table()
    ack = XorAckDynamoDB(table, partition_key="chain", client=client, ttl_attribute="gc_at")
    assert ack.create_table() is True
    ack.create("a", b"\x29")
    item = client.get_item(TableName=table, Key={"chain": {"S": "a"}}, ConsistentRead=True)["Item"]
    assert "gc_at" in item and "expires_at" not in item
    assert ack.stamp("a", b"\x29").acked
    assert ack.status_many(["a"])["a"].state == "acked"


def test_missing_table_raises_table_not_found(client: Any) -> None:
    table = unique_table("absent")
    ack = XorAckDynamoDB(table, client=client)
    for name, call in calls().items():
        with pytest.raises(errors.TableNotFound) as info:
            call(ack)
        assert info.value.code == "TableNotFound", name
        message = str(info.value)
        assert repr(table) in message
        assert "create_table()" in message and f"xor-ack table create --table {table}" in message


def test_missing_table_then_create_table(client: Any) -> None:
    table = unique_table("late")
    ack = XorAckDynamoDB(table, client=client)
    with pytest.raises(errors.TableNotFound):
        ack.create("t", b"\x29")
    assert ack.create_table() is True
    assert ack.create("t", b"\x29") == b"\x29"


@pytest.mark.parametrize(
    "key_schema, attributes",
    [
        ([("id", "HASH")], [("id", "S")]),
        ([("tagID", "HASH")], [("tagID", "N")]),
        ([("tagID", "HASH"), ("sk", "RANGE")], [("tagID", "S"), ("sk", "S")]),
    ],
    ids=["other-name", "number-key", "with-sort-key"],
)
def test_wrong_key_schema(
    client: Any, key_schema: list[tuple[str, str]], attributes: list[tuple[str, str]]
) -> None:
    table = unique_table("wrong")
    client.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": t} for n, t in attributes],
        KeySchema=[{"AttributeName": n, "KeyType": k} for n, k in key_schema],
        BillingMode="PAY_PER_REQUEST",
    )
    ack = XorAckDynamoDB(table, client=client)
    with pytest.raises(errors.TableSchemaMismatch) as info:
        ack.create_table()
    assert info.value.code == "TableSchemaMismatch"
    assert repr(table) in str(info.value) and "'tagID'" in str(info.value)
    # On use, every request on a chain is refused the same way, whatever words the
    # backend's ValidationException uses (moto's names no key at all). With a Number
    # key only the create is checked: moto reads and deletes a key of the wrong type as
    # "no such item" where DynamoDB refuses it.
    for name, call in calls("t").items():
        if attributes[0][1] == "N" and name != "create":
            continue
        with pytest.raises(errors.TableSchemaMismatch) as used:
            call(ack)
        assert used.value.code == "TableSchemaMismatch", name
        assert repr(table) in str(used.value)
    assert client.scan(TableName=table)["Items"] == []


@pytest.mark.parametrize("name", ["ab", "has space", "bad/slash", "x" * 256, None, 7])
def test_table_names_dynamodb_would_refuse(name: object) -> None:
    with pytest.raises(errors.InvalidConfig):
        check_table_name(name)
    with pytest.raises(errors.InvalidConfig):
        XorAckDynamoDB(name, client=object())  # type: ignore[arg-type]


def test_table_names_dynamodb_accepts() -> None:
    for name in ("abc", "acks.prod-1_x", "x" * 255):
        assert check_table_name(name) == name
