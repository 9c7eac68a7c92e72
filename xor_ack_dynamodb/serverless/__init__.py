"""Tracked serverless pipelines: SQS/Lambda fan-outs whose completion is one ack chain.

A chain starts (:func:`start`, or an S3 upload through :func:`process_s3_event`) with the
edges of its first messages; each SQS-triggered handler declares children with
``ctx.emit(body)``; :func:`process_sqs_batch` stamps once per record and then sends the
children; the chain table's stream fires the completion once, whoever stamped last
(:meth:`Pipeline.process_chain_stream`). Redelivered messages, retried handlers, re-sent
children and redelivered S3 events are applied once; a crash loses nothing and acks
nothing early; a record that keeps failing fails its chain with the reason. The default
mode is ``sum`` (one atomic ``UpdateItem`` a stamp, no races between functions).

Modules: :mod:`.envelope`, :mod:`.edges`, :mod:`.records` (run per record by
:mod:`.sqs`), :mod:`.starts`, :mod:`.stream`, :mod:`.completion`,
:mod:`.poller`, :mod:`.metrics`, :mod:`.replay`. See docs/lambda.md.
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
from .poller import StreamPoller, streams_client
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
    "streams_client",
    "unfinished",
    "unfinished_objects",
]
