"""What names a tracked run's chains and finishes them: tags (docs/spark.md, "Chains
belong to their run"), ``<run id>/<nonce>/<attempt>/<key>``, valid UTF-8 (split on its
first three ``/``, a tag gives its parts back: two different (run, nonce, attempt, key)
never share a tag); and root edges keyed per run (:class:`EdgeKey`, :class:`Group`).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import unquote_to_bytes

from ..errors import InvalidConfig, InvalidTag
from ..stamps import check_tag

__all__ = ["TagScheme", "escape_key", "escape_run", "unescape_key", "EdgeKey", "Group", "group_for"]

#: Lone surrogates U+DC80..U+DCFF, which ``surrogateescape`` decoding makes of
#: undecodable bytes 0x80..0xFF, written back as ``%XX``.
_SURROGATE_BYTES = {0xDC00 + b: f"%{b:02X}" for b in range(0x80, 0x100)}


def escape_key(key: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """A key as valid UTF-8 text, reversibly: ``%`` becomes ``%25`` and every byte not
    part of valid UTF-8 ``%XX``; other text stays readable. A ``str`` stands for the
    bytes ``surrogateescape`` gives back (a file name that is not UTF-8, as ``os``
    decodes it); other lone surrogates are encoded with ``surrogatepass``.
    """
    if isinstance(key, os.PathLike):
        key = os.fspath(key)
    if isinstance(key, str):
        try:
            raw = key.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raw = key.encode("utf-8", "surrogatepass")
    elif isinstance(key, (bytes, bytearray, memoryview)):
        raw = bytes(key)
    else:
        raise InvalidTag(f"a key must be str, bytes or a path, not {type(key).__name__}")
    text = raw.decode("utf-8", "surrogateescape").replace("%", "%25")
    return text.translate(_SURROGATE_BYTES)


def unescape_key(text: str) -> bytes:
    """The bytes :func:`escape_key` escaped (``%XX`` back to the byte ``XX``)."""
    return unquote_to_bytes(text)


def escape_run(run_id: str) -> str:
    """``%`` and ``/`` escaped (a run id or stream id as one part of a tag)."""
    return run_id.replace("%", "%25").replace("/", "%2F")


@dataclass(frozen=True)
class TagScheme:
    """The tags of one tracking object (module doc): ``run_id`` (any text) and a
    ``nonce`` of 16 hex digits (random by default)."""

    run_id: str
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or not self.run_id:
            raise InvalidConfig(f"run_id must be a non-empty str, got {self.run_id!r}")
        if len(self.nonce) != 16 or any(c not in "0123456789abcdef" for c in self.nonce):
            raise InvalidConfig(f"nonce must be 16 lower-case hex digits, got {self.nonce!r}")

    @property
    def prefix(self) -> str:
        return f"{escape_run(self.run_id)}/{self.nonce}/"

    @property
    def owner(self) -> str:
        """Who the chains of this scheme belong to: the escaped run id and the nonce."""
        return self.prefix.rstrip("/")

    def tag(self, key: str | bytes | os.PathLike[str] | os.PathLike[bytes], attempt: int) -> str:
        """The tag of ``key``'s chain on ``attempt`` (from 1); raises :class:`InvalidTag`
        if it would be longer than DynamoDB allows."""
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
            raise InvalidConfig(f"attempt must be an int from 1, got {attempt!r}")
        return check_tag(f"{self.prefix}{attempt}/{escape_key(key)}")

    def escaped(self, escaped_key: str, attempt: int) -> str:
        """Like :meth:`tag` for a key already escaped with :func:`escape_key`."""
        return f"{self.prefix}{attempt}/{escaped_key}"


class EdgeKey:
    """Root edges of one run: ``key`` (16 to 64 bytes used) and the edge ``size``. A root
    edge ``r`` is what the root's chain is created holding and finished by, one stamp
    (:class:`Group`): a keyed BLAKE2b of the root's label, the same under the same key (a
    re-run streaming micro-batch sends what its first run sent), unrelated across runs,
    unpredictable without the key; 8 to 64 bytes wide, never zero."""

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

    def root(self, label: str) -> int:
        """The root edge named by ``label`` (a chain's tag)."""
        h = self._keyed.copy()
        for part in (b"root", label.encode("utf-8", "surrogatepass")):
            h.update(len(part).to_bytes(4, "big"))
            h.update(part)
        return int.from_bytes(h.digest(), "big") or 1


@dataclass(frozen=True, slots=True)
class Group:
    """The group of one tracked run's chains: an edge ``r`` is ``r`` itself in xor mode
    (``size`` big-endian bytes), an int in sum mode, finished by ``-r``."""

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
