"""The chain table's DynamoDB stream, the one trigger of completions: a completion fires
where a chain of the pipeline *became* complete, whoever wrote the transition (the claim's
own writes are not transitions); transitions to ``failed`` and pending chains removed by
the TTL are counted (docs/lambda.md, "Completion, once", "The transition").
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..core.algebra import is_zero
from ..core.chain import Chain
from ..errors import CorruptItem
from .completion import Completion, Lineage
from .edges import OWNER_PREFIX
from .parts import ItemReader, PipelineParts

log = logging.getLogger("xor_ack_dynamodb.serverless")

#: Which chains a pipeline completes: called with a chain's tag and owner.
ChainFilter = Callable[[str, "str | None"], bool]

Kind = Literal["completed", "failed", "expired"]


def owned_by_pipelines(tag: str, owner: str | None) -> bool:
    """The default chain filter: chains started by a serverless pipeline (their owner is
    :func:`~.edges.owner_for`'s ``inc-...``)."""
    return owner is not None and owner.startswith(OWNER_PREFIX)


@dataclass(frozen=True, slots=True)
class Change:
    """A stream record that matters: a chain completed, failed or expired."""

    kind: Kind
    chain: Chain
    sequence: str


def _complete(chain: Chain | None) -> bool:
    if chain is None:
        return False
    return chain.state == "acked" or (chain.state == "pending" and is_zero(chain.value))


def _decoded(value: Any) -> Any:
    """A stream image's attribute value with Binary as bytes: Lambda's events carry
    base64 text (JSON), boto3's ``GetRecords`` bytes."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for kind, inner in value.items():
            if kind == "B" and isinstance(inner, str):
                out[kind] = base64.b64decode(inner)
            elif kind == "BS":
                out[kind] = [base64.b64decode(v) if isinstance(v, str) else v for v in inner]
            elif kind == "L":
                out[kind] = [_decoded(v) for v in inner]
            elif kind == "M":
                out[kind] = {k: _decoded(v) for k, v in inner.items()}
            else:
                out[kind] = inner
        return out
    return value


def _image(reader: ItemReader, image: Any) -> Chain | None:
    if not isinstance(image, Mapping) or not image:
        return None
    try:
        return reader({k: _decoded(v) for k, v in image.items()})
    except CorruptItem:
        return None  # not a chain item (another writer's item, a helper item): not ours to read


def read_change(record: Mapping[str, Any], reader: ItemReader) -> Change | None:
    """The change a stream record shows, or None when it shows none that matters (see
    the module doc). Raises ``ValueError`` for a record that is not a DynamoDB stream
    record."""
    data = record.get("dynamodb")
    if not isinstance(data, Mapping):
        raise ValueError("not a DynamoDB stream record: no 'dynamodb' object")
    sequence = str(data.get("SequenceNumber", ""))
    old, new = _image(reader, data.get("OldImage")), _image(reader, data.get("NewImage"))
    if record.get("eventName") == "REMOVE":
        remover = record.get("userIdentity") or {}  # the TTL's deletion: DynamoDB's own service
        by_ttl = remover.get("type") == "Service" and remover.get("principalId") == "dynamodb.amazonaws.com"
        if old is not None and old.state == "pending" and not _complete(old) and by_ttl:
            return Change("expired", old, sequence)
        return None
    if new is None:
        return None
    same = old is not None and old.create_op == new.create_op and old.owner == new.owner
    if _complete(new) and not (same and _complete(old)):
        return Change("completed", new, sequence)
    if new.state == "failed" and not (same and old is not None and old.state == "failed"):
        return Change("failed", new, sequence)
    return None


def process_chain_stream(event: Mapping[str, Any], *, pipeline: PipelineParts) -> dict[str, Any]:
    """Handle a batch of the chain table's stream records (see the module doc) and return
    Lambda's partial batch response: processing stops at the first record whose
    completion cannot fire yet (a live claim, a failed target), and its sequence number
    is returned (``{"batchItemFailures": [{"itemIdentifier": <sequence number>}]}``) so
    that Lambda retries the shard from it. Never raises for one record; raises
    ``ValueError`` for an event that is not a batch of stream records."""
    records = event.get("Records")
    if not isinstance(records, list):
        raise ValueError("not a DynamoDB stream event: no 'Records' list")
    reader, stats = pipeline.item_reader(), pipeline.stats
    for record in records:
        stats.add("stream.records")
        try:
            change = read_change(record, reader)
        except ValueError as exc:
            log.error("stream record %s skipped: %s", record.get("eventID"), exc)
            continue
        if change is None or not pipeline.chains(change.chain.tag, change.chain.owner):
            continue
        if change.kind != "completed":
            stats.add(f"chains.{change.kind}")
            continue
        chain, op = change.chain, change.chain.create_op
        completion = Completion(chain.tag, chain.owner or "", chain.mode, float(chain.updated_at or 0))
        lineage = Lineage(chain.owner, None if op is None else op.key + op.digest)
        try:
            pipeline.fire_completion(completion, lineage)
        except Exception as exc:  # noqa: BLE001 - a live claim, a target down: retry from this record
            log.warning("%s: completion not fired yet (%r); the stream retries from here", chain.tag, exc)
            stats.add("completions.retried")
            return {"batchItemFailures": [{"itemIdentifier": change.sequence}]}
    return {"batchItemFailures": []}
