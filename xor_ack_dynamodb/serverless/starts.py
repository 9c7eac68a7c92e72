"""Starting chains: from any caller (:func:`start`) or from S3 uploads
(:func:`process_s3_event`, one chain per object): one ``create`` holding all the
children's edges, then the sends. The incarnation (``start_id``) derives the owner, the
edges and the create's op id, so a start run again is a duplicate. docs/lambda.md,
"Starting chains, and who owns them". A start with no children creates its chain on a
root edge and finishes it at once.
"""

from __future__ import annotations

import logging
import secrets
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import TagExists
from ..status import State
from .context import Context, S3Object
from .edges import combine, op_id, owner_for, root_edge, start_edge
from .envelope import Message, decode_s3_metadata
from .errors import EnvelopeError, RetryRecord
from .parts import PipelineParts
from .records import CHAIN_OVER, Handler, process_message
from .sending import send_children

log = logging.getLogger("xor_ack_dynamodb.serverless")


@dataclass(frozen=True, slots=True)
class Started:
    """What a start did: ``created`` False for a duplicate of an earlier run; ``children``
    how many it declared; ``sent`` whether they were sent (not when a duplicate found the
    chain finished); ``state`` the chain's state as the start left it."""

    tag: str
    owner: str
    children: int
    created: bool
    sent: bool
    state: State


def start(
    tag: str,
    children: Iterable[Any] = (),
    *,
    pipeline: PipelineParts,
    start_id: str | None = None,
    handler: Handler | None = None,
    source: S3Object | None = None,
) -> Started:
    """Start a chain ``tag`` whose children are ``children`` (message bodies for the
    pipeline's queue) and/or what ``handler(ctx)`` emits. ``start_id`` makes the start
    idempotent; without it a random incarnation is drawn.

    Raises :class:`~xor_ack_dynamodb.errors.TagExists` when another incarnation's chain
    holds the tag (live, or a tombstone within its retention: replay under a new tag),
    :class:`~xor_ack_dynamodb.errors.InvalidTag` for a bad tag (before any request), and
    what the handler raises (nothing was created); a send that fails raises after the
    chain was created: call again with the same ``start_id``.
    """
    incarnation = start_id if start_id is not None else secrets.token_hex(12)
    if not isinstance(incarnation, str) or not incarnation:
        raise ValueError("start_id must be a non-empty str")
    mode, size = pipeline.mode, pipeline.edge_size
    ctx = Context(
        tag=tag,
        owner=owner_for(tag, incarnation),
        mode=mode,
        edge=None,
        derive=lambda i: start_edge(mode, tag, incarnation, i, size),
        default_queue=pipeline.queue_url,
        source=source,
    )
    for body in children:
        ctx.emit(body)
    if handler is not None:
        handler(ctx)
    return _launch(pipeline, ctx, incarnation)


def _launch(pipeline: PipelineParts, ctx: Context, incarnation: str) -> Started:
    tracker, tag, owner = pipeline.tracker, ctx.tag, ctx.owner
    children = ctx.children
    create_op = f"start:{incarnation}"
    if not children:
        root = root_edge(pipeline.mode, tag, incarnation, pipeline.edge_size)
        created = tracker.create(tag, root, op_id=create_op, owner=owner)
        try:
            tracker.stamp(tag, finished=[root], op_id=op_id(root), owner=owner, after=created.position)
        except CHAIN_OVER as exc:  # a duplicate start of a chain that failed or expired since
            log.info("%s: started before and now over (%s)", tag, exc.code)
            return Started(tag, owner, 0, False, False, tracker.status(tag).state)
        return Started(tag, owner, 0, not created.duplicate, False, "acked")
    value = combine(pipeline.mode, [c.edge for c in children])
    created = tracker.create(tag, value, op_id=create_op, owner=owner)
    if created.duplicate:
        state = tracker.status(tag).state
        if state != "pending":
            log.info("%s: started before and now %s; its children are not sent again", tag, state)
            return Started(tag, owner, len(children), False, False, state)
        log.info("%s: started before and still pending; sending its %d children again", tag, len(children))
    send_children(children, created.position, pipeline)
    if not created.duplicate:
        log.info("%s: started with %d children", tag, len(children))
    return Started(tag, owner, len(children), not created.duplicate, True, "pending")


def s3_objects(event: Mapping[str, Any]) -> list[S3Object]:
    """The objects of an S3 event notification's ``ObjectCreated`` records (keys
    URL-decoded as S3 sends them; other records skipped)."""
    found = []
    for record in event.get("Records", []):
        if record.get("eventSource") != "aws:s3" or not str(record.get("eventName", "")).startswith(
            "ObjectCreated"
        ):
            continue
        s3 = record["s3"]
        obj = s3["object"]
        found.append(
            S3Object(
                bucket=s3["bucket"]["name"],
                key=urllib.parse.unquote_plus(obj["key"]),
                etag=str(obj.get("eTag", "")).strip('"'),
                version_id=obj.get("versionId") or None,
                sequencer=obj.get("sequencer") or None,
                size=obj.get("size"),
            )
        )
    return found


def process_s3_event(
    event: Mapping[str, Any],
    handler: Handler,
    *,
    pipeline: PipelineParts,
    lambda_context: Any = None,
    continue_chains: bool = True,
) -> dict[str, Any]:
    """Handle an S3 ``ObjectCreated`` event: for each object, ``handler(ctx)`` (with
    ``ctx.source`` the :class:`S3Object`) declares children, and an object without an
    envelope starts a chain, tag :attr:`S3Object.tag`, incarnation
    :attr:`S3Object.identity` (a redelivered event is a duplicate start); with
    ``continue_chains`` (default: one ``HeadObject`` per object), an object whose
    metadata carries an envelope (``ctx.emit_object``) continues its chain as an SQS
    message would.

    Returns ``{"started": [tags], "continued": [tags], "skipped": [tags]}`` (skipped:
    a chain of another incarnation holds the tag, or the envelope is unreadable). Raises
    the first error after handling every object, so that Lambda retries the event (the
    objects that went through are not applied twice).
    """
    out: dict[str, list[str]] = {"started": [], "continued": [], "skipped": []}
    first_error: BaseException | None = None
    for obj in s3_objects(event):
        try:
            envelope = None
            if continue_chains:
                pipeline.stats.request("s3.HeadObject")
                head = pipeline.client("s3").head_object(
                    Bucket=obj.bucket,
                    Key=obj.key,
                    **({"VersionId": obj.version_id} if obj.version_id else {}),
                )
                envelope = decode_s3_metadata(head.get("Metadata"), pipeline.mode)
            if envelope is not None:
                outcome = process_message(
                    Message(envelope, ""),
                    f"s3:{obj.bucket}/{obj.key}@{obj.identity}",
                    1,
                    handler,
                    pipeline=pipeline,
                    source=obj,
                    lambda_context=lambda_context,
                )
                if outcome == "retry":
                    raise RetryRecord(f"s3://{obj.bucket}/{obj.key} is to be handled again")
                out["continued"].append(envelope.tag)
                continue
            try:
                started = start(
                    obj.tag, pipeline=pipeline, start_id=obj.identity, handler=handler, source=obj
                )
            except TagExists as exc:
                log.warning("%s: another incarnation holds this tag; not started: %s", obj.tag, exc)
                out["skipped"].append(obj.tag)
                continue
            out["started"].append(started.tag)
        except EnvelopeError as exc:
            log.error("s3://%s/%s: %s: %s; skipped", obj.bucket, obj.key, exc.code, exc)
            out["skipped"].append(f"s3://{obj.bucket}/{obj.key}")
        except Exception as exc:  # noqa: BLE001 - handle the others, then raise for Lambda's retry
            log.warning("s3://%s/%s: %r; the event will be retried", obj.bucket, obj.key, exc)
            first_error = first_error or exc
    if first_error is not None:
        raise first_error
    return out
