"""The DynamoDB request codec: each request of :mod:`xor_ack_dynamodb.core.messages` as
one DynamoDB request (its condition the rules' predicate as a ConditionExpression), and
DynamoDB's answers as replies. Pure, so both senders send the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ChecksumError, ClientError, ConnectionError, HTTPClientError

from ...core.chain import Chain, new_token
from ...core.history import START, Block
from ...core.messages import (
    Add,
    BatchRead,
    Committed,
    Extend,
    HistoryRead,
    MarkFailed,
    Put,
    Read,
    ReadHistory,
    Remove,
    RemoveAny,
    Reply,
    Request,
    Trim,
    WriteHistory,
    Written,
    tag_of,
)
from ...core.rules import ChainRules
from ...errors import (
    CorruptItem,
    EndpointUnreachable,
    InvalidConfig,
    ResponseLost,
    TableNotFound,
    TableSchemaMismatch,
    XorAckError,
)
from ...stamps import Position
from .item import Item, ItemCodec

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
    """Whether ``exc`` left the request maybe applied and worth another attempt (a
    throttle, a 5xx, a lost connection, a checksum mismatch)."""
    if isinstance(exc, ClientError):
        return error_code(exc) in TRANSIENT_CODES
    return isinstance(
        exc, (EndpointUnreachable, ResponseLost, ConnectionError, HTTPClientError, ChecksumError)
    )


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def retry_attempts(response: Mapping[str, Any]) -> int:
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)


def capacity_units(consumed: Any) -> float:
    """Total CapacityUnits of a response's ConsumedCapacity (an entry or a list)."""
    entries = consumed if isinstance(consumed, list) else [consumed] if isinstance(consumed, dict) else []
    return float(sum(float(e.get("CapacityUnits") or 0) for e in entries if isinstance(e, dict)))


def table_key(description: dict[str, Any]) -> tuple[str, str] | None:
    """The (name, type) of a table's partition key when it has no sort key, else None."""
    schema = description.get("KeySchema", [])
    if len(schema) != 1 or schema[0].get("KeyType") != "HASH":
        return None
    name = schema[0]["AttributeName"]
    types = {a["AttributeName"]: a["AttributeType"] for a in description.get("AttributeDefinitions", [])}
    return name, types.get(name, "?")


#: The stream of ``create_table(stream=True)`` (what the serverless completion reads).
STREAM_VIEW = "NEW_AND_OLD_IMAGES"
STREAM = {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": STREAM_VIEW}}


def table_request(table: str, partition_key: str, stream: bool) -> dict[str, Any]:
    """CreateTable's parameters: on demand, keyed by a String ``partition_key``."""
    return {
        "TableName": table,
        "AttributeDefinitions": [{"AttributeName": partition_key, "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": partition_key, "KeyType": "HASH"}],
        "BillingMode": "PAY_PER_REQUEST",
        **(STREAM if stream else {}),
    }


def check_key(description: dict[str, Any], table: str, partition_key: str) -> None:
    """Raise :class:`TableSchemaMismatch` unless the table is keyed by a String ``partition_key``."""
    key = table_key(description)
    if key != (partition_key, "S"):
        raise TableSchemaMismatch(
            f"table {table!r} exists with key schema {key!r}, not a String partition key "
            f"named {partition_key!r}"
        )


def stream_missing(description: dict[str, Any], table: str, created: bool) -> bool:
    """Whether the stream ``create_table(stream=True)`` asked for is still to be enabled.
    Raises :class:`InvalidConfig` for a stream of another view, or one the endpoint
    ignored at creation (dynalite serves none)."""
    found = description.get("StreamSpecification") or {}
    if found.get("StreamEnabled") and found.get("StreamViewType") == STREAM_VIEW:
        return False
    if found.get("StreamEnabled"):
        raise InvalidConfig(f"table {table!r} has a {found.get('StreamViewType')} stream, not {STREAM_VIEW}")
    if created:  # asked for at creation and ignored: dynalite
        raise InvalidConfig(f"this endpoint serves no DynamoDB Streams: {table!r} has no stream")
    return True


def missing_table_message(table: str) -> str:
    return (
        f"DynamoDB table {table!r} does not exist at this endpoint and region: create it "
        f"with XorAckDynamoDB(...).create_table() or `xor-ack table create --table {table}`"
    )


@dataclass(frozen=True, slots=True)
class Prepared:
    """One DynamoDB request for a :class:`Request`. ``once``: botocore must not resend
    its bytes (:mod:`.resend`)."""

    operation: str  # GetItem | PutItem | UpdateItem | DeleteItem
    kwargs: dict[str, Any]
    once: bool = False


#: :meth:`RequestCodec.old_item`'s answer when the backend did not return the item.
MISSING = object()


@dataclass(frozen=True)
class RequestCodec:
    """Requests on the chains of ``table``, and their answers."""

    table: str
    items: ItemCodec
    rules: ChainRules

    def transact_request(self, requests: list[Request]) -> dict[str, Any]:
        """The TransactWriteItems parameters for ``requests`` (at most 100, on distinct
        chains, each :data:`~xor_ack_dynamodb.core.messages.TRANSACTABLE`)."""
        entries = []
        for request in requests:
            prepared = self.prepare(request)
            body = {**prepared.kwargs, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
            for per_request in ("ReturnValues", "ReturnConsumedCapacity"):  # not in an entry
                body.pop(per_request, None)
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
                failed[i] = self.old_item(reason.get("Item"), requests[i])
            elif code not in _RETRY_CODES:
                raise exc
        return failed

    @staticmethod
    def schema_message(exc: ClientError) -> bool:
        """Whether a ValidationException says it comes from the table's key schema
        (other backends' may not: the sender then asks DescribeTable)."""
        message = str(exc).lower()
        return "key" in message and "schema" in message

    def typed_error(self, exc: ClientError) -> XorAckError:
        """:class:`TableNotFound` for a ResourceNotFoundException, else (a
        ValidationException the key schema explains) :class:`TableSchemaMismatch`."""
        if error_code(exc) == "ResourceNotFoundException":
            return TableNotFound(missing_table_message(self.table))
        return TableSchemaMismatch(
            f"table {self.table!r} does not have a String partition key named "
            f"{self.items.partition_key!r}: {exc.response.get('Error', {}).get('Message')}"
        )

    def prepare(self, request: Request) -> Prepared:
        """The DynamoDB request for ``request``."""
        codec, rules = self.items, self.rules
        if isinstance(request, Read):
            return Prepared("GetItem", self._base(Key=codec.key(request.tag), ConsistentRead=True))
        if isinstance(request, (Put, Remove)):
            now = request.now if isinstance(request, Put) else None
            values: dict[str, Any] = {}
            expect = request.expect
            condition = "attribute_not_exists(#pk)" if expect is None else self._guard(expect, now, values)
            if isinstance(request, Put):
                operation, target = "PutItem", {"Item": codec.encode(request.new)}
            else:
                operation, target = "DeleteItem", {"Key": codec.key(request.expect.tag)}
            return Prepared(
                operation,
                self._base(
                    **target,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=self._names(condition),
                    **({"ExpressionAttributeValues": values} if values else {}),
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ),
                once=now is not None,
            )
        if isinstance(request, RemoveAny):
            return Prepared("DeleteItem", self._base(Key=codec.key(request.tag), ReturnValues="ALL_OLD"))
        if isinstance(request, Add):
            op = request.op
            values = {
                ":d": {"N": str(request.delta)},
                ":opl": {"L": [{"B": op.key}]},
                ":ohl": {"L": [{"B": op.digest}]},
                ":opk": {"B": op.key},
            }
            condition = (
                "attribute_exists(#sum) AND #st = :pending AND #sum <> :zero "
                "AND (attribute_not_exists(#dl) OR #dl >= :now) AND NOT contains(#ops, :opk)"
            )
            condition = self._owned(f"{condition} AND {_MIGRATED}", values, request.owner)
            if request.after is not None:
                condition += self._covers(request.after, values)
            update = (
                "ADD #sum :d, #v :one, #seq :one "
                "SET #ops = list_append(#ops, :opl), #oph = list_append(#oph, :ohl), #tok = :tok, #u = :now"
            )
            return self._update(request.tag, update, condition, values, request.now)
        if isinstance(request, Extend):
            assert request.ttl is not None, "DynamoDB chains always have a clock deadline"
            deadline = request.now + request.ttl
            values = {
                ":dl": {"N": str(deadline)},
                ":purge": {"N": str(deadline + rules.skew + rules.retention)},
            }
            live = _LIVE + " AND (attribute_not_exists(#dl) OR #dl >= :now)"
            condition = self._owned(live, values, request.owner)
            update = "SET #dl = :dl, #e = :purge, #tok = :tok, #u = :now ADD #v :one"
            return self._update(request.tag, update, condition, values, request.now)
        if isinstance(request, MarkFailed):
            values = {":failed": {"S": "failed"}, ":purge": {"N": str(request.now + rules.retention)}}
            update = "SET #st = :failed, #e = :purge, #tok = :tok, #u = :now"
            if request.reason:
                update += ", #r = :reason"
                values[":reason"] = {"S": request.reason}
            condition = self._owned(_LIVE, values, request.owner)
            return self._update(request.tag, update + " ADD #v :one", condition, values, request.now)
        if isinstance(request, Trim):
            return self._trim(request)
        if isinstance(request, ReadHistory):
            keys = [codec.history_key(request.tag, request.lineage, i) for i in request.indexes]
            projection = "#pk, #hist"
            names = self._names(projection)
            return Prepared(
                "BatchGetItem",
                self._batch_get(keys, ProjectionExpression=projection, ExpressionAttributeNames=names),
            )
        raise TypeError(f"not a store request: {request!r}")

    def history_put(self, request: WriteHistory, block: Block) -> Prepared:
        """The PutItem of one block of ``request`` (unconditional: racing writers write
        the same item)."""
        item = self.items.encode_block(request.tag, request.lineage, block, request.purge_at)
        return Prepared("PutItem", self._base(Item=item))

    def history_answer(self, request: ReadHistory, response: Mapping[str, Any]) -> HistoryRead:
        """The blocks a BatchGetItem of ``request`` found, and the indexes left over."""
        found, left = self._batch_items(response)
        blocks = dict(parsed for item in found if (parsed := self.items.parse_block(item)) is not None)
        return HistoryRead(blocks, tuple(self.items.history_index(k) for k in left))

    def _trim(self, request: Trim) -> Prepared:
        # Highest index first: DynamoDB resolves every index against the list as it was,
        # dynalite removes them one by one (shifting the rest); both then drop 0..count-1.
        indexes = range(request.count - 1, -1, -1)
        paths = [f"#ops[{i}]" for i in indexes] + [f"#oph[{i}]" for i in indexes]
        values: dict[str, Any] = {
            ":n": {"N": str(request.count + request.window)},
            ":count": {"N": str(request.count)},
            ":lineage": {"B": request.lineage},
            ":cut": {"N": str(request.cut)},
        }
        at = "(attribute_not_exists(#cn) OR #cn = :cut)" if request.cut == 0 else "#cn = :cut"
        update = "REMOVE " + ", ".join(paths) + " ADD #cn :count"
        condition = f"#lin = :lineage AND {at} AND size(#ops) >= :n"
        prepared = self._update(request.tag, update, condition, values)
        del prepared.kwargs["ReturnValues"]  # its answer is Written(None): no item to return
        return prepared

    @staticmethod
    def _covers(after: Position, values: dict[str, Any]) -> str:
        """``ChainRules.covers`` as a condition."""
        values[":after_seq"] = {"N": str(after.seq)}
        out = " AND (attribute_not_exists(#cn) OR #cn <= :after_seq)"
        if after != START:
            if after.lineage:
                values[":after_lineage"] = {"B": after.lineage}
                out += " AND #lin = :after_lineage"
            else:
                out += " AND attribute_not_exists(#lin)"
        return out

    def answer(self, request: Request, response: Mapping[str, Any]) -> Reply | Chain | None:
        """The reply to ``request`` from DynamoDB's successful ``response``."""
        resent = retry_attempts(response) > 0
        tag = tag_of(request)
        if isinstance(request, Read):
            item = response.get("Item")
            return None if item is None else self.items.parse(item, tag)
        if isinstance(request, Put):
            return Written(request.new, resent)
        if isinstance(request, (Remove, Trim, WriteHistory)):
            return Written(None, resent)
        if isinstance(request, RemoveAny):
            old = response.get("Attributes")
            try:
                return Written(None if old is None else self.items.parse(old, tag), resent)
            except CorruptItem:  # deleted all the same: for the record
                return Written(Chain(tag=tag, mode="xor", value=b"\x00"), resent)
        return Written(self.items.parse(response["Attributes"], tag), resent)

    def old_item(self, item: Any, request: Request) -> Chain | None | object:
        """The ``item`` a failed condition saw (``ALL_OLD``), or :data:`MISSING` when the
        backend did not return it (the caller then reads it; for a Trim, None)."""
        if item is None:
            return None if isinstance(request, Trim) else MISSING
        return self.items.parse(item, tag_of(request))

    def batch_request(self, tags: list[str]) -> dict[str, Any]:
        return self._batch_get([self.items.key(t) for t in tags])

    def _batch_get(self, keys: list[Item], **options: Any) -> dict[str, Any]:
        """A strongly consistent BatchGetItem of ``keys`` in the table."""
        return {
            "RequestItems": {self.table: {"Keys": keys, "ConsistentRead": True, **options}},
            "ReturnConsumedCapacity": "TOTAL",
        }

    def _batch_items(self, response: Mapping[str, Any]) -> tuple[list[Item], list[Item]]:
        """The items a BatchGetItem ``response`` found in the table, and the keys left over."""
        found = response.get("Responses", {}).get(self.table, [])
        return found, response.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])

    def batch_answer(self, response: Mapping[str, Any]) -> BatchRead:
        """Chains, undecodable items and unprocessed keys of one BatchGetItem response."""
        out = BatchRead()
        found, left = self._batch_items(response)
        for item in found:
            tag = item.get(self.items.partition_key, {}).get("S")
            try:
                out.chains.append(self.items.parse(item, tag))
            except CorruptItem as exc:
                if tag is None:
                    raise
                out.corrupt[tag] = str(exc)
        out.unprocessed.extend(key[self.items.partition_key]["S"] for key in left)
        return out

    # -- request building ---------------------------------------------------------------

    def _base(self, **kwargs: Any) -> dict[str, Any]:
        return {"TableName": self.table, "ReturnConsumedCapacity": "TOTAL", **kwargs}

    def _names(self, *expressions: str) -> dict[str, str]:
        return self.items.names(*placeholders(*expressions))

    def _update(
        self, tag: str, update: str, condition: str, values: dict[str, Any], now: int | None = None
    ) -> Prepared:
        """An UpdateItem; with ``now``, a write dated ``now`` that botocore must not resend."""
        if now is not None:
            values.update({**_CONSTANTS, ":tok": {"B": new_token()}, ":now": {"N": str(now)}})
        return Prepared(
            "UpdateItem",
            self._base(
                Key=self.items.key(tag),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=self._names(update, condition),
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            ),
            once=now is not None,
        )

    @staticmethod
    def _owned(condition: str, values: dict[str, Any], owner: str | None) -> str:
        if owner is None:
            return condition
        values[":owner"] = {"S": owner}
        return condition + " AND #own = :owner"

    @staticmethod
    def _guard(chain: Chain, now: int | None, values: dict[str, Any]) -> str:
        """The condition that the stored chain is still ``chain`` (its token; a foreign
        item's value and version), and with ``now`` ``ChainRules.before_deadline``."""
        if chain.token is not None:
            condition = "#tok = :tok"
            values[":tok"] = {"B": chain.token}
        else:
            assert isinstance(chain.value, bytes)
            values[":old"] = {"B": chain.value}
            if chain.version:
                values[":v"] = {"N": str(chain.version)}
                version = "#v = :v"
            else:
                version = "attribute_not_exists(#v)"
            condition = f"attribute_not_exists(#tok) AND #s = :old AND {version}"
        if now is not None:
            values[":now"] = {"N": str(now)}
            condition += " AND (attribute_not_exists(#dl) OR #dl >= :now)"
        return condition


#: Not an item of the 0.1 layout (op ids without a lineage; ``hb``: positions without
#: history), which only ``xor-ack migrate`` may write: a blind update refuses it, and the
#: refusal's ``ALL_OLD`` raises :class:`UnmigratedItem`.
_MIGRATED = "attribute_not_exists(#hb) AND (attribute_exists(#lin) OR attribute_not_exists(#ops))"
#: A chain an update may change: there, of the current layout, pending, and (sum mode)
#: not at zero.
_LIVE = (
    f"attribute_exists(#pk) AND {_MIGRATED} AND (attribute_not_exists(#st) OR #st = :pending) "
    "AND (attribute_not_exists(#sum) OR #sum <> :zero)"
)


def placeholders(*expressions: str) -> list[str]:
    """The attribute-name placeholders ``expressions`` use, each once (DynamoDB refuses
    an ``ExpressionAttributeNames`` entry no expression uses)."""
    return sorted(set(re.findall(r"#\w+", " ".join(expressions))))


#: The constants of the dated updates' expressions.
_CONSTANTS = {":one": {"N": "1"}, ":pending": {"S": "pending"}, ":zero": {"N": "0"}}
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
