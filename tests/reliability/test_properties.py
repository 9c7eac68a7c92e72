"""Property tests: any valid tree, any order of its stamps, any duplicate deliveries
(same op id): the chain reaches zero exactly at the last distinct op."""

from __future__ import annotations

import random
from typing import Any

import boto3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from xor_ack_dynamodb import MemoryAck, XorAckDynamoDB

from .workload import Tree


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[Tree, list[int]]:
    """A random tree (each node's parent is an earlier node) with random edges, and an
    order of delivery of its stamps: a permutation with duplicates mixed in anywhere
    after the original. Edges are random (8 to 32 bytes, seeded), as real edges are:
    hand-picked equal edges would cancel, which is why the library draws them from
    ``secrets``."""
    size = draw(st.integers(min_value=1, max_value=14))
    parents = [-1] + [draw(st.integers(min_value=0, max_value=i - 1)) for i in range(1, size)]
    width = draw(st.integers(min_value=8, max_value=32))
    rng = random.Random(draw(st.integers(min_value=0, max_value=2**32)))
    edges = [rng.randbytes(width) for _ in range(size)]
    order = draw(st.permutations(range(size)))
    duplicates = draw(st.lists(st.integers(min_value=0, max_value=size - 1), max_size=6))
    sequence = list(order)
    for node in duplicates:
        first = sequence.index(node)
        at = draw(st.integers(min_value=first + 1, max_value=len(sequence)))
        sequence.insert(at, node)
    return Tree("chain", tuple(parents), tuple(edges)), sequence


def _check(tracker: Any, tree: Tree, sequence: list[int]) -> None:
    tracker.create(tree.tag, tree.edges[0], op_id="create")
    seen: set[int] = set()
    completer: int | None = None  # the node whose first delivery completed the chain
    for node in sequence:
        first_time = node not in seen
        seen.add(node)
        value = tracker.stamp(tree.tag, tree.stamp(node), op_id=tree.op_id(node))
        done = len(seen) == tree.size
        if done and completer is None:
            completer = node
        # Zero exactly once every distinct op has landed; a duplicate changes nothing.
        assert (not any(value)) == done, (sequence, node)
        assert (not tree.open_edges(seen)) == done
        # acked is the call's own: True only for the op that completed the chain (its
        # first delivery, and any duplicate of it), never for a duplicate of another op.
        assert value.acked == (node == completer), (sequence, node)
        assert value.duplicate == (not first_time), (sequence, node)
        if not first_time:
            assert tracker.status(tree.tag).stamp == value
    assert tracker.status(tree.tag).state == "acked"


@settings(max_examples=200, deadline=None)
@given(deliveries())
def test_memory_ack_zero_exactly_at_last_distinct_op(case: tuple[Tree, list[int]]) -> None:
    acked: list[str] = []
    tracker = MemoryAck(on_acked=acked.append)
    _check(tracker, *case)
    assert acked == ["chain"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deliveries())
def test_dynamodb_zero_exactly_at_last_distinct_op(case: tuple[Tree, list[int]]) -> None:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        tracker = XorAckDynamoDB("prop-acks", client=client)
        tracker.create_table()
        _check(tracker, *case)
