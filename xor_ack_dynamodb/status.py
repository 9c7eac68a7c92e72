"""What a tracker reports about a chain, shared by every tracker implementation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from .stamps import Stamp, Sum

__all__ = ["ChainStatus", "State", "MIN_EPOCH", "MAX_EPOCH", "epoch_to_datetime", "readable_epoch"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The epoch seconds a ``datetime`` can hold (year 1 to year 9999, UTC): the range of a
#: deadline or TTL value this library can read. An item holding one outside it (written
#: in milliseconds by another writer, say) is a ``CorruptItem``.
MIN_EPOCH = int((datetime(1, 1, 1, tzinfo=UTC) - _EPOCH).total_seconds())
MAX_EPOCH = int((datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - _EPOCH).total_seconds())

#: ``expired`` is never stored: it is how a ``pending`` chain whose deadline has passed
#: reads. ``corrupt`` is only reported by ``status_many`` for an item it cannot decode.
State = Literal["pending", "acked", "failed", "expired", "corrupt"]


@dataclass(frozen=True, slots=True)
class ChainStatus:
    """A chain as read at one moment.

    ``state`` is ``expired`` when the chain is pending and its deadline (plus the
    tracker's clock-skew margin) has passed, whether or not DynamoDB's TTL has deleted
    it yet; ``corrupt`` (from ``status_many`` only) when its item cannot be decoded, with
    the error in ``reason`` and ``value`` None. ``value`` is the chain's running value: a
    :class:`Stamp` in xor mode, a :class:`Sum` in sum mode (``stamp`` is the same, by its
    older name). ``expires_at`` is the deadline of a pending (or expired) chain, and for
    ``acked`` and ``failed`` chains when the tombstone may be purged; None for a chain
    that never expires (an item written by the Node package, a ``MemoryAck`` chain without
    ``ttl``). ``version`` counts the writes the chain has had (0 for an item the Node
    package wrote). ``owner`` is what its creator passed as ``owner=``.
    """

    tag: str
    state: State
    value: Stamp | Sum | None
    expires_at: datetime | None
    reason: str | None = None
    version: int = 0
    owner: str | None = None
    mode: Literal["xor", "sum"] = "xor"

    @property
    def stamp(self) -> Stamp | Sum | None:
        """The chain's value (the name the xor-only API used)."""
        return self.value

    @property
    def done(self) -> bool:
        """True for a chain that will not change again by stamping (acked, failed,
        expired, or unreadable)."""
        return self.state != "pending"


def readable_epoch(seconds: int) -> bool:
    """Whether ``seconds`` (epoch seconds) lies in :data:`MIN_EPOCH` .. :data:`MAX_EPOCH`."""
    return MIN_EPOCH <= seconds <= MAX_EPOCH


def epoch_to_datetime(seconds: int | None) -> datetime | None:
    """``seconds`` as an aware UTC ``datetime`` (None for None), on every platform for the
    whole of :func:`readable_epoch`'s range (``fromtimestamp`` refuses negative values on
    some). Raises ``ValueError`` outside it: the item codec refuses such values first."""
    if seconds is None:
        return None
    if not readable_epoch(seconds):
        raise ValueError(f"{seconds} epoch seconds is outside datetime's range (years 1 to 9999)")
    return _EPOCH + timedelta(seconds=seconds)
