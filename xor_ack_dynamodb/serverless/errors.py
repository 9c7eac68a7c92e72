"""The errors of the serverless layer, under the library's :class:`XorAckError`.
Envelope errors are bad input: they derive from ``ValueError`` and are raised before any
request is sent.
"""

from __future__ import annotations

from ..errors import XorAckError


class EnvelopeError(XorAckError, ValueError):
    """A message does not carry a usable envelope (the chain's tag, the message's edge
    and the chain's owner)."""


class MissingEnvelope(EnvelopeError):
    """The message carries no envelope at all: no ``xor-ack`` message attribute, no JSON
    body form, no ``xor-ack`` S3 object metadata. Probably a message sent by something
    other than this library to a tracked queue."""


class MalformedEnvelope(EnvelopeError):
    """The envelope is there but cannot be read: not JSON, a field missing or of the
    wrong type, an edge out of range, a tag DynamoDB would refuse."""


class UnsupportedEnvelopeVersion(MalformedEnvelope):
    """The envelope's ``v`` is a version this library does not read (a newer writer)."""


class EnvelopeModeMismatch(MalformedEnvelope):
    """The envelope's edge counts in the other mode (an xor edge for a sum-mode pipeline
    or the reverse): producers and workers of one pipeline must agree on the mode."""


class RetryRecord(XorAckError):
    """Raised by :meth:`Pipeline.record_handler` (the Powertools-compatible record
    function), and by :func:`process_s3_event` for an S3-carried record, for a record
    that should be delivered again."""


class FailChain(XorAckError):
    """Raise it from a handler to fail the record's chain at once with ``reason`` (data
    that can never be processed: no point in retrying). The record is then dropped."""

    def __init__(self, reason: str, *, tag: str | None = None) -> None:
        super().__init__(reason, tag=tag)
        self.reason = reason


class CompletionPending(XorAckError):
    """Another delivery holds the chain's completion claim and its lease has not run
    out: the record is retried, and fires the completion itself if that delivery died."""


class TargetFailed(XorAckError):
    """A completion target (an SQS queue, an EventBridge bus) refused the completion.
    The claim is released and the record retried."""
