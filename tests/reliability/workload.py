"""Random trees of work, their stamps, and the truth every stamp is checked against.

A :class:`Tree` is one chain: node 0 is the root message, whose edge the chain is created
with; finishing node *n* is one stamp (finished: its own edge; started: its children's),
with its own op id. :class:`ChainTruth` keeps, beside the chain, which stamps have been
started and which have returned, and checks every returned value against the true
open-edge set.

The chain counts in a :class:`Group`: ``XOR`` (bytes; a stamp is ``edge(n) ^
edge(child) ^ ...``) or ``SUM`` (ints; a stamp is ``edge(child) + ... - edge(n)``). The
checker's group is written here, apart from the library's algebra, so that the checks do
not trust the code they check.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from functools import reduce
from typing import Literal

from xor_ack_dynamodb import Stamp, Sum

__all__ = ["Group", "XOR", "SUM", "Tree", "random_tree", "ChainTruth", "Verdict"]


@dataclass(frozen=True)
class Group:
    """The group a chain counts in, on ints: XOR (edges as unsigned big-endian ints) or
    addition. A tree's values travel to the tracker as its mode takes them (bytes or
    int) and are compared here as ints."""

    mode: Literal["xor", "sum"]

    def combine(self, a: int, b: int) -> int:
        return a ^ b if self.mode == "xor" else a + b

    def inverse(self, a: int) -> int:
        return a if self.mode == "xor" else -a

    def random_edge(self, rng: random.Random, edge_bytes: int) -> bytes | int:
        """A random non-zero edge (from ``rng``, so a seed reproduces a run): bytes, or
        an int in [1, 2**63) as the library's sum-mode edges are."""
        if self.mode == "sum":
            return rng.randrange(1, 2**63)
        edge = rng.randbytes(edge_bytes)
        return edge if any(edge) else b"\x01" * edge_bytes

    @staticmethod
    def as_int(value: bytes | int) -> int:
        return int.from_bytes(value, "big") if isinstance(value, bytes) else int(value)

    def as_value(self, number: int, like: bytes | int) -> bytes | int:
        """``number`` in the form the tracker takes (the width of ``like`` in xor mode)."""
        return number.to_bytes(len(like), "big") if isinstance(like, bytes) else number


XOR = Group("xor")
SUM = Group("sum")


@dataclass(frozen=True)
class Tree:
    """A tree of work: ``parents[n]`` is node *n*'s parent (-1 for the root)."""

    tag: str
    parents: tuple[int, ...]
    edges: tuple[bytes | int, ...]  # bytes in xor mode (the default), ints in sum mode
    group: Group = XOR

    @property
    def size(self) -> int:
        return len(self.parents)

    def children(self, node: int) -> list[int]:
        return [n for n, p in enumerate(self.parents) if p == node]

    def level(self, node: int) -> int:
        """How far ``node`` is from the root (the root: 0)."""
        return 0 if self.parents[node] < 0 else 1 + self.level(self.parents[node])

    def depth(self) -> int:
        return 1 + max(self.level(n) for n in range(self.size))

    def finished(self, node: int) -> list[bytes | int]:
        return [self.edges[node]]

    def started(self, node: int) -> list[bytes | int]:
        return [self.edges[c] for c in self.children(node)]

    def stamp(self, node: int) -> bytes | int:
        """Finishing ``node`` as one value: its own edge finished and the edges of the
        children it started (what ``stamp(tag, finished=..., started=...)`` applies)."""
        g = self.group
        own = g.inverse(g.as_int(self.edges[node]))
        total = reduce(g.combine, (g.as_int(e) for e in self.started(node)), own)
        return g.as_value(total, self.edges[node])

    def op_id(self, node: int) -> str:
        return f"{self.tag}/node-{node}"

    def open_edges(self, applied: set[int] | frozenset[int]) -> set[int]:
        """The nodes whose edge is started and not finished once ``applied`` stamps (and
        the chain's creation, which starts the root) have landed, in any order; or
        finished before it was started (the stamps land out of order): in either group
        exactly these edges keep the value from zero."""
        open_: set[int] = {0}
        for node in applied:
            open_ ^= {node, *self.children(node)}
        return open_


def random_tree(
    tag: str,
    rng: random.Random,
    *,
    min_depth: int = 3,
    max_depth: int = 5,
    max_fanout: int = 4,
    max_nodes: int = 30,
    min_nodes: int = 0,
    edge_bytes: int = 16,
    group: Group = XOR,
) -> Tree:
    """A random tree at least ``min_depth`` levels deep (the root is level 1) with random
    fan-out; edges are random in ``group`` (from ``rng``, so a seed reproduces a run).
    Until it has ``min_nodes`` nodes every node gets at least three children (so five
    levels hold up to 121)."""
    parents = [-1]
    depth_of = [1]
    spine = 0  # one path is forced down to min_depth
    frontier = [0]
    while frontier:
        node = frontier.pop(0)
        if depth_of[node] >= max_depth:
            continue
        fanout = rng.randint(0, max_fanout)
        if node == spine and depth_of[node] < min_depth:
            fanout = max(fanout, 1)
        if len(parents) < min_nodes:
            fanout = max(fanout, min(3, max_fanout))
        for i in range(fanout):
            if len(parents) >= max_nodes:
                break
            parents.append(node)
            depth_of.append(depth_of[node] + 1)
            child = len(parents) - 1
            if node == spine and i == 0:
                spine = child
            frontier.append(child)
    edges = tuple(group.random_edge(rng, edge_bytes) for _ in parents)
    return Tree(tag, tuple(parents), edges, group)


@dataclass
class Verdict:
    """What the checks found, over every chain of a run."""

    stamps_ok: int = 0
    false_acks: int = 0
    lost_acks: int = 0
    corrupt: int = 0
    wide_checks: int = 0  # too many stamps in flight to enumerate: checked by rules only
    problems: list[str] = field(default_factory=list)

    def merge(self, other: Verdict) -> None:
        self.stamps_ok += other.stamps_ok
        self.false_acks += other.false_acks
        self.lost_acks += other.lost_acks
        self.corrupt += other.corrupt
        self.wide_checks += other.wide_checks
        self.problems.extend(other.problems)


_MAX_ENUMERATED = 14


class ChainTruth:
    """The truth about one chain, updated as its stamps start and return (thread-safe).

    The set of stamps the table had applied when a stamp's write (or its duplicate
    check) happened is, at least, every stamp that had returned before this one started
    plus this one, and at most every stamp started by the time it returned. Each
    returned value must equal the root combined with the stamps of one such set (in
    the tree's group: the XOR, or the sum, of its open edges), and be acked
    exactly when that open-edge set is empty, with one exception: ``acked`` is the
    call's own (True only for the op that completed the chain), so a duplicate of
    another op (its first copy had landed, its response was lost) may return the zero
    value not acked. Over the whole chain exactly one call reports ``acked``.
    """

    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self._lock = threading.Lock()
        self._group = tree.group
        self._stamps = [tree.group.as_int(tree.stamp(n)) for n in range(tree.size)]
        self._root = tree.group.as_int(tree.edges[0])
        self.started: set[int] = set()
        self.returned: set[int] = set()
        self.acked_returns = 0
        self.verdict = Verdict()

    def start(self, node: int) -> frozenset[int]:
        """Call just before stamping ``node``; pass the result to :meth:`returned_value`."""
        with self._lock:
            self.started.add(node)
            return frozenset(self.returned)

    def returned_value(self, node: int, value: Stamp | Sum, returned_before: frozenset[int]) -> None:
        with self._lock:
            everything = frozenset(range(self.tree.size))
            sure = returned_before | {node}
            maybe = sorted(self.started - sure)
            self.returned.add(node)
            if value.acked:
                self.acked_returns += 1
            got = self._group.as_int(value)
            v = self.verdict
            if len(maybe) > _MAX_ENUMERATED:
                v.wide_checks += 1
                if value.acked and self.started != everything:
                    self._problem("false_acks", node, "acked while a stamp had not even started")
                elif not value.acked and not value.duplicate and sure == everything:
                    self._problem("lost_acks", node, "not acked although every other stamp had returned")
                return
            applied = self._matching(sure, maybe, got)
            if applied is None:
                if not value.acked and not value.duplicate and sure == everything:
                    self._problem("lost_acks", node, "not acked although every other stamp had returned")
                elif value.acked:
                    self._problem("false_acks", node, "acked, but no set of applied stamps gives zero")
                else:
                    self._problem("corrupt", node, f"value {value!r} matches no set of applied stamps")
                return
            open_edges = self.tree.open_edges(applied)
            if value.acked and open_edges:
                self._problem("false_acks", node, f"acked with open edges {sorted(open_edges)}")
            elif not value.acked and not open_edges and not value.duplicate:
                self._problem("lost_acks", node, "every edge finished but the call did not report acked")
            else:
                v.stamps_ok += 1

    def _matching(self, sure: frozenset[int], maybe: list[int], got: int) -> frozenset[int] | None:
        combine = self._group.combine
        base = reduce(lambda a, n: combine(a, self._stamps[n]), sure, self._root)
        for mask in range(1 << len(maybe)):
            value = base
            for bit, node in enumerate(maybe):
                if mask >> bit & 1:
                    value = combine(value, self._stamps[node])
            if value == got:
                return sure | {n for bit, n in enumerate(maybe) if mask >> bit & 1}
        return None

    def _problem(self, kind: str, node: int, what: str) -> None:
        setattr(self.verdict, kind, getattr(self.verdict, kind) + 1)
        self.verdict.problems.append(f"{self.tree.tag} node {node}: {what}")

    def finish(self) -> None:
        """Call once every stamp has returned: a chain that never returned an acked
        value lost its ack."""
        with self._lock:
            if self.returned == set(range(self.tree.size)) and self.acked_returns == 0:
                self._problem("lost_acks", -1, "every stamp returned and none returned acked")
            if self.acked_returns > 1:
                self._problem("false_acks", -1, f"{self.acked_returns} calls reported the chain acked")


def error_names(errors: list[BaseException]) -> Counter[str]:
    return Counter(type(e).__name__ for e in errors)
