"""Configuration as data: a tracker's options, and a picklable description of a tracker.

* :class:`TrackerOptions`: the options every tracker's constructor takes as keywords
  (``XorAckDynamoDB``, ``AsyncXorAckDynamoDB``, ``MemoryAck``, ``AsyncMemoryAck``), named
  and documented once; :class:`TrackerKeywords` types them for ``**options``.
* :class:`AckConfig`: what code running elsewhere needs to build its own tracker
  (``XorAckDynamoDB.from_config(config)``); it builds nothing itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal, TypedDict

from .core.algebra import Mode, algebra_for
from .core.factory import seconds, skew_seconds
from .core.rules import ChainRules
from .errors import InvalidConfig
from .retry import RetryPolicy

__all__ = ["AckConfig", "TrackerOptions", "TrackerKeywords"]


class TrackerKeywords(TypedDict, total=False):
    """The keyword arguments of every tracker's constructor: see :class:`TrackerOptions`."""

    mode: Mode
    ttl: timedelta | float | None
    retention: timedelta | float
    skew: timedelta | float
    delete_on_ack: bool
    max_ops: int
    edge_size: int
    retry: RetryPolicy | None
    cache_size: int
    clock: Callable[[], float]


@dataclass(frozen=True)
class TrackerOptions:
    """The options of a tracker, each a keyword of every tracker's constructor.

    :param mode: ``"xor"`` (the default: byte stamps, the Node package's layout) or
        ``"sum"`` (int edges added when started and subtracted when finished; each stamp
        is one atomic ``ADD`` that never loses a race: for chains stamped by many
        processes at once). See ``docs/concepts.md`` for which to pick.
    :param ttl: how long a chain may stay pending before it times out (``timedelta`` or
        seconds). ``MemoryAck``: default None, chains time out by rotation only
        (``touch(tag, ttl)`` sets a clock deadline either way); DynamoDB trackers need one.
    :param retention: how long an ``acked``/``failed`` tombstone, or a timed-out chain,
        stays readable (so a poller can tell done from timed out, and a late duplicate
        is caught) before DynamoDB's TTL may purge it.
    :param skew: the clock-skew margin: a stamp is refused once the deadline has passed
        on the writer's clock, but a chain reads ``expired`` (and a create may overwrite
        it) only ``skew`` seconds later (0 to 3600).
    :param delete_on_ack: delete a chain once it completes (as the Node package does),
        after storing its ``acked`` tombstone first so the completing stamp's outcome is
        never lost. A stamp arriving after that raises ``TagNotFound``, duplicate or not,
        and ``create(op_id=...)`` is refused (a redelivered create would start a new chain).
    :param max_ops: the window of chains this tracker creates: how many of the most
        recent op ids a chain's item always keeps (it holds up to ``max_ops + 40``;
        older ones move to the chain's history items in blocks of 40). It does not
        bound the duplicate guarantee (a stamp is applied at most once per op id for
        the chain's whole life); it decides when a duplicate check is free: a retry or
        a redelivery whose earlier copy is among the recent ops is told by the item
        alone, an older one costs a history read. The window is stored in each chain,
        so trackers configured otherwise keep to it. Default 8, which keeps a chain's
        item under 1 KB with one writer (one write unit a stamp).
    :param edge_size: bytes of the edges ``new_edge()`` draws in xor mode.
    :param retry: the budget for lost races and transient errors (default ``RetryPolicy()``).
    :param cache_size: how many chains' last known values to keep (0 disables;
        ``MemoryAck``'s default). With it, an xor-mode stamp that follows this tracker's
        own write costs one request.
    :param clock: the time source, in epoch seconds (tests move it to expire chains).

    Frozen. :meth:`rules` raises :class:`~xor_ack_dynamodb.errors.InvalidConfig` for a
    value out of range, before the tracker sends anything.
    """

    mode: Mode = "xor"
    ttl: timedelta | float | None = timedelta(hours=1)
    retention: timedelta | float = timedelta(days=1)
    skew: timedelta | float = 5
    delete_on_ack: bool = False
    max_ops: int = 8
    edge_size: int = 16
    retry: RetryPolicy | None = None
    cache_size: int = 10_000
    clock: Callable[[], float] = time.time

    @property
    def budget(self) -> RetryPolicy:
        """``retry``, or the default policy."""
        return self.retry if self.retry is not None else RetryPolicy()

    def rules(self, *, deadline: bool = False) -> ChainRules:
        """The chain rules these options describe; ``deadline``: chains must have a
        clock deadline (a ``ttl``). Raises :class:`InvalidConfig` for a value out of range."""
        if self.ttl is None and deadline:
            raise InvalidConfig("ttl must be a timedelta or a number of seconds, got None")
        return ChainRules(
            algebra_for(self.mode, self.edge_size),
            ttl=None if self.ttl is None else seconds(self.ttl, "ttl"),
            retention=seconds(self.retention, "retention"),
            skew=skew_seconds(self.skew),
            window=self.max_ops,
            delete_on_ack=bool(self.delete_on_ack),
        )


@dataclass(frozen=True)
class AckConfig:
    """Everything an executor, a worker process or a Lambda function needs to build its
    own tracker, ``XorAckDynamoDB.from_config(config)``: boto3 clients cannot be pickled
    and must never travel in a Spark closure, this can.

    ``region`` and ``endpoint_url`` default to the environment (``AWS_REGION``, then
    ``AWS_DEFAULT_REGION``; ``AWS_ENDPOINT_URL_DYNAMODB``, then ``AWS_ENDPOINT_URL``).
    The explicit keys exist for local endpoints (moto, dynalite) that accept any key; on
    AWS leave them unset and let the executor's role provide credentials. They are never
    shown by ``repr``. The other fields are the tracker's options of the same names
    (``mode``: ``"xor"`` or ``"sum"``).
    """

    table: str
    partition_key: str = "tagID"
    region: str | None = None
    endpoint_url: str | None = None
    ttl_seconds: float = 3600.0
    retention_seconds: float = 86400.0
    delete_on_ack: bool = False
    max_ops: int = 8
    mode: Literal["xor", "sum"] = "xor"
    skew_seconds: float = 5.0
    edge_size: int = 16
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)

    def options(self) -> TrackerKeywords:
        """The tracker options this configuration names, as constructor keywords."""
        return TrackerKeywords(
            ttl=self.ttl_seconds,
            retention=self.retention_seconds,
            delete_on_ack=self.delete_on_ack,
            max_ops=self.max_ops,
            mode=self.mode,
            skew=self.skew_seconds,
            edge_size=self.edge_size,
            retry=self.retry,
        )
