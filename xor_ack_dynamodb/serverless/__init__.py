"""Tracked serverless pipelines: SQS/Lambda fan-outs whose completion is one ack chain
(docs/lambda.md). Redelivered messages, retried handlers, re-sent children and
redelivered S3 events are applied once; a crash loses nothing and acks nothing early; a
record that keeps failing fails its chain with the reason; the completion fires once,
from the chain table's stream. This namespace holds what a pipeline's code calls; the
pieces it is built of stay importable from their modules.
"""

from __future__ import annotations

from .completion import Completion, EventBridgeTarget, SqsTarget
from .context import Context
from .envelope import Envelope
from .errors import (
    EnvelopeError,
    EnvelopeModeMismatch,
    FailChain,
    MalformedEnvelope,
    MissingEnvelope,
    RetryRecord,
    UnsupportedEnvelopeVersion,
)
from .pipeline import Pipeline, PipelineConfig
from .poller import StreamPoller
from .records import process_sqs_batch
from .replay import Unfinished, scan_unfinished, unfinished, unfinished_objects
from .sending import ChildrenNotSent
from .starts import Started, process_s3_event, start
from .stream import process_chain_stream

__all__ = [
    # the pipeline, its configuration, what a handler sees
    "Pipeline",
    "PipelineConfig",
    "Context",
    # the entry points (also methods of Pipeline)
    "process_sqs_batch",
    "process_s3_event",
    "process_chain_stream",
    "start",
    "Started",
    "StreamPoller",
    # completion and its targets
    "Completion",
    "SqsTarget",
    "EventBridgeTarget",
    # chains to replay
    "unfinished",
    "unfinished_objects",
    "scan_unfinished",
    "Unfinished",
    # the envelope a tracked message carries, and the errors a caller may catch
    "Envelope",
    "FailChain",
    "RetryRecord",
    "ChildrenNotSent",
    "EnvelopeError",
    "MissingEnvelope",
    "MalformedEnvelope",
    "UnsupportedEnvelopeVersion",
    "EnvelopeModeMismatch",
]
