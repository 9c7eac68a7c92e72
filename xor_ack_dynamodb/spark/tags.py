"""Chain tags of tracked runs: unique per :class:`TagScheme`, unambiguous, valid UTF-8.

A tag is ``<run id>/<nonce>/<attempt>/<key>``:

- the run id, with ``%`` and ``/`` percent-escaped, so it never contains a ``/``;
- a random 64-bit nonce drawn per tracking object: two runs never share a chain, even
  with the same run id and the same keys (a reused run id, a job run twice over the same
  files);
- the attempt number, in decimal: attempt 2 of root ``x`` (``…/2/x``) can never be
  attempt 1 of a root whose key is ``x#2`` (``…/1/x#2``);
- the root's key, escaped by :func:`escape_key` into valid UTF-8.

:meth:`TagScheme.parse` splits a tag back on its first three ``/`` and returns the key
as given, which makes the encoding injective: two different (run, nonce, attempt, key)
never give the same tag.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from ..errors import InvalidConfig, InvalidTag
from ..stamps import check_tag

__all__ = ["TagScheme", "escape_key", "escape_run", "unescape_key", "ParsedTag"]

#: Lone surrogates U+DC80..U+DCFF, which ``surrogateescape`` decoding makes of
#: undecodable bytes 0x80..0xFF, written back as ``%XX``.
_SURROGATE_BYTES = {0xDC00 + b: f"%{b:02X}" for b in range(0x80, 0x100)}


def escape_key(key: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str:
    """A key as valid UTF-8 text, reversibly: ``%`` becomes ``%25`` and every byte that
    is not part of valid UTF-8 becomes ``%XX`` (upper-case hex).

    ``bytes`` (a raw file name) are taken as they are. A ``str`` is first encoded back
    to the bytes it stands for: file names that are not valid UTF-8 reach Python as
    ``str`` with lone surrogates (``os.fsdecode``'s ``surrogateescape``), and encoding
    them with ``surrogateescape`` gives the original bytes back. Other lone surrogates
    (which no file system produces) are encoded with ``surrogatepass`` and escaped in
    turn. Valid text other than ``%`` is left as it is, so ordinary keys stay readable.
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
class ParsedTag:
    """The parts of a tag made by :class:`TagScheme` (``key`` still escaped)."""

    run_id: str
    nonce: str
    attempt: int
    key: str


@dataclass(frozen=True)
class TagScheme:
    """The tags of one tracking object (see the module doc). Picklable.

    :param run_id: a readable name for the run (any text, even with ``/``).
    :param nonce: 16 hex digits; drawn at random when not given. Tests pass one to
        rebuild the tags of a known run.
    """

    run_id: str
    nonce: str = field(default_factory=lambda: secrets.token_hex(8))

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or not self.run_id:
            raise InvalidConfig(f"run_id must be a non-empty str, got {self.run_id!r}")
        if len(self.nonce) != 16 or any(c not in "0123456789abcdef" for c in self.nonce):
            raise InvalidConfig(f"nonce must be 16 lower-case hex digits, got {self.nonce!r}")

    @property
    def prefix(self) -> str:
        """What every tag of this scheme starts with."""
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

    def owns(self, tag: str) -> bool:
        """True for a tag this scheme made."""
        return tag.startswith(self.prefix)

    def parse(self, tag: str) -> ParsedTag:
        """The parts of a tag; raises :class:`InvalidTag` for a tag of another scheme."""
        if not self.owns(tag):
            raise InvalidTag(f"{tag!r} is not a tag of run {self.run_id!r} ({self.nonce})")
        attempt, sep, key = tag[len(self.prefix) :].partition("/")
        if not sep or not attempt.isdigit():
            raise InvalidTag(f"{tag!r} has no attempt number")
        return ParsedTag(self.run_id, self.nonce, int(attempt), key)
