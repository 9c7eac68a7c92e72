"""A chain's op history: where every op it ever applied is kept, and which part of it
a duplicate check has to read.

A chain numbers its ops as they land (positions 1, 2, ...; ``Chain.seq`` is the last).
Its item keeps the most recent ones (the window, ``ops``: positions ``cut_seq + 1`` to
``seq``); older ones move, before they leave the item, to history items beside it, in
blocks of :data:`~.chain.BLOCK` consecutive positions at fixed places (block ``b``
holds positions ``b * BLOCK + 1`` to ``(b + 1) * BLOCK``). Fixed places
make a move idempotent (writers that race to move a block write the same content) and a
lookup cheap (positions ``(a, b]`` are known blocks: one batch read). A block never
changes once written, so what any call read or wrote stays true: a tracker keeps the
blocks it saw (:class:`Searched` over a shared :class:`BlockCache`).

The one rule (:class:`Delivery`): an op is checked for earlier copies from the earliest
point where one could exist: the ``after`` its caller gives (the position of the stamp
that started its work), else the lineage's start. Only an op id the library drew
itself, in this call, has no earlier copy (``drawn``); once that call's own write has
an unknown outcome, its copy is checked from the chain as the call last saw it.

A write sure its op was not applied since ``p`` finds it in the window, or knows the
window holds everything after ``p`` (``cutn <= :p``, sum mode's own condition), or reads
the blocks of ``(p, cut_seq]``. A position not kept (a missing block, a lineage a
foreign writer reset) is unknowable: ``OutcomeUnknown``.

Pure: no I/O. The calls (:mod:`.stamping`) ask the store for the blocks named here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..stamps import Position
from .chain import BLOCK, Chain, Op

__all__ = [
    "Block",
    "BlockCache",
    "Delivery",
    "DRAWN",
    "Clear",
    "Lookup",
    "Unknowable",
    "Scope",
    "Searched",
    "CLEAR",
    "scope",
    "due",
    "responsible",
]


@dataclass(frozen=True, slots=True)
class Block:
    """Block ``index`` of a chain's history: the ops at its :data:`BLOCK` positions."""

    index: int
    ops: tuple[Op, ...]


@dataclass(frozen=True, slots=True)
class Delivery:
    """Where earlier copies of a stamp's op can have landed: after ``after`` (None:
    anywhere in the chain's current lineage). ``drawn``: the op id was drawn by the
    library in this call, so no earlier copy exists."""

    after: Position | None = None
    drawn: bool = False

    def unknown(self, view: Chain | None) -> Delivery:
        """This delivery once a copy of it was sent with ``view`` the chain as last seen
        (its outcome unknown): that copy, had it landed, is after ``view``'s last op; a
        copy an earlier delivery sent is still bounded by ``after``."""
        if not self.drawn:
            return self
        return Delivery(None if view is None else Position(view.line, view.seq))


#: The delivery of a stamp whose op id the library drew: nothing to check.
DRAWN = Delivery(drawn=True)


@dataclass(frozen=True, slots=True)
class Clear:
    """The window holds every op that landed after the bound: it alone decides."""


@dataclass(frozen=True, slots=True)
class Lookup:
    """Read blocks ``indexes`` of lineage ``lineage``: they cover every position not in
    the window since the bound, so an op found in none of them was not applied (a
    missing block is unknowable)."""

    lineage: bytes
    indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Unknowable:
    """The positions to check are not kept anywhere: why."""

    why: str


CLEAR = Clear()
Scope = Clear | Lookup | Unknowable


def scope(chain: Chain, after: Position | None) -> Scope:
    """What must be read to know whether an op that is not in ``chain``'s window landed
    on it after ``after`` (None: since its lineage began)."""
    if after is None or after.lineage == chain.line:
        return _since(chain, 0 if after is None else after.seq)
    if chain.lineage is not None and not chain.adopted and after.lineage:
        return _since(chain, 0)  # created again since: a new lineage, searched whole
    # A writer without history (the Node package) replaced the item since: the op may
    # have landed on the earlier lineage, whose last window is lost.
    return Unknowable("a writer without history (the Node package) replaced the item since")


def _since(chain: Chain, p: int) -> Scope:
    if p >= chain.cut_seq:
        return CLEAR
    return Lookup(chain.line, tuple(range(p // BLOCK, (chain.cut_seq - 1) // BLOCK + 1)))


class BlockCache(Protocol):
    """History blocks shared by a tracker's calls (thread-safe; keys name a lineage and
    an index). Blocks never change once written, so an entry is never stale."""

    def get(self, key: str) -> tuple[Op, ...] | None: ...

    def put(self, key: str, value: tuple[Op, ...]) -> None: ...


def _key(lineage: bytes, index: int) -> str:
    return f"{lineage.hex()}:{index}"


class Searched:
    """History blocks a call has read or written, by lineage and index (None: not
    there), backed by its tracker's ``shared`` cache of the blocks found."""

    def __init__(self, shared: BlockCache | None = None) -> None:
        self.blocks: dict[tuple[bytes, int], tuple[Op, ...] | None] = {}
        self.shared = shared

    def _get(self, lineage: bytes, index: int) -> tuple[Op, ...] | None | bool:
        """The block, None when it was found missing, False when not read."""
        if (lineage, index) in self.blocks:
            return self.blocks[(lineage, index)]
        found = None if self.shared is None else self.shared.get(_key(lineage, index))
        return False if found is None else found

    def unread(self, lookup: Lookup) -> tuple[int, ...]:
        return tuple(i for i in lookup.indexes if self._get(lookup.lineage, i) is False)

    def add(self, lineage: bytes, indexes: tuple[int, ...], found: dict[int, tuple[Op, ...]]) -> None:
        for i in indexes:
            ops = found.get(i)
            self.blocks[(lineage, i)] = ops
            if ops is not None and self.shared is not None:
                self.shared.put(_key(lineage, i), ops)

    def find(self, lookup: Lookup, key: bytes) -> tuple[Op, int] | None | Unknowable:
        """The op with ``key`` in the blocks read for ``lookup``, and its position;
        None when it is in none of them; :class:`Unknowable` when one is missing."""
        for index in lookup.indexes:
            ops = self._get(lookup.lineage, index)
            if not isinstance(ops, tuple):
                return Unknowable(f"its history block {index} is missing")
            for offset, op in enumerate(ops):
                if op.key == key:
                    return op, index * BLOCK + offset + 1
        return None


def due(chain: Chain, window: int, committed: int, upto: int | None = None, most: int = 4) -> list[Block]:
    """The blocks of ``chain`` to move out of its window, oldest first: whole blocks
    from ``cut_seq``, of positions already stored (up to ``committed``) and, with
    ``upto``, within the first ``upto`` positions, while at least ``window`` ops stay;
    at most ``most``."""
    out: list[Block] = []
    cut = chain.cut_seq
    while (
        len(out) < most
        and cut + BLOCK <= committed
        and (upto is None or cut + BLOCK <= upto)
        and chain.seq - (cut + BLOCK) >= window
    ):
        start = cut - chain.cut_seq
        out.append(Block(cut // BLOCK, chain.ops[start : start + BLOCK]))
        cut += BLOCK
    return out


def responsible(position: int, window: int) -> int | None:
    """The last position whose block the writer of the op at ``position`` must move
    out (sum mode, after its ``ADD``): exactly one writer is responsible for each
    block, the one whose op took the list :data:`BLOCK` + ``window`` past the block's
    start. None when it is responsible for none."""
    beyond = position - window
    return beyond if beyond > 0 and beyond % BLOCK == 0 else None
