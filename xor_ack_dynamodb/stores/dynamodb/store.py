"""The DynamoDB store: each request of :mod:`.core.messages` as one DynamoDB request.

Primitives only: a consistent read, a conditional put/update/delete, a batch read. The
conditions here are the rules' predicates (``ChainRules.add_allowed``, ``touch_allowed``,
``fail_allowed``) written as ConditionExpressions; the rules decide everything else.
Shared by the sync tracker and (through :meth:`DynamoDBStore.prepare` and
:meth:`DynamoDBStore.answer`) the asyncio one, so both send the same requests.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

from ...core.chain import Chain
from ...core.messages import (
    Add,
    Cancelled,
    Committed,
    Extend,
    MarkFailed,
    Put,
    Read,
    Rejected,
    Remove,
    RemoveAny,
    Reply,
    Request,
    TransactionsUnsupported,
    Trim,
    Written,
)
from ...core.rules import ChainRules
from ...drivers.engine import BatchRead
from ...errors import CorruptItem, TableNotFound, TableSchemaMismatch
from ...stats import RequestStats
from .item import Item, ItemCodec
from .table import describe, missing_table_message, table_key

__all__ = ["DynamoDBStore", "TRANSIENT_CODES", "is_transient", "Prepared", "MISSING", "METHODS", "tag_of"]

log = logging.getLogger("xor_ack_dynamodb")

#: Error codes after which a request may or may not have been applied, and which are
#: worth another attempt once botocore's own retries are spent.
TRANSIENT_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "TransactionConflictException",
    }
)


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a throttle, a 5xx or a lost connection: the request may or may
    not have been applied, and another attempt is worth it."""
    if isinstance(exc, ClientError):
        return error_code(exc) in TRANSIENT_CODES
    return isinstance(exc, (ConnectionError, HTTPClientError))


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def retry_attempts(response: Mapping[str, Any]) -> int:
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)


@dataclass(frozen=True, slots=True)
class Prepared:
    """One DynamoDB request for a :class:`Request`: the client method and its arguments."""

    operation: str  # GetItem | PutItem | UpdateItem | DeleteItem
    kwargs: dict[str, Any]


class DynamoDBStore:
    """Chains in one table, through a boto3 (or aiobotocore) low-level client."""

    def __init__(
        self, client: Any, table: str, codec: ItemCodec, rules: ChainRules, stats: RequestStats
    ) -> None:
        self.client = client
        self.table = table
        self.codec = codec
        self.rules = rules
        self.stats = stats

    # -- the sync path ------------------------------------------------------------------

    def execute(self, request: Request) -> Reply | Chain | None:
        prepared = self.prepare(request)
        try:
            response = self.call(prepared.operation, prepared.kwargs, tag_of(request))
        except ClientError as exc:
            if not self.condition_failed(exc):
                raise
            current = self.old_item(exc, request)
            if current is MISSING:
                current = self.execute(Read(tag_of(request)))
            return self.rejection(exc, current)
        return self.answer(request, response)

    def read_many(self, tags: list[str]) -> BatchRead:
        response = self.call("BatchGetItem", self.batch_request(tags), f"{len(tags)} keys")
        return self.batch_answer(response)

    def transact(self, requests: list[Request]) -> Committed | Cancelled:
        """Apply ``requests`` (at most 100, on distinct chains, each one of
        :data:`~.core.messages.TRANSACTABLE`) all or none: one TransactWriteItems.
        Raises :class:`TransactionsUnsupported` where the backend has none (dynalite)."""
        try:
            response = self.call(
                "TransactWriteItems", self.transact_request(requests), f"{len(requests)} chains"
            )
        except ClientError as exc:
            if error_code(exc) == "UnknownOperationException":
                raise TransactionsUnsupported(str(exc)) from exc
            if error_code(exc) != "TransactionCanceledException":
                raise
            rejected: dict[int, Rejected] = {}
            for i, current in self.cancelled(exc, requests).items():
                if current is MISSING:
                    current = self.execute(Read(tag_of(requests[i])))
                rejected[i] = self.rejection(exc, current)
            return Cancelled(rejected)
        return self.committed(requests, response)

    def transact_request(self, requests: list[Request]) -> dict[str, Any]:
        """The TransactWriteItems arguments for ``requests``: each request's own
        conditional write, with the failed condition's item asked for."""
        entries = []
        for request in requests:
            prepared = self.prepare(request)
            body = {
                k: v
                for k, v in prepared.kwargs.items()
                if k not in ("ReturnValues", "ReturnConsumedCapacity")
            }
            body["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            entries.append({_TRANSACT_ENTRY[prepared.operation]: body})
        return {"TransactItems": entries, "ReturnConsumedCapacity": "TOTAL"}

    @staticmethod
    def committed(requests: list[Request], response: Mapping[str, Any]) -> Committed:
        resent = retry_attempts(response) > 0
        return Committed([Written(r.new if isinstance(r, Put) else None, resent) for r in requests])

    def cancelled(self, exc: ClientError, requests: list[Request]) -> dict[int, Chain | None | object]:
        """The positions of a cancelled transaction whose condition failed, with the item
        each saw (or :data:`MISSING`). Raises ``exc`` when an entry failed for a reason
        that sending it again will not cure (a validation error)."""
        reasons = exc.response.get("CancellationReasons") or []
        failed: dict[int, Chain | None | object] = {}
        for i, reason in enumerate(reasons[: len(requests)]):
            code = str(reason.get("Code") or "None")
            if code == "ConditionalCheckFailed":
                item = reason.get("Item")
                failed[i] = (
                    MISSING if item is None else self.codec.parse(cast("Item", item), tag_of(requests[i]))
                )
            elif code not in _RETRY_CODES:
                raise exc
        return failed

    def is_transient(self, error: BaseException) -> bool:
        return is_transient(error)

    def call(self, operation: str, kwargs: dict[str, Any], tag: str | None = None) -> dict[str, Any]:
        """One request: counted (with botocore's own resends) and its consumed capacity
        summed; a missing table and a key-schema mismatch become typed errors."""
        method = getattr(self.client, METHODS[operation])
        log.debug("%s %s tag=%r", operation, self.table, tag)
        try:
            response: dict[str, Any] = method(**kwargs)
        except ClientError as exc:
            self.counted_failure(operation, exc)
            self.raise_typed(exc, kwargs)
            raise
        self.counted(operation, response)
        return response

    # -- shared by the sync and async paths ---------------------------------------------

    def counted(self, operation: str, response: Mapping[str, Any]) -> None:
        self.stats.request(operation, 1 + retry_attempts(response))
        self.stats.add_capacity(_capacity_units(response.get("ConsumedCapacity")))

    def counted_failure(self, operation: str, exc: ClientError) -> None:
        self.stats.request(operation, 1 + retry_attempts(exc.response))

    @staticmethod
    def condition_failed(exc: ClientError) -> bool:
        return error_code(exc) == "ConditionalCheckFailedException"

    @staticmethod
    def rejection(exc: ClientError, current: Chain | None | object) -> Rejected:
        """The reply to a request whose condition failed, given the chain as it is now
        (from :meth:`old_item`, or a read when that was :data:`MISSING`)."""
        return Rejected(cast("Chain | None", current), resent=retry_attempts(exc.response) > 0)

    def raise_typed(self, exc: ClientError, kwargs: Mapping[str, Any], mismatch: bool | None = None) -> None:
        """Raise :class:`TableNotFound` or :class:`TableSchemaMismatch` for the errors
        that mean those; return for any other. ``mismatch`` is the async path's answer
        to :meth:`key_mismatch` (it cannot call DescribeTable synchronously)."""
        code = error_code(exc)
        if code == "ResourceNotFoundException":
            raise TableNotFound(missing_table_message(self.table)) from exc
        if code == "ValidationException" and (self.key_mismatch(exc) if mismatch is None else mismatch):
            raise TableSchemaMismatch(
                f"table {self.table!r} does not have a String partition key named "
                f"{self.codec.partition_key!r}: {exc.response.get('Error', {}).get('Message')}"
            ) from exc

    def key_mismatch(self, exc: ClientError) -> bool:
        """Whether a ValidationException comes from the table's key schema. DynamoDB says
        so ("does not match the schema"); other backends do not always, and then one
        DescribeTable (on this error path only) decides."""
        if self.schema_message(exc):
            return True
        try:
            return table_key(describe(self.client, self.table)) != (self.codec.partition_key, "S")
        except (ClientError, TableNotFound):
            return False

    @staticmethod
    def schema_message(exc: ClientError) -> bool:
        message = str(exc).lower()
        return "key" in message and "schema" in message

    def prepare(self, request: Request) -> Prepared:
        """The DynamoDB request for ``request``."""
        codec, rules = self.codec, self.rules
        if isinstance(request, Read):
            return Prepared("GetItem", self._base(Key=codec.key(request.tag), ConsistentRead=True))
        if isinstance(request, Put):
            if request.expect is None:
                values: dict[str, Any] = {}
                condition, names = "attribute_not_exists(#pk)", codec.names("#pk")
            else:
                condition, names, values = self._guard(request.expect)
            return Prepared(
                "PutItem",
                self._base(
                    Item=codec.encode(request.new),
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    **_values(values),
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ),
            )
        if isinstance(request, Remove):
            condition, names, values = self._guard(request.expect)
            return Prepared(
                "DeleteItem",
                self._base(
                    Key=codec.key(request.expect.tag),
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    **_values(values),
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ),
            )
        if isinstance(request, RemoveAny):
            return Prepared("DeleteItem", self._base(Key=codec.key(request.tag), ReturnValues="ALL_OLD"))
        if isinstance(request, Add):
            op = request.op
            values = {
                ":d": {"N": str(request.delta)},
                ":one": {"N": "1"},
                ":opl": {"L": [{"B": op.key}]},
                ":ohl": {"L": [{"B": op.digest}]},
                ":opk": {"B": op.key},
                ":tok": {"B": _token()},
                ":now": {"N": str(request.now)},
                ":pending": {"S": "pending"},
                ":zero": {"N": "0"},
            }
            condition = (
                "attribute_exists(#sum) AND #st = :pending AND #sum <> :zero "
                "AND (attribute_not_exists(#dl) OR #dl >= :now) AND NOT contains(#ops, :opk)"
            )
            names = codec.names("#sum", "#v", "#seq", "#ops", "#oph", "#tok", "#u", "#st", "#dl")
            condition = self._owned(condition, names, values, request.owner)
            if request.after_seq is not None:
                condition += " AND (attribute_not_exists(#cn) OR #cn <= :after)"
                names.update(codec.names("#cn"))
                values[":after"] = {"N": str(request.after_seq)}
            elif request.since is not None:
                condition += " AND (attribute_not_exists(#cut) OR #cut < :since)"
                names.update(codec.names("#cut"))
                values[":since"] = {"N": str(request.since)}
            return self._update(
                request.tag,
                "ADD #sum :d, #v :one, #seq :one "
                "SET #ops = list_append(#ops, :opl), #oph = list_append(#oph, :ohl), #tok = :tok, #u = :now",
                condition,
                names,
                values,
            )
        if isinstance(request, Extend):
            assert request.ttl is not None, "DynamoDB chains always have a clock deadline"
            deadline = request.now + request.ttl
            values = {
                ":dl": {"N": str(deadline)},
                ":purge": {"N": str(deadline + rules.skew + rules.retention)},
                ":tok": {"B": _token()},
                ":now": {"N": str(request.now)},
                ":one": {"N": "1"},
                ":pending": {"S": "pending"},
                ":zero": {"N": "0"},
            }
            names = codec.names("#pk", "#st", "#sum", "#dl", "#e", "#tok", "#u", "#v")
            condition = self._owned(
                "attribute_exists(#pk) AND (attribute_not_exists(#st) OR #st = :pending) "
                "AND (attribute_not_exists(#sum) OR #sum <> :zero) "
                "AND (attribute_not_exists(#dl) OR #dl >= :now)",
                names,
                values,
                request.owner,
            )
            return self._update(
                request.tag,
                "SET #dl = :dl, #e = :purge, #tok = :tok, #u = :now ADD #v :one",
                condition,
                names,
                values,
            )
        if isinstance(request, MarkFailed):
            values = {
                ":failed": {"S": "failed"},
                ":purge": {"N": str(request.now + rules.retention)},
                ":tok": {"B": _token()},
                ":now": {"N": str(request.now)},
                ":one": {"N": "1"},
                ":pending": {"S": "pending"},
                ":zero": {"N": "0"},
            }
            names = codec.names("#pk", "#st", "#sum", "#e", "#tok", "#u", "#v")
            update = "SET #st = :failed, #e = :purge, #tok = :tok, #u = :now"
            if request.reason:
                update += ", #r = :reason"
                values[":reason"] = {"S": request.reason}
                names.update(codec.names("#r"))
            condition = self._owned(
                "attribute_exists(#pk) AND (attribute_not_exists(#st) OR #st = :pending) "
                "AND (attribute_not_exists(#sum) OR #sum <> :zero)",
                names,
                values,
                request.owner,
            )
            return self._update(request.tag, update + " ADD #v :one", condition, names, values)
        if isinstance(request, Trim):
            # Highest index first: DynamoDB resolves every index against the list as it was,
            # dynalite removes them one by one (shifting the rest); both then drop 0..count-1.
            indexes = range(request.count - 1, -1, -1)
            paths = [f"#ops[{i}]" for i in indexes] + [f"#oph[{i}]" for i in indexes]
            return Prepared(
                "UpdateItem",
                self._base(
                    Key=codec.key(request.tag),
                    UpdateExpression="SET #cut = :now REMOVE "
                    + ", ".join(paths)
                    + " ADD #tr :one, #cn :count",
                    ConditionExpression="size(#ops) >= :n",
                    ExpressionAttributeNames=codec.names("#ops", "#oph", "#tr", "#cut", "#cn"),
                    ExpressionAttributeValues={
                        ":n": {"N": str(request.count + request.window)},
                        ":one": {"N": "1"},
                        ":count": {"N": str(request.count)},
                        ":now": {"N": str(request.now)},
                    },
                ),
            )
        raise TypeError(f"not a store request: {request!r}")

    def answer(self, request: Request, response: Mapping[str, Any]) -> Reply | Chain | None:
        """The reply to ``request`` from DynamoDB's successful ``response``."""
        resent = retry_attempts(response) > 0
        tag = tag_of(request)
        if isinstance(request, Read):
            item = response.get("Item")
            return None if item is None else self.codec.parse(item, tag)
        if isinstance(request, Put):
            return Written(request.new, resent)
        if isinstance(request, Remove):
            return Written(None, resent)
        if isinstance(request, RemoveAny):
            old = response.get("Attributes")
            return Written(None if old is None else _parse_loosely(self.codec, old, tag), resent)
        if isinstance(request, Trim):
            return Written(None, resent)
        return Written(self.codec.parse(response["Attributes"], tag), resent)

    def old_item(self, exc: ClientError, request: Request) -> Chain | None | object:
        """The item a failed condition saw (``ALL_OLD``, free), or :data:`MISSING`
        when the backend did not return it (dynalite, older DynamoDB Local): the caller
        then reads it (strongly consistent). A rejected Trim needs no item."""
        if isinstance(request, Trim):
            return None
        item = cast("Item | None", exc.response.get("Item"))
        if item is None:
            return MISSING
        return self.codec.parse(item, tag_of(request))

    def batch_request(self, tags: list[str]) -> dict[str, Any]:
        return {
            "RequestItems": {self.table: {"Keys": [self.codec.key(t) for t in tags], "ConsistentRead": True}},
            "ReturnConsumedCapacity": "TOTAL",
        }

    def batch_answer(self, response: Mapping[str, Any]) -> BatchRead:
        """Chains, undecodable items and unprocessed keys of one BatchGetItem response."""
        out = BatchRead()
        for item in response.get("Responses", {}).get(self.table, []):
            tag = item.get(self.codec.partition_key, {}).get("S")
            try:
                out.chains.append(self.codec.parse(item, tag))
            except CorruptItem as exc:
                if tag is None:
                    raise
                out.corrupt[tag] = str(exc)
        for key in response.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", []):
            out.unprocessed.append(key[self.codec.partition_key]["S"])
        return out

    # -- request building ---------------------------------------------------------------

    def _base(self, **kwargs: Any) -> dict[str, Any]:
        return {"TableName": self.table, "ReturnConsumedCapacity": "TOTAL", **kwargs}

    def _update(
        self, tag: str, update: str, condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> Prepared:
        return Prepared(
            "UpdateItem",
            self._base(
                Key=self.codec.key(tag),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            ),
        )

    def _owned(self, condition: str, names: dict[str, str], values: dict[str, Any], owner: str | None) -> str:
        if owner is None:
            return condition
        names.update(self.codec.names("#own"))
        values[":owner"] = {"S": owner}
        return condition + " AND #own = :owner"

    def _guard(self, chain: Chain) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The condition that the stored chain is still ``chain``: its write token (which
        never repeats); for an item a foreign writer left without one, its value and
        version (the best that writer leaves to check)."""
        if chain.token is not None:
            return "#tok = :tok", self.codec.names("#tok"), {":tok": {"B": chain.token}}
        assert isinstance(chain.value, bytes)
        names = self.codec.names("#tok", "#s", "#v")
        values: dict[str, Any] = {":old": {"B": chain.value}}
        if chain.version:
            values[":v"] = {"N": str(chain.version)}
            version = "#v = :v"
        else:
            version = "attribute_not_exists(#v)"
        return f"attribute_not_exists(#tok) AND #s = :old AND {version}", names, values


#: :meth:`DynamoDBStore.old_item`'s answer when the backend did not return the item.
MISSING = object()


def _values(values: dict[str, Any]) -> dict[str, Any]:
    return {"ExpressionAttributeValues": values} if values else {}


def _token() -> bytes:
    from ...core.chain import new_token

    return new_token()


def tag_of(request: Request) -> str:
    """The tag a request is about."""
    if isinstance(request, Put):
        return request.new.tag
    if isinstance(request, Remove):
        return request.expect.tag
    return request.tag


def _parse_loosely(codec: ItemCodec, item: Item, tag: str) -> Chain | None:
    """A deleted item, for the record: an undecodable one was deleted all the same."""
    try:
        return codec.parse(item, tag)
    except CorruptItem:
        return Chain(tag=tag, mode="xor", value=b"\x00")


def _capacity_units(consumed: Any) -> float:
    """Total CapacityUnits of a response's ConsumedCapacity: one entry for a single-item
    request, a list (one per table) for a batch; 0.0 when the backend reports none."""
    entries = consumed if isinstance(consumed, list) else [consumed] if isinstance(consumed, dict) else []
    return float(sum(float(e.get("CapacityUnits") or 0) for e in entries if isinstance(e, dict)))


#: The client method of each operation.
METHODS = {
    "GetItem": "get_item",
    "PutItem": "put_item",
    "UpdateItem": "update_item",
    "DeleteItem": "delete_item",
    "BatchGetItem": "batch_get_item",
    "TransactWriteItems": "transact_write_items",
}

#: The TransactWriteItems entry of each single-item operation.
_TRANSACT_ENTRY = {"PutItem": "Put", "UpdateItem": "Update", "DeleteItem": "Delete"}
#: Cancellation codes after which an entry may simply be sent again (the transaction
#: failed for another entry's condition, or was throttled or conflicted as a whole).
_RETRY_CODES = frozenset(
    {
        "None",
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
    }
)
