"""Keeping botocore from resending a write whose bytes must not be sent again: a sum
``ADD`` (a late copy could land after its op left the window) and every write that tests
the deadline (a late copy carries a stale ``:now``: docs/expiry.md, "Clocks and the skew
margin"). The store sends those inside :func:`no_resend`, and a ``needs-retry`` handler
registered first for :data:`EVENTS` raises any failure instead of resending: the call
decides again and sends a new request, dated anew.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ClassVar
from zlib import crc32

from botocore.exceptions import ChecksumError, ClientError

from .codec import TRANSIENT_CODES

#: The events the handler answers: botocore asks them before every resend of a request
#: of these operations (the conditional writes; a GetItem is resent freely).
EVENTS = tuple(f"needs-retry.dynamodb.{op}" for op in ("UpdateItem", "PutItem", "TransactWriteItems"))
#: Registering twice with this id is a no-op.
HANDLER_ID = "xor_ack_dynamodb.no-resend"

_ACTIVE: ContextVar[bool] = ContextVar("xor_ack_dynamodb_no_resend", default=False)


@contextmanager
def no_resend() -> Iterator[None]:
    """Requests sent inside (in this thread or task) are never resent by botocore: the
    failure that would have made it resend is raised instead."""
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def _needs_retry(
    response: Any = None, caught_exception: Any = None, attempts: int = 1, operation: Any = None, **_: Any
) -> None:
    """botocore's ``needs-retry`` question, inside :func:`no_resend`: raise what the
    caller should see instead of a resend; None for a final answer."""
    if _stop(response, caught_exception, attempts, operation):
        _check_body(response[0], response[0].content)


async def _async_needs_retry(
    response: Any = None, caught_exception: Any = None, attempts: int = 1, operation: Any = None, **_: Any
) -> None:
    """:func:`_needs_retry` for aiobotocore."""
    if _stop(response, caught_exception, attempts, operation):
        _check_body(response[0], await response[0].content)


def _stop(response: Any, caught_exception: Any, attempts: int, operation: Any) -> bool:
    """Raise every failure botocore would resend after; True when the answer is a
    success whose body is still to be checked."""
    if not _ACTIVE.get():
        return False
    if caught_exception is not None:
        raise caught_exception  # reached DynamoDB or not, a resend would carry old bytes
    if response is None:
        return False
    http, parsed = response
    status = int(getattr(http, "status_code", 0) or 0)
    code = str(parsed.get("Error", {}).get("Code", "")) if isinstance(parsed, dict) else ""
    if status >= 500 or (status >= 300 and code in TRANSIENT_CODES):  # a throttle: resent too
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


class NoResend:
    """The handler for botocore clients."""

    handler: ClassVar[Callable[..., Any]] = _needs_retry

    @classmethod
    def install(cls, client: Any) -> None:
        """Register the handler first on ``client``'s events (idempotent)."""
        for event in EVENTS:
            client.meta.events.register_first(event, cls.handler, unique_id=f"{HANDLER_ID}:{event}")


class AsyncNoResend(NoResend):
    """The handler for aiobotocore clients (whose response bodies are awaited)."""

    handler = _async_needs_retry
