"""The error hierarchy.

Every error the library raises on purpose derives from :class:`XorAckError` and carries
``.code``, the class name, as the Node package's errors do, and ``.tag`` where a chain is
involved. Errors that mean "the caller passed bad input" also derive from ``ValueError``
(or ``TypeError`` for a value of the wrong type), and are raised before any request is
sent, so nothing is written.

A request that fails below the service's own answers (no connection, a timeout, an
answer that is not the service's, IAM's refusal) raises a :class:`RequestFailed`
subclass naming the service, the region and the endpoint, botocore's exception as its
``__cause__`` where botocore raised one; a mistyped region raises
:class:`UnknownRegion` when the client is built. Service errors the library does not
interpret (a throttle that outlasts the retry budget) propagate as botocore's
``ClientError``.
"""

from __future__ import annotations

__all__ = [
    "XorAckError",
    "BufferLengthsUnequal",
    "LessThanTwoBuffers",
    "ZeroBufferNoOp",
    "InvalidTag",
    "InvalidTagType",
    "InvalidStamp",
    "InvalidStampType",
    "InvalidConfig",
    "StaleLocalData",
    "TagExists",
    "TagNotFound",
    "TagFailed",
    "TagExpired",
    "TagAcked",
    "TableNotFound",
    "TableSchemaMismatch",
    "CorruptItem",
    "UnmigratedItem",
    "BatchIncomplete",
    "OpIdReused",
    "NotOwner",
    "ChainModeMismatch",
    "OutcomeUnknown",
    "UnknownRegion",
    "RequestFailed",
    "EndpointUnreachable",
    "ConnectTimeout",
    "ResponseLost",
    "ReadTimeout",
    "BadResponse",
    "AccessDenied",
]


class XorAckError(Exception):
    """Base of every error this library raises on purpose."""

    def __init__(self, message: str, *, tag: str | None = None) -> None:
        super().__init__(message)
        self.tag = tag

    @property
    def code(self) -> str:
        """The class name, like the Node package's ``error.code``."""
        return type(self).__name__

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only ``tag`` (and a subclass's own attributes, in ``__dict__``) would be
        # lost by the default exception pickling, and these errors cross process
        # boundaries (Spark executors, multiprocessing).
        return (_rebuild, (type(self), str(self), self.tag), self.__dict__)


def _rebuild(cls: type[XorAckError], message: str, tag: str | None) -> XorAckError:
    return cls(message, tag=tag)


# Bad input: raised before any request is sent.


class BufferLengthsUnequal(XorAckError, ValueError):
    """Stamps of different lengths were XORed, or a stamp's length differs from the
    chain's stored stamp. Probably a programming bug."""


class LessThanTwoBuffers(XorAckError, ValueError):
    """``xor()`` was given fewer than two stamps. Probably a programming bug."""


class ZeroBufferNoOp(XorAckError, ValueError):
    """An all-zero stamp was passed to ``create()`` or ``stamp()``: it would change
    nothing (or create a chain that is already complete). Probably a programming bug."""


class InvalidTag(XorAckError, ValueError):
    """The tag is not a non-empty ``str`` that encodes to at most 2048 bytes of UTF-8
    (DynamoDB's limit for a partition key). A tag of the wrong type also derives from
    ``TypeError`` (see :class:`InvalidTagType`)."""


class InvalidTagType(InvalidTag, TypeError):
    """The tag is not a ``str``."""


class InvalidStamp(XorAckError, ValueError):
    """The stamp is empty or larger than the library allows (``MAX_STAMP_BYTES``)."""


class InvalidStampType(InvalidStamp, TypeError):
    """The stamp is not bytes-like (``bytes``, ``bytearray``, ``memoryview``)."""


class InvalidConfig(XorAckError, ValueError):
    """A constructor argument is out of range: a table name DynamoDB would reject, an
    empty partition key name, a non-positive ttl, a retry budget below one attempt."""


class UnknownRegion(InvalidConfig):
    """The region is not one botocore knows and its endpoint's host name does not
    resolve: a typo such as ``eu-wst-1``. Raised when the client is built (or, for a
    client you built, on its first request, without the retry budget's retries);
    nothing was sent. A region newer than the installed botocore whose endpoint
    resolves is accepted."""


# Chain state: raised after reading the chain, never after a partial write.


class StaleLocalData(XorAckError):
    """``stamp()`` lost the optimistic-concurrency race on every attempt of its retry
    budget. Nothing was applied by the failed attempts; retrying the same call with the
    same ``op_id`` is safe."""


class TagExists(XorAckError):
    """``create()`` found a live chain (pending, or finished and still within its
    retention) with that tag. A chain whose expiry has passed is overwritten instead."""


class TagNotFound(XorAckError):
    """No chain with that tag exists (never created, deleted, or removed by TTL)."""


class TagFailed(XorAckError):
    """The chain was marked failed; it takes no more stamps."""

    def __init__(self, message: str, *, tag: str | None = None, reason: str | None = None):
        super().__init__(message, tag=tag)
        self.reason = reason


class OpIdReused(XorAckError, ValueError):
    """An op id the chain has already applied came again with a different payload (a
    different stamp, or a create with another value). An op id names one stamp; reusing
    it for another is a caller bug, and applying either would be wrong. Nothing was
    written."""


class NotOwner(XorAckError):
    """The chain belongs to another owner than the one the call named (``owner=``): a
    chain this caller did not create and was not handed. Nothing was written."""


class ChainModeMismatch(XorAckError):
    """The chain counts in the other mode (an XOR chain stamped by a sum-mode tracker,
    or the reverse). Trackers sharing a table must agree on each chain's mode."""


class OutcomeUnknown(XorAckError):
    """An earlier attempt of this call may or may not have been applied (its response
    was lost), and the chain's history no longer tells: another writer (the Node
    package's PutItem) reset it, the chain was re-created, or more ops than the chain's
    window landed since. Applying the stamp again could apply it twice, so nothing more
    was written. Treat the chain as failed (replay its root)."""


class TagExpired(XorAckError):
    """The chain's ``expires_at`` has passed while it was pending: it timed out, and is
    to be reported and replayed, never counted as done."""


class TagAcked(XorAckError):
    """The chain already reached zero. A stamp carrying an op id that the chain already
    applied is not an error: it returns the stored value instead."""


# Table and item problems.


class TableNotFound(XorAckError):
    """The table does not exist in this account and region (or at this endpoint)."""


class TableSchemaMismatch(XorAckError):
    """The table exists but its key schema is not a single String partition key with
    the configured name."""


class CorruptItem(XorAckError):
    """The chain's item holds an attribute of a type this library cannot read (for
    example a ``stamp`` that is not Binary, or a TTL attribute that is not a Number).
    Nothing was written to it."""


class UnmigratedItem(CorruptItem):
    """The chain's item was written by this library's 0.1 layout (op ids without a
    lineage): run ``xor-ack migrate`` once (:func:`~xor_ack_dynamodb.stores.dynamodb.migrate.migrate_table`)
    before this version uses the table. Nothing was written to it."""


class BatchIncomplete(XorAckError):
    """``status_many()`` still had unprocessed keys when its retry budget was spent."""


# The network: a request that got no answer from the service.


class RequestFailed(XorAckError):
    """A request to AWS got no answer from the service that the library can decide
    from: see the subclasses for whether it may have been applied. ``service``,
    ``operation``, ``region`` and ``endpoint`` name the request (the message too);
    ``__cause__`` is botocore's exception where it raised one.
    Raised once the retries are spent: botocore's resends, then (for a tracker's own
    requests) the retry budget's attempts, which resend a write only with the guards
    that keep it from being applied twice."""

    def __init__(
        self,
        message: str,
        *,
        tag: str | None = None,
        service: str | None = None,
        operation: str | None = None,
        region: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        super().__init__(message, tag=tag)
        self.service = service
        self.operation = operation
        self.region = region
        self.endpoint = endpoint


class EndpointUnreachable(RequestFailed):
    """No connection to the endpoint could be made (refused, a host name that does not
    resolve, a proxy or TLS failure): the request never reached the service, so it was
    not applied."""


class ConnectTimeout(EndpointUnreachable):
    """Connecting to the endpoint took longer than the client's connect timeout: the
    request was not sent, so it was not applied."""


class ResponseLost(RequestFailed):
    """The request was sent and its response was lost (the connection closed, or the
    body did not match its checksum): it may or may not have been applied. A
    tracker's write is recognised when sent again with the same ``op_id``, so
    calling again tells (``duplicate`` if it landed)."""


class ReadTimeout(ResponseLost):
    """The request was sent and no response came within the client's read timeout: it
    may or may not have been applied (see :class:`ResponseLost`)."""


class BadResponse(RequestFailed):
    """The endpoint answered with something that is not the service's answer: an HTTP
    status of 300 and up with no AWS error in its body (an HTML page from a proxy, an
    empty 404, a wrong endpoint, a local emulator that does not serve this region), or
    an HTTP 200 whose body does not have the shape of the service's answer to that
    request (``{}``, an HTML page). Nothing is decided from it: no chain is reported
    created, stamped or acked. Whether the request was applied is not known; calling
    again with the same ``op_id`` tells. Not retried: an endpoint that answers so is
    misconfigured, not busy."""


class AccessDenied(RequestFailed):
    """IAM refused the request (``AccessDeniedException``): the caller's identity lacks
    the action on the table. Nothing was applied. Not retried: it needs a policy change
    (docs/security.md lists what each role needs)."""
