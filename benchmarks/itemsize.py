"""The size DynamoDB bills an item at, by AWS's published rules.

https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html:
an item is the sum of its attribute names (UTF-8 bytes) and values. A String is its
UTF-8 bytes; a Binary its raw bytes; a Number 1 byte per two significant digits plus 1;
a Boolean or Null 1 byte; a List or Map 3 bytes plus its elements, each with 1 byte of
overhead (a Map's element also counts its name); a set is the sum of its members.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

__all__ = ["item_size", "write_units"]


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
