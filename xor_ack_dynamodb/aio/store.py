"""The DynamoDB store for the asyncio tracker: the requests of
:class:`~xor_ack_dynamodb.stores.dynamodb.store.DynamoDBStore`, sent through an aiobotocore client.

Every request is built by ``DynamoDBStore.prepare`` and every answer read by its
``answer``/``old_item``/``batch_answer``, so the two trackers send byte-for-byte the same
requests and judge the same replies; only the sending is awaited here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from botocore.exceptions import ClientError

from ..core.chain import Chain
from ..core.messages import Read, Reply, Request
from ..drivers.engine import BatchRead
from ..errors import TableNotFound
from ..stores.dynamodb.store import METHODS, MISSING, DynamoDBStore, error_code, is_transient, tag_of
from ..stores.dynamodb.table import table_key
from .table import describe

__all__ = ["AsyncDynamoDBStore"]

log = logging.getLogger("xor_ack_dynamodb")


class AsyncDynamoDBStore:
    """Chains in one table, through an aiobotocore client that ``client()`` gives (made
    on first use when the tracker builds its own)."""

    def __init__(self, requests: DynamoDBStore, client: Callable[[], Awaitable[Any]]) -> None:
        self.requests = requests
        self.client = client

    async def execute(self, request: Request) -> Reply | Chain | None:
        prepared = self.requests.prepare(request)
        try:
            response = await self.call(prepared.operation, prepared.kwargs, tag_of(request))
        except ClientError as exc:
            if not self.requests.condition_failed(exc):
                raise
            current = self.requests.old_item(exc, request)
            if current is MISSING:
                current = await self.execute(Read(tag_of(request)))
            return self.requests.rejection(exc, current)
        return self.requests.answer(request, response)

    async def read_many(self, tags: list[str]) -> BatchRead:
        response = await self.call("BatchGetItem", self.requests.batch_request(tags))
        return self.requests.batch_answer(response)

    def is_transient(self, error: BaseException) -> bool:
        return is_transient(error)

    async def call(self, operation: str, kwargs: dict[str, Any], tag: str | None = None) -> dict[str, Any]:
        """``DynamoDBStore.call``, awaited: counted, capacity summed, a missing table and
        a key-schema mismatch raised as typed errors."""
        method = getattr(await self.client(), METHODS[operation])
        log.debug("%s %s tag=%r", operation, self.requests.table, tag)
        try:
            response: dict[str, Any] = await method(**kwargs)
        except ClientError as exc:
            self.requests.counted_failure(operation, exc)
            mismatch = None
            if error_code(exc) == "ValidationException":
                mismatch = await self._key_mismatch(exc)
            self.requests.raise_typed(exc, kwargs, mismatch)
            raise
        self.requests.counted(operation, response)
        return response

    async def _key_mismatch(self, exc: ClientError) -> bool:
        """``DynamoDBStore.key_mismatch``, awaited."""
        if self.requests.schema_message(exc):
            return True
        try:
            found = table_key(await describe(await self.client(), self.requests.table))
        except (ClientError, TableNotFound):
            return False
        return found != (self.requests.codec.partition_key, "S")
