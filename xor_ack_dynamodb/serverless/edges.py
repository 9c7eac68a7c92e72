"""Deterministic edges, op ids and owners (keyed BLAKE2b): a start's from the tag, its
incarnation and the child's position, a child's from its parent's edge and its position.
So a retried handler re-derives the very edges of its first attempt, and the op id
finishing an edge is a function of that edge alone: every kind of copy is applied once.
"""

from __future__ import annotations

import hashlib

from ..core.algebra import Mode
from ..stamps import Stamp, derive_edge, xor_all

#: An edge as the serverless layer handles it: bytes (xor mode) or an int (sum mode).
Edge = bytes | int

#: The BLAKE2b key of every derivation here: keeps these edges apart from the Spark layer's.
EDGE_KEY = b"xor-ack-dynamodb/serverless/v1"

_SUM_RANGE = 2**63 - 1

#: How every owner :func:`owner_for` derives begins: the stream handler's default filter
#: for "chains of a serverless pipeline".
OWNER_PREFIX = "inc-"


def _sum_edge(parent: bytes, label: bytes) -> int:
    data = len(parent).to_bytes(4, "big") + parent + label
    digest = hashlib.blake2b(data, digest_size=8, key=EDGE_KEY).digest()
    return int.from_bytes(digest, "big") % _SUM_RANGE + 1


def _label(index: int) -> bytes:
    return index.to_bytes(8, "big", signed=False)


def child_edge(parent: Edge, index: int) -> Edge:
    """The edge of the ``index``-th child emitted by the holder of ``parent`` (same type
    as ``parent``; never zero)."""
    if isinstance(parent, int):
        return _sum_edge(b"child" + parent.to_bytes(8, "big"), _label(index))
    return derive_edge(EDGE_KEY, parent, index)


def _seed(tag: str, incarnation: str, size: int) -> bytes:
    data = f"{tag}\x00{incarnation}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=size, key=EDGE_KEY).digest()


def root_edge(mode: Mode, tag: str, incarnation: str, edge_size: int = 16) -> Edge:
    """The edge a start holds itself (used when a start has no children, so that its
    chain has something to finish)."""
    seed = _seed(tag, incarnation, edge_size)
    if mode == "sum":
        return _sum_edge(b"root" + seed, b"")
    return derive_edge(EDGE_KEY, seed, "root")


def start_edge(mode: Mode, tag: str, incarnation: str, index: int, edge_size: int = 16) -> Edge:
    """The edge of a start's ``index``-th child."""
    seed = _seed(tag, incarnation, edge_size)
    if mode == "sum":
        return _sum_edge(b"start" + seed, _label(index))
    return derive_edge(EDGE_KEY, seed, index)


def combine(mode: Mode, edges: list[Edge]) -> Edge:
    """The value a chain starts with when it holds ``edges``: their XOR or their sum."""
    if mode == "sum":
        return sum(int(e) for e in edges)
    return Stamp(xor_all([e for e in edges if isinstance(e, bytes)]))


def edge_text(edge: Edge) -> str:
    """An edge as the envelope writes it: hex digits (xor), decimal digits (sum)."""
    return str(edge) if isinstance(edge, int) else bytes(edge).hex()


def op_id(edge: Edge) -> str:
    """The op id of the stamp that finishes ``edge`` (and starts its children): the same
    for every copy of the message that carries it."""
    return f"edge:{edge_text(edge)}"


def owner_for(tag: str, incarnation: str) -> str:
    """The owner a start stores on its chain: derived from the incarnation, so a start
    run again names the same owner, while a new incarnation of the same tag (a replay
    after expiry) names another and its predecessor's late messages are refused."""
    return OWNER_PREFIX + _seed(tag, "owner\x00" + incarnation, 12).hex()
