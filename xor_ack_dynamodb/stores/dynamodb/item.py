"""One chain, one DynamoDB item (the layout: docs/guarantees.md, "Item layout and the
Node package"). An item the Node package wrote reads as a pending xor chain with no
history that never expires.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer

from ...core.chain import DIGEST_BYTES, OP_KEY_BYTES, STORED_STATES, UNKNOWN_DIGEST, Chain, Op
from ...core.history import Block
from ...errors import CorruptItem, InvalidConfig, UnmigratedItem
from ...stamps import RESERVED_PREFIX
from ...status import readable_epoch

AttributeValue = dict[str, Any]
Item = dict[str, AttributeValue]

_deserializer = TypeDeserializer()
_serializer = TypeSerializer()

#: Placeholder -> attribute name for every attribute a request may name.
ATTRIBUTES = {
    "#s": "stamp",
    "#sum": "sum",
    "#st": "state",
    "#dl": "deadline",
    "#tok": "tok",
    "#v": "version",
    "#seq": "seq",
    "#ops": "ops",
    "#oph": "oph",
    "#win": "win",
    "#cn": "cutn",
    "#lin": "lin",
    "#hb": "hb",
    "#adp": "adp",
    "#hist": "hist",
    "#cop": "cop",
    "#own": "owner",
    "#r": "reason",
    "#c": "created_at",
    "#u": "updated_at",
}
#: The serverless completion's claim on a chain's item (:mod:`.claims`).
CLAIM, CLAIM_BY, CLAIM_UNTIL, FIRED_AT = "cmpl", "cmpl_by", "cmpl_until", "cmpl_at"


@dataclass(frozen=True, slots=True)
class ItemCodec:
    """Attribute names and the translation between items and :class:`Chain`. Picklable.
    Raises :class:`InvalidConfig` when a configured name collides with a chain attribute
    (the completion claim's included)."""

    partition_key: str
    ttl_attribute: str = "expires_at"

    def __post_init__(self) -> None:
        names = {*ATTRIBUTES.values(), CLAIM, CLAIM_BY, CLAIM_UNTIL, FIRED_AT}
        for what, name in (("partition_key", self.partition_key), ("ttl_attribute", self.ttl_attribute)):
            if not isinstance(name, str) or not 1 <= len(name.encode()) <= 255:
                raise InvalidConfig(f"{what} must be a name of 1 to 255 bytes, got {name!r}")
            if name in names:
                raise InvalidConfig(f"{what} {name!r} collides with a chain attribute")
        if self.partition_key == self.ttl_attribute:
            raise InvalidConfig("partition_key and ttl_attribute must differ")

    def names(self, *placeholders: str) -> dict[str, str]:
        table = {**ATTRIBUTES, "#pk": self.partition_key, "#e": self.ttl_attribute}
        return {p: table[p] for p in placeholders}

    def key(self, tag: str) -> Item:
        return {self.partition_key: {"S": tag}}

    # -- writing ---------------------------------------------------------------------

    def encode(self, chain: Chain) -> Item:
        """The whole item for ``chain`` (what a conditional PutItem writes)."""
        cop = None if chain.create_op is None else chain.create_op.key + chain.create_op.digest
        attributes = {
            self.partition_key: chain.tag,
            "state": chain.state,
            "stamp" if chain.mode == "xor" else "sum": chain.value,
            "deadline": chain.deadline,
            self.ttl_attribute: chain.purge_at,
            "version": chain.version,
            "seq": chain.seq,
            "win": chain.window,
            "cutn": chain.cut_seq or None,
            "adp": 1 if chain.adopted else None,
            "created_at": chain.created_at,
            "updated_at": chain.updated_at,
            "tok": chain.token,
            "lin": chain.lineage,
            "cop": cop,
            "owner": chain.owner,
            "reason": chain.reason,
            "ops": [op.key for op in chain.ops],
            "oph": [op.digest for op in chain.ops],
        }
        serialize = _serializer.serialize
        return {name: cast(AttributeValue, serialize(v)) for name, v in attributes.items() if v is not None}

    # -- reading ---------------------------------------------------------------------

    def parse(self, item: Item, tag: str | None = None) -> Chain:
        """Read an item. Raises :class:`CorruptItem` for an attribute of the wrong type or
        a deadline or TTL value no ``datetime`` can hold (years 1 to 9999),
        :class:`UnmigratedItem` for an item of the 0.1 layout, or one whose window still
        holds op ids of the first layout (more ops than its ``seq`` counts)."""
        try:
            data = {k: _deserializer.deserialize(cast(Any, v)) for k, v in item.items()}
        except (TypeError, ValueError) as exc:
            raise CorruptItem(f"chain item cannot be decoded: {exc}", tag=tag) from None
        found = data.get(self.partition_key, tag)
        if not isinstance(found, str):
            raise CorruptItem("chain item has no String partition key", tag=tag)
        tag = found
        stamp, total = data.get("stamp"), data.get("sum")
        value: bytes | int
        if isinstance(stamp, Binary) and total is None:
            value, mode = bytes(cast(Any, stamp).value), "xor"  # the stubs omit Binary.value
        elif stamp is None and total is not None:
            value, mode = _integer(total, "sum", tag), "sum"
        else:
            raise CorruptItem("chain item needs exactly one of a Binary 'stamp' or a Number 'sum'", tag=tag)
        state = data.get("state", "pending")
        if state not in STORED_STATES:
            raise CorruptItem(f"chain item's 'state' is {state!r}", tag=tag)
        ops: Any = data.get("ops")
        old = "lin" not in data and isinstance(ops, list) or "hb" in data
        # a pre-release lineage adopted over the first layout: its window still holds
        # op keys of that layout, which this version would not recognise
        first = "adp" in data and isinstance(ops, list)
        if old or first and (data.get("cutn") or 0) + len(ops) > (data.get("seq") or 0):
            what = (
                "was written by xor-ack-dynamodb 0.1 (no lineage)"
                if old
                else "holds op ids of xor-ack-dynamodb's first layout"
            )
            raise UnmigratedItem(
                f"chain {tag!r} {what}: run 'xor-ack migrate' once before this version uses the table",
                tag=tag,
            )
        return Chain(
            tag=tag,
            mode=mode,  # type: ignore[arg-type]
            value=value,
            state=state,
            deadline=self._epoch(data, "deadline", tag),
            purge_at=self._epoch(data, self.ttl_attribute, tag),
            token=_binary(data, "tok", tag),
            version=self._number(data, "version", tag) or 0,
            seq=self._number(data, "seq", tag) or 0,
            ops=_ops(ops, data.get("oph"), tag),
            window=self._number(data, "win", tag),
            cut_seq=self._number(data, "cutn", tag) or 0,
            lineage=_binary(data, "lin", tag),
            adopted=bool(self._number(data, "adp", tag)),
            create_op=_create_op(data.get("cop"), tag),
            owner=_string(data, "owner", tag),
            reason=_string(data, "reason", tag),
            created_at=self._number(data, "created_at", tag),
            updated_at=self._number(data, "updated_at", tag),
        )

    # -- history items -------------------------------------------------------------------

    def history_key(self, tag: str, lineage: bytes, index: int) -> Item:
        """The key of block ``index`` of the history of ``tag``'s lineage ``lineage``."""
        digest = hashlib.blake2b(tag.encode("utf-8") + b"\x00" + lineage, digest_size=16).hexdigest()
        return {self.partition_key: {"S": f"{RESERVED_PREFIX}{digest}/{index}"}}

    @staticmethod
    def history_index(item: Item) -> int:
        """The block index a history item's key names."""
        return int(next(iter(item.values()))["S"].rsplit("/", 1)[1])

    def encode_block(self, tag: str, lineage: bytes, block: Block, purge_at: int | None) -> Item:
        item: Item = {
            **self.history_key(tag, lineage, block.index),
            "hist": {"B": b"".join(op.key + op.digest for op in block.ops)},
        }
        if purge_at is not None:
            item[self.ttl_attribute] = {"N": str(purge_at)}
        return item

    def parse_block(self, item: Item) -> tuple[int, tuple[Op, ...]] | None:
        """A history item's index and ops; None for an item that is not one (it is then
        treated as missing: the check it was read for cannot tell)."""
        try:
            key = item[self.partition_key]["S"]
            data = item["hist"]["B"]
            index = int(key.rsplit("/", 1)[1])
        except (KeyError, TypeError, ValueError, IndexError):
            return None
        size = OP_KEY_BYTES + DIGEST_BYTES
        if not isinstance(data, bytes) or len(data) % size:
            return None
        ops = tuple(
            Op(data[i : i + OP_KEY_BYTES], data[i + OP_KEY_BYTES : i + size])
            for i in range(0, len(data), size)
        )
        return index, ops

    @staticmethod
    def _number(data: dict[str, Any], name: str, tag: str) -> int | None:
        value = data.get(name)
        return None if value is None else _integer(value, name, tag)

    @classmethod
    def _epoch(cls, data: dict[str, Any], name: str, tag: str) -> int | None:
        seconds = cls._number(data, name, tag)
        if seconds is not None and not readable_epoch(seconds):
            raise CorruptItem(
                f"chain item's {name!r} is {seconds}, not epoch seconds a date can hold (years 1 to 9999)",
                tag=tag,
            )
        return seconds


def _integer(value: Any, name: str, tag: str) -> int:
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    raise CorruptItem(f"chain item's {name!r} is not a whole Number: {value!r}", tag=tag)


def _binary(data: dict[str, Any], name: str, tag: str) -> bytes | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, Binary):
        raise CorruptItem(f"chain item's {name!r} is not Binary", tag=tag)
    return bytes(cast(Any, value).value)


def _string(data: dict[str, Any], name: str, tag: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise CorruptItem(f"chain item's {name!r} is not a String", tag=tag)
    return value


def _ops(keys: Any, digests: Any, tag: str) -> tuple[Op, ...]:
    if keys is None:
        return ()
    if not isinstance(keys, list):
        raise CorruptItem("chain item's 'ops' is not a List", tag=tag)
    if not all(isinstance(key, Binary) and len(cast(Any, key).value) == OP_KEY_BYTES for key in keys):
        raise CorruptItem("chain item's 'ops' holds a malformed op key", tag=tag)
    out = [bytes(cast(Any, key).value) for key in keys]
    if digests is None:
        return tuple(Op(k, UNKNOWN_DIGEST) for k in out)
    if not isinstance(digests, list) or len(digests) != len(out):
        raise CorruptItem("chain item's 'oph' does not match its 'ops'", tag=tag)
    if not all(isinstance(d, Binary) for d in digests):
        raise CorruptItem("chain item's 'oph' holds a non-Binary hash", tag=tag)
    hashes = [bytes(cast(Any, h).value) or UNKNOWN_DIGEST for h in digests]
    return tuple(Op(k, h) for k, h in zip(out, hashes, strict=True))


def _create_op(value: Any, tag: str) -> Op | None:
    if value is None:
        return None
    if not isinstance(value, Binary) or len(cast(Any, value).value) != OP_KEY_BYTES + DIGEST_BYTES:
        raise CorruptItem("chain item's 'cop' is malformed", tag=tag)
    data = bytes(cast(Any, value).value)
    return Op(data[:OP_KEY_BYTES], data[OP_KEY_BYTES:])
