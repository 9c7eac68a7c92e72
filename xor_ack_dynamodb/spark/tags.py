"""Chain tags of tracked runs (docs/spark.md, "Chains belong to their run"):
``<run id>/<nonce>/<attempt>/<key>``, valid UTF-8. Split on its first three ``/``, a tag
gives its parts back: two different (run, nonce, attempt, key) never share a tag.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from ..errors import InvalidConfig, InvalidTag
from ..stamps import check_tag

__all__ = ["TagScheme", "escape_key", "escape_run", "unescape_key"]

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
