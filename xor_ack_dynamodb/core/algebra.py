"""The two groups a chain can count in, xor and sum (docs/concepts.md, "xor or sum:
which mode"): each validates values before any request is sent, computes a stamp's delta
and the canonical bytes an op id's payload hash covers.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidConfig, InvalidStamp, InvalidStampType, ZeroBufferNoOp
from ..stamps import MAX_STAMP_BYTES, Stamp, as_bytes, new_stamp, xor_all

Mode = Literal["xor", "sum"]
#: A chain's stored value: bytes in xor mode, an int in sum mode.
Value = bytes | int
#: What callers may pass as an edge or a stamp.
EdgeLike = bytes | bytearray | memoryview | int

#: DynamoDB Numbers keep 38 significant digits: a sum-mode value (and every delta) must
#: stay below this in magnitude to be exact.
MAX_SUM = 10**38 - 1
#: Sum-mode edges are in [1, 2**64): random ones are drawn from [1, 2**63) (as Storm's
#: 64-bit ids), and unsigned 64-bit hashes (Spark's xxhash64 masked) also fit.
EDGE_LIMIT = 2**64


@dataclass(frozen=True, slots=True)
class XorAlgebra:
    """XOR over byte strings of one length (``edge_size`` for :meth:`new_edge`)."""

    edge_size: int = 16
    mode: Mode = "xor"

    def __post_init__(self) -> None:
        if not isinstance(self.edge_size, int) or not 1 <= self.edge_size <= MAX_STAMP_BYTES:
            raise InvalidConfig(f"edge_size must be 1 to {MAX_STAMP_BYTES} bytes, got {self.edge_size!r}")

    def new_edge(self) -> Stamp:
        """A random edge (never all zeros)."""
        return new_stamp(self.edge_size)

    def value(self, value: object, tag: str | None) -> bytes:
        """``value`` checked as a stamp: bytes-like, 1 to ``MAX_STAMP_BYTES`` bytes."""
        if isinstance(value, int):
            raise InvalidStampType(
                "an xor-mode chain takes bytes stamps, not int (a sum-mode value)", tag=tag
            )
        return as_bytes(value, tag=tag)

    def delta(
        self,
        value: object | None,
        finished: Iterable[object],
        started: Iterable[object],
        tag: str | None,
    ) -> bytes:
        """The stamp to apply: ``value``, or the XOR of every finished and started edge.
        Raises :class:`ZeroBufferNoOp` when it is all zeros (it would change nothing)."""
        given, done, begun = _forms(value, finished, started, tag)
        edges = [self.value(e, tag) for e in ([given] if given is not None else done + begun)]
        delta = bytes(xor_all(edges))
        if not any(delta):
            raise ZeroBufferNoOp("stamping with an all-zero stamp changes nothing", tag=tag)
        return delta

    def combine(self, a: Value, b: Value) -> bytes:
        assert isinstance(a, bytes) and isinstance(b, bytes)
        return bytes(xor_all((a, b)))

    def payload(self, value: Value) -> bytes:
        assert isinstance(value, bytes)
        return value


@dataclass(frozen=True, slots=True)
class SumAlgebra:
    """Addition over integers: started edges are added, finished edges subtracted."""

    mode: Mode = "sum"

    def new_edge(self) -> int:
        """A random edge in [1, 2**63)."""
        return secrets.randbelow(2**63 - 1) + 1

    def value(self, value: object, tag: str | None) -> int:
        """``value`` checked as a sum-mode value: an int (not a bool) with at most 38
        digits."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidStampType(f"a sum-mode chain takes int values, not {type(value).__name__}", tag=tag)
        if abs(value) > MAX_SUM:
            raise InvalidStamp("a sum-mode value must have at most 38 digits (DynamoDB's Number)", tag=tag)
        return int(value)

    def edge(self, value: object, tag: str | None) -> int:
        """``value`` checked as a sum-mode edge: an int in [1, 2**64)."""
        edge = self.value(value, tag)
        if not 0 < edge < EDGE_LIMIT:
            raise InvalidStamp(f"a sum-mode edge must be in [1, 2**64), got {edge}", tag=tag)
        return edge

    def delta(
        self,
        value: object | None,
        finished: Iterable[object],
        started: Iterable[object],
        tag: str | None,
    ) -> int:
        """``value``, or the sum of the started edges minus the finished ones. Raises
        :class:`ZeroBufferNoOp` for zero and :class:`InvalidStamp` past 38 digits."""
        given, done, begun = _forms(value, finished, started, tag)
        if given is not None:
            delta = self.value(given, tag)
        else:
            delta = sum(self.edge(e, tag) for e in begun) - sum(self.edge(e, tag) for e in done)
            if abs(delta) > MAX_SUM:
                raise InvalidStamp("a stamp's delta must have at most 38 digits", tag=tag)
        if delta == 0:
            raise ZeroBufferNoOp("stamping with a zero delta changes nothing", tag=tag)
        return delta

    def combine(self, a: Value, b: Value) -> int:
        assert isinstance(a, int) and isinstance(b, int)
        return a + b

    def payload(self, value: Value) -> bytes:
        assert isinstance(value, int)
        return str(value).encode()


Algebra = XorAlgebra | SumAlgebra


def is_zero(value: Value) -> bool:
    """Whether ``value`` is a complete chain's: all zero bytes (xor), or 0 (sum)."""
    return not any(value) if isinstance(value, bytes) else value == 0


def is_negative(value: Value) -> bool:
    """Whether a sum went below zero (never an xor value)."""
    return isinstance(value, int) and value < 0


def algebra_for(mode: object, edge_size: int = 16) -> Algebra:
    """The algebra of ``mode`` (``"xor"`` or ``"sum"``); :class:`InvalidConfig` otherwise."""
    if mode == "xor":
        return XorAlgebra(edge_size)
    if mode == "sum":
        return SumAlgebra()
    raise InvalidConfig(f"mode must be 'xor' or 'sum', got {mode!r}")


def _forms(
    value: object | None, finished: Iterable[object], started: Iterable[object], tag: str | None
) -> tuple[object | None, list[object], list[object]]:
    """The positional and keyword forms of ``stamp()``, checked: exactly one of them."""
    if isinstance(finished, (str, bytes, bytearray, memoryview, int)) or isinstance(
        started, (str, bytes, bytearray, memoryview, int)
    ):
        raise InvalidStampType("finished= and started= take iterables of edges, not one edge", tag=tag)
    finished, started = list(finished), list(started)
    if value is not None:
        if finished or started:
            raise InvalidStamp("pass either a stamp value or finished=/started= edges, not both", tag=tag)
        return value, [], []
    if not finished and not started:
        raise InvalidStamp("stamp() needs a value, or edges finished and/or started", tag=tag)
    return None, finished, started
