"""Tracked serverless pipelines: SQS/Lambda fan-outs whose completion is one ack chain.

A chain starts (:func:`start`, or an S3 upload through :func:`process_s3_event`) with the
edges of its first messages; each SQS-triggered handler does its work and declares
children with ``ctx.emit(body)``; :func:`process_sqs_batch` stamps once per record
(finishing its edge, starting its children's), sends the children, and fires the
completion once when the chain reaches zero::

    from xor_ack_dynamodb.serverless import Pipeline

    pipeline = None

    def handler(event, context):              # SQS trigger, ReportBatchItemFailures
        global pipeline
        pipeline = pipeline or Pipeline.from_env()
        return pipeline.process_sqs_batch(event, work, context)

    def work(ctx):
        job = ctx.json()
        for part in split(job):
            ctx.emit(part)                    # sent after this record's stamp

Guarantees (details in each module): every message carries a versioned, validated
envelope (:mod:`.envelope`); edges and op ids are derived, so redelivered messages,
retried handlers, re-sent children and redelivered S3 events are applied once
(:mod:`.edges`); the stamp lands before the sends, so a crash loses nothing and acks
nothing early (:mod:`.records`, run per record by :mod:`.sqs`); a record that keeps
failing fails its chain with the reason, records of finished chains are dropped with a
log line; chains start in :mod:`.starts`; the completion fires once per chain
(:mod:`.completion`); chains to replay are found by :mod:`.replay`.

The default mode is ``sum``: a fan-out's functions stamp one chain concurrently, and a
sum-mode stamp is one atomic ``UpdateItem`` that never loses a race. ``xor`` works too
(the Node package's layout), at the cost of read-modify-write races on hot chains.
AWS Lambda Powertools is optional: :meth:`Pipeline.record_handler` plugs a handler into
its ``BatchProcessor`` (see ``docs/lambda.md``).
"""

from __future__ import annotations

from .completion import (
    Completion,
    CompletionGuard,
    DynamoDBGuard,
    EventBridgeTarget,
    MemoryGuard,
    SqsTarget,
    Target,
)
from .context import Child, Context, S3Object
from .edges import child_edge, op_id, owner_for, start_edge
from .envelope import (
    ATTRIBUTE,
    VERSION,
    Envelope,
    Message,
    decode_body_form,
    decode_record,
    decode_s3_metadata,
    from_json,
)
from .errors import (
    CompletionPending,
    EnvelopeError,
    EnvelopeModeMismatch,
    FailChain,
    MalformedEnvelope,
    MissingEnvelope,
    RetryRecord,
    TargetFailed,
    UnsupportedEnvelopeVersion,
)
from .pipeline import Pipeline, PipelineConfig
from .records import CHAIN_OVER, Handler, Outcome, process_record
from .replay import Unfinished, scan_unfinished, unfinished, unfinished_objects
from .sending import ChildrenNotSent
from .sqs import process_sqs_batch
from .starts import Started, process_s3_event, s3_objects, start

__all__ = [
    "ATTRIBUTE",
    "CHAIN_OVER",
    "VERSION",
    "Child",
    "ChildrenNotSent",
    "Completion",
    "CompletionGuard",
    "CompletionPending",
    "Context",
    "DynamoDBGuard",
    "Envelope",
    "EnvelopeError",
    "EnvelopeModeMismatch",
    "EventBridgeTarget",
    "FailChain",
    "Handler",
    "MalformedEnvelope",
    "MemoryGuard",
    "Message",
    "MissingEnvelope",
    "Outcome",
    "Pipeline",
    "PipelineConfig",
    "RetryRecord",
    "S3Object",
    "SqsTarget",
    "Started",
    "Target",
    "TargetFailed",
    "Unfinished",
    "UnsupportedEnvelopeVersion",
    "child_edge",
    "decode_body_form",
    "decode_record",
    "decode_s3_metadata",
    "from_json",
    "op_id",
    "owner_for",
    "process_record",
    "process_s3_event",
    "process_sqs_batch",
    "s3_objects",
    "scan_unfinished",
    "start",
    "start_edge",
    "unfinished",
    "unfinished_objects",
]
