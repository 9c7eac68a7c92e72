"""One chain, one DynamoDB item: the layout and its reading.

Layout (the first two attributes are the Node package's, so both can share a table):

=================  ======  ===============================================================
``<partition_key>``  S     the tag
``stamp``            B     the running XOR
``expires_at``       N     epoch seconds; the table's TTL attribute (name configurable)
``state``            S     ``pending`` | ``acked`` | ``failed``
``version``          N     incremented by every write of this library (ABA guard)
``ops``              L(S)  keys of the most recent op ids applied, oldest first, bounded
``reason``           S     why a chain failed
``created_at``       N     epoch seconds
``updated_at``       N     epoch seconds
=================  ======  ===============================================================

An item written by the Node package has only the first two: it reads as a pending chain
at version 0 that never expires.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer

from .errors import CorruptItem
from .model import STORED_STATES, ChainStatus, State, epoch_to_datetime
from .stamps import Stamp

__all__ = ["Chain", "ItemCodec"]

AttributeValue = dict[str, Any]
Item = dict[str, AttributeValue]

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


@dataclass(frozen=True, slots=True)
class Chain:
    """A chain's item as last read or written."""

    tag: str
    stamp: bytes
    state: str  # as stored: pending | acked | failed
    version: int
    expires_at: int | None
    ops: tuple[str, ...]
    reason: str | None = None

    def effective_state(self, now: int) -> State:
        """The state a reader sees at ``now``: a pending chain past its expiry is expired."""
        if self.state == "pending":
            if self.expires_at is not None and self.expires_at < now:
                return "expired"
            return "pending"
        return "acked" if self.state == "acked" else "failed"

    def status(self, now: int) -> ChainStatus:
        return ChainStatus(
            tag=self.tag,
            state=self.effective_state(now),
            stamp=Stamp(self.stamp),
            expires_at=epoch_to_datetime(self.expires_at),
            reason=self.reason,
            version=self.version,
        )


@dataclass(frozen=True, slots=True)
class ItemCodec:
    """Attribute names and the translation between items and :class:`Chain`. Picklable."""

    partition_key: str
    ttl_attribute: str = "expires_at"

    #: Placeholders for every attribute a request may name. Several are DynamoDB
    #: reserved words, so requests always go through these.
    def names(self, *keys: str) -> dict[str, str]:
        table = {
            "#pk": self.partition_key,
            "#s": "stamp",
            "#e": self.ttl_attribute,
            "#st": "state",
            "#v": "version",
            "#ops": "ops",
            "#r": "reason",
            "#c": "created_at",
            "#u": "updated_at",
        }
        return {k: table[k] for k in keys}

    def key(self, tag: str) -> Item:
        return {self.partition_key: {"S": tag}}

    @staticmethod
    def value(python_value: Any) -> AttributeValue:
        """A Python value as a DynamoDB attribute value (boto3's serializer)."""
        if isinstance(python_value, (bytes, bytearray)):
            return {"B": bytes(python_value)}
        return cast(AttributeValue, _serializer.serialize(python_value))

    def parse(self, item: Item, tag: str | None = None) -> Chain:
        """Read an item. Raises :class:`CorruptItem` for an attribute of the wrong type."""
        try:
            data = {k: _deserializer.deserialize(cast(Any, v)) for k, v in item.items()}
        except (TypeError, ValueError) as exc:
            raise CorruptItem(f"chain item cannot be decoded: {exc}", tag=tag) from None
        tag_value = data.get(self.partition_key, tag)
        if not isinstance(tag_value, str):
            raise CorruptItem("chain item has no String partition key", tag=tag)
        tag = tag_value
        stamp = data.get("stamp")
        if not isinstance(stamp, Binary):
            raise CorruptItem("chain item's 'stamp' is missing or not Binary", tag=tag)
        state = data.get("state", "pending")
        if state not in STORED_STATES:
            raise CorruptItem(f"chain item's 'state' is {state!r}", tag=tag)
        version = _integer(data.get("version", Decimal(0)), "version", tag)
        expires = data.get(self.ttl_attribute)
        expires_at = None if expires is None else _integer(expires, self.ttl_attribute, tag)
        ops = data.get("ops", [])
        if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
            raise CorruptItem("chain item's 'ops' is not a list of strings", tag=tag)
        reason = data.get("reason")
        return Chain(
            tag=tag,
            stamp=bytes(cast(Any, stamp).value),  # the stubs omit Binary.value
            state=state,
            version=version,
            expires_at=expires_at,
            ops=tuple(ops),
            reason=reason if isinstance(reason, str) else None,
        )


def _integer(value: Any, name: str, tag: str) -> int:
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    raise CorruptItem(f"chain item's {name!r} is not a whole Number: {value!r}", tag=tag)
