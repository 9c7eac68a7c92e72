"""XorAckDynamoDB and AsyncXorAckDynamoDB: ack chains kept in DynamoDB.

A tracker checks its arguments, builds a call (:mod:`xor_ack_dynamodb.core.factory`) and
runs it on its driver against a DynamoDB store (``_sync/store.py``, or ``_async/store.py``
on aiobotocore). The two trackers send the same requests, so chains written by either are
the other's, and the Node package's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Self, Unpack

from ...config import AckConfig, TrackerKeywords, TrackerOptions, check_client_settings, check_table_name
from ...core.chain import Chain
from ...core.rules import ChainRules
from ...drivers import AsyncTracker, SyncTracker
from ...errors import InvalidConfig
from ...retry import RetryPolicy
from ...stats import RequestStats
from ...status import ChainStatus
from ._async.store import AsyncDynamoDBStore
from ._async.table import create_table as async_create_table
from ._sync.store import DynamoDBStore
from ._sync.table import create_table
from .answers import scan_pages
from .claims import ClaimResult, CompletionClaims
from .clients import (
    ClientOptions,
    ClientSettings,
    client_for,
    client_settings,
    dynamodb_client,
    open_client,
    settings_for,
)
from .codec import RequestCodec, placeholders
from .item import ItemCodec

__all__ = ["XorAckDynamoDB", "AsyncXorAckDynamoDB", "ClaimResult"]  # ClaimResult: serverless/completion.py


#: The constructor keywords of the DynamoDB trackers besides the tracker options.
_KEYWORDS = tuple("client ttl_attribute region endpoint_url aws_access_key_id aws_secret_access_key".split())


class _OnTable:
    """What both DynamoDB trackers hold besides their chain methods: the table, its item
    layout, the rules and budget they were built with; their one constructor (the
    parameters are :class:`XorAckDynamoDB`'s)."""

    table: str
    codec: ItemCodec
    retry: RetryPolicy
    _limits: ChainRules
    #: What ``from_config`` builds a client (or its settings) with when none is given.
    _from_config: Any

    def __init__(
        self,
        table: str,
        partition_key: str = "tagID",
        *,
        client: Any = None,
        ttl_attribute: str = "expires_at",
        region: str | None = None,
        endpoint_url: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        **options: Unpack[TrackerKeywords],
    ) -> None:
        self.table = check_table_name(table)
        self.codec = ItemCodec(partition_key, ttl_attribute)
        settings = TrackerOptions.of(options, type(self).__name__, _KEYWORDS)
        self._limits = settings.rules(deadline=True)
        self.retry = settings.budget
        check_client_settings(region, endpoint_url, aws_access_key_id, aws_secret_access_key)
        connection = ClientOptions(
            region=region,
            endpoint_url=endpoint_url,
            aws_access_key_id=aws_access_key_id,
            aws_secret_access_key=aws_secret_access_key,
        )
        named = [name for name, value in connection.items() if value is not None]
        if client is not None and named:
            raise InvalidConfig(
                f"give either client= or the settings to build one ({', '.join(named)}), not both: "
                "a client keeps its own region, endpoint and keys"
            )
        connection["retry"] = self.retry
        self._open(client, connection, settings, RequestCodec(self.table, self.codec, self._limits))

    def _open(
        self, client: Any, connection: ClientOptions, settings: TrackerOptions, requests: RequestCodec
    ) -> None:
        """Make the store on ``client`` (None: one built from ``connection``) and bind the
        driver to it."""
        raise NotImplementedError

    @classmethod
    def from_config(cls, config: AckConfig, client: Any = None, **options: Unpack[TrackerKeywords]) -> Self:
        """A tracker for a picklable :class:`~xor_ack_dynamodb.AckConfig` (what a Spark
        executor or a Lambda function does): its table, key and options, on ``client``
        or a new one built (the asyncio tracker: when first used) from its region,
        endpoint, keys and retry budget
        (:func:`~xor_ack_dynamodb.stores.dynamodb.clients.client_for`). ``options``
        override or add constructor keywords (``clock=``, ``cache_size=``, ...)."""
        client = client if client is not None else cls._from_config(config)
        return cls(config.table, config.partition_key, client=client, **(config.options() | options))

    def __repr__(self) -> str:
        name, mode = type(self).__name__, self._limits.mode
        return f"{name}(table={self.table!r}, partition_key={self.partition_key!r}, mode={mode!r})"

    @property
    def partition_key(self) -> str:
        return self.codec.partition_key

    @property
    def ttl_seconds(self) -> int:
        assert self._limits.ttl is not None
        return self._limits.ttl

    @property
    def retention_seconds(self) -> int:
        return self._limits.retention

    @property
    def delete_on_ack(self) -> bool:
        return self._limits.delete_on_ack

    def read_item(self, item: Mapping[str, Any]) -> Chain:
        """The chain an item of this table holds (a stream record's image, Binary as
        bytes). Raises :class:`~xor_ack_dynamodb.errors.CorruptItem` for an item that
        is not a chain's, :class:`~xor_ack_dynamodb.errors.UnmigratedItem` for one of
        an older layout."""
        return self.codec.parse(dict(item))


class XorAckDynamoDB(_OnTable, SyncTracker):
    """Ack chains in one DynamoDB table. The chain methods (``create``, ``stamp``,
    ``fail``, ``touch``, ``status``, ``status_many``, ``delete``, ``new_edge`` and the
    batch calls ``create_many``, ``stamp_many``, ``touch_many``) and their guarantees
    are :class:`~xor_ack_dynamodb.drivers.SyncTracker`'s.

    :param table: the table's name. Create it with :meth:`create_table`.
    :param partition_key: the name of the table's String partition key.
    :param client: a boto3 low-level DynamoDB client; built when omitted, from
        ``region``, ``endpoint_url`` and the keys where given, else from the environment
        (``AWS_REGION``, ``AWS_ENDPOINT_URL_DYNAMODB`` and the usual credentials), with
        timeouts that keep a call near its retry budget
        (:func:`~xor_ack_dynamodb.stores.dynamodb.clients.dynamodb_client`).
    :param ttl_attribute: the table's TTL attribute (when an item may be purged).
    :param region, endpoint_url, aws_access_key_id, aws_secret_access_key: the settings
        of the client the tracker builds, as :class:`~xor_ack_dynamodb.AckConfig` takes
        them (the keys for local endpoints; on AWS let the role provide credentials).
        Not with ``client``: a client keeps its own.
    :param options: the tracker's options (``ttl`` defaults to one hour), documented once
        in :class:`~xor_ack_dynamodb.config.TrackerOptions`.

    A tracker is thread-safe; share one per process. Raises
    :class:`~xor_ack_dynamodb.errors.InvalidConfig`, before anything is sent, for an
    argument of the wrong type or out of range, a keyword it does not take, client
    settings beside ``client``, and as
    :func:`~xor_ack_dynamodb.stores.dynamodb.clients.dynamodb_client` does when it
    builds the client (no region anywhere, ...).
    """

    _from_config = staticmethod(client_for)

    def _open(
        self, client: Any, connection: ClientOptions, settings: TrackerOptions, requests: RequestCodec
    ) -> None:
        stats = RequestStats()
        self.client = client if client is not None else dynamodb_client(**connection)
        self.store = DynamoDBStore(lambda: self.client, requests, stats)
        self._bind(self.store, self._limits, settings, stats)
        self._claims = CompletionClaims(self.store, self.retry, self.table, self.partition_key)

    def create_table(self, *, wait: bool = True, stream: bool = False) -> bool:
        """Create the table: on demand, String partition key, TTL on the expiry
        attribute, and with ``stream`` a stream of new and old images (the serverless
        completion's trigger); with ``wait``, until it is ACTIVE. Returns False, after
        making sure TTL (and the stream) is enabled, if it already exists with that key.
        Raises :class:`~xor_ack_dynamodb.errors.TableSchemaMismatch` if it exists with
        another key, :class:`~xor_ack_dynamodb.errors.InvalidConfig` if it has TTL on
        another attribute or, with ``stream``, a stream of another view type, or the
        endpoint serves no streams (dynalite)."""
        key, ttl = self.partition_key, self.codec.ttl_attribute
        return create_table(self.client, self.table, key, ttl, wait=wait, stream=stream)

    def scan_unfinished(self, *, prefix: str | None = None, page_size: int = 1000) -> Iterator[ChainStatus]:
        """Every failed or expired chain of the table (of tags starting with ``prefix``),
        as it iterates: a consistent Scan (billed for every item read) filtered
        server-side to ``failed`` chains and pending ones past their deadline, then
        decided by the rules (the skew margin included). Raises
        :class:`~xor_ack_dynamodb.errors.BadResponse` for a page that is not DynamoDB's,
        never reading it as a table with nothing to replay."""
        now = self.driver.now()
        values: dict[str, Any] = {
            ":failed": {"S": "failed"},
            ":pending": {"S": "pending"},
            ":now": {"N": str(now)},
        }
        condition = "(#st = :failed OR (#st = :pending AND #dl < :now))"
        if prefix:
            values[":p"] = {"S": prefix}
            condition = f"begins_with(#pk, :p) AND {condition}"
        pages = scan_pages(
            self.client,
            TableName=self.table,
            FilterExpression=condition,
            ExpressionAttributeNames=self.codec.names(*placeholders(condition)),
            ExpressionAttributeValues=values,
            ConsistentRead=True,
            Limit=page_size,
        )
        for page in pages:
            self.stats.request("Scan")
            for item in page["Items"]:
                status = self.rules.status(self.codec.parse(item), now)
                if status.state in ("failed", "expired"):
                    yield status

    # -- the serverless completion's claim on a chain's item (stores/dynamodb/claims.py) --

    def claim_completion(
        self,
        tag: str,
        claimant: str,
        now: float,
        lease: float,
        *,
        owner: str | None = None,
        create_op: bytes | None = None,
        skew: float | None = None,
    ) -> ClaimResult:
        """Claim the completion of the complete chain ``tag`` (of ``owner`` and
        ``create_op`` where given) for ``lease`` seconds from ``now``: ``claimed`` (also
        when the claim is this claimant's already), ``fired`` (marked before), ``held``
        (another claim, not ``skew`` seconds past its lease; default the tracker's skew)
        or ``gone`` (no such complete chain). One ``UpdateItem``, within the retry
        budget; past it the last error is raised."""
        margin = self.rules.skew if skew is None else skew
        return self._claims.claim(tag, claimant, now, lease, margin, owner, create_op)

    def mark_completion_fired(self, tag: str, claimant: str, now: float) -> bool:
        """Mark ``tag``'s completion fired, if ``claimant`` still holds its claim (False
        if another took it over)."""
        return self._claims.mark_fired(tag, claimant, now)

    def release_completion(self, tag: str, claimant: str) -> None:
        """Give up ``claimant``'s claim on ``tag``'s completion (nothing if it holds none)."""
        self._claims.release(tag, claimant)


class AsyncXorAckDynamoDB(_OnTable, AsyncTracker):
    """Ack chains in one DynamoDB table, awaited (``pip install 'xor-ack-dynamodb[async]'``).
    The parameters are :class:`XorAckDynamoDB`'s, except ``client``:

    :param client: an aiobotocore DynamoDB client (the tracker never closes it); or a
        :class:`~xor_ack_dynamodb.stores.dynamodb.clients.ClientSettings` to build one
        from; or None to build one as ``XorAckDynamoDB`` does. A client the tracker builds
        is made on first use, inside the running loop, and closed by :meth:`close` or by
        leaving ``async with``.

    One tracker serves any number of tasks of one event loop; do not share it between
    loops (an aiobotocore client belongs to the loop it was made in). Raises
    :class:`~xor_ack_dynamodb.errors.InvalidConfig` as ``XorAckDynamoDB`` does and, when
    it is to build its client, for a missing region, before anything is sent.
    """

    _from_config = staticmethod(settings_for)

    def _open(
        self, client: Any, connection: ClientOptions, settings: TrackerOptions, requests: RequestCodec
    ) -> None:
        if client is None:
            client = client_settings(**connection)
        self._settings = client if isinstance(client, ClientSettings) else None
        self._client: Any = None if self._settings is not None else client
        self._owned: AbstractAsyncContextManager[Any] | None = None
        self._opening = asyncio.Lock()
        stats = RequestStats()
        self.store = AsyncDynamoDBStore(self.get_client, requests, stats)
        self._bind(self.store, self._limits, settings, stats)

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

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def create_table(self, *, wait: bool = True, stream: bool = False) -> bool:
        """Create the table; see :meth:`XorAckDynamoDB.create_table`."""
        client, key, ttl = await self.get_client(), self.partition_key, self.codec.ttl_attribute
        return await async_create_table(client, self.table, key, ttl, wait=wait, stream=stream)
