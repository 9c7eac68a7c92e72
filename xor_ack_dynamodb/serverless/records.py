"""Tracked SQS records: the batch loop (:func:`process_sqs_batch`) and the unit it runs
per record (:func:`process_record`). Per record: decode the envelope, run
``handler(ctx)``, one stamp (op id ``edge:<edge>``, checked from the envelope's
``after``) finishing its edge and starting its children's, then the sends. Stamp before
send: a crash between them never acks early and loses nothing. What ends a record, and
why this order: docs/lambda.md, "What ends a record" and "One record, one stamp, then
the sends".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..core.algebra import is_zero
from ..core.factory import fit_reason
from ..errors import (
    BufferLengthsUnequal,
    ChainModeMismatch,
    CorruptItem,
    InvalidStamp,
    NotOwner,
    OpIdReused,
    OutcomeUnknown,
    TagAcked,
    TagExpired,
    TagFailed,
    TagNotFound,
)
from .context import Context, S3Object
from .edges import child_edge, op_id
from .envelope import Envelope, Message, decode_record
from .errors import EnvelopeError, FailChain
from .parts import PipelineParts
from .sending import send_children

log = logging.getLogger("xor_ack_dynamodb.serverless")

#: A handler: does the record's work, declares children with ``ctx.emit``.
Handler = Callable[[Context], object]

#: What became of a record: ``done`` (stamped, children sent), ``retry`` (report it for
#: redelivery), ``dropped`` (its chain is over), ``failed`` (it failed its chain),
#: ``malformed`` (no usable envelope; dropped at the receive limit).
Outcome = Literal["done", "retry", "dropped", "failed", "malformed"]

#: Errors that mean the record's chain takes no more stamps: the record is dropped.
CHAIN_OVER = (TagAcked, TagFailed, TagExpired, TagNotFound, NotOwner)

#: Errors no redelivery can cure: the record's chain is failed at once with the reason.
PERMANENT = (ChainModeMismatch, BufferLengthsUnequal, InvalidStamp)


def process_sqs_batch(
    event: Mapping[str, Any], handler: Handler, *, pipeline: PipelineParts, lambda_context: Any = None
) -> dict[str, Any]:
    """Process an SQS event's records with ``handler`` (see the module doc) and return
    Lambda's partial batch response, ``{"batchItemFailures": [{"itemIdentifier": id}...]}``:
    the records to deliver again. Configure the event source mapping with
    ``FunctionResponseTypes: ["ReportBatchItemFailures"]``. From a FIFO queue, the
    records after the first one to retry are not processed and are reported too (as
    Lambda requires to keep a message group's order). Never raises for one bad record;
    raises :class:`ValueError` for an event that is not an SQS event."""
    records = event.get("Records")
    if not isinstance(records, list):
        raise ValueError("not an SQS event: no 'Records' list")
    fifo = any(str(r.get("eventSourceARN", "")).endswith(".fifo") for r in records)
    failures: list[dict[str, str]] = []
    for record in records:
        held = fifo and bool(failures)  # keep a FIFO group's order: the rest waits for the failed one
        if (
            held
            or process_record(record, handler, pipeline=pipeline, lambda_context=lambda_context) == "retry"
        ):
            failures.append({"itemIdentifier": _message_id(record)})
    return {"batchItemFailures": failures}


def _message_id(record: Mapping[str, Any]) -> str:
    return str(record.get("messageId", record.get("MessageId", "")))


def _receive_count(record: Mapping[str, Any]) -> int:
    attributes = record.get("attributes", record.get("Attributes")) or {}
    try:
        return max(1, int(attributes.get("ApproximateReceiveCount", 1)))
    except (TypeError, ValueError):
        return 1


def process_record(
    record: Mapping[str, Any], handler: Handler, *, pipeline: PipelineParts, lambda_context: Any = None
) -> Outcome:
    """One SQS record, start to end (see the module doc). Returns its outcome."""
    message_id, count = _message_id(record), _receive_count(record)
    try:
        message = decode_record(record, pipeline.mode)
    except EnvelopeError as exc:
        if count >= pipeline.max_receives:
            log.error("message %s: %s: %s; dropped after %d receives", message_id, exc.code, exc, count)
            return _count(pipeline, "malformed")
        log.error("message %s: %s: %s; left for redelivery (a DLQ keeps it)", message_id, exc.code, exc)
        return _count(pipeline, "retry")
    return process_message(
        message, message_id, count, handler, pipeline=pipeline, record=record, lambda_context=lambda_context
    )


def process_message(
    message: Message,
    message_id: str,
    receive_count: int,
    handler: Handler,
    *,
    pipeline: PipelineParts,
    record: Mapping[str, Any] | None = None,
    source: S3Object | None = None,
    lambda_context: Any = None,
) -> Outcome:
    """One decoded message (an SQS record, or an S3 object that carries an envelope):
    handler, one stamp, sends. Returns its outcome."""
    env = message.envelope
    parent = env.edge
    ctx = Context(
        tag=env.tag,
        owner=env.owner,
        mode=env.mode,
        edge=parent,
        derive=lambda i: child_edge(parent, i),
        default_queue=pipeline.queue_url,
        body=message.body,
        record=record,
        message_id=message_id,
        receive_count=receive_count,
        source=source,
        lambda_context=lambda_context,
    )
    try:
        handler(ctx)
    except FailChain as exc:
        return _count(pipeline, _fail(pipeline, ctx, f"message {message_id}: {exc.reason}"))
    except Exception as exc:
        return _count(pipeline, _handler_failed(pipeline, ctx, exc))
    return _count(pipeline, _stamp_and_send(pipeline, ctx, env))


def _handler_failed(pipeline: PipelineParts, ctx: Context, exc: Exception) -> Outcome:
    what = f"{type(exc).__name__}: {exc}"
    if ctx.receive_count >= pipeline.max_receives:
        reason = f"poison message {ctx.message_id} (received {ctx.receive_count} times): {what}"
        outcome = _fail(pipeline, ctx, reason)
        if outcome == "failed":
            pipeline.stats.add("records.poison")
        return outcome
    try:
        status = pipeline.tracker.status(ctx.tag)  # only on the error path: skip retries of a dead chain
    except TagNotFound:
        _log(logging.INFO, ctx, "dropped: the chain does not exist")
        return "dropped"
    except Exception:  # noqa: BLE001 - the status is an optimization; retry the record anyway
        status = None
    if status is not None and (status.done or (status.owner is not None and status.owner != ctx.owner)):
        _log(logging.INFO, ctx, "dropped: the chain is %s", status.state)
        return "dropped"
    receive = f"receive {ctx.receive_count} of {pipeline.max_receives}"
    _log(logging.WARNING, ctx, "failed (%s), will be retried: %s", receive, what)
    return "retry"


def _log(level: int, ctx: Context, text: str, *args: object) -> None:
    log.log(level, "%s: message %s " + text, ctx.tag, ctx.message_id, *args)


def _fail(pipeline: PipelineParts, ctx: Context, reason: str) -> Outcome:
    reason = fit_reason(reason)
    try:
        status = pipeline.tracker.fail(ctx.tag, reason, owner=ctx.owner)
    except CHAIN_OVER as exc:
        _log(logging.INFO, ctx, "dropped (%s); not failing it: %s", exc.code, reason)
        return "dropped"
    except CorruptItem as exc:
        text = "dropped: the chain's item cannot be read (%s), so it cannot be failed either; repair or "
        _log(logging.ERROR, ctx, text + "delete the item. The reason was: %s", exc, reason)
        return "dropped"
    except Exception as exc:  # noqa: BLE001 - throttling, network: fail it on the next delivery
        _log(logging.WARNING, ctx, "could not fail the chain (%r), will be retried", exc)
        return "retry"
    if status.reason != reason:
        _log(logging.INFO, ctx, "dropped: the chain had failed already (%s)", status.reason)
        return "dropped"
    log.error("%s: chain failed: %s", ctx.tag, reason)
    return "failed"


def _stamp_and_send(pipeline: PipelineParts, ctx: Context, env: Envelope) -> Outcome:
    assert ctx.edge is not None
    children = ctx.children
    own = op_id(ctx.edge)
    try:
        result = pipeline.tracker.stamp(
            ctx.tag,
            finished=[ctx.edge],
            started=[c.edge for c in children],
            op_id=own,
            owner=ctx.owner,
            after=env.after,
        )
    except CHAIN_OVER as exc:
        _log(logging.INFO, ctx, "dropped: %s: %s", exc.code, exc)
        return "dropped"
    except OpIdReused:
        return _fail(
            pipeline,
            ctx,
            f"handler not deterministic: message {ctx.message_id} emitted {len(children)} children, "
            "not as many as on its earlier delivery",
        )
    except OutcomeUnknown as exc:
        return _fail(pipeline, ctx, f"message {ctx.message_id}: {exc}")
    except PERMANENT as exc:
        return _fail(pipeline, ctx, f"message {ctx.message_id} can never be applied: {exc.code}: {exc}")
    except CorruptItem as exc:
        if ctx.receive_count >= pipeline.max_receives:
            return _fail(pipeline, ctx, f"message {ctx.message_id}: the chain's item cannot be read: {exc}")
        receive = f"receive {ctx.receive_count} of {pipeline.max_receives}"
        _log(logging.WARNING, ctx, "will be retried (%s): the chain's item cannot be read (%s)", receive, exc)
        return "retry"
    except Exception as exc:  # noqa: BLE001 - lost races past the budget, throttling, network
        _log(logging.WARNING, ctx, "failed its stamp, will be retried: %r", exc)
        return "retry"
    pipeline.stats.add("stamps.duplicate" if result.duplicate else "stamps.applied")
    if result.acked:
        _log(logging.INFO, ctx, "completed the chain (its completion fires from the stream)")
        return "done"
    if is_zero(result):
        _log(logging.INFO, ctx, "is a late copy; the chain is complete")
        return "dropped"
    # No copy of a child lands before this op did: where it landed (a duplicate found in
    # history names none; this record's own bound is then theirs too).
    after = result.position if result.position is not None else env.after
    try:
        send_children(children, after, pipeline)
    except Exception as exc:  # noqa: BLE001 - the redelivery's duplicate stamp re-sends them
        _log(logging.WARNING, ctx, "did not send all its children, will be retried: %r", exc)
        return "retry"
    if result.duplicate:
        _log(logging.INFO, ctx, "was applied before; its %d children sent again", len(children))
    return "done"


_EVENTS = {
    "done": "records.done",
    "retry": "records.retried",
    "dropped": "records.dropped",
    "failed": "records.failed_chain",
    "malformed": "records.malformed",
}


def _count(pipeline: PipelineParts, outcome: Outcome) -> Outcome:
    pipeline.stats.add(_EVENTS[outcome])
    return outcome
