"""Writes exactly as the Node package (xor-ack-dynamodb 0.3, ``index.js``) makes them,
for the interop tests: the same requests, the same conditions.

* ``create``: ``PutItem {pk, stamp}`` if ``attribute_not_exists(pk)``;
* ``stamp``: a consistent ``GetItem``, then, when the XOR is all zeros, a ``DeleteItem``
  if ``attribute_exists(pk) AND stamp = :read``, otherwise a ``PutItem {pk, stamp}``
  under the same condition (every other attribute of the item is dropped);
* ``delete``: ``DeleteItem`` if ``attribute_exists(pk)``.

A failed condition is the Node package's ``Conflict`` (:class:`NodeConflict` here); it
does not retry.
"""

from __future__ import annotations

from typing import Any

from xor_ack_dynamodb import xor


class NodeConflict(Exception):
    """The Node package's ``{code: "Conflict"}``: a condition failed."""


def _conditional(call: Any, **params: Any) -> None:
    try:
        call(**params)
    except Exception as error:
        if getattr(error, "response", {}).get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            raise NodeConflict(str(error)) from error
        raise


def node_create(client: Any, table: str, tag: str, stamp: bytes, partition_key: str = "tagID") -> None:
    _conditional(
        client.put_item,
        TableName=table,
        Item={partition_key: {"S": tag}, "stamp": {"B": stamp}},
        ConditionExpression="attribute_not_exists(#pk)",
        ExpressionAttributeNames={"#pk": partition_key},
    )


def node_stamp(client: Any, table: str, tag: str, stamp: bytes, partition_key: str = "tagID") -> bytes:
    """The Node ``stamp()``: the new XOR (all zeros: the item was deleted)."""
    item = client.get_item(TableName=table, Key={partition_key: {"S": tag}}, ConsistentRead=True)["Item"]
    current = item["stamp"]["B"]
    updated = xor(stamp, current)
    condition = {
        "ConditionExpression": "attribute_exists(#pk) and #stamp = :stamp",
        "ExpressionAttributeNames": {"#pk": partition_key, "#stamp": "stamp"},
        "ExpressionAttributeValues": {":stamp": {"B": current}},
    }
    if not any(updated):
        _conditional(client.delete_item, TableName=table, Key={partition_key: {"S": tag}}, **condition)
    else:
        _conditional(
            client.put_item,
            TableName=table,
            Item={partition_key: {"S": tag}, "stamp": {"B": updated}},
            **condition,
        )
    return bytes(updated)


def node_delete(client: Any, table: str, tag: str, partition_key: str = "tagID") -> None:
    _conditional(
        client.delete_item,
        TableName=table,
        Key={partition_key: {"S": tag}},
        ConditionExpression="attribute_exists(#pk)",
        ExpressionAttributeNames={"#pk": partition_key},
    )
