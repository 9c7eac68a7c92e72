"""The per-partition functions of tracked steps (what Spark ships to executors).

Each takes the step's :class:`RunSpec`, name and user function first (bound with
``functools.partial`` on the driver, so a closure never captures a SparkContext or a
client), then the partition index and its iterator, as ``mapPartitionsWithIndex`` wants.
Records are ``(value, anchors)`` pairs; see :data:`Anchors`.

Exceptions raised by user functions fail the record's chains and the partition goes on;
a record that raised is dropped without acking its edges, so its chains cannot reach
zero whatever else arrives. Everything else (DynamoDB unreachable) fails the task, which
Spark retries; deterministic edges and op ids make the retry safe.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..errors import TagExists
from ..stamps import derive_edge
from .executor import Anchors, Ledger, RunSpec, executor_tracker, report, snapshot

__all__ = [
    "root_edge",
    "start_partition",
    "start_fan_out_partition",
    "fan_out_partition",
    "map_partition",
    "filter_partition",
    "key_partition",
    "combine",
    "unpack_partition",
    "sink_partition",
]

Record = tuple[Any, Anchors]
#: A reduce value on its way through the shuffle: (value, anchors, error or None).
Combined = tuple[Any, Anchors, str | None]


class EdgeDeriver:
    """``derive_edge(key, parent, position)`` for many children, as ints: the same
    values (a test checks it), from a BLAKE2b state keyed once and copied per child
    instead of keyed per call, which halves the per-record cost of a fan-out."""

    def __init__(self, key: bytes, size: int) -> None:
        self.key = key
        self.size = size
        self._keyed = hashlib.blake2b(digest_size=size, key=key[:64])

    def child(self, parent: bytes, position: int) -> int:
        h = self._keyed.copy()
        h.update(parent)
        h.update(b"\x00\x00\x00\x08")  # the length of the 8-byte position label
        h.update(position.to_bytes(8, "big", signed=True))
        digest = h.digest()
        if not any(digest):  # derive_edge's rehashing of an all-zero digest (2**-128)
            digest = derive_edge(self.key, parent, position)
        return int.from_bytes(digest, "big")


def root_edge(spec: RunSpec, tag: str) -> int:
    """A chain's first edge: derived from the run key and the tag, so a retried start
    creates the chain with the same stamp its first attempt did."""
    edge = derive_edge(spec.key, bytes(spec.edge_size), tag)
    return int.from_bytes(edge, "big")


def start_partition(
    spec: RunSpec, step: str, key: Callable[[Any], str], suffix: str, index: int, roots: Iterable[Any]
) -> Iterator[Record]:
    """Create one chain per root (tag ``key(root) + suffix``) and emit the root anchored
    to it. The create carries the op id ``<run>/<step>/<tag>``: a retried task's create
    is recognised as already applied."""
    tracker = executor_tracker(spec.config)
    before = snapshot(tracker)
    created = 0
    size = spec.edge_size
    for root in roots:
        tag = key(root) + suffix
        edge = root_edge(spec, tag)
        try:
            tracker.create(tag, edge.to_bytes(size, "big"), op_id=f"{spec.run_id}/{step}/{tag}")
        except TagExists:
            # Tags carry the run id, so only this run creates them: this is our own
            # create, from an earlier attempt of this task, whose op id the chain has
            # since forgotten (more than max_ops ops landed on it).
            pass
        created += 1
        yield root, {tag: edge}
    report(spec, tracker, before, Counter({"chains_created": created}))
    if spec.after_flush is not None:
        spec.after_flush(step, index)


def fan_out_partition(
    spec: RunSpec, step: str, fn: Callable[[Any], Iterable[Any]], index: int, records: Iterable[Record]
) -> Iterator[Record]:
    """Replace each record by its children. The partition's stamp per chain acks every
    parent edge and starts every child edge; child ``i`` of a parent gets, per chain,
    ``derive_edge(run key, parent edge, i)``."""
    ledger = Ledger(spec, step, index)
    size = spec.edge_size
    edges = EdgeDeriver(spec.key, size)
    for value, anchors in records:
        try:
            children = list(fn(value))
        except Exception as exc:
            ledger.fail(anchors, exc)
            continue
        parents = [(tag, edge.to_bytes(size, "big")) for tag, edge in anchors.items()]
        started: Anchors = {}
        out: list[Record] = []
        for position, child in enumerate(children):
            child_anchors = {tag: edges.child(parent, position) for tag, parent in parents}
            for tag, edge in child_anchors.items():
                started[tag] = started.get(tag, 0) ^ edge
            out.append((child, child_anchors))
        ledger.ack(anchors)
        ledger.ack(started)
        yield from out
    ledger.flush()


def start_fan_out_partition(
    spec: RunSpec,
    step: str,
    key: Callable[[Any], str],
    suffix: str,
    fn: Callable[[Any], Iterable[Any]],
    index: int,
    roots: Iterable[Any],
) -> Iterator[Record]:
    """``start`` and ``fan_out`` in one step: each root's chain is created at the end of
    the partition already holding its children's edges (the root edge is started and
    acked in the same write). A root whose ``fn`` raised gets a chain created and failed.
    The children are emitted before the chain exists; every step after this one flushes
    later (in this task, its flush follows this one; other tasks run after this one
    ended), so no stamp can reach a chain that is not there yet."""
    ledger = Ledger(spec, step, index)
    size = spec.edge_size
    edges = EdgeDeriver(spec.key, size)
    for root in roots:
        tag = key(root) + suffix
        edge = root_edge(spec, tag)
        ledger.create(tag, edge)
        try:
            children = list(fn(root))
        except Exception as exc:
            ledger.fail([tag], exc)
            continue
        parent = edge.to_bytes(size, "big")
        started = 0
        out: list[Record] = []
        for position, child in enumerate(children):
            child_edge = edges.child(parent, position)
            started ^= child_edge
            out.append((child, {tag: child_edge}))
        ledger.ack({tag: edge ^ started})
        yield from out
    ledger.flush()


def map_partition(
    spec: RunSpec, step: str, fn: Callable[[Any], Any], index: int, records: Iterable[Record]
) -> Iterator[Record]:
    """Replace each value by ``fn(value)``; the record keeps its anchors (no stamp)."""
    ledger = Ledger(spec, step, index)
    for value, anchors in records:
        try:
            result = fn(value)
        except Exception as exc:
            ledger.fail(anchors, exc)
            continue
        yield result, anchors
    ledger.flush()


def filter_partition(
    spec: RunSpec, step: str, pred: Callable[[Any], bool], index: int, records: Iterable[Record]
) -> Iterator[Record]:
    """Keep records whose value passes ``pred``; a dropped record is finished, so its
    edges are acked."""
    ledger = Ledger(spec, step, index)
    for value, anchors in records:
        try:
            keep = pred(value)
        except Exception as exc:
            ledger.fail(anchors, exc)
            continue
        if keep:
            yield value, anchors
        else:
            ledger.ack(anchors)
    ledger.flush()


def key_partition(
    spec: RunSpec, step: str, index: int, records: Iterable[Record]
) -> Iterator[tuple[Any, Combined]]:
    """Turn ``((k, v), anchors)`` records into shuffle pairs ``(k, (v, anchors, None))``;
    a value that is not a pair fails its chains."""
    ledger = Ledger(spec, step, index)
    for value, anchors in records:
        try:
            k, v = value
        except (TypeError, ValueError) as exc:
            ledger.fail(anchors, exc)
            continue
        yield k, (v, anchors, None)
    ledger.flush()


def combine(fn: Callable[[Any, Any], Any], a: Combined, b: Combined) -> Combined:
    """Merge two shuffle values: ``fn`` on the values, anchors merged by XOR per chain
    (the result stands for every input it combines). If ``fn`` raises, the result carries
    the error and the anchors of both sides, whose chains fail after the shuffle."""
    value_a, anchors, error_a = a
    value_b, anchors_b, error_b = b
    # In place: each shuffle value (and its anchors dict) is owned by the one record
    # being combined, as in any reduceByKey combiner.
    for tag, edge in anchors_b.items():
        anchors[tag] = anchors.get(tag, 0) ^ edge
    error = error_a or error_b
    value = None
    if error is None:
        try:
            value = fn(value_a, value_b)
        except Exception as exc:
            error = repr(exc)
    return value, anchors, error


def unpack_partition(
    spec: RunSpec, step: str, index: int, pairs: Iterable[tuple[Any, Combined]]
) -> Iterator[Record]:
    """Back from the shuffle to ``((k, v), anchors)`` records; values whose combining
    raised fail their chains here."""
    ledger = Ledger(spec, step, index)
    for k, (value, anchors, error) in pairs:
        if error is not None:
            ledger.fail(anchors, error)
            continue
        yield (k, value), anchors
    ledger.flush()


def sink_partition(
    spec: RunSpec, step: str, writer: Callable[[int, list[Any]], None], index: int, records: Iterable[Record]
) -> Iterator[int]:
    """Write the partition's values with ``writer`` and only then ack their edges.

    ``writer(index, values)`` must return only once the output is durable, and must be
    idempotent per partition (a retried or speculative task writes the same values
    again). If it raises, the partition's chains fail instead (they will be replayed).
    Yields the number of values written.
    """
    ledger = Ledger(spec, step, index)
    values: list[Any] = []
    for value, anchors in records:
        values.append(value)
        ledger.ack(anchors)
    try:
        writer(index, values)
    except Exception as exc:
        tags = list(ledger.pending)
        ledger.pending.clear()
        ledger.fail(tags, exc)
        values = []
    ledger.flush()
    yield len(values)
