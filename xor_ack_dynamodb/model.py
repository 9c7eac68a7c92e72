"""What a tracker reports about a chain, shared by every tracker implementation."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from .errors import InvalidConfig
from .stamps import Stamp

__all__ = ["ChainStatus", "State", "create_op_key", "op_key", "random_op_key"]

#: ``expired`` is never stored: it is how a ``pending`` chain whose expiry has passed reads.
State = Literal["pending", "acked", "failed", "expired"]
STORED_STATES = frozenset({"pending", "acked", "failed"})


@dataclass(frozen=True, slots=True)
class ChainStatus:
    """A chain as read at one moment.

    ``state`` is ``expired`` when the chain is pending and ``expires_at`` has passed,
    whether or not DynamoDB's TTL has deleted it yet. ``expires_at`` is None for a chain
    that never expires (an item written by the Node package, or a ``MemoryAck`` chain,
    whose expiry is driven by ``rotate()``). For ``acked`` and ``failed`` chains it is
    when the tombstone may be removed. ``version`` counts the writes the chain has had
    (0 for an item the Node package wrote).
    """

    tag: str
    state: State
    stamp: Stamp
    expires_at: datetime | None
    reason: str | None = None
    version: int = 0

    @property
    def done(self) -> bool:
        """True for a chain that will not change again by stamping (acked, failed or
        expired)."""
        return self.state != "pending"


def epoch_to_datetime(seconds: int | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=UTC)


def op_key(op_id: str, *, namespace: str = "") -> str:
    """The 16-hex-digit key under which an op id is remembered in a chain.

    Op ids are hashed so that a chain's item stays small whatever ids callers use
    (SQS message ids, Spark task coordinates); a 64-bit key makes a false "already
    applied" between two of the last few dozen ops of one chain a 2**-58 event.
    Raises :class:`InvalidConfig` for an op id that is not a non-empty ``str``.
    """
    if not isinstance(op_id, str) or not op_id:
        raise InvalidConfig(f"op_id must be a non-empty str, got {op_id!r}")
    data = f"{namespace}\x00{op_id}" if namespace else op_id
    return hashlib.blake2b(data.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def create_op_key(op_id: str) -> str:
    """The key a ``create()`` remembers for ``op_id``: in a namespace of its own, so a
    caller that uses one message id for a create and for the stamp that follows it (a
    Lambda handler doing both) does not see its stamp taken for a duplicate."""
    return op_key(op_id, namespace="create")


def random_op_key() -> str:
    """A fresh op key for a call that was given no op id."""
    return secrets.token_hex(8)
