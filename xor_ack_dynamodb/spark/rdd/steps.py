"""The per-partition functions of tracked steps (what Spark ships to executors).

Each takes the step's :class:`RunSpec`, name and user function first (bound with
``functools.partial`` on the driver, so a closure never captures a SparkContext or a
client), then the partition index and its iterator, as ``mapPartitionsWithIndex`` wants.
Records are ``(value, tag, anchor)`` triples; see :data:`~.executor.Record`. Anchors
combine in the run's :class:`~.group.Group`: XOR for xor chains, ``+`` for sum chains
(where a stamp adds the edges started and subtracts the anchors finished).

Every step passes carrier records (:class:`~.executor.Carry`: what earlier steps owe
their chains, on their way to the driver) through untouched, and ends by emitting its
own ledger's carrier, if any (see :mod:`.executor`). No step sends a request.

Exceptions raised by user functions fail the record's chains and the partition goes on;
a record that raised is dropped without acking its edges, so its chains cannot reach
zero whatever else arrives; the driver fails them after the sink. Deterministic edges
make a retried or recomputed task emit the same records and carriers.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..outcomes import failure_reason
from .executor import Anchor, Anchors, Carry, Ledger, Noted, Record, RunSpec

__all__ = [
    "start_partition",
    "fan_out_partition",
    "map_partition",
    "key_partition",
    "combine",
    "unpack_partition",
    "sink_partition",
    "SinkResult",
]

#: A reduce value on its way through the shuffle: (value, tag, anchor, error or None).
Combined = tuple[Any, str | None, Anchor, str | None]
#: What a sink partition returns to the driver: (values written, pending stamp per chain,
#: failure reason per chain, note per chain).
SinkResult = tuple[int, dict[str, int], dict[str, str], dict[str, str]]


def start_partition(
    spec: RunSpec, key: Callable[[Any], Any], index: int, roots: Iterable[Any]
) -> Iterator[Record]:
    """The first step over the roots: each root anchored to its chain's root edge (the
    driver creates the chains, holding that edge)."""
    for root in roots:
        tag = spec.tag(key(root))
        yield root, tag, spec.edges.root(tag)


def _children(spec: RunSpec, parent: int, count: int) -> tuple[list[int], int]:
    """``count`` child edges of ``parent`` and what starting them all adds to a stamp
    (their XOR, or their sum)."""
    edges = spec.edges.children(parent, count)
    return edges, sum(edges) if spec.group.is_sum else functools.reduce(operator.xor, edges, 0)


def fan_out_partition(
    spec: RunSpec,
    step: str,
    fn: Callable[[Any], Iterable[Any] | Noted],
    index: int,
    records: Iterable[Record],
) -> Iterator[Record]:
    """Replace each record by its children. The partition's stamp per chain acks every
    parent edge and starts every child edge; child ``i`` of a parent edge ``p`` gets the
    edge ``spec.edges.child(p, i)``, per chain."""
    ledger = Ledger(spec, step, index)
    pending = ledger.pending
    merge, finish = spec.group.merge, spec.group.finish
    for value, tag, anchor in records:
        if type(value) is Carry:
            yield value, tag, anchor
            continue
        try:
            result = fn(value)
            if isinstance(result, Noted):
                ledger.note([tag] if tag is not None else list(anchor), result.note)  # type: ignore[arg-type]
                result = result.items
            children = list(result)
        except Exception as exc:
            ledger.fail_anchor(tag, anchor, exc)
            continue
        if tag is not None:
            edges, started = _children(spec, anchor, len(children))  # type: ignore[arg-type]
            pending[tag] = merge(finish(pending.get(tag, 0), anchor), started)  # type: ignore[arg-type]
            for child, edge in zip(children, edges, strict=True):
                yield child, tag, edge
            continue
        anchors: Anchors = anchor  # type: ignore[assignment]
        per_chain = {}
        for chain, parent in anchors.items():
            edges, started = _children(spec, parent, len(children))
            pending[chain] = merge(finish(pending.get(chain, 0), parent), started)
            per_chain[chain] = edges
        for position, child in enumerate(children):
            yield child, None, {chain: edges[position] for chain, edges in per_chain.items()}
    yield from ledger.flush()


def map_partition(
    spec: RunSpec,
    step: str,
    fn: Callable[[Any], Any],
    index: int,
    records: Iterable[Record],
    *,
    keep: bool = False,
) -> Iterator[Record]:
    """Replace each value by ``fn(value)``; the record keeps its anchor (no stamp). With
    ``keep`` (a filter), keep the records whose value passes ``fn`` instead; a dropped
    record is finished, so its edges are acked."""
    ledger = Ledger(spec, step, index)
    for value, tag, anchor in records:
        if type(value) is Carry:
            yield value, tag, anchor
            continue
        try:
            result = fn(value)
        except Exception as exc:
            ledger.fail_anchor(tag, anchor, exc)
            continue
        if not keep:
            yield result, tag, anchor
        elif result:
            yield value, tag, anchor
        else:
            ledger.anchor(tag, anchor)
    yield from ledger.flush()


def key_partition(
    spec: RunSpec, step: str, index: int, records: Iterable[Record]
) -> Iterator[tuple[Any, Combined]]:
    """Turn ``((k, v), tag, anchor)`` records into shuffle pairs
    ``(k, (v, tag, anchor, None))``; a value that is not a pair fails its chains."""
    ledger = Ledger(spec, step, index)
    for value, tag, anchor in records:
        if type(value) is Carry:
            # Its own key: it meets no user value in the shuffle.
            yield value, (value, tag, anchor, None)
            continue
        try:
            k, v = value
        except (TypeError, ValueError) as exc:
            ledger.fail_anchor(tag, anchor, exc)
            continue
        yield k, (v, tag, anchor, None)
    for carry, tag, anchor in ledger.flush():
        yield carry, (carry, tag, anchor, None)


def _as_anchors(tag: str | None, anchor: Anchor) -> Anchors:
    return {tag: anchor} if tag is not None else dict(anchor)  # type: ignore[dict-item, arg-type]


def combine(
    fn: Callable[[Any, Any], Any], a: Combined, b: Combined, merge: Callable[[int, int], int] | None = None
) -> Combined:
    """Merge two shuffle values: ``fn`` on the values, anchors merged per chain by
    ``merge`` (XOR by default; ``+`` for sum chains): the result stands for every input
    it combines; values of one chain keep a single int. If ``fn`` raises, the result
    carries the error and the anchors of both sides, whose chains fail after the
    shuffle."""
    value_a, tag_a, anchor_a, error_a = a
    value_b, tag_b, anchor_b, error_b = b
    tag: str | None = tag_a
    anchor: Anchor
    if tag_a is not None and tag_a == tag_b and type(value_a) is not Carry:
        anchor = anchor_a ^ anchor_b if merge is None else merge(anchor_a, anchor_b)  # type: ignore[operator, arg-type]
    else:
        tag, merged = None, _as_anchors(tag_a, anchor_a)
        add = merge or operator.xor
        for chain, amount in _as_anchors(tag_b, anchor_b).items():
            merged[chain] = add(merged.get(chain, 0), amount)
        anchor = merged
    if type(value_a) is Carry:  # never met (one carrier per key); merged if it were
        return value_a, None, anchor, None
    error = error_a or error_b
    value = None
    if error is None:
        try:
            value = fn(value_a, value_b)
        except Exception as exc:
            error = failure_reason(exc)
    return value, tag, anchor, error


def unpack_partition(
    spec: RunSpec, step: str, index: int, pairs: Iterable[tuple[Any, Combined]]
) -> Iterator[Record]:
    """Back from the shuffle to ``((k, v), tag, anchor)`` records; values whose combining
    raised fail their chains here."""
    ledger = Ledger(spec, step, index)
    for k, (value, tag, anchor, error) in pairs:
        if type(value) is Carry:
            yield value, tag, anchor
            continue
        if error is not None:
            ledger.fail_anchor(tag, anchor, error)
            continue
        yield (k, value), tag, anchor
    yield from ledger.flush()


def sink_partition(
    spec: RunSpec, step: str, writer: Callable[[int, list[Any]], None], index: int, records: Iterable[Record]
) -> Iterator[SinkResult]:
    """Write the partition's values with ``writer``, then return to the driver what to
    ack: per chain, the stamp that finishes the written records' anchors (their XOR, or
    minus their sum) with what the carriers brought, the failed chains and the notes
    (the driver merges the partitions' results and stamps each chain once; see
    :meth:`TrackedRDD.sink`).

    ``writer(index, values)`` must return only once the output is durable, and must be
    idempotent per partition (a retried or speculative task writes the same values
    again; Spark hands the driver the result of one successful attempt per partition).
    If it raises, the partition's chains fail instead (they will be replayed).
    """
    ledger = Ledger(spec, step, index)
    values: list[Any] = []
    for value, tag, anchor in records:
        if type(value) is Carry:
            ledger.owe(anchor, value.failed, value.notes)  # type: ignore[arg-type]
        else:
            values.append(value)
            ledger.anchor(tag, anchor)
    try:
        writer(index, values)
    except Exception as exc:
        ledger.fail(list(ledger.pending), exc)
        ledger.pending.clear()
        values = []
    if spec.after_flush is not None:
        spec.after_flush(step, index)
    yield len(values), ledger.pending, ledger.failed, ledger.notes
