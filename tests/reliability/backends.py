"""Probes of what a DynamoDB implementation does where the local backends differ.

Each probe sends real requests through a boto3 client to a table keyed by a String
``k`` (:func:`make_table`) and returns what it saw. ``tests/test_backends.py`` pins the
answers of every backend (docs/testing.md's table states them); ``scripts/backends.py``
runs all of them, with the racing, rate and TTL-sweep probes, and prints one table.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

__all__ = [
    "BIG",
    "add_big_number",
    "all_old_on_failed_condition",
    "batch_get_over_16_mb",
    "binary_list_ops",
    "conditional_race",
    "conditional_rate",
    "consumed_capacity",
    "make_table",
    "ttl_api",
    "ttl_sweep",
]

KEY = "k"
#: 27 and 26 digits: past a double's 15-17 significant digits, within DynamoDB's 38.
BIG = (123456789012345678901234567, 98765432109876543210987654)


def make_table(client: Any, table: str) -> str:
    client.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": KEY, "AttributeType": "S"}],
        KeySchema=[{"AttributeName": KEY, "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1})
    return table


def _key(name: str) -> dict[str, Any]:
    return {KEY: {"S": name}}


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code"))


def all_old_on_failed_condition(client: Any, table: str) -> dict[str, bool]:
    """Per request type (PutItem, UpdateItem, DeleteItem): whether a write whose condition
    fails, sent with ``ReturnValuesOnConditionCheckFailure=ALL_OLD``, raises
    ConditionalCheckFailedException carrying the item as it is."""
    key = _key("all-old")
    client.put_item(TableName=table, Item={**key, "v": {"N": "1"}})
    common = {
        "TableName": table,
        "ConditionExpression": "attribute_not_exists(k)",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    calls: dict[str, Callable[[], Any]] = {
        "PutItem": lambda: client.put_item(Item={**key, "v": {"N": "2"}}, **common),
        "UpdateItem": lambda: client.update_item(
            Key=key, UpdateExpression="SET v = :x", ExpressionAttributeValues={":x": {"N": "3"}}, **common
        ),
        "DeleteItem": lambda: client.delete_item(Key=key, **common),
    }
    seen: dict[str, bool] = {}
    for name, call in calls.items():
        try:
            call()
        except ClientError as exc:
            assert _code(exc) == "ConditionalCheckFailedException", exc.response
            seen[name] = exc.response.get("Item") == {**key, "v": {"N": "1"}}
        else:
            raise AssertionError(f"{name}: the condition should have failed")
    return seen


def ttl_api(client: Any, table: str) -> str:
    """``"ok"`` if UpdateTimeToLive and DescribeTimeToLive work (and agree), else the
    error code of the first that fails."""
    try:
        client.update_time_to_live(
            TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"}
        )
        ttl = client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    except ClientError as exc:
        return _code(exc)
    assert ttl.get("AttributeName") == "exp" and ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"), ttl
    return "ok"


def ttl_sweep(client: Any, table: str, wait: float) -> float | None:
    """Seconds until an item that expired a minute ago is deleted by TTL, or None if it
    is still there after ``wait`` seconds. Needs :func:`ttl_api` to have enabled TTL on
    ``exp``."""
    key = _key("ttl-sweep")
    client.put_item(TableName=table, Item={**key, "exp": {"N": str(int(time.time()) - 60)}})
    started = time.monotonic()
    while time.monotonic() - started < wait:
        if "Item" not in client.get_item(TableName=table, Key=key, ConsistentRead=True):
            return round(time.monotonic() - started, 1)
        time.sleep(0.1)
    return None


def consumed_capacity(client: Any, table: str) -> bool:
    """Whether a conditional UpdateItem sent with ``ReturnConsumedCapacity=TOTAL``
    reports its capacity."""
    response = client.update_item(
        TableName=table,
        Key=_key("capacity"),
        UpdateExpression="SET v = :x",
        ConditionExpression="attribute_not_exists(v)",
        ExpressionAttributeValues={":x": {"N": "1"}},
        ReturnConsumedCapacity="TOTAL",
    )
    capacity = response.get("ConsumedCapacity") or {}
    return capacity.get("TableName") == table and float(capacity.get("CapacityUnits", 0)) > 0


def add_big_number(client: Any, table: str) -> bool:
    """Whether ``ADD #n :big`` on 26- and 27-digit integers is exact."""
    key = _key("big")
    client.put_item(TableName=table, Item={**key, "n": {"N": str(BIG[1])}})
    response = client.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="ADD #n :big",
        ExpressionAttributeNames={"#n": "n"},
        ExpressionAttributeValues={":big": {"N": str(BIG[0])}},
        ReturnValues="ALL_NEW",
    )
    return bool(response["Attributes"]["n"]["N"] == str(sum(BIG)))


def binary_list_ops(client: Any, table: str) -> dict[str, bool]:
    """On a List of Binary values (the shape of the library's op list): whether
    ``list_append`` appends, ``contains(ops, :b)`` finds a member (and only a member), and
    ``REMOVE ops[0], ops[1]`` removes exactly the first two."""
    key = _key("ops")
    one, two, three = b"\x01op", b"\x02op", b"\x03op"
    client.put_item(TableName=table, Item={**key, "ops": {"L": [{"B": one}, {"B": two}]}})
    appended = client.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET ops = list_append(ops, :new)",
        ExpressionAttributeValues={":new": {"L": [{"B": three}]}},
        ReturnValues="ALL_NEW",
    )["Attributes"]["ops"]

    def holds(member: bytes) -> bool:
        try:
            client.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET probe = :one",
                ConditionExpression="contains(ops, :b)",
                ExpressionAttributeValues={":b": {"B": member}, ":one": {"N": "1"}},
            )
        except ClientError as exc:
            assert _code(exc) == "ConditionalCheckFailedException", exc.response
            return False
        return True

    contains = holds(two) and not holds(b"\x09op")
    removed = client.update_item(
        TableName=table, Key=key, UpdateExpression="REMOVE ops[0], ops[1]", ReturnValues="ALL_NEW"
    )["Attributes"]["ops"]
    return {
        "list_append": appended == {"L": [{"B": one}, {"B": two}, {"B": three}]},
        "contains": contains,
        "remove_two": removed == {"L": [{"B": three}]},
    }


def batch_get_over_16_mb(client: Any, table: str, items: int = 50) -> tuple[int, int]:
    """``items`` items of 390 KB (19.5 MB in all, over BatchGetItem's 16 MB per call),
    read in one BatchGetItem: (items returned, keys left in UnprocessedKeys)."""
    keys = [_key(f"large-{i}") for i in range(items)]
    pad = {"B": b"x" * 390_000}
    for key in keys:
        client.put_item(TableName=table, Item={**key, "pad": pad})
    response = client.batch_get_item(RequestItems={table: {"Keys": keys, "ConsistentRead": True}})
    unprocessed = response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
    return len(response["Responses"].get(table, [])), len(unprocessed)


def conditional_race(
    new_client: Callable[[], Any], table: str, threads: int = 16, each: int = 25
) -> tuple[int, int]:
    """``threads`` threads, each with its own client, each ``each`` times: read a counter,
    write it + 1 on condition that it is unchanged. Returns (successful writes, final
    value): equal when conditional writes are atomic."""
    key = _key("race")
    setup = new_client()
    setup.put_item(TableName=table, Item={**key, "n": {"N": "0"}})
    wins = [0]
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def work() -> None:
        client = new_client()
        start.wait()
        for _ in range(each):
            seen = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["n"]["N"]
            try:
                client.update_item(
                    TableName=table,
                    Key=key,
                    UpdateExpression="SET n = :new",
                    ConditionExpression="n = :old",
                    ExpressionAttributeValues={":new": {"N": str(int(seen) + 1)}, ":old": {"N": seen}},
                )
            except ClientError as exc:
                assert _code(exc) == "ConditionalCheckFailedException", exc.response
                continue
            with lock:
                wins[0] += 1

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    final = setup.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["n"]["N"]
    return wins[0], int(final)


def conditional_rate(client: Any, table: str, seconds: float = 2.0) -> float:
    """Conditional UpdateItem requests per second from one thread (each one succeeds)."""
    key = _key("rate")
    client.put_item(TableName=table, Item={**key, "n": {"N": "0"}})
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        client.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET n = :new",
            ConditionExpression="n = :old",
            ExpressionAttributeValues={":new": {"N": str(done + 1)}, ":old": {"N": str(done)}},
        )
        done += 1
    return done / (time.perf_counter() - started)
