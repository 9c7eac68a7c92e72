"""A chain's op history in blocks, and the one value a duplicate check moves: a
:class:`Position` (docs/concepts.md, "Exactly once for a chain's whole life").

An op is checked for earlier copies from ``after``, the earliest position one could
have landed at (None: an op id the library drew, no copy exists); :func:`check` moves it
on, and it is the next write's guard (``ChainRules.covers``). A position not kept is unknowable
(``OutcomeUnknown``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from ..stamps import Position
from .chain import BLOCK, Chain, Op

#: The start of whatever lineage a chain has: an ``after`` that searches it whole (and,
#: as a write's guard, tests no lineage).
START = Position(b"", 0)


@dataclass(frozen=True, slots=True)
class Block:
    """Block ``index`` of a chain's history: the ops at its :data:`BLOCK` positions."""

    index: int
    ops: tuple[Op, ...]


@dataclass(frozen=True, slots=True)
class Found:
    """The op landed at ``position``, as ``op`` (its payload's hash)."""

    op: Op
    position: Position


@dataclass(frozen=True, slots=True)
class Lookup:
    """Read blocks ``indexes`` of lineage ``lineage``: every position not in the window
    since ``after``."""

    lineage: bytes
    indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Unknowable:
    """The positions to check are not kept anywhere: why."""

    why: str


def check(
    chain: Chain, key: bytes, after: Position | None, searched: Searched | None
) -> Position | Found | Lookup | Unknowable:
    """Where the op ``key`` stands on ``chain``: :class:`Found`; else the position up to
    which it is known absent (the ``after`` a write on ``chain`` is then guarded by); or
    the blocks to read first (those not yet ``searched``); or :class:`Unknowable`."""
    here = chain.position
    at = chain.position_of(key)
    if at is not None:
        return Found(chain.ops[at - chain.cut_seq - 1], Position(here.lineage, at))
    if after is None:
        return here
    if after == START or after.lineage == here.lineage:
        since = after.seq
    elif chain.lineage is not None and not chain.adopted and after.lineage:
        since = 0  # created again since: a new lineage, searched whole
    else:  # a writer without history (the Node package) replaced the item since: the op
        # may have landed on the earlier lineage, whose last window is lost
        return Unknowable("a writer without history (the Node package) replaced the item since")
    if since < chain.cut_seq:
        lookup = Lookup(here.lineage, tuple(range(since // BLOCK, (chain.cut_seq - 1) // BLOCK + 1)))
        if searched is None or searched.unread(lookup):
            return lookup
        hit = searched.find(lookup, key)
        if hit is not None:
            return hit
    return Position(here.lineage, max(here.seq, after.seq if after.lineage == here.lineage else 0))


class BlockCache(Protocol):
    """History blocks shared by a tracker's calls (thread-safe). Blocks never change
    once written, so an entry is never stale."""

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

    def add(self, lineage: bytes, indexes: Iterable[int], found: dict[int, tuple[Op, ...]]) -> None:
        for i in indexes:
            ops = found.get(i)
            self.blocks[(lineage, i)] = ops
            if ops is not None and self.shared is not None:
                self.shared.put(_key(lineage, i), ops)

    def find(self, lookup: Lookup, key: bytes) -> Found | Unknowable | None:
        """The op with ``key`` in the blocks read for ``lookup``, where it landed; None
        when it is in none of them; :class:`Unknowable` when one is missing."""
        for index in lookup.indexes:
            ops = self._get(lookup.lineage, index)
            if not isinstance(ops, tuple):
                return Unknowable(f"its history block {index} is missing")
            for offset, op in enumerate(ops):
                if op.key == key:
                    return Found(op, Position(lookup.lineage, index * BLOCK + offset + 1))
        return None


def due(chain: Chain, window: int, committed: int, upto: int | None = None, most: int = 4) -> list[Block]:
    """Up to ``most`` whole blocks of ``chain`` to move out of its window, oldest first:
    of positions up to ``committed`` (and ``upto``), while ``window`` ops stay."""
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
    out (sum mode; one writer per block: docs/concepts.md, "Moving a block"), or None."""
    beyond = position - window
    return beyond if beyond > 0 and beyond % BLOCK == 0 else None
