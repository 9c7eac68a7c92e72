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

Where a warm view stops being enough (sum mode): an ``ADD`` is guarded by the last
position of the chain its process last saw, so it is refused only once a trim has
passed that position, which takes more than ``max_ops`` stamps of other processes
since: then it reads the one block that moved, once. Two trackers driven by hand, one
stamp at a time on DynamoDB Local, show the bound exactly, and that a copy which
landed just after the view is still found there.
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


#: The default window (``max_ops``), and where A's view ends: one position before block 1
#: (41 to 80) ends, so the trim that passes it is the one of block 1, made by the ADD
#: that lands at 80 + WINDOW.
WINDOW = 8
VIEW = 2 * BLOCK - 1


def _a_process_and_another(
    server: Any, view: int
) -> tuple[XorAckDynamoDB, Wire, XorAckDynamoDB, list[Any], Position]:
    """Tracker A (its own client, metered) whose last stamp landed at ``view``, all the
    chain's stamps so far its own (it moved, and keeps, every block before); tracker B
    of another process that never saw the chain; the open edges; the bound of every
    stamp (the root stamp's position, 1: a serverless child's)."""
    table = unique_table("bound")
    a_client = server.client()
    a = _tracker(a_client, "sum", table)
    a.create_table()
    assert a.max_ops == WINDOW
    root, edges = a.new_edge(), [a.new_edge() for _ in range(view + 20)]
    a.create(TAG, root)
    after = a.stamp(TAG, finished=[root], started=edges, op_id="root").position
    assert after is not None and after.seq == 1
    for i in range(view - 1):
        a.stamp(TAG, finished=[edges[i]], op_id=f"a-{i}", after=after)
    b = _tracker(server.client(), "sum", table)
    return a, Wire(a_client), b, edges[view - 1 :], after


@pytest.mark.parametrize(
    ("view", "others", "cost"),
    [
        # A trim since A's view that did not pass its last position: the window still
        # holds every op after it.
        (2 * BLOCK + WINDOW - 1, 1, {"UpdateItem": 1}),
        # max_ops stamps since, no trim past the view: applied at once (A's ADD lands at
        # 80 + WINDOW: A owns block 1 and moves it, a history write and a trim).
        (VIEW, WINDOW, {"UpdateItem": 2, "PutItem": 1}),
        # One more, and B's ADD moved block 1 past A's view: refused, block 1 read once
        # (block 0 is in A's cache), ADD again.
        (VIEW, WINDOW + 1, {"UpdateItem": 2, "BatchGetItem": 1}),
    ],
    ids=["trim-inside-the-view", "max_ops-later", "max_ops+1-later-across-a-trim"],
)
def test_a_process_pays_a_history_read_only_past_max_ops_stamps_across_a_trim(
    ddblocal: Any, view: int, others: int, cost: dict[str, int]
) -> None:
    a, wire, b, edges, after = _a_process_and_another(ddblocal, view)
    for i in range(others):
        b.stamp(TAG, finished=[edges[i]], op_id=f"b-{i}", after=after)
    applied, sent = wire.during(lambda: a.stamp(TAG, finished=[edges[others]], op_id="a-last", after=after))
    assert not applied.duplicate and applied.position.seq == view + others + 1
    assert sent == cost


@pytest.mark.parametrize("others", [WINDOW, WINDOW + 1], ids=["in-the-window", "moved-out"])
def test_a_copy_that_landed_just_after_the_view_is_found(ddblocal: Any, others: int) -> None:
    """B applied A's op at the position right after A's view, then ``others - 1`` more:
    A's copy, guarded by its view's last position, is refused and told it is a
    duplicate, from the window or from the block that just moved."""
    a, wire, b, edges, after = _a_process_and_another(ddblocal, VIEW)
    b.stamp(TAG, finished=[edges[0]], op_id="twin", after=after)
    for i in range(1, others):
        b.stamp(TAG, finished=[edges[i]], op_id=f"b-{i}", after=after)
    copy, sent = wire.during(lambda: a.stamp(TAG, finished=[edges[0]], op_id="twin", after=after))
    assert copy.duplicate and copy.position == Position(after.lineage, VIEW + 1)
    assert sent == ({"UpdateItem": 1} if others == WINDOW else {"UpdateItem": 1, "BatchGetItem": 1})
    assert a.driver.store.execute(Read(TAG)).seq == VIEW + others  # applied once


def test_a_block_seen_whole_in_a_window_is_not_read_once_it_moved_out(ddblocal: Any) -> None:
    """A's view held block 1 (41 to 80) whole, B's op at 80 in it, before B's ADD at
    80 + WINDOW moved it out: A keeps such a block as it keeps the blocks it reads, so a
    copy of B's op that reaches A is found there, a duplicate, with no history read."""
    a, wire, b, edges, after = _a_process_and_another(ddblocal, VIEW)
    b.stamp(TAG, finished=[edges[0]], op_id="twin", after=after)  # at 80
    a.stamp(TAG, finished=[edges[1]], op_id="a-81", after=after)  # A's view: 41 to 81
    for i in range(2, 2 + WINDOW - 1):  # 82 to 88: B's ADD at 88 moves block 1
        b.stamp(TAG, finished=[edges[i]], op_id=f"b-{i}", after=after)
    applied, sent = wire.during(lambda: a.stamp(TAG, finished=[edges[9]], op_id="a-89", after=after))
    assert applied.position.seq == 2 * BLOCK + WINDOW + 1 and sent == {"UpdateItem": 1}
    copy, sent = wire.during(lambda: a.stamp(TAG, finished=[edges[0]], op_id="twin", after=after))
    assert copy.duplicate and copy.position == Position(after.lineage, 2 * BLOCK)
    assert sent == {"UpdateItem": 1}  # the refused ADD that returns the chain
    assert a.driver.store.execute(Read(TAG)).seq == 2 * BLOCK + WINDOW + 1  # applied once
