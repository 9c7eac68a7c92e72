"""The DynamoDB store: the requests of :class:`~..codec.RequestCodec`, sent and counted
(botocore's resends too: DynamoDB bills them). The boto3 twin is generated.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, cast

from botocore import xform_name
from botocore.exceptions import BotoCoreError, ClientError

from ....core.chain import Chain
from ....core.messages import (
    BatchRead,
    Cancelled,
    Committed,
    HistoryRead,
    Read,
    ReadHistory,
    Rejected,
    Reply,
    Request,
    TransactionsUnsupported,
    WriteHistory,
    Written,
    tag_of,
)
from ....errors import EndpointUnreachable, RequestFailed, TableNotFound
from ....stats import RequestStats
from ..answers import checked
from ..codec import (
    MISSING,
    RequestCodec,
    capacity_units,
    error_code,
    is_transient,
    retry_attempts,
    table_key,
)
from ..failures import typed_failure
from ..resend import AsyncNoResend, no_resend
from .table import describe

log = logging.getLogger("xor_ack_dynamodb")


class AsyncDynamoDBStore:
    """Chains in one table, through the low-level client ``client()`` gives (the
    asyncio tracker makes its own on first use), counted in ``stats``."""

    def __init__(self, client: Callable[[], Any], codec: RequestCodec, stats: RequestStats) -> None:
        self.client = client
        self.codec = codec
        self.stats = stats

    is_transient = staticmethod(is_transient)

    async def execute(self, request: Request) -> Reply | Chain | HistoryRead | None:
        if isinstance(request, WriteHistory):
            for block in request.blocks:
                prepared = self.codec.history_put(request, block)
                await self.call(prepared.operation, prepared.kwargs, request.tag)
            return Written(None)
        prepared = self.codec.prepare(request)
        if isinstance(request, ReadHistory):
            found = await self.call(prepared.operation, prepared.kwargs, request.tag)
            return self.codec.history_answer(request, found)
        try:
            response = await self.call(
                prepared.operation, prepared.kwargs, tag_of(request), once=prepared.once
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return await self._rejected(exc, request, self.codec.old_item(exc.response.get("Item"), request))
        return self.codec.answer(request, response)

    async def _rejected(self, exc: ClientError, request: Request, current: Chain | None | object) -> Rejected:
        """The rejection of ``request``: the chain its failed condition saw, read when the
        backend did not return it."""
        if current is MISSING:
            current = await self.execute(Read(tag_of(request)))
        return Rejected(cast("Chain | None", current), resent=retry_attempts(exc.response) > 0)

    async def read_many(self, tags: list[str]) -> BatchRead:
        response = await self.call("BatchGetItem", self.codec.batch_request(tags), f"{len(tags)} keys")
        return self.codec.batch_answer(response)

    async def transact(self, requests: list[Request]) -> Committed | Cancelled:
        """Apply ``requests`` all or none: one TransactWriteItems. Raises
        :class:`TransactionsUnsupported` where the backend has none (dynalite)."""
        try:
            response = await self.call(
                "TransactWriteItems",
                self.codec.transact_request(requests),
                f"{len(requests)} chains",
                once=True,
            )
        except ClientError as exc:
            if error_code(exc) == "UnknownOperationException":
                raise TransactionsUnsupported(str(exc)) from exc
            if error_code(exc) != "TransactionCanceledException":
                raise
            failed = self.codec.cancelled(exc, requests)
            return Cancelled({i: await self._rejected(exc, requests[i], c) for i, c in failed.items()})
        return self.codec.committed(requests, response)

    async def call(
        self, operation: str, kwargs: dict[str, Any], tag: str | None = None, *, once: bool = False
    ) -> dict[str, Any]:
        """One request, counted and its consumed capacity summed; a missing table, a
        key-schema mismatch and an answer that is not DynamoDB's (:mod:`..answers`)
        raise typed errors. ``once``: botocore must not resend it (:mod:`..resend`)."""
        client = await self.client()
        method = getattr(client, xform_name(operation))  # GetItem -> get_item
        log.debug("%s %s tag=%r", operation, self.codec.table, tag)
        try:
            if once:
                AsyncNoResend.install(client)
            with no_resend() if once else nullcontext():
                response: dict[str, Any] = await method(**kwargs)
        except ClientError as exc:
            self.stats.request(operation, 1 + retry_attempts(exc.response))
            code = error_code(exc)
            if code == "ResourceNotFoundException" or (
                code == "ValidationException" and await self._key_mismatch(exc)
            ):
                raise self.codec.typed_error(exc) from exc
            typed = typed_failure(exc, client, operation)  # a client passed in: a 5xx page
            if typed is not None:
                raise typed from exc
            raise
        except (RequestFailed, BotoCoreError) as exc:  # typed by a built client, or a transport error
            typed = exc if isinstance(exc, RequestFailed) else typed_failure(exc, client, operation)
            if not isinstance(typed, EndpointUnreachable):  # sent: DynamoDB may have applied and billed it
                self.stats.request(operation)
            if typed is None or typed is exc:
                raise
            raise typed from exc
        self.stats.request(operation, 1 + retry_attempts(response))
        checked(client, operation, kwargs, response)
        self.stats.add_capacity(capacity_units(response.get("ConsumedCapacity")))
        return response

    async def _key_mismatch(self, exc: ClientError) -> bool:
        """Whether a ValidationException comes from the table's key schema."""
        if self.codec.schema_message(exc):
            return True
        try:
            found = table_key(await describe(await self.client(), self.codec.table))
        except (ClientError, TableNotFound):
            return False
        return found != (self.codec.items.partition_key, "S")
