"""Root edges, keyed per run: the value each root's chain is created with and finished by.

A root's edge must be the same on every attempt of a run that uses the same key (a
re-run streaming micro-batch sends the very values its first run sent) and unrelated
across runs, and nobody without the run's key can predict it: a keyed BLAKE2b of the
root's label (the run's 32-byte key). Edges are 8 to 64 bytes wide (a multiple of 8) and
never zero.
"""

from __future__ import annotations

import hashlib

from ..errors import InvalidConfig

__all__ = ["EdgeKey"]


class EdgeKey:
    """Root edges of one run: ``key`` (at most 64 bytes are used) and the edge ``size``
    in bytes (a multiple of 8, from 8 to 64). Picklable; cheap to build."""

    __slots__ = ("key", "size", "_keyed")

    def __init__(self, key: bytes, size: int = 8) -> None:
        if not isinstance(size, int) or size % 8 or not 8 <= size <= 64:
            raise InvalidConfig(f"edge size must be 8, 16, ... or 64 bytes, got {size!r}")
        if len(key) < 16:
            raise InvalidConfig("an edge key needs at least 16 bytes")
        self.key = bytes(key[:64])
        self.size = size
        self._keyed = hashlib.blake2b(digest_size=size, key=self.key)

    def __getstate__(self) -> tuple[bytes, int]:
        return self.key, self.size

    def __setstate__(self, state: tuple[bytes, int]) -> None:
        self.__init__(*state)  # type: ignore[misc]

    def root(self, label: str | bytes) -> int:
        """A root edge named by ``label`` (a chain's tag): the same on every attempt of a
        task, unrelated across runs. Never zero."""
        data = label.encode("utf-8", "surrogatepass") if isinstance(label, str) else bytes(label)
        h = self._keyed.copy()
        for part in (b"root", data):
            h.update(len(part).to_bytes(4, "big"))
            h.update(part)
        return int.from_bytes(h.digest(), "big") or 1
