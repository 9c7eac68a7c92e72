"""IAM's decision on a request, for the policies of docs/, as IAM documents it (there is
no IAM locally: this reads the JSON the way AWS's policy evaluation logic says).

* An identity policy allows a request when a statement with ``Effect: Allow`` matches
  its action, its resource and every condition, and no ``Deny`` statement matches; else
  the request is denied (implicitly).
* A condition block holds when every operator in it holds; an operator holds when every
  key under it holds; a key holds when any of the policy's values matches.
* A single-valued operator on a key the request does not carry is false (true for the
  ``...Not...`` operators, and for ``...IfExists``).
* ``ForAllValues:`` is true when *every* value of the request's key matches, and so
  **also when the key is absent or empty**; ``ForAnyValue:`` is false then.
* ``Null`` is ``"true"`` for an absent key, ``"false"`` for a present one.

:func:`requests` turns the parameters of a DynamoDB request into what IAM evaluates:
the action (a transaction's entries each as its single-item action) and the
``dynamodb:LeadingKeys`` (the partition key values of every key it names; a Scan names
none).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The condition operators this evaluator knows; any other raises, so that a policy
#: using one cannot pass a test by being misread.
_STRING = ("StringEquals", "StringNotEquals", "StringLike", "StringNotLike")

Context = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class Request:
    """What IAM evaluates for one request: its action, resource and condition keys
    (a key absent from ``context`` is absent from the request)."""

    action: str
    resource: str
    context: Context = field(default_factory=dict)


def _like(pattern: str, value: str) -> bool:
    """IAM's ``StringLike``: ``*`` any run of characters, ``?`` any one, nothing else special."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.DOTALL) is not None


def _matches(base: str, pattern: str, value: str) -> bool:
    if base in ("StringEquals", "StringNotEquals"):
        return pattern == value
    return _like(pattern, value)


def _listed(value: str | Iterable[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _operator(name: str, key: str, wanted: list[str], context: Context) -> bool:
    if name == "Null":
        (flag,) = wanted
        absent = key not in context
        return absent if flag == "true" else not absent
    qualifier, _, base = name.rpartition(":")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    if base not in _STRING or qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise ValueError(f"condition operator {name!r} is not modelled here")
    negated = "Not" in base
    positive = base.replace("Not", "")
    values = list(context.get(key, ()))
    if qualifier == "ForAllValues":  # true for an absent or empty key: nothing fails to match
        hit = all(any(_matches(positive, w, v) for w in wanted) for v in values)
        return not hit if negated else hit
    if qualifier == "ForAnyValue":
        hit = any(any(_matches(positive, w, v) for w in wanted) for v in values)
        return not hit if negated else hit
    if key not in context:
        return if_exists or negated
    (value,) = values
    hit = any(_matches(positive, w, value) for w in wanted)
    return not hit if negated else hit


def _holds(condition: Mapping[str, Mapping[str, Any]], context: Context) -> bool:
    return all(
        _operator(name, key, _listed(wanted), context)
        for name, keys in condition.items()
        for key, wanted in keys.items()
    )


def _applies(statement: Mapping[str, Any], request: Request) -> bool:
    return (
        any(_like(a, request.action) for a in _listed(statement["Action"]))
        and any(_like(r, request.resource) for r in _listed(statement["Resource"]))
        and _holds(statement.get("Condition", {}), request.context)
    )


def allows(policy: Mapping[str, Any], request: Request) -> bool:
    """Whether identity policy ``policy`` allows ``request`` (explicit deny wins)."""
    statements = policy["Statement"]
    if any(s["Effect"] == "Deny" and _applies(s, request) for s in statements):
        return False
    return any(s["Effect"] == "Allow" and _applies(s, request) for s in statements)


_ENTRY_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def _key_value(item: Mapping[str, Any], partition_key: str) -> str:
    return str(item[partition_key]["S"])


def requests(operation: str, params: Mapping[str, Any], partition_key: str, table_arn: str) -> list[Request]:
    """What IAM evaluates for a DynamoDB request of ``operation`` with ``params``."""

    def one(action: str, keys: list[str] | None) -> Request:
        context = {} if keys is None else {"dynamodb:LeadingKeys": keys}
        return Request(f"dynamodb:{action}", table_arn, context)

    if operation in ("GetItem", "UpdateItem", "DeleteItem"):
        return [one(operation, [_key_value(params["Key"], partition_key)])]
    if operation == "PutItem":
        return [one(operation, [_key_value(params["Item"], partition_key)])]
    if operation == "BatchGetItem":
        keys = [_key_value(k, partition_key) for r in params["RequestItems"].values() for k in r["Keys"]]
        return [one(operation, keys)]
    if operation == "TransactWriteItems":
        out = []
        for entry in params["TransactItems"]:
            ((kind, body),) = entry.items()
            item = body["Item"] if kind == "Put" else body["Key"]
            out.append(one(_ENTRY_ACTIONS[kind], [_key_value(item, partition_key)]))
        return out
    return [one(operation, None)]  # Scan and the table requests name no key
