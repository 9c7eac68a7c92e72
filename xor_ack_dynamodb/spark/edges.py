"""Root edges, keyed per run: the value each root's chain is created holding (``r``) and
finished by, one stamp: ``r`` itself in xor mode (``size`` big-endian bytes), ``-r`` in
sum mode (an int). An edge is a keyed BLAKE2b of the root's label: the same under the
same key (a re-run streaming micro-batch sends what its first run sent), unrelated
across runs, unpredictable without the key; 8 to 64 bytes wide, never zero.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidConfig

__all__ = ["EdgeKey", "Group", "group_for"]


class EdgeKey:
    """Root edges of one run: ``key`` (16 to 64 bytes used) and the edge ``size``."""

    def __init__(self, key: bytes, size: int = 8) -> None:
        if not isinstance(size, int) or size % 8 or not 8 <= size <= 64:
            raise InvalidConfig(f"edge size must be 8, 16, ... or 64 bytes, got {size!r}")
        if len(key) < 16:
            raise InvalidConfig("an edge key needs at least 16 bytes")
        self.key = bytes(key[:64])
        self.size = size
        self._keyed = hashlib.blake2b(digest_size=size, key=self.key)

    def root(self, label: str) -> int:
        """The root edge named by ``label`` (a chain's tag)."""
        h = self._keyed.copy()
        for part in (b"root", label.encode("utf-8", "surrogatepass")):
            h.update(len(part).to_bytes(4, "big"))
            h.update(part)
        return int.from_bytes(h.digest(), "big") or 1


@dataclass(frozen=True, slots=True)
class Group:
    """The group of one tracked run's chains."""

    mode: Literal["xor", "sum"]
    size: int = 8

    @property
    def is_sum(self) -> bool:
        return self.mode == "sum"

    def value(self, amount: int) -> bytes | int:
        """What the tracker is sent for ``amount`` (module doc)."""
        return amount if self.mode == "sum" else amount.to_bytes(self.size, "big")

    def finished(self, committed: int) -> int:
        """The stamp that finishes a chain created holding ``committed``."""
        return -committed if self.mode == "sum" else committed


def group_for(mode: object, edge_size: int) -> Group:
    """The group for ``mode`` and ``edge_size``-byte edges (sum mode: 8, the core's
    limit); :class:`InvalidConfig` otherwise."""
    if mode not in ("xor", "sum"):
        raise InvalidConfig(f"mode must be 'xor' or 'sum', got {mode!r}")
    if mode == "sum" and edge_size != 8:
        raise InvalidConfig(f"sum-mode chains take 64-bit edges: edge_size must be 8, got {edge_size}")
    return Group(mode, edge_size)
