"""Stamps: the values XORed into a chain.

A stamp is an immutable ``bytes`` value. A chain's stored stamp is the XOR of every edge
that was started and not yet finished; it is all zeros exactly when every started edge
has also been finished (up to a chance of 2**-(8*size) for random edges, which is why
edges must be random and large enough: 16 bytes by default, Storm uses 8).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import (
    BufferLengthsUnequal,
    InvalidConfig,
    InvalidStamp,
    InvalidStampType,
    InvalidTag,
    InvalidTagType,
    LessThanTwoBuffers,
)

__all__ = [
    "Stamp",
    "Sum",
    "Position",
    "xor",
    "new_stamp",
    "derive_edge",
    "MAX_STAMP_BYTES",
    "MAX_TAG_BYTES",
    "RESERVED_PREFIX",
]

#: DynamoDB's limit on the size of a partition key value.
MAX_TAG_BYTES = 2048
#: The keys of the items a chain's op history moves into start with this; no chain's
#: tag may (``InvalidTag``), so the two can never collide.
RESERVED_PREFIX = "\x00xa/"
#: The largest stamp the library accepts. 1 KiB keeps a chain's item (stamp, op ids,
#: timestamps) near one write unit; real edges are 8 to 64 bytes.
MAX_STAMP_BYTES = 1024

BytesLike = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class Position:
    """Where an op landed on a chain: the chain's ``lineage`` (8 random bytes drawn when
    the chain was created; empty for a chain written by an older version or a foreign
    writer) and the op's ``seq`` (ops are numbered 1, 2, ... in the order they landed;
    a create is 0).

    Every value a tracker's ``create()`` or ``stamp()`` returns carries one
    (``result.position``). Pass it on as ``stamp(..., after=position)`` from work that
    could only have been sent after that op landed (a child message sent by the stamp
    that started it): a copy of the child can then only have landed after it, and the
    duplicate check reads no further back. ``str(position)`` and :meth:`parse` carry it
    through a message."""

    lineage: bytes
    seq: int

    def __str__(self) -> str:
        return f"{self.lineage.hex()}:{self.seq}"

    @classmethod
    def parse(cls, text: str) -> Position:
        """The position ``str(position)`` wrote. Raises :class:`InvalidConfig` for
        anything else."""
        try:
            lineage, seq = text.split(":")
            found = cls(bytes.fromhex(lineage), int(seq))
        except (AttributeError, ValueError):
            raise InvalidConfig(f"not a chain position: {text!r}") from None
        if found.seq < 0 or len(found.lineage) not in (0, 8) or str(found) != text:
            raise InvalidConfig(f"not a chain position: {text!r}")
        return found


class Stamp(bytes):
    """An immutable stamp: the value of an XOR chain, or an edge of one.

    Being a ``bytes`` subclass, a ``Stamp`` compares equal to the same bytes and can be
    passed anywhere bytes are expected (boto3 Binary attributes among them).

    ``acked`` is True when every byte is zero, except on a value returned by a
    tracker's ``stamp()``: there it says whether *that call's op* completed the chain,
    so that exactly one caller sees it even when a duplicate delivery of another op
    finds the chain finished. ``duplicate`` is True when the op had been applied before
    (the call changed nothing and returns the chain's current value). ``position`` (on
    a value a tracker returned) is where the call's op landed: see :class:`Position`.
    """

    __slots__ = ()
    _acked: bool | None = None
    duplicate: bool = False
    position: Position | None = None

    @property
    def acked(self) -> bool:
        """True when the chain this value came from is complete (see the class doc)."""
        return not any(self) if self._acked is None else self._acked

    def __repr__(self) -> str:
        return f"Stamp({self.hex()!r}, acked={self.acked})"


class _StampResult(Stamp):
    """A :class:`Stamp` returned by a tracker: it carries the call's own flags."""


class Sum(int):
    """The value of a sum-mode chain (``mode="sum"``): the running sum of the edges
    started and not yet finished. ``acked`` and ``duplicate`` mean what they mean on a
    :class:`Stamp`: zero is complete, and on a value returned by ``stamp()``, ``acked``
    says whether that call's op completed the chain."""

    __slots__ = ()
    _acked: bool | None = None
    duplicate: bool = False
    position: Position | None = None

    @property
    def acked(self) -> bool:
        """True when the chain this value came from is complete."""
        return self == 0 if self._acked is None else self._acked

    def __repr__(self) -> str:
        return f"Sum({int(self)}, acked={self.acked})"


class _SumResult(Sum):
    """A :class:`Sum` returned by a tracker: it carries the call's own flags."""


def result(
    value: bytes | int, *, acked: bool, duplicate: bool = False, position: Position | None = None
) -> Stamp | Sum:
    """A tracker's return value: ``value`` as a :class:`Stamp` (bytes) or :class:`Sum`
    (int) carrying the call's own ``acked``, ``duplicate`` and ``position``."""
    out: _StampResult | _SumResult = _StampResult(value) if isinstance(value, bytes) else _SumResult(value)
    out._acked = acked
    out.duplicate = duplicate
    out.position = position
    return out


def as_bytes(value: object, *, tag: str | None = None) -> bytes:
    """Return ``value`` as ``bytes``, or raise :class:`InvalidStampType` /
    :class:`InvalidStamp` (empty, or over :data:`MAX_STAMP_BYTES`)."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise InvalidStampType(
            f"a stamp must be bytes-like (bytes, bytearray, memoryview), not {type(value).__name__}",
            tag=tag,
        )
    data = bytes(value)
    if not data:
        raise InvalidStamp("a stamp must not be empty", tag=tag)
    if len(data) > MAX_STAMP_BYTES:
        raise InvalidStamp(f"a stamp must be at most {MAX_STAMP_BYTES} bytes, got {len(data)}", tag=tag)
    return data


def check_tag(tag: object) -> str:
    """Return ``tag`` if it is a usable chain tag, else raise :class:`InvalidTag`.

    A usable tag is a non-empty ``str`` whose UTF-8 encoding (which must exist: lone
    surrogates have none) is at most :data:`MAX_TAG_BYTES` bytes, and which does not
    start with :data:`RESERVED_PREFIX` (the keys of the chains' op history).
    """
    if not isinstance(tag, str):
        raise InvalidTagType(f"a tag must be a str, not {type(tag).__name__}")
    if not tag:
        raise InvalidTag("a tag must not be empty")
    try:
        size = len(tag.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidTag(f"a tag must be encodable as UTF-8 ({exc.reason})") from None
    if size > MAX_TAG_BYTES:
        raise InvalidTag(f"a tag must be at most {MAX_TAG_BYTES} bytes of UTF-8, got {size}")
    if tag.startswith(RESERVED_PREFIX):
        raise InvalidTag(f"a tag must not start with {RESERVED_PREFIX!r}: the library's own items do")
    return tag


def check_tags(tags: Iterable[str]) -> list[str]:
    """Every tag of ``tags`` checked with :func:`check_tag`. A bare ``str`` is refused
    with :class:`InvalidTagType` rather than read as an iterable of one-letter tags."""
    if isinstance(tags, (str, bytes)):
        raise InvalidTagType("expected an iterable of tags, not a single str; wrap it in a list")
    return [check_tag(t) for t in tags]


def xor(*stamps: BytesLike) -> Stamp:
    """XOR two or more bytes-like values of equal length.

    Raises :class:`LessThanTwoBuffers` for fewer than two values,
    :class:`BufferLengthsUnequal` when lengths differ, and :class:`InvalidStampType`
    for a value that is not bytes-like. Empty values of equal length give an empty
    ``Stamp``.
    """
    if len(stamps) < 2:
        raise LessThanTwoBuffers(f"xor() needs at least two stamps, got {len(stamps)}")
    return xor_all(stamps)


def xor_all(stamps: Iterable[BytesLike]) -> Stamp:
    """XOR any number (one or more) of equal-length values; see :func:`xor`."""
    size: int | None = None
    acc = 0
    for value in stamps:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise InvalidStampType(f"xor() takes bytes-like values, not {type(value).__name__}")
        data = bytes(value)
        if size is None:
            size = len(data)
        elif len(data) != size:
            raise BufferLengthsUnequal(
                f"cannot XOR stamps of different lengths ({size} and {len(data)} bytes)"
            )
        acc ^= int.from_bytes(data, "big")
    if size is None:
        raise LessThanTwoBuffers("xor_all() needs at least one stamp")
    return Stamp(acc.to_bytes(size, "big"))


def new_stamp(size: int = 16) -> Stamp:
    """A random stamp of ``size`` bytes from :mod:`secrets`, never all zeros."""
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_STAMP_BYTES:
        raise InvalidStamp(f"a stamp size must be an int from 1 to {MAX_STAMP_BYTES}, got {size!r}")
    while True:
        data = secrets.token_bytes(size)
        if any(data):
            return Stamp(data)


def derive_edge(key: bytes, parent: bytes, index: int | str | bytes) -> Stamp:
    """A child edge derived deterministically from its parent edge and its position.

    Keyed BLAKE2b of ``parent`` and ``index``, as long as ``parent`` (at most 64 bytes).
    The same inputs give the same edge on every machine and every attempt, which is what
    lets a recomputed Spark partition re-emit exactly the edges its first attempt did.
    ``key`` (at most 64 bytes) keeps edges of different runs unrelated. The result is
    never all zeros.
    """
    size = len(parent)
    if not 1 <= size <= 64:
        raise InvalidStamp(f"derive_edge() needs a parent edge of 1 to 64 bytes, got {size}")
    if isinstance(index, int):
        label = index.to_bytes(8, "big", signed=True)
    elif isinstance(index, str):
        label = index.encode("utf-8")
    else:
        label = bytes(index)
    counter = 0
    while True:
        h = hashlib.blake2b(digest_size=size, key=key[:64])
        h.update(bytes(parent))
        h.update(len(label).to_bytes(4, "big"))
        h.update(label)
        if counter:
            h.update(counter.to_bytes(4, "big"))
        digest = h.digest()
        if any(digest):
            return Stamp(digest)
        counter += 1
