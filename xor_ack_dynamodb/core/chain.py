"""A chain's value as the rules see it: immutable, storage-neutral."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..errors import InvalidConfig
from ..stamps import Position
from .algebra import Mode, Value

#: What a chain's ``state`` attribute holds. ``expired`` is never stored: it is how a
#: pending chain reads once its deadline (plus the skew margin) has passed.
StoredState = Literal["pending", "acked", "failed"]
STORED_STATES: frozenset[str] = frozenset({"pending", "acked", "failed"})

#: An op id is remembered as a 64-bit key: a false "already applied" between two of the
#: last few dozen ops of one chain is a 2**-53 event.
OP_KEY_BYTES = 8
#: Each op key is kept with a 32-bit hash of its payload, so that an op id reused for a
#: different stamp is caught (the miss rate of that check is 2**-32).
DIGEST_BYTES = 4
TOKEN_BYTES = 8
LINEAGE_BYTES = 8
#: Ops per history block, at fixed places (why 40: docs/concepts.md, "Exactly once for a
#: chain's whole life"; ``tests/test_item_budget.py``).
BLOCK = 40
#: The hash stored for an op whose payload is not known (a batch marker): it matches
#: any payload.
UNKNOWN_DIGEST = b"\x00" * DIGEST_BYTES


@dataclass(frozen=True, slots=True)
class Op:
    """One applied op as a chain remembers it: the op id's key and its payload's hash.
    An :data:`UNKNOWN_DIGEST` matches any payload."""

    key: bytes
    digest: bytes = UNKNOWN_DIGEST

    def same_payload(self, other: Op) -> bool:
        return UNKNOWN_DIGEST in (self.digest, other.digest) or self.digest == other.digest


def op_key(op_id: str, namespace: str) -> bytes:
    """The key under which ``op_id`` is remembered, in its ``namespace`` (``stamp``,
    ``create``, ``batch``): one message id may name a create and a stamp without the
    second being taken for a duplicate of the first. Raises :class:`InvalidConfig` for
    an op id that is not a non-empty ``str``."""
    if not isinstance(op_id, str) or not op_id:
        raise InvalidConfig(f"op_id must be a non-empty str, got {op_id!r}")
    data = f"{namespace}\x00{op_id}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=OP_KEY_BYTES).digest()


def payload_digest(kind: str, payload: bytes) -> bytes:
    """The hash an op's ``kind`` (stamp/create) and canonical payload are kept with."""
    return hashlib.blake2b(kind.encode() + b"\x00" + payload, digest_size=DIGEST_BYTES).digest()


def make_op(op_id: str | None, namespace: str, payload: bytes) -> Op:
    """The :class:`Op` of a call: ``op_id``'s key (a random one when None, which still
    catches botocore's resends of this very call) and the payload's hash."""
    key = op_key(op_id, namespace) if op_id is not None else secrets.token_bytes(OP_KEY_BYTES)
    return Op(key, payload_digest(namespace, payload))


def random_op() -> Op:
    """A marker op with a random key (a combined write's batch marker)."""
    return Op(secrets.token_bytes(OP_KEY_BYTES), UNKNOWN_DIGEST)


def new_lineage() -> bytes:
    """A fresh lineage, drawn by every create: a chain created again under a tag never
    shares positions or history with the one before."""
    return secrets.token_bytes(LINEAGE_BYTES)


def new_token() -> bytes:
    """A fresh write token, stored by every write: unlike a version number, it never
    repeats, whoever else writes the item in between (no ABA)."""
    return secrets.token_bytes(TOKEN_BYTES)


@dataclass(frozen=True, slots=True)
class Chain:
    """One chain as last read or written.

    ``token`` is None for an item written by a foreign writer (the Node package writes
    ``{tag, stamp}`` with PutItem, dropping everything else); such an item also has no
    ``deadline`` (it never expires), no ops, no window and no lineage. ``seq`` counts
    every op ever appended to ``ops`` (the op appended n-th is at position n);
    ``version`` counts writes. ``cut_seq`` counts the ops that left the list, so the
    list holds exactly positions ``cut_seq + 1`` to ``seq``; positions up to ``cut_seq``
    are in the chain's history items, in blocks of :data:`BLOCK` (see :mod:`.history`).
    ``lineage`` is drawn by the create (None: an item a foreign writer reset);
    ``adopted`` marks a lineage a Python write started over such an item, whose earlier
    ops are unknown. ``purge_at`` is the TTL attribute.
    """

    tag: str
    mode: Mode
    value: Value
    state: StoredState = "pending"
    deadline: int | None = None
    purge_at: int | None = None
    token: bytes | None = None
    version: int = 0
    seq: int = 0
    ops: tuple[Op, ...] = ()
    window: int | None = None
    cut_seq: int = 0
    lineage: bytes | None = None
    adopted: bool = False
    create_op: Op | None = None
    owner: str | None = None
    reason: str | None = None
    created_at: int | None = None
    updated_at: int | None = None

    def find(self, key: bytes) -> Op | None:
        """The remembered op with ``key``, if it is still in the window."""
        return next((op for op in self.ops if op.key == key), None)

    def position_of(self, key: bytes) -> int | None:
        """The position of the op with ``key`` in the window, if it is there."""
        return next((self.cut_seq + i + 1 for i, op in enumerate(self.ops) if op.key == key), None)

    @property
    def position(self) -> Position:
        """The chain's last position: its lineage (empty for a chain without one) and
        ``seq``."""
        return Position(self.lineage or b"", self.seq)

    @property
    def foreign(self) -> bool:
        """True when the item was last written by a writer that keeps no history."""
        return self.token is None


def updated(chain: Chain, now: int, **changes: Any) -> Chain:
    """``chain`` as a write at ``now`` leaves it: ``changes``, one more version and a new
    token (a read-modify-write based on the chain before it is then refused)."""
    return replace(chain, version=chain.version + 1, token=new_token(), updated_at=now, **changes)


def check_window(window: object) -> int:
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= 1000:
        raise InvalidConfig(f"the op window (max_ops) must be an int from 1 to 1000, got {window!r}")
    return window
