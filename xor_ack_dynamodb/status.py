"""What a tracker reports about a chain, shared by every tracker implementation."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from .stamps import Stamp, Sum

__all__ = ["ChainStatus", "State"]

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


def epoch_to_datetime(seconds: int | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)
