"""XorAckDynamoDB: ack chains kept in DynamoDB.

The tracker checks its arguments, builds a call (:mod:`.core.factory`) and runs it on its
engine against a :class:`~.store.DynamoDBStore`: the chain rules (:mod:`.core.rules`) and
the race handling (:mod:`.core.calls`) are shared with every other tracker. Every write
is conditional on what the writer last saw, so concurrent trackers (threads, processes,
Spark executors, Lambda functions, a Node service) share chains without a lock; every
create and stamp carries an op id remembered in the chain, so a delivery that arrives
twice is applied once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ...core.algebra import Mode
from ...core.factory import chain_rules
from ...drivers.engine import Engine
from ...drivers.tracker import SyncTracker
from ...retry import RetryPolicy
from ...stats import RequestStats
from .item import ItemCodec
from .store import TRANSIENT_CODES, DynamoDBStore
from .table import check_table_name, create_table

if TYPE_CHECKING:
    from ...config import AckConfig

__all__ = ["XorAckDynamoDB", "TRANSIENT_CODES"]


class XorAckDynamoDB(SyncTracker):
    """Ack chains in one DynamoDB table. The chain methods (``create``, ``stamp``,
    ``fail``, ``touch``, ``status``, ``status_many``, ``delete``, ``new_edge``) and their
    guarantees are :class:`~xor_ack_dynamodb.drivers.tracker.SyncTracker`'s.

    :param table: the table's name. Create it with :meth:`create_table`.
    :param partition_key: the name of the table's String partition key.
    :param client: a boto3 low-level DynamoDB client; built from the environment when
        omitted (``AWS_REGION``, ``AWS_ENDPOINT_URL_DYNAMODB`` and the usual credentials),
        with timeouts that keep a call near its retry budget.
    :param mode: ``"xor"`` (the default: byte stamps, the Node package's layout) or
        ``"sum"`` (int edges added when started and subtracted when finished; each stamp
        is one atomic ``ADD`` that never loses a race: for chains stamped by many
        processes at once). See ``docs/concepts.md`` for which to pick.
    :param ttl: how long a chain may stay pending before it times out.
    :param retention: how long an ``acked``/``failed`` tombstone, or a timed-out chain,
        stays readable (so a poller can tell done from timed out, and a late duplicate
        is caught) before DynamoDB's TTL may purge it.
    :param skew: the clock-skew margin: a stamp is refused once the deadline has passed
        on the writer's clock, but a chain reads ``expired`` (and a create may overwrite
        it) only ``skew`` seconds later.
    :param delete_on_ack: delete a chain once it completes (as the Node package does),
        after storing its ``acked`` tombstone first so the completing stamp's outcome is
        never lost. A stamp arriving after that raises ``TagNotFound``, duplicate or not,
        and ``create(op_id=...)`` is refused (a redelivered create would start a new chain).
    :param max_ops: the op-id window of chains this tracker creates: a duplicate
        delivery is caught while fewer than ``max_ops`` other ops landed on the chain
        since. The window is stored in each chain, so trackers configured otherwise keep
        to it.
    :param edge_size: bytes of the edges :meth:`new_edge` draws in xor mode.
    :param retry: the budget for lost races and transient errors.
    :param cache_size: how many chains' last known values to keep (0 disables). With it,
        an xor-mode stamp that follows this tracker's own write costs one request.
    :param clock: the time source, in epoch seconds (tests move it to expire chains).

    A tracker is thread-safe; share one per process. Raises
    :class:`~xor_ack_dynamodb.errors.InvalidConfig` for arguments out of range.
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
        if client is None:
            from .clients import dynamodb_client

            client = dynamodb_client(retry=self.retry)
        self.client = client
        self.store = DynamoDBStore(client, self.table, self.codec, rules, stats)
        self._bind(
            Engine(self.store, rules, retry=self.retry, stats=stats, clock=clock, cache_size=cache_size)
        )

    @classmethod
    def from_config(cls, config: AckConfig, client: Any = None) -> XorAckDynamoDB:
        """A tracker built from a picklable :class:`~xor_ack_dynamodb.AckConfig` (what a
        Spark executor or a Lambda function does)."""
        return config.connect(client)

    def __repr__(self) -> str:
        return (
            f"XorAckDynamoDB(table={self.table!r}, partition_key={self.partition_key!r}, mode={self.mode!r})"
        )

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

    # -- table ------------------------------------------------------------------------

    def create_table(self, *, wait: bool = True) -> bool:
        """Create the table: on demand, String partition key, TTL on the expiry
        attribute. Returns False, after making sure TTL is enabled, if it already exists
        with that key. Raises :class:`~xor_ack_dynamodb.errors.TableSchemaMismatch` if
        it exists with another key."""
        return create_table(self.client, self.table, self.partition_key, self.codec.ttl_attribute, wait=wait)
