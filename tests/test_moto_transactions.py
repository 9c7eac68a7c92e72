"""The embedded moto server's TransactWriteItems (``testing/moto_server.py``): moto
deep-copies the whole table once per item of a transaction; the server snapshots only
the items a transaction names, once. All or nothing still holds."""

from __future__ import annotations

from typing import Any

import pytest

from xor_ack_dynamodb import LocalDynamoDB

pytestmark = pytest.mark.server


def _put(key: str, value: str, new: bool = True) -> dict[str, Any]:
    put: dict[str, Any] = {"TableName": "tx", "Item": {"k": {"S": key}, "v": {"S": value}}}
    if new:
        put["ConditionExpression"] = "attribute_not_exists(k)"
    return {"Put": put}


def _client(server: LocalDynamoDB, table: str) -> Any:
    """A client of ``server`` and a new table ``table`` keyed by ``k`` (moto's tables
    outlive a server in this process: each test names its own)."""
    client = server.client()
    client.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return client


def test_a_cancelled_transaction_changes_nothing_and_tables_are_not_copied() -> None:
    from moto.dynamodb import models

    with LocalDynamoDB() as server:
        client = _client(server, "tx")
        client.transact_write_items(TransactItems=[_put(f"old{i}", "a") for i in range(100)])
        update = {
            "Update": {
                "TableName": "tx",
                "Key": {"k": {"S": "old1"}},
                "UpdateExpression": "SET v = :b",
                "ExpressionAttributeValues": {":b": {"S": "b"}},
            }
        }
        delete = {"Delete": {"TableName": "tx", "Key": {"k": {"S": "old3"}}}}
        replace = _put("old2", "p", new=False)  # a Put over an item is undone too
        items = [_put(f"new{i}", "n") for i in range(50)] + [update, replace, delete, _put("old0", "x")]
        with pytest.raises(client.exceptions.TransactionCanceledException):  # the last one fails
            client.transact_write_items(TransactItems=items)
        keys = {item["k"]["S"]: item["v"]["S"] for item in client.scan(TableName="tx")["Items"]}
        assert keys == {f"old{i}": "a" for i in range(100)}  # no new item; old0-old3 as they were
        client.transact_write_items(TransactItems=[_put("new0", "n"), update])
        assert client.get_item(TableName="tx", Key={"k": {"S": "old1"}})["Item"]["v"]["S"] == "b"
        table = object.__new__(models.Table)
        assert models.copy.deepcopy(table) is table  # type: ignore[attr-defined]


def test_the_item_size_limit_holds_with_items_measured_once() -> None:
    """The embedded server builds items measuring them once (``_measure_items_once``),
    with moto's limit: an item just under 400 KB is stored, one past it refused, in a
    PutItem and in a transaction."""
    with LocalDynamoDB() as server:
        client = _client(server, "sized")

        def item(key: str, *sizes: int) -> dict[str, Any]:
            return {"k": {"S": key}, **{f"a{i}": {"S": "x" * size} for i, size in enumerate(sizes)}}

        client.put_item(TableName="sized", Item=item("small", 200_000, 199_000))
        with pytest.raises(client.exceptions.ClientError, match="Item size has exceeded"):
            client.put_item(TableName="sized", Item=item("big", 200_000, 206_000))
        with pytest.raises(client.exceptions.ClientError, match="Item size has exceeded"):
            client.transact_write_items(
                TransactItems=[{"Put": {"TableName": "sized", "Item": item("big", 406_000)}}]
            )
        assert [i["k"]["S"] for i in client.scan(TableName="sized")["Items"]] == ["small"]


def test_conditions_parsed_once_decide_by_each_requests_own_values() -> None:
    """The server parses a ConditionExpression once per expression
    (``_parse_conditions_once``); each item is still checked against its own values:
    a transaction of updates with one expression, one of whose conditions is false, is
    cancelled at that item; then the same expression with right values passes; and a
    missing value still raises (as moto's own parse does)."""
    from moto.dynamodb.comparisons import ConditionExpressionParser

    def bump(key: str, old: str, new: str) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": "cond",
                "Key": {"k": {"S": key}},
                "UpdateExpression": "SET #v = :new",
                "ConditionExpression": "attribute_exists(k) AND #v = :old",
                "ExpressionAttributeNames": {"#v": "v"},
                "ExpressionAttributeValues": {":old": {"S": old}, ":new": {"S": new}},
            }
        }

    with LocalDynamoDB() as server:
        assert getattr(ConditionExpressionParser.parse, "_xor_ack", False)
        client = _client(server, "cond")
        for i in range(5):
            client.put_item(TableName="cond", Item={"k": {"S": f"i{i}"}, "v": {"S": str(i)}})
        wrong = [bump(f"i{i}", str(i) if i != 3 else "nope", f"{i}b") for i in range(5)]
        with pytest.raises(client.exceptions.TransactionCanceledException) as cancelled:
            client.transact_write_items(TransactItems=wrong)
        reasons = [r["Code"] for r in cancelled.value.response["CancellationReasons"]]
        assert reasons == ["None", "None", "None", "ConditionalCheckFailed", "None"]
        client.transact_write_items(TransactItems=[bump(f"i{i}", str(i), f"{i}b") for i in range(5)])
        stored = {item["k"]["S"]: item["v"]["S"] for item in client.scan(TableName="cond")["Items"]}
        assert stored == {f"i{i}": f"{i}b" for i in range(5)}
        # A kept parse is not handed to a request lacking one of its values.
        with pytest.raises(KeyError):
            ConditionExpressionParser("attribute_exists(k) AND #v = :old", {"#v": "v"}, {}).parse()
