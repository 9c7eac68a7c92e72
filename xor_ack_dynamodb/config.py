"""Configuration as data: a tracker's options, and a picklable description of a tracker.

* :class:`TrackerOptions`: the options every tracker's constructor takes as keywords
  (``XorAckDynamoDB``, ``AsyncXorAckDynamoDB``, ``MemoryAck``, ``AsyncMemoryAck``), named
  and documented once; :class:`TrackerKeywords` types them for ``**options``.
* :class:`AckConfig`: what code running elsewhere needs to build its own tracker
  (``XorAckDynamoDB.from_config(config)``); it builds nothing itself.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from typing import Literal, TypedDict

from .core.algebra import Mode, algebra_for
from .core.factory import seconds, skew_seconds
from .core.rules import ChainRules
from .errors import InvalidConfig
from .retry import RetryPolicy
from .stamps import MAX_STAMP_BYTES

__all__ = ["AckConfig", "TrackerOptions", "TrackerKeywords", "check_table_name", "check_client_settings"]

#: What DynamoDB accepts as a table name.
_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")


def check_table_name(table: object) -> str:
    """Return ``table`` if DynamoDB would accept it as a table name, else raise
    :class:`InvalidConfig` (3 to 255 characters of ``A-Z a-z 0-9 _ - .``)."""
    if not isinstance(table, str) or not _TABLE_NAME.fullmatch(table):
        raise InvalidConfig(
            f"table name {table!r:.300} is not valid: DynamoDB takes 3 to 255 characters "
            "of letters, digits, '_', '-' and '.'"
        )
    return table


def _int(value: object, name: str, low: int, high: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        span = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise InvalidConfig(f"{name} must be an int {span}, got {value!r}")
    return value


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidConfig(f"{name} must be True or False, got {value!r}")
    return value


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
    value of the wrong type or out of range, before the tracker sends anything: ``ttl``
    and ``retention`` must be more than 0 and at most 100 years (``MAX_DURATION``
    seconds), finite; ``skew`` 0 to 3600 seconds; ``max_ops`` 1 to 1000; ``edge_size``
    1 to 1024; ``cache_size`` 0 or more; ``delete_on_ack`` a bool; ``retry`` a
    :class:`~xor_ack_dynamodb.RetryPolicy` or None; ``clock`` callable.
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

    @classmethod
    def of(cls, options: Mapping[str, object], owner: str, also: tuple[str, ...] = ()) -> TrackerOptions:
        """The options named by ``options`` (constructor keywords). Raises
        :class:`InvalidConfig` naming a keyword that is not an option, and the keyword
        it may have meant among the options and ``also`` (``owner``'s other keywords)."""
        known = [f.name for f in fields(cls)]
        for name in options:
            if name not in known:
                near = difflib.get_close_matches(name, [*known, *also], n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                accepted = ", ".join([*also, *known])
                raise InvalidConfig(f"{owner} takes no keyword {name!r}{hint}; it takes {accepted}")
        return cls(**options)  # type: ignore[arg-type]

    @property
    def budget(self) -> RetryPolicy:
        """``retry``, or the default policy."""
        return self.retry if self.retry is not None else RetryPolicy()

    def rules(self, *, deadline: bool = False) -> ChainRules:
        """The chain rules these options describe; ``deadline``: chains must have a
        clock deadline (a ``ttl``). Raises :class:`InvalidConfig` for a value out of range."""
        if self.ttl is None and deadline:
            raise InvalidConfig("ttl must be a timedelta or a number of seconds, got None")
        if self.retry is not None and not isinstance(self.retry, RetryPolicy):
            raise InvalidConfig(f"retry must be a RetryPolicy or None, got {type(self.retry).__name__}")
        if not callable(self.clock):
            raise InvalidConfig(f"clock must be a callable returning epoch seconds, got {self.clock!r}")
        _int(self.cache_size, "cache_size", 0)
        return ChainRules(
            algebra_for(self.mode, _int(self.edge_size, "edge_size", 1, MAX_STAMP_BYTES)),
            ttl=None if self.ttl is None else seconds(self.ttl, "ttl"),
            retention=seconds(self.retention, "retention"),
            skew=skew_seconds(self.skew),
            window=self.max_ops,
            delete_on_ack=_flag(self.delete_on_ack, "delete_on_ack"),
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

    Every field is checked when the config is made: a table name DynamoDB would refuse,
    a ``partition_key`` that is not a name of 1 to 255 bytes, a region or endpoint that
    is not one (or not a ``str``), one key without the other, and each option out of
    range as :class:`TrackerOptions` says raise
    :class:`~xor_ack_dynamodb.errors.InvalidConfig`, so a bad config fails where it is
    written, not on an executor. (A ``partition_key`` that collides with a chain
    attribute is refused when the tracker is built.)
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

    def __post_init__(self) -> None:
        check_table_name(self.table)
        if not isinstance(self.partition_key, str) or not 1 <= len(self.partition_key.encode()) <= 255:
            raise InvalidConfig(
                f"partition_key must be a name of 1 to 255 bytes, got {self.partition_key!r:.300}"
            )
        check_client_settings(
            self.region, self.endpoint_url, self.aws_access_key_id, self.aws_secret_access_key
        )
        TrackerOptions(**self.options()).rules(deadline=True)

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


def check_client_settings(
    region: object, endpoint_url: object, aws_access_key_id: object, aws_secret_access_key: object
) -> None:
    """Check the client settings of an :class:`AckConfig` (or a tracker's keywords) as
    botocore would when building the client. Raises :class:`InvalidConfig`."""
    from botocore.exceptions import InvalidRegionError
    from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url, validate_region_name

    if region is not None:  # "" is unset, as botocore takes it
        if not isinstance(region, str):
            raise InvalidConfig(f"region must be a str such as 'us-east-1' or None, got {region!r}")
        try:
            if region:
                validate_region_name(region)
        except InvalidRegionError:
            raise InvalidConfig(f"region {region!r:.100} is not a region name such as 'us-east-1'") from None
    if endpoint_url is not None and not (
        isinstance(endpoint_url, str)
        and (is_valid_endpoint_url(endpoint_url) or is_valid_ipv6_endpoint_url(endpoint_url))
    ):
        raise InvalidConfig(
            f"endpoint_url must be a URL such as http://127.0.0.1:8000 or None, got {endpoint_url!r:.300}"
        )
    for name, key in (
        ("aws_access_key_id", aws_access_key_id),
        ("aws_secret_access_key", aws_secret_access_key),
    ):
        if key is not None and (not isinstance(key, str) or not key):
            raise InvalidConfig(f"{name} must be a non-empty str or None")  # the value is a secret: not shown
    if (aws_access_key_id is None) != (aws_secret_access_key is None):
        raise InvalidConfig("give both aws_access_key_id and aws_secret_access_key, or neither")
