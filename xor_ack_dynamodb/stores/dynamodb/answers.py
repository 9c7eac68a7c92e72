"""What DynamoDB's answer to each request the library sends must hold (and SQS's, S3's
and EventBridge's), checked before anything is decided from it (docs/guarantees.md,
"Errors"): botocore parses whatever body an endpoint returns with HTTP 200, and left
unchecked a proxy's page would read as a write that landed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ...errors import BadResponse
from .failures import request_names

#: The member each operation's answer must hold (besides the capacity asked for), and
#: its type. ``Attributes`` of an ``UpdateItem`` is required only with ``ReturnValues``.
_REQUIRED: dict[str, tuple[tuple[str, type], ...]] = {
    "BatchGetItem": (("Responses", dict),),
    "Scan": (("Items", list), ("Count", int), ("ScannedCount", int)),
    "DescribeTable": (("Table", dict),),
    "CreateTable": (("TableDescription", dict),),
    "UpdateTable": (("TableDescription", dict),),
    "DescribeTimeToLive": (("TimeToLiveDescription", dict),),
    "UpdateTimeToLive": (("TimeToLiveSpecification", dict),),
    # the serverless layer's sends: a child or a completion that was not sent must not
    # read as sent
    "SendMessage": (("MessageId", str),),
    "SendMessageBatch": (("Successful", list),),
    "PutObject": (("ETag", str),),
    "PutEvents": (("Entries", list), ("FailedEntryCount", int)),
}

#: Operations whose ``ConsumedCapacity`` is a list (one entry per table).
_PER_TABLE = frozenset({"BatchGetItem", "TransactWriteItems", "BatchWriteItem"})


def shape_problem(operation: str, request: Mapping[str, Any], response: Any) -> str | None:
    """What ``response``, the HTTP 200 answer to ``operation`` sent with ``request``,
    lacks to be DynamoDB's answer (its required members, the consumed capacity naming
    the request's table, the key of every item returned); None when it has the shape."""
    if not isinstance(response, Mapping):
        return f"the answer is {type(response).__name__}, not a JSON object"
    for member, kind in _REQUIRED.get(operation, ()):
        if not isinstance(response.get(member), kind):
            return f"no {member} ({kind.__name__})"
    if operation == "UpdateItem" and request.get("ReturnValues", "NONE") != "NONE":
        if not isinstance(response.get("Attributes"), dict):
            return "no Attributes though ReturnValues was asked for"
    if request.get("ReturnConsumedCapacity", "NONE") != "NONE":
        problem = _capacity_problem(operation, request, response.get("ConsumedCapacity"))
        if problem:
            return problem
    key = request.get("Key")
    for member in ("Item", "Attributes"):
        item = response.get(member)
        if item is None:
            continue
        if not isinstance(item, dict):
            return f"{member} is not an item"
        if isinstance(key, dict) and any(item.get(name) != value for name, value in key.items()):
            return f"{member} is not the item asked for (its key differs)"
    if operation == "BatchGetItem":
        return _batch_problem(request, response)
    if operation == "SendMessageBatch":
        answered = [
            e.get("Id") for e in (*response["Successful"], *response.get("Failed", [])) if isinstance(e, dict)
        ]
        if sorted(map(str, answered)) != sorted(str(e.get("Id")) for e in request.get("Entries", [])):
            return "Successful and Failed do not answer the request's entries"
    if operation == "PutEvents" and len(response["Entries"]) != len(request.get("Entries", [])):
        return "Entries does not answer the request's entries"
    return None


def _capacity_problem(operation: str, request: Mapping[str, Any], consumed: Any) -> str | None:
    if operation in _PER_TABLE:
        if not isinstance(consumed, list):
            return "no ConsumedCapacity list though it was asked for"
        tables = set(request.get("RequestItems", {})) or None
        for entry in consumed:
            name = entry.get("TableName") if isinstance(entry, dict) else None
            if not isinstance(entry, dict) or (tables is not None and name not in tables):
                return f"a ConsumedCapacity entry names no table of the request ({entry!r:.60})"
        return None
    if not isinstance(consumed, dict):
        return "no ConsumedCapacity though it was asked for"
    named, asked = consumed.get("TableName"), request.get("TableName")
    if named != asked:
        return f"its ConsumedCapacity names table {named!r}, not {asked!r}"
    return None


def _batch_problem(request: Mapping[str, Any], response: Mapping[str, Any]) -> str | None:
    asked = request.get("RequestItems", {})
    for table, items in response["Responses"].items():
        keys = asked.get(table, {}).get("Keys") if table in asked else None
        if keys is None or not isinstance(items, list):
            return f"Responses holds table {table!r}, which was not asked for"
        names = {name for key in keys for name in key}
        wanted = {tuple(sorted((n, repr(key[n])) for n in names)) for key in keys}
        for item in items:
            if (
                not isinstance(item, dict)
                or tuple(sorted((n, repr(item.get(n))) for n in names)) not in wanted
            ):
                return "Responses holds an item whose key was not asked for"
    return None


def checked(client: Any, operation: str, request: Mapping[str, Any], response: Any) -> Any:
    """``response`` when it has the shape of DynamoDB's answer to ``operation`` sent
    with ``request``; raises :class:`BadResponse` naming ``client``'s endpoint otherwise."""
    problem = shape_problem(operation, request, response)
    if problem is None:
        return response
    where, names = request_names(client, operation)
    service = names["service"]
    raise BadResponse(
        f"{where} answered {operation} with a body that is not {service}'s ({problem}): nothing "
        f"is decided from it; is this endpoint {service}, or a proxy in front of it?",
        **names,
    )


def scan_pages(client: Any, **request: Any) -> Iterator[dict[str, Any]]:
    """The pages of a Scan of ``request``, each :func:`checked`: a page that is not
    DynamoDB's raises :class:`BadResponse`, never reads as an empty table."""
    request = {"ReturnConsumedCapacity": "TOTAL", **request}
    for page in client.get_paginator("scan").paginate(**request):
        yield checked(client, "Scan", request, page)
