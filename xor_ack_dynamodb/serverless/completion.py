"""Completion: one firing per chain, guarded by a conditional claim on the chain's item.

Exactly one *op* completes a chain (its stamp returns ``acked``), but that op can arrive
more than once: SQS redelivers its message, or a parent's redelivery re-sent it, and a
redelivered completing op also returns ``acked`` (with ``duplicate`` True). So ``acked``
alone would fire a completion once per copy. The guard makes the firing itself
conditional:

1. **claim**: one ``UpdateItem`` on the chain's own item, conditioned on the chain
   being stored ``acked`` and on no claim (or only a claim whose lease ran out):
   ``SET cmpl = claimed, cmpl_by = :me, cmpl_until = :now + lease``;
2. **fire** the targets (a callback, an SQS queue, an EventBridge bus);
3. **mark** it fired (``SET cmpl = fired``, conditioned on ``cmpl_by = :me``).

A copy that finds ``fired`` does nothing; one that finds a live claim is retried (the
claimant may still die); one that finds a claim past its lease takes it over. If a
target fails, the claim is released and the record retried. Race timelines::

    A: stamp -> acked ─ claim ok ─ fire ─ mark fired
    B: (copy) stamp -> acked, duplicate ─ claim: cmpl = fired ─> nothing to do
    B': (copy, concurrent) ─ claim: cmpl = claimed, lease live ─> CompletionPending, retried

    A: claim ok ─ fire ─ (Lambda times out before mark)
    B: (A's record redelivered) ─ claim: lease ran out ─> takes over, fires again

So a completion fires **once**, except when its claimant dies after firing and before
marking (the second timeline): then it fires again after the lease (at least once,
never zero). Every firing of a chain carries the same :attr:`Completion.id`; the SQS
target uses it as the FIFO deduplication id, and consumers of other targets can drop a
repeat by it. Set the lease above the function timeout, so a live claimant is never
overtaken.

Why the chain's item: the claim is atomic with the chain's state (only an ``acked``
chain can be claimed, in the same request) and is purged with the tombstone; no second
table. After a chain is stored ``acked`` the tracker never writes its item again (it
refuses every stamp, fail and touch; a create may overwrite it only after its
retention), so nothing erases the claim. ``delete_on_ack`` trackers are refused (their
tombstone is gone at once).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, cast

from botocore.exceptions import ClientError

from ..core.algebra import Mode
from ..errors import InvalidConfig
from ..stats import RequestStats
from .errors import CompletionPending, TargetFailed

__all__ = [
    "Completion",
    "CompletionGuard",
    "DynamoDBGuard",
    "MemoryGuard",
    "SqsTarget",
    "EventBridgeTarget",
    "Target",
    "fire_once",
    "guard_for",
]

log = logging.getLogger("xor_ack_dynamodb.serverless")

ClaimResult = Literal["claimed", "fired", "held", "not-acked"]

#: The claim's attributes on the chain's item.
CLAIM, CLAIM_BY, CLAIM_UNTIL, FIRED_AT = "cmpl", "cmpl_by", "cmpl_until", "cmpl_at"


@dataclass(frozen=True, slots=True)
class Completion:
    """A chain that reached zero. ``id`` is the same for every firing of this chain
    (a consumer deduplicates by it); ``message_id`` is the SQS message whose stamp
    completed it (None for a start with no children)."""

    tag: str
    owner: str
    mode: Mode
    completed_at: float
    message_id: str | None = None

    @property
    def id(self) -> str:
        return hashlib.blake2b(f"{self.tag}\x00{self.owner}".encode(), digest_size=16).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "id": self.id}


#: A completion target: any callable taking the :class:`Completion` (raise to refuse).
Target = Callable[[Completion], None]


class CompletionGuard(Protocol):
    """The claim protocol (see the module doc)."""

    def claim(self, tag: str, claimant: str, now: float, lease: float) -> ClaimResult: ...

    def mark_fired(self, tag: str, claimant: str, now: float) -> bool: ...

    def release(self, tag: str, claimant: str) -> None: ...


class DynamoDBGuard:
    """The claim on the chain's item in the tracker's table: one ``UpdateItem`` to claim,
    one to mark (counted in the tracker's ``stats``)."""

    def __init__(self, tracker: Any) -> None:
        if getattr(tracker, "delete_on_ack", False):
            raise InvalidConfig("completion needs the acked tombstone: use a tracker without delete_on_ack")
        self.client = tracker.client
        self.table: str = tracker.table
        self.partition_key: str = tracker.partition_key
        self.stats: RequestStats = tracker.stats

    def _update(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        self.stats.request(operation)
        method = self.client.update_item if operation == "UpdateItem" else self.client.get_item
        response: dict[str, Any] = method(
            TableName=self.table, Key={self.partition_key: {"S": kwargs.pop("tag")}}, **kwargs
        )
        return response

    def claim(self, tag: str, claimant: str, now: float, lease: float) -> ClaimResult:
        try:
            self._update(
                "UpdateItem",
                tag=tag,
                UpdateExpression="SET #c = :claimed, #by = :me, #until = :until",
                ConditionExpression=(
                    "#st = :acked AND (attribute_not_exists(#c) OR (#c = :claimed AND #until < :now))"
                ),
                ExpressionAttributeNames={
                    "#c": CLAIM,
                    "#by": CLAIM_BY,
                    "#until": CLAIM_UNTIL,
                    "#st": "state",
                },
                ExpressionAttributeValues={
                    ":claimed": {"S": "claimed"},
                    ":me": {"S": claimant},
                    ":until": {"N": str(int(now + lease))},
                    ":now": {"N": str(int(now))},
                    ":acked": {"S": "acked"},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return "claimed"
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            item: dict[str, Any] | None = cast("dict[str, Any] | None", exc.response.get("Item"))
        if item is None:  # backends that do not return ALL_OLD (dynalite)
            item = self._update("GetItem", tag=tag, ConsistentRead=True).get("Item") or {}
        if item.get(CLAIM, {}).get("S") == "fired":
            return "fired"
        if item.get("state", {}).get("S") != "acked":
            return "not-acked"
        return "held"

    def mark_fired(self, tag: str, claimant: str, now: float) -> bool:
        try:
            self._update(
                "UpdateItem",
                tag=tag,
                UpdateExpression="SET #c = :fired, #at = :now",
                ConditionExpression="#by = :me",
                ExpressionAttributeNames={"#c": CLAIM, "#by": CLAIM_BY, "#at": FIRED_AT},
                ExpressionAttributeValues={
                    ":fired": {"S": "fired"},
                    ":me": {"S": claimant},
                    ":now": {"N": str(int(now))},
                },
            )
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return False

    def release(self, tag: str, claimant: str) -> None:
        try:
            self._update(
                "UpdateItem",
                tag=tag,
                UpdateExpression="REMOVE #c, #by, #until",
                ConditionExpression="#by = :me AND #c = :claimed",
                ExpressionAttributeNames={"#c": CLAIM, "#by": CLAIM_BY, "#until": CLAIM_UNTIL},
                ExpressionAttributeValues={":me": {"S": claimant}, ":claimed": {"S": "claimed"}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise


class MemoryGuard:
    """The same claim for a :class:`~xor_ack_dynamodb.MemoryAck` (one process, tests)."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker
        self._lock = threading.Lock()
        self._claims: dict[str, tuple[str, str, float]] = {}  # tag -> (state, claimant, until)

    def claim(self, tag: str, claimant: str, now: float, lease: float) -> ClaimResult:
        if self.tracker.status(tag).state != "acked":
            return "not-acked"
        with self._lock:
            state, _, until = self._claims.get(tag, ("", "", 0.0))
            if state == "fired":
                return "fired"
            if state == "claimed" and until >= now:
                return "held"
            self._claims[tag] = ("claimed", claimant, now + lease)
            return "claimed"

    def mark_fired(self, tag: str, claimant: str, now: float) -> bool:
        with self._lock:
            if self._claims.get(tag, ("", "", 0.0))[1] != claimant:
                return False
            self._claims[tag] = ("fired", claimant, now)
            return True

    def release(self, tag: str, claimant: str) -> None:
        with self._lock:
            state, by, _ = self._claims.get(tag, ("", "", 0.0))
            if state == "claimed" and by == claimant:
                del self._claims[tag]


def guard_for(tracker: Any) -> CompletionGuard:
    """The guard for ``tracker``: on its DynamoDB table, or in memory for a
    ``MemoryAck``. Raises :class:`InvalidConfig` for any other tracker (pass a guard)."""
    from ..stores.dynamodb.tracker import XorAckDynamoDB
    from ..stores.memory import MemoryAck

    if isinstance(tracker, XorAckDynamoDB):
        return DynamoDBGuard(tracker)
    if isinstance(tracker, MemoryAck):
        return MemoryGuard(tracker)
    raise InvalidConfig(f"no completion guard for a {type(tracker).__name__}: pass guard=")


def fire_once(
    guard: CompletionGuard, targets: list[Target], completion: Completion, *, now: float, lease: float
) -> bool:
    """Claim, fire every target in order, mark fired (see the module doc). Returns True
    if this call fired, False if the completion had fired before. Raises
    :class:`CompletionPending` (retry later) when another claim is live or the chain's
    ``acked`` state is not stored yet, and re-raises a target's error after releasing
    the claim."""
    claimant = secrets.token_hex(8)
    outcome = guard.claim(completion.tag, claimant, now, lease)
    if outcome == "fired":
        log.info("%s: completion already fired; this copy does nothing", completion.tag)
        return False
    if outcome == "held":
        raise CompletionPending(
            f"chain {completion.tag!r}: another delivery is firing its completion", tag=completion.tag
        )
    if outcome == "not-acked":
        raise CompletionPending(
            f"chain {completion.tag!r}: its acked state is not stored yet", tag=completion.tag
        )
    try:
        for target in targets:
            target(completion)
    except BaseException:
        guard.release(completion.tag, claimant)
        raise
    if not guard.mark_fired(completion.tag, claimant, now):
        log.warning(
            "%s: completion fired, but another delivery took the claim over meanwhile", completion.tag
        )
    log.info("%s: complete; completion fired", completion.tag)
    return True


class SqsTarget:
    """Sends each completion as a JSON message (:meth:`Completion.to_dict`) to an SQS
    queue. On a FIFO queue (``.fifo``), the completion's id is the deduplication id, so
    a repeat firing within SQS's 5-minute window is dropped by SQS itself."""

    def __init__(self, client: Any, queue_url: str, stats: RequestStats | None = None) -> None:
        self.client, self.queue_url, self.stats = client, queue_url, stats

    def __call__(self, completion: Completion) -> None:
        kwargs: dict[str, Any] = {"QueueUrl": self.queue_url, "MessageBody": json.dumps(completion.to_dict())}
        if self.queue_url.endswith(".fifo"):
            kwargs["MessageGroupId"] = completion.id
            kwargs["MessageDeduplicationId"] = completion.id
        if self.stats is not None:
            self.stats.request("sqs.SendMessage")
        self.client.send_message(**kwargs)

    def __repr__(self) -> str:
        return f"SqsTarget({self.queue_url!r})"


class EventBridgeTarget:
    """Puts each completion on an EventBridge bus: ``source`` and ``detail_type`` as
    given, ``detail`` the completion (:meth:`Completion.to_dict`). Raises
    :class:`TargetFailed` when the bus refuses the entry."""

    def __init__(
        self,
        client: Any,
        bus_name: str = "default",
        *,
        source: str = "xor-ack",
        detail_type: str = "Chain completed",
        stats: RequestStats | None = None,
    ) -> None:
        self.client, self.bus_name, self.source, self.detail_type, self.stats = (
            client,
            bus_name,
            source,
            detail_type,
            stats,
        )

    def __call__(self, completion: Completion) -> None:
        if self.stats is not None:
            self.stats.request("events.PutEvents")
        response = self.client.put_events(
            Entries=[
                {
                    "Source": self.source,
                    "DetailType": self.detail_type,
                    "Detail": json.dumps(completion.to_dict()),
                    "EventBusName": self.bus_name,
                }
            ]
        )
        if response.get("FailedEntryCount"):
            entry = response.get("Entries", [{}])[0]
            raise TargetFailed(
                f"EventBridge refused the completion of {completion.tag!r}: {entry.get('ErrorCode')} "
                f"{entry.get('ErrorMessage')}",
                tag=completion.tag,
            )

    def __repr__(self) -> str:
        return f"EventBridgeTarget({self.bus_name!r})"
