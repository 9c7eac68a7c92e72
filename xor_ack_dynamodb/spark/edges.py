"""Deterministic edges, keyed per run: cheap enough to derive one per record.

A recomputed partition must produce the same edges as the first attempt, and the XOR
of a tree's edges must reach zero by accident only with probability about 2**-64, as
with Storm's random ids. So edges are derived: one keyed BLAKE2b seed per parent (the
run's 32-byte key), its children SplitMix64's output stream from that seed. Distinct
positions give distinct children, children of different parents come from unrelated
seeds, and nobody without the run key can predict them. Wider
edges (``size`` 16, 24 … 64 bytes) draw one stream per 8 bytes from independent seeds;
:meth:`EdgeKey.children_array` derives them with numpy. Edges are never zero.

See docs/spark.md, "RDDs" (the paragraph on edges, with the costs weighed).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from ..errors import InvalidConfig

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["EdgeKey", "mix64", "GOLDEN", "MASK"]

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
#: Fan-outs at least this wide derive their children with numpy.
_VECTOR_FROM = 48


def mix64(z: int) -> int:
    """SplitMix64's finalizer: a bijection of 64-bit words that mixes every input bit into
    every output bit."""
    z = ((z ^ (z >> 30)) * _M1) & MASK
    z = ((z ^ (z >> 27)) * _M2) & MASK
    return z ^ (z >> 31)


def mix64_array(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """:func:`mix64` over a numpy array (uint64 arithmetic wraps, as the masks do)."""
    import numpy as np

    z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
    return z ^ (z >> np.uint64(31))


class EdgeKey:
    """Edge derivation for one run: ``key`` (at most 64 bytes are used) and the edge
    ``size`` in bytes (a multiple of 8, from 8 to 64). Picklable; cheap to build."""

    __slots__ = ("key", "size", "_streams", "_keyed")

    def __init__(self, key: bytes, size: int = 8) -> None:
        if not isinstance(size, int) or size % 8 or not 8 <= size <= 64:
            raise InvalidConfig(f"edge size must be 8, 16, ... or 64 bytes, got {size!r}")
        if len(key) < 16:
            raise InvalidConfig("an edge key needs at least 16 bytes")
        self.key = bytes(key[:64])
        self.size = size
        self._streams = size // 8
        self._keyed = hashlib.blake2b(digest_size=size, key=self.key)

    def __getstate__(self) -> tuple[bytes, int]:
        return self.key, self.size

    def __setstate__(self, state: tuple[bytes, int]) -> None:
        self.__init__(*state)  # type: ignore[misc]

    def _hash(self, *parts: bytes) -> int:
        h = self._keyed.copy()
        for part in parts:
            h.update(len(part).to_bytes(4, "big"))
            h.update(part)
        return int.from_bytes(h.digest(), "big") or 1

    def root(self, label: str | bytes) -> int:
        """A root edge named by ``label`` (a chain's tag): the same on every attempt of a
        task, unrelated across runs. Never zero."""
        data = label.encode("utf-8", "surrogatepass") if isinstance(label, str) else bytes(label)
        return self._hash(b"root", data)

    def seeds(self, parent: int) -> list[int]:
        """The per-stream seeds of ``parent``'s children (one per 8 bytes of edge).
        ``parent`` is an edge, or an anchor: the XOR of edges (as wide as an edge) or,
        for sum chains, a sum of edges, which may be wider (its whole value is hashed)."""
        width = max(self.size, (parent.bit_length() + 7) // 8)
        digest = self._hash(b"seed", parent.to_bytes(width, "big"))
        return [(digest >> (64 * j)) & MASK for j in range(self._streams)]

    def child(self, parent: int, position: int) -> int:
        """Child ``position`` (0, 1, ...) of ``parent``."""
        step = ((position + 1) * GOLDEN) & MASK
        edge = 0
        for j, seed in enumerate(self.seeds(parent)):
            edge |= (mix64((seed + step) & MASK) or 1) << (64 * j)
        return edge

    def children(self, parent: int, count: int) -> list[int]:
        """Children ``0 .. count-1`` of ``parent``, as :meth:`child` gives them."""
        if count >= _VECTOR_FROM:
            return self.children_array(self.seeds(parent), 0, count)
        seeds = self.seeds(parent)
        if len(seeds) == 1:
            seed = seeds[0]
            out = []
            for i in range(1, count + 1):
                z = (seed + i * GOLDEN) & MASK
                z = ((z ^ (z >> 30)) * _M1) & MASK
                z = ((z ^ (z >> 27)) * _M2) & MASK
                out.append((z ^ (z >> 31)) or 1)
            return out
        return [self.child(parent, i) for i in range(count)]

    @staticmethod
    def stream_array(seed: int, start: int, count: int) -> npt.NDArray[np.uint64]:
        """Positions ``start .. start+count-1`` of one 64-bit stream, as a numpy array."""
        import numpy as np

        steps = np.arange(start + 1, start + count + 1, dtype=np.uint64) * np.uint64(GOLDEN)
        out = mix64_array(steps + np.uint64(seed))
        out[out == 0] = 1
        return out

    def children_array(self, seeds: list[int], start: int, count: int) -> list[int]:
        """Children ``start .. start+count-1`` of the parent whose :meth:`seeds` these are."""
        streams: list[list[int]] = [self.stream_array(seed, start, count).tolist() for seed in seeds]
        if len(streams) == 1:
            return streams[0]
        return [sum(word << (64 * j) for j, word in enumerate(words)) for words in zip(*streams, strict=True)]
