"""A chain's op history: where every op it ever applied is kept, and which part of it
a duplicate check has to read.

A chain numbers its ops as they land (positions 1, 2, ...; ``Chain.seq`` is the last).
Its item keeps the most recent ones (the window, ``ops``: positions ``cut_seq + 1`` to
``seq``); older ones move, before they leave the item, to history items beside it, in
blocks of :data:`~.chain.BLOCK` consecutive positions at fixed places (block ``b``
holds positions ``base + b * BLOCK + 1`` to ``base + (b + 1) * BLOCK``). Fixed places
make a move idempotent (writers that race to move a block write the same content) and a
lookup cheap (positions ``(a, b]`` are known blocks: one batch read).

Who has to look: a write that must be sure its op was not applied since position ``p``
(the earliest an earlier copy could have landed) finds the op in the window, or knows
the window covers everything after ``p`` (``cut_seq <= p``: in sum mode that is the
write's own condition, ``cutn <= :p``, so the common case costs nothing), or reads the
blocks of ``(p, cut_seq]``. A position it cannot read (a missing block, ops an older
version dropped, a lineage a foreign writer reset) makes the answer unknowable:
:class:`~xor_ack_dynamodb.errors.OutcomeUnknown`, never a guess.

Pure: no I/O. The calls (:mod:`.stamping`) ask the store for the blocks named here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..stamps import Position
from .chain import BLOCK, Chain, Op

__all__ = [
    "Block",
    "Delivery",
    "Clear",
    "Lookup",
    "Unknowable",
    "Scope",
    "CLEAR",
    "NO_CHECK",
    "NoCheck",
    "scope",
    "due",
    "responsible",
    "search",
    "block_index",
    "SCAN_BLOCKS",
]

#: How many blocks of an earlier lineage are searched for an op after a foreign writer
#: reset the chain (one batch read).
SCAN_BLOCKS = 100


@dataclass(frozen=True, slots=True)
class Block:
    """Block ``index`` of a chain's history: the ops at its :data:`BLOCK` positions."""

    index: int
    ops: tuple[Op, ...]


class NoCheck:
    def __repr__(self) -> str:
        return "NO_CHECK"


#: A delivery's bound when no earlier copy of the op can exist: nothing to check.
NO_CHECK = NoCheck()


@dataclass(frozen=True, slots=True)
class Delivery:
    """What a stamp's caller knows of earlier copies of its op.

    ``after``: every earlier copy landed after this position (None: at any time in the
    chain's current lineage: the whole-life check). ``first``: there is no earlier copy
    (nothing to check), unless ``parent`` (a parent op's key) is marked re-sent on the
    chain: then copies may exist, and ``after`` bounds them."""

    after: Position | None = None
    first: bool = False
    parent: bytes | None = None

    def bound(self, chain: Chain) -> Position | None | NoCheck:
        """Since when ``chain`` must be searched for an earlier copy, or
        :data:`NO_CHECK`."""
        if self.first and not (self.parent is not None and self.parent in chain.resent):
            return NO_CHECK
        return self.after

    def retried(self, view: Chain | None) -> Delivery:
        """This delivery once a copy of it was sent with ``view`` the chain as last
        seen: the copy, had it landed, is after ``view``'s last op."""
        if not self.first:
            return Delivery(self.after, False, None)
        return Delivery(None if view is None else Position(view.line, view.seq), False, None)


@dataclass(frozen=True, slots=True)
class Clear:
    """The window holds every op that landed after the bound: it alone decides."""


@dataclass(frozen=True, slots=True)
class Lookup:
    """Read blocks ``indexes`` of lineage ``lineage``. ``exhaustive``: they cover every
    position not in the window since the bound, so an op found in none of them was not
    applied (a missing block is unknowable); otherwise (an earlier lineage a foreign
    writer reset) only a find decides."""

    lineage: bytes
    indexes: tuple[int, ...]
    exhaustive: bool = True


@dataclass(frozen=True, slots=True)
class Unknowable:
    """The positions to check are not kept anywhere: why."""

    why: str


CLEAR = Clear()
Scope = Clear | Lookup | Unknowable


def block_index(chain: Chain, position: int) -> int:
    return (position - chain.base - 1) // BLOCK


def scope(chain: Chain, after: Position | None) -> Scope:
    """What must be read to know whether an op that is not in ``chain``'s window landed
    on it after ``after`` (None: since its lineage began)."""
    if after is None:
        if chain.lineage is None:
            if chain.cut_seq > 0:
                return Unknowable(
                    f"its first {chain.cut_seq} ops were dropped without history (an older version)"
                )
            return CLEAR
        return _since(chain, 0)
    if after.lineage == chain.line:
        return _since(chain, after.seq)
    if chain.lineage is not None and not chain.adopted and after.lineage:
        return _since(chain, 0)  # created again since: a new lineage, searched whole
    if after.lineage:
        # A foreign writer replaced the item since: the op may have landed on the earlier
        # lineage, whose last window is lost; only its history can still tell.
        first = max(0, (after.seq) // BLOCK)
        return Lookup(after.lineage, tuple(range(first, first + SCAN_BLOCKS)), exhaustive=False)
    return Unknowable("the chain was replaced since by another writer")


def _since(chain: Chain, p: int) -> Scope:
    if p >= chain.cut_seq:
        return CLEAR
    if p < chain.base:
        return Unknowable(
            f"its ops up to position {chain.base} were dropped without history (an older version)"
        )
    first, last = block_index(chain, p + 1), block_index(chain, chain.cut_seq)
    return Lookup(chain.line, tuple(range(first, last + 1)))


def search(lookup: Lookup, blocks: dict[int, tuple[Op, ...]], key: bytes) -> Op | None | Unknowable:
    """The op with ``key`` in the blocks a lookup read; None when it is in none of them
    and they were all there (exhaustive); :class:`Unknowable` otherwise."""
    for index in lookup.indexes:
        ops = blocks.get(index)
        if ops is None:
            if lookup.exhaustive:
                return Unknowable(f"its history block {index} is missing")
            break
        for op in ops:
            if op.key == key:
                return op
    if lookup.exhaustive:
        return None
    return Unknowable("a writer without history (the Node package) replaced the item since")


def due(chain: Chain, window: int, committed: int, upto: int | None = None, most: int = 4) -> list[Block]:
    """The blocks of ``chain`` to move out of its window, oldest first: whole blocks
    from ``cut_seq``, of positions already stored (up to ``committed``) and, with
    ``upto``, within the first ``upto`` positions, while at least ``window`` ops stay;
    at most ``most``."""
    out: list[Block] = []
    cut = chain.cut_seq
    if (cut - chain.base) % BLOCK:
        return out  # not on a block boundary: an older version's list (adopted first)
    while (
        len(out) < most
        and cut + BLOCK <= committed
        and (upto is None or cut + BLOCK <= upto)
        and chain.seq - (cut + BLOCK) >= window
    ):
        start = cut - chain.cut_seq
        out.append(Block((cut - chain.base) // BLOCK, chain.ops[start : start + BLOCK]))
        cut += BLOCK
    return out


def responsible(chain: Chain, position: int, window: int) -> int | None:
    """The last position whose block the writer of the op at ``position`` must move
    out (sum mode, after its ``ADD``): exactly one writer is responsible for each
    block, the one whose op took the list :data:`BLOCK` + ``window`` past the block's
    start. None when it is responsible for none."""
    beyond = position - chain.base - window
    if beyond <= 0 or beyond % BLOCK:
        return None
    return chain.base + beyond
