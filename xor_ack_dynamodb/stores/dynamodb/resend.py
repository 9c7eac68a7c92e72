"""Keeping botocore from resending a write whose first copy may have landed.

botocore sends a request again after a lost connection, a read timeout, a 5xx or a
DynamoDB response whose checksum does not match, and the copy carries the first one's
condition unchanged. For a sum-mode ``ADD`` that is a second application waiting to
happen: its ``NOT contains(ops, :op)`` only sees the op list's window, so a copy that
lands after the first copy's op moved to history (60 other stamps on a busy chain take
a fraction of a second) is applied again, and the call returns normally.

So the store sends ``ADD``s inside :func:`no_resend`, and a ``needs-retry`` handler,
registered first on the client (one the library built or one the user passed in),
stops botocore from resending them after any of those outcomes: the error reaches the
call, which treats the outcome as unknown and sends its own copy with the guard that
makes it exact (``core/stamping.py``). Throttles and refused connections, which DynamoDB
never applied, are left to botocore's own resends. Every other request is untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from zlib import crc32

from botocore.exceptions import ChecksumError, ClientError, ConnectTimeoutError, EndpointConnectionError

__all__ = ["NoResend", "AsyncNoResend", "no_resend", "HANDLER_ID", "EVENT"]

#: The event the handler answers: botocore asks it before every resend of an UpdateItem.
EVENT = "needs-retry.dynamodb.UpdateItem"
#: Registering twice with this id is a no-op.
HANDLER_ID = "xor_ack_dynamodb.no-resend"

_ACTIVE: ContextVar[bool] = ContextVar("xor_ack_dynamodb_no_resend", default=False)


class NoResend:
    """The handler for botocore clients."""

    @staticmethod
    def install(client: Any) -> None:
        """Register the handler first on ``client``'s events (idempotent)."""
        client.meta.events.register_first(EVENT, _needs_retry, unique_id=HANDLER_ID)


class AsyncNoResend:
    """The handler for aiobotocore clients (whose response bodies are awaited)."""

    @staticmethod
    def install(client: Any) -> None:
        """Register the handler first on ``client``'s events (idempotent)."""
        client.meta.events.register_first(EVENT, _async_needs_retry, unique_id=HANDLER_ID)


@contextmanager
def no_resend() -> Iterator[None]:
    """Requests sent inside (in this thread or task) are not resent by botocore after
    an outcome that may have been applied."""
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def _needs_retry(
    response: Any = None, caught_exception: Any = None, attempts: int = 1, operation: Any = None, **_: Any
) -> None:
    """botocore's ``needs-retry`` question, for a request sent inside
    :func:`no_resend`: raise what the caller should see instead of letting botocore
    resend, when the request may have been applied; None (botocore decides) otherwise."""
    if _stop(response, caught_exception, attempts, operation):
        _check_body(response[0], response[0].content)


async def _async_needs_retry(
    response: Any = None, caught_exception: Any = None, attempts: int = 1, operation: Any = None, **_: Any
) -> None:
    """:func:`_needs_retry` for aiobotocore."""
    if _stop(response, caught_exception, attempts, operation):
        _check_body(response[0], await response[0].content)


def _stop(response: Any, caught_exception: Any, attempts: int, operation: Any) -> bool:
    """Raise for an outcome that may have been applied; True when the answer is a
    success whose body is still to be checked."""
    if not _ACTIVE.get():
        return False
    if caught_exception is not None:
        if isinstance(caught_exception, (EndpointConnectionError, ConnectTimeoutError)):
            return False  # never reached DynamoDB
        raise caught_exception
    if response is None:
        return False
    http, parsed = response
    status = int(getattr(http, "status_code", 0) or 0)
    if status >= 500:
        parsed.setdefault("ResponseMetadata", {})["RetryAttempts"] = attempts - 1
        raise ClientError(parsed, getattr(operation, "name", "UpdateItem"))
    return status < 300 and getattr(http, "headers", {}).get("x-amz-crc32") is not None


def _check_body(http: Any, content: bytes) -> None:
    """A success whose body does not match DynamoDB's checksum: botocore would resend
    a request that was applied."""
    expected = http.headers.get("x-amz-crc32")
    actual = str(crc32(content) & 0xFFFFFFFF)
    if actual != str(int(expected)):
        raise ChecksumError(checksum_type="crc32", expected_checksum=expected, actual_checksum=actual)
