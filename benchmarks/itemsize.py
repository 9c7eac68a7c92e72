"""The size DynamoDB bills an item at, by AWS's published rules.

https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html:
an item is the sum of its attribute names (UTF-8 bytes) and values. A String is its
UTF-8 bytes; a Binary its raw bytes; a Number 1 byte per two significant digits plus 1;
a Boolean or Null 1 byte; a List or Map 3 bytes plus its elements, each with 1 byte of
overhead (a Map's element also counts its name); a set is the sum of its members.

:class:`ItemMeter` applies them to every chain item a client writes, as it writes it.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

__all__ = ["item_size", "write_units", "ItemMeter", "WRITES"]

#: The requests that write an item (and are billed write units).
WRITES = ("PutItem", "UpdateItem", "DeleteItem")


def item_size(item: dict[str, dict[str, Any]]) -> int:
    """The billed size in bytes of an item in the low-level (typed) format."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    """Write capacity units one standard write of an item of ``size`` bytes costs."""
    return max(1, math.ceil(size / 1024))


def _number_size(text: str) -> int:
    digits = Decimal(text).normalize().as_tuple().digits
    significant = len(digits) if any(digits) else 1
    return math.ceil(significant / 2) + 1


def _value_size(value: dict[str, Any]) -> int:
    ((kind, data),) = value.items()
    if kind == "S":
        return len(data.encode())
    if kind == "B":
        return len(data)
    if kind == "N":
        return _number_size(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in data)
    if kind == "BS":
        return sum(len(b) for b in data)
    if kind == "NS":
        return sum(_number_size(n) for n in data)
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in data)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(v) for k, v in data.items())
    raise ValueError(f"unknown attribute type {kind!r}")


class ItemMeter:
    """A botocore hook on one client: the capacity units the backend reported, by kind,
    and the size of the chain item after each successful write (the item a PutItem
    wrote, the ``ALL_NEW`` attributes an UpdateItem returned; a trim returns nothing and
    is not sized). Items without an op list (not chains) are not sized."""

    def __init__(self, client: Any) -> None:
        self.reset()
        client.meta.events.register("before-parameter-build.dynamodb.PutItem", self._remember_put)
        client.meta.events.register("after-call.dynamodb", self._count)

    def reset(self) -> None:
        self.write_units = 0.0
        self.read_units = 0.0
        self.writes_ok = 0  # successful write requests (a refused one has no capacity figure)
        self.item_bytes: list[int] = []
        self.item_ops = 0  # the most op ids seen in an item after a write

    @staticmethod
    def _remember_put(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["metered_item"] = params.get("Item")

    def _count(self, http_response: Any, parsed: dict[str, Any], model: Any, context: Any, **_: Any) -> None:
        if http_response.status_code >= 300:
            return
        consumed = parsed.get("ConsumedCapacity") or {}
        if isinstance(consumed, list):  # BatchGetItem, BatchWriteItem, transactions: one per table
            units = sum(float(c.get("CapacityUnits") or 0.0) for c in consumed)
        else:
            units = float(consumed.get("CapacityUnits") or 0.0)
        if model.name in WRITES:
            self.write_units += units
            self.writes_ok += 1
        else:
            self.read_units += units
        item = parsed.get("Attributes") if model.name == "UpdateItem" else None
        if model.name == "PutItem":
            item = context.get("metered_item")
        if item and "ops" in item:
            self.item_bytes.append(item_size(item))
            self.item_ops = max(self.item_ops, len(item["ops"].get("L", [])))
