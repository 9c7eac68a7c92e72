"""Tracked serverless pipelines: SQS/Lambda fan-outs whose completion is one ack chain.

A chain starts (:func:`start`, or an S3 upload through :func:`process_s3_event`) with the
edges of its first messages; each SQS-triggered handler does its work and declares
children with ``ctx.emit(body)``; :func:`process_sqs_batch` stamps once per record
(finishing its edge, starting its children's) and sends the children; the chain table's
DynamoDB stream fires the completion once when the chain reaches zero, whoever stamped
it last (:meth:`Pipeline.process_chain_stream`, the handler of a second function on the
stream)::

    from xor_ack_dynamodb.serverless import Pipeline

    pipeline = None

    def handler(event, context):              # SQS trigger, ReportBatchItemFailures
        global pipeline
        pipeline = pipeline or Pipeline.from_env()
        return pipeline.process_sqs_batch(event, work, context)

    def on_chain_stream(event, context):      # the table's stream, ReportBatchItemFailures
        global pipeline
        pipeline = pipeline or Pipeline.from_env()
        return pipeline.process_chain_stream(event)

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
log line; chains start in :mod:`.starts`; the completion fires once per chain from the
table's stream (:mod:`.stream`, :mod:`.completion`; :mod:`.poller` reads the stream
without Lambda); counters go to CloudWatch as EMF through Powertools Metrics when it is
installed (:mod:`.metrics`); chains to replay are found by :mod:`.replay`.

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
    Lineage,
    MemoryGuard,
    SqsTarget,
    Target,
)
from .context import Child, Context, S3Object
from .edges import OWNER_PREFIX, child_edge, op_id, owner_for, start_edge
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
from .metrics import METRICS, MetricsPublisher
from .pipeline import Pipeline, PipelineConfig
from .poller import StreamPoller
from .records import CHAIN_OVER, PERMANENT, Handler, Outcome, process_record
from .replay import Unfinished, scan_unfinished, unfinished, unfinished_objects
from .sending import ChildrenNotSent
from .sqs import process_sqs_batch
from .starts import Started, process_s3_event, s3_objects, start
from .stream import ChainFilter, Change, owned_by_pipelines, process_chain_stream, read_change

__all__ = [
    "ATTRIBUTE",
    "CHAIN_OVER",
    "METRICS",
    "OWNER_PREFIX",
    "PERMANENT",
    "VERSION",
    "ChainFilter",
    "Change",
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
    "Lineage",
    "MalformedEnvelope",
    "MemoryGuard",
    "Message",
    "MetricsPublisher",
    "MissingEnvelope",
    "Outcome",
    "Pipeline",
    "PipelineConfig",
    "RetryRecord",
    "S3Object",
    "SqsTarget",
    "Started",
    "StreamPoller",
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
    "owned_by_pipelines",
    "owner_for",
    "process_chain_stream",
    "process_record",
    "process_s3_event",
    "process_sqs_batch",
    "read_change",
    "s3_objects",
    "scan_unfinished",
    "start",
    "start_edge",
    "unfinished",
    "unfinished_objects",
]
