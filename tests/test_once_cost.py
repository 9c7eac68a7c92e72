"""Issue 31's cost rule, counted on the wire: a delivery whose bound (``after``) is inside
the chain item's window is one request, on a chain whose history has moved on, in both
modes, on the moto server and on Amazon's DynamoDB Local.

Every HTTP request a client sends is counted by a botocore ``before-send`` hook (the
library's own statistics are not used), so a history read, a refused write or a read
before a write would show. The chain has history items already (its first block left
the item), and the bound is a position still in the item: the window alone decides.

What one request means per mode: sum mode's ``ADD`` carries its check in its condition,
so any tracker pays one request, to apply the op or to be told it is a duplicate. An
xor stamp is a read-modify-write: a tracker whose view of the chain is current pays the
write alone; a tracker without a view reads the chain first (two requests, neither a
history read); deciding that a copy is a duplicate takes one fresh read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import unique_table

from xor_ack_dynamodb import XorAckDynamoDB
from xor_ack_dynamodb.core.chain import BLOCK
from xor_ack_dynamodb.core.messages import Read
from xor_ack_dynamodb.stamps import Position

pytestmark = pytest.mark.server

TAG = "s3://bucket/object@version:1"


class Wire:
    """The DynamoDB requests one client sends, by operation (every HTTP attempt)."""

    def __init__(self, client: Any) -> None:
        self.sent: Counter[str] = Counter()
        client.meta.events.register("before-send.dynamodb", self._count)

    def _count(self, event_name: str, **_: Any) -> None:
        self.sent[event_name.rsplit(".", 1)[-1]] += 1

    def during(self, thunk: Callable[[], Any]) -> tuple[Any, dict[str, int]]:
        """``thunk()``'s result and the requests it sent."""
        before = Counter(self.sent)
        result = thunk()
        return result, dict(self.sent - before)


@pytest.fixture(params=("server", "ddblocal"))
def clients(request: pytest.FixtureRequest) -> Iterator[Callable[[], Any]]:
    """A factory of new clients of one backend (each a container's own)."""
    server = request.getfixturevalue({"server": "moto_server"}.get(request.param, request.param))
    yield server.client


def _tracker(client: Any, mode: str, table: str) -> XorAckDynamoDB:
    return XorAckDynamoDB(table, client=client, mode=mode)  # type: ignore[arg-type]


def _chain_with_history(tracker: XorAckDynamoDB, kids: int) -> tuple[list[Any], Position]:
    """A chain whose first history block has left its item, with ``kids`` open edges
    left; and the position of its last stamp, inside the item's window, chosen so that
    none of the next four stamps moves a block (their cost is the stamp's alone)."""
    root, edges = tracker.new_edge(), [tracker.new_edge() for _ in range(kids + 80)]
    tracker.create(TAG, root)
    last = tracker.stamp(TAG, finished=[root], started=edges, op_id="root")
    window = tracker.max_ops
    i = 0
    while True:
        chain = tracker.driver.store.execute(Read(TAG))
        upcoming = range(chain.seq + 1, chain.seq + 5)
        if chain.cut_seq > 0 and all((p - window) % BLOCK for p in upcoming):
            break
        last = tracker.stamp(TAG, finished=[edges[i]], op_id=f"earlier-{i}")
        i += 1
    assert last.position is not None and last.position.seq > chain.cut_seq  # inside the window
    return edges[i:], last.position


@pytest.mark.parametrize("mode", ["sum", "xor"])
def test_a_delivery_bounded_inside_the_window_is_one_request(clients: Callable[[], Any], mode: str) -> None:
    table = unique_table("cost")
    writer_client = clients()
    writer = _tracker(writer_client, mode, table)
    writer.create_table()
    kids, after = _chain_with_history(writer, 4)
    warm = Wire(writer_client)
    cold_client = clients()
    cold = Wire(cold_client)
    moves = writer.stats.events.get("history_writes", 0)

    # The tracker that made the chain's last stamp: its view is current.
    applied, sent = warm.during(lambda: writer.stamp(TAG, finished=[kids[0]], op_id="child-0", after=after))
    assert not applied.duplicate and applied.position.seq == after.seq + 1
    assert sent == ({"UpdateItem": 1} if mode == "sum" else {"PutItem": 1})
    copy, sent = warm.during(lambda: writer.stamp(TAG, finished=[kids[0]], op_id="child-0", after=after))
    assert copy.duplicate and copy.position == applied.position
    assert sent == ({"UpdateItem": 1} if mode == "sum" else {"GetItem": 1})

    # A container that never saw the chain (no view, no history block).
    stranger = _tracker(cold_client, mode, table)
    applied, sent = cold.during(lambda: stranger.stamp(TAG, finished=[kids[1]], op_id="child-1", after=after))
    assert not applied.duplicate
    assert sent == ({"UpdateItem": 1} if mode == "sum" else {"GetItem": 1, "PutItem": 1})
    copy, sent = cold.during(
        lambda: _tracker(cold_client, mode, table).stamp(
            TAG, finished=[kids[0]], op_id="child-0", after=after
        )
    )
    assert copy.duplicate
    assert sent == ({"UpdateItem": 1} if mode == "sum" else {"GetItem": 1})
    assert writer.stats.events.get("history_writes", 0) == moves  # no stamp above moved a block
    assert "BatchGetItem" not in warm.sent and "BatchGetItem" not in cold.sent
