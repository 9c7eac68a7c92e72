"""One tracked record, start to end: the unit that :mod:`.sqs`'s batch loop runs per
record. One stamp per record, then its children.

For each record:

1. **Read the envelope** (:func:`~.envelope.decode_record`). Missing or malformed: the
   handler is not called and no chain is touched; the record is reported for
   redelivery (so a DLQ keeps it) until ``max_receives``, then dropped with an error
   log line.
2. **Run the handler** ``handler(ctx)``. It does the work and declares children with
   ``ctx.emit(body)``; nothing is stamped or sent yet. If it raises, nothing happens to
   the chain and the record is retried; at ``ApproximateReceiveCount >= max_receives``
   (a poison message) the chain is failed with the reason and the record dropped. If
   the chain turns out to be over already, the record is dropped at once.
   ``raise FailChain(reason)`` fails the chain without retrying.
3. **One stamp** finishes the record's edge and starts its children's, with the op id
   derived from the record's edge and ``owner=`` the envelope's owner:
   ``stamp(tag, finished=[edge], started=[c1, c2...], op_id="edge:<edge>", owner=...)``.
4. **Then send the children** (SQS ``SendMessageBatch``; S3 ``PutObject`` for objects).
5. If the stamp returned ``acked``, fire the completion (once per chain, see
   :mod:`.completion`).

Why stamp before send, and what a crash between them does:

* *Crash after the stamp, before or during the sends:* the children's edges are in the
  chain, so it cannot reach zero (nothing is acked early); the record was not deleted,
  so SQS redelivers it; the handler runs again and emits the same edges (derived from
  the record's edge and their position); the stamp is a duplicate (same op id, same
  payload), applied once; the children are sent. Nothing lost. If the redeliveries run
  out, the chain expires and is reported: never a false ack.
* *Crash before the stamp:* nothing happened; the redelivery starts over.
* The other order (send, then stamp) would also never ack early (the sum or XOR is
  order-free), but a child could finish before its start is recorded, and a crash
  would leave children running on a chain that does not know them until the parent's
  redelivery. Stamp-then-send keeps the chain's value an upper bound of the work
  outstanding at every moment.

A redelivered record whose stamp is a duplicate re-sends its children, because it cannot
know whether its first attempt's sends completed: copies of a child are applied once
(same edge, same op id) but their handlers do run again: make handlers idempotent, as
any SQS consumer must. Records of a chain that is acked, failed, expired, missing or of
another owner are dropped with an INFO log line.

A handler must emit the same *number* of children on every attempt (their bodies may
differ): the stamp's payload is its edges, and the chain refuses an op id seen with
another payload (:class:`~xor_ack_dynamodb.errors.OpIdReused`), which fails the chain
with the reason "handler not deterministic".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..core.algebra import Mode
from ..errors import NotOwner, OpIdReused, OutcomeUnknown, TagAcked, TagExpired, TagFailed, TagNotFound
from .completion import Completion, fire_once
from .context import Context, S3Object
from .edges import child_edge, op_id
from .envelope import Message, decode_record
from .errors import CompletionPending, EnvelopeError, FailChain
from .parts import PipelineParts
from .sending import send_children

__all__ = ["CHAIN_OVER", "Handler", "Outcome", "complete", "process_message", "process_record"]

log = logging.getLogger("xor_ack_dynamodb.serverless")

#: A handler: does the record's work, declares children with ``ctx.emit``.
Handler = Callable[[Context], object]

#: What became of a record: ``done`` (stamped, children sent), ``retry`` (report it for
#: redelivery), ``dropped`` (its chain is over), ``failed`` (it failed its chain),
#: ``malformed`` (no usable envelope; dropped at the receive limit).
Outcome = Literal["done", "retry", "dropped", "failed", "malformed"]

#: Errors that mean the record's chain takes no more stamps: the record is dropped.
CHAIN_OVER = (TagAcked, TagFailed, TagExpired, TagNotFound, NotOwner)


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
    message_id, count = str(record.get("messageId", record.get("MessageId", ""))), _receive_count(record)
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
    handler, one stamp, sends, completion. Returns its outcome."""
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
    return _count(pipeline, _stamp_and_send(pipeline, ctx))


def _handler_failed(pipeline: PipelineParts, ctx: Context, exc: Exception) -> Outcome:
    what = f"{type(exc).__name__}: {exc}"
    if ctx.receive_count >= pipeline.max_receives:
        reason = f"poison message {ctx.message_id} (received {ctx.receive_count} times): {what}"
        return _fail(pipeline, ctx, reason)
    try:
        status = pipeline.tracker.status(ctx.tag)  # only on the error path: skip retries of a dead chain
    except TagNotFound:
        log.info("%s: message %s dropped: the chain does not exist", ctx.tag, ctx.message_id)
        return "dropped"
    except Exception:  # noqa: BLE001 - the status is an optimization; retry the record anyway
        status = None
    if status is not None and (status.done or (status.owner is not None and status.owner != ctx.owner)):
        log.info("%s: message %s dropped: the chain is %s", ctx.tag, ctx.message_id, status.state)
        return "dropped"
    log.warning(
        "%s: message %s failed (receive %d of %d), will be retried: %s",
        ctx.tag,
        ctx.message_id,
        ctx.receive_count,
        pipeline.max_receives,
        what,
    )
    return "retry"


def _fail(pipeline: PipelineParts, ctx: Context, reason: str) -> Outcome:
    try:
        status = pipeline.tracker.fail(ctx.tag, reason, owner=ctx.owner)
    except CHAIN_OVER as exc:
        log.info("%s: message %s dropped (%s); not failing it: %s", ctx.tag, ctx.message_id, exc.code, reason)
        return "dropped"
    except Exception as exc:  # noqa: BLE001 - throttling, network: fail it on the next delivery
        log.warning(
            "%s: could not fail the chain (%r); message %s will be retried", ctx.tag, exc, ctx.message_id
        )
        return "retry"
    if status.reason != reason[:1024]:
        log.info(
            "%s: message %s dropped: the chain had failed already (%s)",
            ctx.tag,
            ctx.message_id,
            status.reason,
        )
        return "dropped"
    log.error("%s: chain failed: %s", ctx.tag, reason)
    return "failed"


def _stamp_and_send(pipeline: PipelineParts, ctx: Context) -> Outcome:
    assert ctx.edge is not None
    children = ctx.children
    try:
        result = pipeline.tracker.stamp(
            ctx.tag,
            finished=[ctx.edge],
            started=[c.edge for c in children],
            op_id=op_id(ctx.edge),
            owner=ctx.owner,
        )
    except CHAIN_OVER as exc:
        log.info("%s: message %s dropped: %s: %s", ctx.tag, ctx.message_id, exc.code, exc)
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
    except Exception as exc:  # noqa: BLE001 - lost races past the budget, throttling, network
        log.warning("%s: stamp of message %s failed, will be retried: %r", ctx.tag, ctx.message_id, exc)
        return "retry"
    if result.acked:
        return _complete(pipeline, ctx)
    if _is_zero(result):
        log.info("%s: message %s is a late copy; the chain is complete", ctx.tag, ctx.message_id)
        return "dropped"
    try:
        send_children(children, client=pipeline.client, stats=pipeline.stats)
    except Exception as exc:  # noqa: BLE001 - the redelivery's duplicate stamp re-sends them
        log.warning(
            "%s: children of message %s not all sent, will be retried: %r", ctx.tag, ctx.message_id, exc
        )
        return "retry"
    if result.duplicate:
        log.info(
            "%s: message %s was applied before; its %d children sent again",
            ctx.tag,
            ctx.message_id,
            len(children),
        )
    return "done"


def _is_zero(value: object) -> bool:
    return value == 0 if isinstance(value, int) else isinstance(value, bytes) and not any(value)


def _complete(pipeline: PipelineParts, ctx: Context) -> Outcome:
    try:
        complete(pipeline, ctx.tag, ctx.owner, ctx.mode, ctx.message_id)
    except CompletionPending as exc:
        log.info("%s: %s; message %s will be retried", ctx.tag, exc, ctx.message_id)
        return "retry"
    except Exception as exc:  # noqa: BLE001 - a target refused: the claim was released
        log.warning("%s: completion failed (%r); message %s will be retried", ctx.tag, exc, ctx.message_id)
        return "retry"
    return "done"


def complete(
    pipeline: PipelineParts, tag: str, owner: str, mode: Mode, message_id: str | None = None
) -> bool:
    """Fire the completion of the acked chain ``tag`` once (:func:`~.completion.fire_once`)
    and count it; True if this call fired it. Raises what ``fire_once`` raises."""
    completion = Completion(tag, owner, mode, pipeline.now(), message_id)
    fired = fire_once(
        pipeline.guard, pipeline.targets, completion, now=pipeline.now(), lease=pipeline.completion_lease
    )
    pipeline.stats.add("completions.fired" if fired else "completions.repeated")
    return fired


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
