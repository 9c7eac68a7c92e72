"""AsyncXorAckDynamoDB: ack chains kept in DynamoDB, for asyncio code.

The same tracker as :class:`~xor_ack_dynamodb.XorAckDynamoDB` (the same constructor,
rules, requests, errors, op ids, retry budget and stats) on an aiobotocore client: the
calls of :mod:`xor_ack_dynamodb.core.calls` run on an
:class:`~xor_ack_dynamodb.aio.engine.AsyncEngine`, and the requests are built and read by
:class:`~xor_ack_dynamodb.stores.dynamodb.store.DynamoDBStore`, so chains written by either tracker are
the other's, and by the Node package's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..core.algebra import Mode
from ..core.factory import chain_rules
from ..retry import RetryPolicy
from ..stats import RequestStats
from ..stores.dynamodb.item import ItemCodec
from ..stores.dynamodb.store import DynamoDBStore
from ..stores.dynamodb.table import check_table_name
from .clients import ClientSettings, client_settings, open_client
from .engine import AsyncEngine
from .store import AsyncDynamoDBStore
from .table import create_table
from .tracker import AsyncTracker

if TYPE_CHECKING:
    from ..config import AckConfig

__all__ = ["AsyncXorAckDynamoDB"]


class AsyncXorAckDynamoDB(AsyncTracker):
    """Ack chains in one DynamoDB table, awaited. The parameters are
    :class:`~xor_ack_dynamodb.XorAckDynamoDB`'s, except ``client``:

    :param client: an aiobotocore DynamoDB client (the tracker never closes it); or a
        :class:`~xor_ack_dynamodb.aio.clients.ClientSettings` to build one from; or None
        to build one from the environment as ``XorAckDynamoDB`` does (``AWS_REGION``,
        ``AWS_ENDPOINT_URL_DYNAMODB``, the usual credentials, timeouts from ``retry``).
        A client the tracker builds is made on first use, inside the running loop, and
        closed by :meth:`close` or by leaving ``async with``.

    One tracker serves any number of tasks of one event loop; do not share it between
    loops (an aiobotocore client belongs to the loop it was made in). Raises
    :class:`~xor_ack_dynamodb.errors.InvalidConfig` for arguments out of range and, when
    it is to build its client, for a missing region, before anything is sent.
    """

    def __init__(
        self,
        table: str,
        partition_key: str = "tagID",
        *,
        client: Any = None,
        mode: Mode = "xor",
        ttl: timedelta | float = timedelta(hours=1),
        retention: timedelta | float = timedelta(days=1),
        skew: timedelta | float = 5,
        delete_on_ack: bool = False,
        max_ops: int = 32,
        edge_size: int = 16,
        retry: RetryPolicy | None = None,
        ttl_attribute: str = "expires_at",
        cache_size: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = check_table_name(table)
        self.codec = ItemCodec(partition_key, ttl_attribute)
        rules = chain_rules(
            mode,
            edge_size,
            ttl=ttl,
            retention=retention,
            skew=skew,
            max_ops=max_ops,
            delete_on_ack=delete_on_ack,
        )
        self.retry = retry or RetryPolicy()
        stats = RequestStats()
        self._settings: ClientSettings | None = None
        self._client: Any = None
        if isinstance(client, ClientSettings):
            self._settings = client
        elif client is None:
            self._settings = client_settings(retry=self.retry)
        else:
            self._client = client
        self._owned: AbstractAsyncContextManager[Any] | None = None
        self._opening = asyncio.Lock()
        self.requests = DynamoDBStore(self._client, self.table, self.codec, rules, stats)
        self.store = AsyncDynamoDBStore(self.requests, self.get_client)
        self._bind(
            AsyncEngine(self.store, rules, retry=self.retry, stats=stats, clock=clock, cache_size=cache_size)
        )

    @classmethod
    def from_config(cls, config: AckConfig, client: Any = None, **options: Any) -> AsyncXorAckDynamoDB:
        """A tracker for a picklable :class:`~xor_ack_dynamodb.AckConfig` (its table, key,
        region, endpoint, keys, ttl, retention, max_ops, mode, skew, edge_size and retry),
        on ``client`` or one it builds. ``options`` override or add constructor arguments
        (``clock=``, ``cache_size=``, ...)."""
        if client is None:
            client = client_settings(
                region=config.region,
                endpoint_url=config.endpoint_url,
                aws_access_key_id=config.aws_access_key_id,
                aws_secret_access_key=config.aws_secret_access_key,
                retry=config.retry,
            )
        settings: dict[str, Any] = {
            "ttl": config.ttl_seconds,
            "retention": config.retention_seconds,
            "delete_on_ack": config.delete_on_ack,
            "max_ops": config.max_ops,
            "mode": config.mode,
            "skew": config.skew_seconds,
            "edge_size": config.edge_size,
            "retry": config.retry,
        }
        settings.update(options)
        return cls(config.table, config.partition_key, client=client, **settings)

    def __repr__(self) -> str:
        return (
            f"AsyncXorAckDynamoDB(table={self.table!r}, partition_key={self.partition_key!r}, "
            f"mode={self.mode!r})"
        )

    # -- the client -----------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The aiobotocore client in use: the one given, or the tracker's own once made
        (None before its first use)."""
        return self._client

    async def get_client(self) -> Any:
        """The aiobotocore client: the one given, or the tracker's own (made now if it is
        not yet). Raises :class:`~xor_ack_dynamodb.errors.InvalidConfig` for an endpoint
        from the environment that is not valid."""
        if self._client is None:
            async with self._opening:
                if self._client is None:
                    assert self._settings is not None
                    context = open_client(self._settings)
                    self._client = await context.__aenter__()
                    self._owned = context
        return self._client

    async def close(self) -> None:
        """Close the client if the tracker built it (a client passed in is the caller's
        to close). The tracker builds a new one if used again."""
        context, self._owned = self._owned, None
        if context is not None:
            self._client = None
            await context.__aexit__(None, None, None)

    async def __aenter__(self) -> AsyncXorAckDynamoDB:
        await self.get_client()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the table ------------------------------------------------------------------------

    @property
    def partition_key(self) -> str:
        return self.codec.partition_key

    @property
    def ttl_seconds(self) -> int:
        assert self.rules.ttl is not None
        return self.rules.ttl

    @property
    def retention_seconds(self) -> int:
        return self.rules.retention

    @property
    def delete_on_ack(self) -> bool:
        return self.rules.delete_on_ack

    @property
    def max_ops(self) -> int:
        return self.rules.window

    async def create_table(self, *, wait: bool = True) -> bool:
        """Create the table; see :meth:`XorAckDynamoDB.create_table`."""
        return await create_table(
            await self.get_client(), self.table, self.partition_key, self.codec.ttl_attribute, wait=wait
        )
