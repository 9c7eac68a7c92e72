"""The completion claim on a chain's own item: the writes behind
:meth:`XorAckDynamoDB.claim_completion`, ``mark_completion_fired`` and
``release_completion`` (the serverless layer's completion, once: docs/lambda.md).
Mark and release are conditioned on the claimant, so a copy that lands twice changes
nothing. Transient errors are retried within the tracker's budget.
"""

from __future__ import annotations

from typing import Any, Literal, cast

import tenacity
from botocore.exceptions import ClientError

from ...core.chain import new_token
from ...errors import RequestFailed
from ...retry import RetryPolicy
from ._sync.store import DynamoDBStore
from .codec import error_code, is_transient, placeholders
from .item import ATTRIBUTES, CLAIM, CLAIM_BY, CLAIM_UNTIL, FIRED_AT

ClaimResult = Literal["claimed", "fired", "held", "gone"]

#: Placeholder -> attribute name in the claim's requests (besides the chain's own).
_NAMES = {**ATTRIBUTES, "#cl": CLAIM, "#by": CLAIM_BY, "#until": CLAIM_UNTIL, "#at": FIRED_AT}


def _number(value: float) -> dict[str, str]:
    """A DynamoDB Number of epoch seconds, to the millisecond (no rounding that could
    shorten a lease)."""
    return {"N": f"{value:.3f}"}


class CompletionClaims:
    """The claim's three writes on ``table``'s chain items, through ``store`` (counted in
    its stats), within ``retry``."""

    def __init__(self, store: DynamoDBStore, retry: RetryPolicy, table: str, partition_key: str) -> None:
        self.store, self.retry, self.table, self.partition_key = store, retry, table, partition_key

    def _call(self, operation: str, tag: str, **kwargs: Any) -> dict[str, Any]:
        key = {self.partition_key: {"S": tag}}
        request = {"TableName": self.table, "Key": key, **kwargs}
        retrying = self.retry.retrying(tenacity.retry_if_exception(is_transient)).copy(reraise=True)
        return retrying(self.store.call, operation, request, tag)

    def _update(
        self, tag: str, update: str, condition: str, values: dict[str, Any], **kwargs: Any
    ) -> dict[str, Any] | None:
        """A conditional ``UpdateItem``: None when it was applied, the error's response
        when its condition failed; any other error raises."""
        names = {**_NAMES, "#pk": self.partition_key}
        kwargs.update(
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames={p: names[p] for p in placeholders(update, condition)},
            ExpressionAttributeValues=values,
        )
        try:
            self._call("UpdateItem", tag, **kwargs)
            return None
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return cast("dict[str, Any]", exc.response)

    def _item(self, tag: str) -> dict[str, Any]:
        return self._call("GetItem", tag, ConsistentRead=True).get("Item") or {}

    def claim(
        self,
        tag: str,
        claimant: str,
        now: float,
        lease: float,
        skew: float,
        owner: str | None = None,
        create_op: bytes | None = None,
    ) -> ClaimResult:
        values: dict[str, Any] = {
            ":claimed": {"S": "claimed"},
            ":me": {"S": claimant},
            ":until": _number(now + lease),
            ":stale": _number(now - skew),
            ":acked": {"S": "acked"},
            ":pending": {"S": "pending"},
            ":zero": {"N": "0"},
            ":tok": {"B": new_token()},
        }
        condition = (
            "attribute_exists(#pk) AND (#st = :acked OR (#st = :pending AND #sum = :zero)) "
            "AND (attribute_not_exists(#cl) OR (#cl = :claimed AND #until < :stale))"
        )
        if owner is not None:
            condition += " AND #own = :own"
            values[":own"] = {"S": owner}
        if create_op is not None:
            condition += " AND #cop = :cop"
            values[":cop"] = {"B": create_op}
        update = "SET #st = :acked, #tok = :tok, #cl = :claimed, #by = :me, #until = :until"
        try:
            refused = self._update(
                tag, update, condition, values, ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        except (RequestFailed, ClientError) as unknown:
            # Past the retry budget, after an error that may hide an applied attempt (a
            # lost response, then throttles): read the claim back, or the stream's retry,
            # a new claimant, would wait out the whole lease.
            if not is_transient(unknown):
                raise
            try:
                landed = self._item(tag)
            except (RequestFailed, ClientError):
                raise unknown from None
            if _claimed_by(landed, claimant):
                return "claimed"
            raise
        if refused is None:
            return "claimed"
        item: dict[str, Any] | None = refused.get("Item")
        if item is None:  # backends that do not return ALL_OLD (dynalite), or no item
            item = self._item(tag)
        if not item or not _same_lineage(item, owner, create_op):
            return "gone"
        if item.get(CLAIM, {}).get("S") == "fired":
            return "fired"
        if _claimed_by(item, claimant):
            return "claimed"  # our own claim: its first copy landed, its response was lost
        state, total = item.get("state", {}).get("S"), item.get("sum", {}).get("N")
        return "held" if state == "acked" or (state == "pending" and total == "0") else "gone"

    def mark_fired(self, tag: str, claimant: str, now: float) -> bool:
        values = {":fired": {"S": "fired"}, ":me": {"S": claimant}, ":now": {"N": str(int(now))}}
        return self._update(tag, "SET #cl = :fired, #at = :now", "#by = :me", values) is None

    def release(self, tag: str, claimant: str) -> None:
        values = {":me": {"S": claimant}, ":claimed": {"S": "claimed"}}
        self._update(tag, "REMOVE #cl, #by, #until", "#by = :me AND #cl = :claimed", values)


def _claimed_by(item: dict[str, Any], claimant: str) -> bool:
    return bool(item.get(CLAIM, {}).get("S") == "claimed" and item.get(CLAIM_BY, {}).get("S") == claimant)


def _same_lineage(item: dict[str, Any], owner: str | None, create_op: bytes | None) -> bool:
    if owner is not None and item.get("owner", {}).get("S") != owner:
        return False
    if create_op is not None:
        found = item.get("cop", {}).get("B")
        return found is not None and bytes(found) == create_op
    return True
