"""Completion: one firing per chain, whoever completed it: **claim** (a conditional write
the tracker makes on the chain's item), **fire** the targets, **mark** fired. Once, and
at least once when a claimant dies or its mark fails (then the claim is taken over
after its lease and the skew margin); every firing carries the same
:attr:`Completion.id`. The protocol, its bounds and why: docs/lambda.md, "Completion,
once".
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..core.algebra import Mode
from ..errors import InvalidConfig
from ..stats import RequestStats
from ..stores.dynamodb.answers import checked
from .errors import CompletionPending, TargetFailed

if TYPE_CHECKING:
    from ..stores.dynamodb.tracker import ClaimResult


log = logging.getLogger("xor_ack_dynamodb.serverless")

#: What :func:`fire_once` did: fired the targets, found them fired before, or found the
#: chain gone (purged, or created again under its tag) before it could claim it.
FireOutcome = Literal["fired", "repeated", "missed"]


@dataclass(frozen=True, slots=True)
class Completion:
    """A chain that completed. ``id`` is the same for every firing of this chain (a
    consumer deduplicates by it); ``completed_at`` is the epoch second of the chain's
    completing write, as its writer's clock had it (the same on every firing)."""

    tag: str
    owner: str
    mode: Mode
    completed_at: float

    @property
    def id(self) -> str:
        return hashlib.blake2b(f"{self.tag}\x00{self.owner}".encode(), digest_size=16).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "id": self.id}


@dataclass(frozen=True, slots=True)
class Lineage:
    """Which chain of a tag a stream record is about: its owner and its create op (key
    and payload hash). A claim names them, so a late record of a chain cannot claim a
    chain created again under the same tag."""

    owner: str | None
    create_op: bytes | None


#: A completion target: any callable taking the :class:`Completion` (raise to refuse).
Target = Callable[[Completion], None]


class CompletionGuard(Protocol):
    """The claim, as an :class:`~xor_ack_dynamodb.XorAckDynamoDB` makes it on the chain's
    item: ``claim_completion`` answers ``claimed`` (also when the claim is this
    claimant's already), ``fired`` (marked before), ``held`` (another's claim, live: not
    past its lease and the tracker's skew margin) or ``gone`` (no such complete chain, of
    ``owner`` and ``create_op`` where given); ``mark_completion_fired`` is False when
    another took the claim over."""

    def claim_completion(
        self,
        tag: str,
        claimant: str,
        now: float,
        lease: float,
        *,
        owner: str | None = None,
        create_op: bytes | None = None,
    ) -> ClaimResult: ...

    def mark_completion_fired(self, tag: str, claimant: str, now: float) -> bool: ...

    def release_completion(self, tag: str, claimant: str) -> None: ...


def guard_for(tracker: Any) -> CompletionGuard:
    """The guard for ``tracker``: an ``XorAckDynamoDB`` or a ``MemoryAck`` itself (its
    claim on the chain's item). Raises :class:`InvalidConfig` for a tracker
    with ``delete_on_ack`` (completion needs the tombstone) and for any other tracker
    (pass a guard)."""
    from ..stores.dynamodb.tracker import XorAckDynamoDB
    from ..stores.memory import MemoryAck

    if isinstance(tracker, XorAckDynamoDB) and tracker.delete_on_ack:
        raise InvalidConfig("completion needs the acked tombstone: use a tracker without delete_on_ack")
    if isinstance(tracker, (XorAckDynamoDB, MemoryAck)):
        return tracker
    raise InvalidConfig(f"no completion guard for a {type(tracker).__name__}: pass guard=")


def fire_once(
    guard: CompletionGuard,
    targets: list[Target],
    completion: Completion,
    *,
    now: float,
    lease: float,
    lineage: Lineage | None = None,
) -> FireOutcome:
    """Claim, fire every target in order, mark fired (see the module doc); returns what
    it did (:data:`FireOutcome`; ``missed`` is logged as an error). Raises
    :class:`CompletionPending` when another claim is live, and re-raises a target's error
    after releasing the claim."""
    claimant, tag = secrets.token_hex(8), completion.tag
    owner, create_op = (None, None) if lineage is None else (lineage.owner, lineage.create_op)
    outcome = guard.claim_completion(tag, claimant, now, lease, owner=owner, create_op=create_op)
    if outcome == "fired":
        log.info("%s: completion already fired; this copy does nothing", tag)
        return "repeated"
    if outcome == "held":
        raise CompletionPending(f"chain {tag!r}: another delivery is firing its completion", tag=tag)
    if outcome == "gone":
        log.error(
            "%s: completion of owner %s NOT fired: the chain was purged or created again before "
            "its stream record was handled (keep the retention above the stream's 24 hours)",
            tag,
            completion.owner,
        )
        return "missed"
    try:
        for target in targets:
            target(completion)
    except BaseException:
        guard.release_completion(tag, claimant)
        raise
    if not guard.mark_completion_fired(tag, claimant, now):
        log.warning("%s: completion fired, but another delivery took the claim over meanwhile", tag)
    log.info("%s: complete; completion fired", tag)
    return "fired"


class SqsTarget:
    """Sends each completion as a JSON message (:meth:`Completion.to_dict`) to an SQS
    queue; on a FIFO queue the completion's id is the deduplication id."""

    def __init__(self, client: Any, queue_url: str, stats: RequestStats | None = None) -> None:
        self.client, self.queue_url, self.stats = client, queue_url, stats

    def __call__(self, completion: Completion) -> None:
        kwargs: dict[str, Any] = {"QueueUrl": self.queue_url, "MessageBody": json.dumps(completion.to_dict())}
        if self.queue_url.endswith(".fifo"):
            kwargs["MessageGroupId"] = completion.id
            kwargs["MessageDeduplicationId"] = completion.id
        if self.stats is not None:
            self.stats.request("sqs.SendMessage")
        checked(self.client, "SendMessage", kwargs, self.client.send_message(**kwargs))

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
        self.client, self.bus_name, self.stats = client, bus_name, stats
        self.source, self.detail_type = source, detail_type

    def __call__(self, completion: Completion) -> None:
        if self.stats is not None:
            self.stats.request("events.PutEvents")
        request = {
            "Entries": [
                {
                    "Source": self.source,
                    "DetailType": self.detail_type,
                    "Detail": json.dumps(completion.to_dict()),
                    "EventBusName": self.bus_name,
                }
            ]
        }
        response = checked(self.client, "PutEvents", request, self.client.put_events(**request))
        if response.get("FailedEntryCount"):
            entry = response.get("Entries", [{}])[0]
            raise TargetFailed(
                f"EventBridge refused the completion of {completion.tag!r}: {entry.get('ErrorCode')} "
                f"{entry.get('ErrorMessage')}",
                tag=completion.tag,
            )

    def __repr__(self) -> str:
        return f"EventBridgeTarget({self.bus_name!r})"
