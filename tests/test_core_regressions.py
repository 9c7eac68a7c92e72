"""Regressions of issue 9: each test here failed on the code before the shared rule set
(see the issue's closing note for the failures seen) and passes now.

They run against the moto server over HTTP, whose requests are serialized (atomic like
DynamoDB), with faults scripted on the real botocore request path (``scripted.Script``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import node_package
import pytest
from conftest import Clock, unique_table
from regression_clients import client, tracker
from scripted import Script

from xor_ack_dynamodb import CombiningTracker, LocalDynamoDB, XorAckDynamoDB, errors, new_stamp, xor

pytestmark = pytest.mark.server

TAG = "database/file13"


@pytest.fixture
def table(moto_server: LocalDynamoDB) -> str:
    name = unique_table("regress")
    XorAckDynamoDB(name, client=client(moto_server)).create_table()
    return name


def node_stamp(raw: Any, table: str, edge: bytes) -> None:
    """What the Node package does (``node_package``): a consistent read, then a PutItem
    of ``{tag, stamp}`` conditioned on the stamp it read (every other attribute is
    dropped)."""
    node_package.node_stamp(raw, table, TAG, edge)


# -- CombiningTracker ------------------------------------------------------------------------


def test_a_combined_write_whose_response_is_lost_is_applied_once(
    moto_server: LocalDynamoDB, table: str
) -> None:
    """8 stamps queue behind a leader on a chain whose window is 4; the combined write
    that carries them lands but its response is lost, and botocore does not resend it (a
    stamp's write is sent once, resend.py). The library's retry must recognise the
    landed batch (its marker), not re-apply its early members."""
    raw = client(moto_server)
    plain = tracker(moto_server, table, client=raw, max_ops=4)
    combiner = CombiningTracker(plain)
    root = new_stamp()
    plain.create(TAG, root)
    kids = [new_stamp() for _ in range(9)]
    plain.stamp(TAG, xor(root, *kids), op_id="root")
    script = Script(raw)
    holding, queued = threading.Event(), threading.Event()

    def hold_the_leader() -> None:  # the first write waits until 8 stamps queue behind it
        holding.set()
        _wait_for(lambda: combiner.waiting(TAG) >= 8)
        queued.set()

    script.before("PutItem|UpdateItem", hold_the_leader)
    script.lose("PutItem|UpdateItem")  # lost, and not resent: the library's retry decides
    results: dict[int, Any] = {}

    def stamp(i: int) -> None:
        try:
            results[i] = combiner.stamp(TAG, kids[i], op_id=f"kid-{i}")
        except Exception as exc:  # recorded, asserted below
            results[i] = exc

    leader = threading.Thread(target=stamp, args=(0,))
    leader.start()
    assert holding.wait(10)
    others = [threading.Thread(target=stamp, args=(i,)) for i in range(1, 9)]
    for t in others:
        t.start()
    for t in [leader, *others]:
        t.join(30)
    assert queued.is_set() and script.pending == 0
    assert plain.stats.events.get("combined") == 8  # the 8 rode together (in writes of 3)
    assert all(not isinstance(r, Exception) for r in results.values()), results
    assert sum(r.acked for r in results.values()) == 1
    assert plain.status(TAG).state == "acked"


def test_every_waiter_is_settled_even_by_an_error_that_cannot_be_copied(
    moto_server: LocalDynamoDB, table: str
) -> None:
    raw = client(moto_server)
    plain = tracker(moto_server, table, client=raw)
    combiner = CombiningTracker(plain)
    root = new_stamp()
    plain.create(TAG, root)
    kids = [new_stamp() for _ in range(5)]
    plain.stamp(TAG, xor(root, *kids), op_id="root")

    class Uncopyable(Exception):
        def __reduce_ex__(self, protocol: Any) -> Any:
            raise RuntimeError("this exception cannot be copied")

    script = Script(raw)
    holding = threading.Event()

    def hold_the_leader() -> None:
        holding.set()
        _wait_for(lambda: combiner.waiting(TAG) >= 4)

    script.before("PutItem|UpdateItem", hold_the_leader)

    def explode() -> None:
        raise Uncopyable("the write failed oddly")

    script.before("PutItem|UpdateItem", explode)
    outcomes: dict[int, Any] = {}

    def stamp(i: int) -> None:
        try:
            outcomes[i] = combiner.stamp(TAG, kids[i])
        except BaseException as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=stamp, args=(0,))]
    threads[0].start()
    assert holding.wait(10)
    for i in range(1, 5):
        threads.append(threading.Thread(target=stamp, args=(i,)))
        threads[-1].start()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads), "a waiter was left blocked"
    assert not isinstance(outcomes[0], BaseException)  # the first leader's own write succeeded
    assert all(isinstance(outcomes[i], Uncopyable) for i in range(1, 5)), outcomes


def _wait_for(condition: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.002)


# -- delete_on_ack ------------------------------------------------------------------------------


def test_a_completing_write_hidden_by_errors_still_reports_acked(
    moto_server: LocalDynamoDB, table: str
) -> None:
    raw = client(moto_server)
    ack = tracker(moto_server, table, client=raw, delete_on_ack=True)
    root = new_stamp()
    ack.create(TAG, root)
    script = Script(raw)
    # The completing write lands and its response is lost (botocore does not resend a
    # stamp's write, resend.py): the library's own retry has to find out what happened.
    # The tombstone's DeleteItem then fails twice before it goes through.
    script.lose("PutItem|DeleteItem").fail("PutItem|DeleteItem", times=2)
    done = ack.stamp(TAG, root)
    assert done.acked
    assert script.pending == 0
    with pytest.raises(errors.TagNotFound):
        ack.status(TAG)  # and the tombstone was deleted, as delete_on_ack asks


def test_a_chain_deleted_by_someone_else_is_never_reported_acked(
    moto_server: LocalDynamoDB, table: str
) -> None:
    raw, other = client(moto_server), client(moto_server)
    ack = tracker(moto_server, table, client=raw, delete_on_ack=True)
    root = new_stamp()
    ack.create(TAG, root)
    ack.status(TAG)
    script = Script(raw)
    # The completing write fails with a 500 (not applied); before the library's retry
    # decides again (botocore does not resend a stamp's write), an operator deletes the
    # chain.
    script.fail(
        "PutItem|DeleteItem", after=lambda: other.delete_item(TableName=table, Key={"tagID": {"S": TAG}})
    )
    with pytest.raises(errors.TagNotFound):
        ack.stamp(TAG, root)


# -- foreign writers (the Node package) -----------------------------------------------------------


def test_a_stale_writer_cannot_write_back_an_op_list_that_lost_entries(
    moto_server: LocalDynamoDB, table: str
) -> None:
    """The Node package's PutItem drops every attribute but the stamp, so versions repeat;
    a Python writer holding a stale view must not pass its guard (ABA) and write back an
    op list without the ops landed since."""
    raw = client(moto_server)
    a = tracker(moto_server, table, client=raw)
    b = tracker(moto_server, table)
    root, x, y, w = new_stamp(), new_stamp(), new_stamp(), new_stamp()
    a.create(TAG, root)  # a's cache: stamp=root at version 1
    node_stamp(raw, table, x)  # Node: root^x, no version
    node_stamp(raw, table, x)  # Node: root again, no version
    node_stamp(raw, table, y)  # Node: root^y
    b.stamp(TAG, y, op_id="b2")  # Python b: root, version 1 (counting again from 0), ops [b2]
    a.stamp(TAG, w, op_id="a1")  # a's stale view (root, version 1) must not win
    # b2 redelivered: it must still be known to the chain.
    again = b.stamp(TAG, y, op_id="b2")
    assert again.duplicate
    assert b.status(TAG).value == xor(root, w)


def test_a_lost_response_then_a_node_write_raises_instead_of_applying_twice(
    moto_server: LocalDynamoDB, table: str
) -> None:
    raw, other = client(moto_server), client(moto_server)
    ack = tracker(moto_server, table, client=raw)
    root, kid, node_edge = new_stamp(), new_stamp(), new_stamp()
    ack.create(TAG, xor(root, kid))
    script = Script(raw)
    # Our stamp lands, the response is lost, the Node package writes; the library's retry
    # (botocore does not resend a stamp's write) reads a chain it cannot account for.
    script.lose("PutItem|UpdateItem", after=lambda: node_stamp(other, table, node_edge))
    with pytest.raises(errors.OutcomeUnknown) as info:
        ack.stamp(TAG, root, op_id="mine")
    assert info.value.tag == TAG
    # Applied exactly once (by the first copy); nothing more was written.
    item = other.get_item(TableName=table, Key={"tagID": {"S": TAG}}, ConsistentRead=True)["Item"]
    assert item["stamp"]["B"] == xor(kid, node_edge)


# -- reading ---------------------------------------------------------------------------------------


def test_one_unreadable_item_does_not_fail_status_many(moto_server: LocalDynamoDB, table: str) -> None:
    raw = client(moto_server)
    ack = tracker(moto_server, table, client=raw)
    ack.create("good-1", new_stamp())
    ack.create("good-2", new_stamp())
    raw.put_item(TableName=table, Item={"tagID": {"S": "bad"}, "stamp": {"S": "not binary"}})
    found = ack.status_many(["good-1", "bad", "good-2"])
    assert [found[t].state for t in ("good-1", "bad", "good-2")] == ["pending", "corrupt", "pending"]
    assert found["bad"].value is None and "stamp" in (found["bad"].reason or "")
    with pytest.raises(errors.CorruptItem):
        ack.status("bad")


def test_a_timed_out_chain_stays_readable_for_the_retention(moto_server: LocalDynamoDB, table: str) -> None:
    """The TTL attribute of a pending chain is its deadline plus the skew margin plus the
    retention: DynamoDB's TTL cannot turn "expired" into "missing" at once."""
    raw, clock = client(moto_server), Clock()
    ack = tracker(moto_server, table, client=raw, ttl=60, retention=600, skew=5, clock=clock)
    ack.create(TAG, new_stamp())
    item = raw.get_item(TableName=table, Key={"tagID": {"S": TAG}}, ConsistentRead=True)["Item"]
    now = int(clock.now)
    assert int(item["deadline"]["N"]) == now + 60
    assert int(item["expires_at"]["N"]) == now + 60 + 5 + 600
    clock.advance(60 + 5 + 599)
    assert ack.status(TAG).state == "expired"


# -- sum mode: a resend after its op was trimmed out ----------------------------------------


def test_a_sum_stamp_lost_then_trimmed_out_is_applied_exactly_once(
    moto_server: LocalDynamoDB, table: str
) -> None:
    """A sum stamp lands, its response is lost, and before the retry other writers push
    it out of the op list (its block moves to history). The retry's NOT contains(ops,
    :op) can no longer see it. Issue 10 made the retry refuse (OutcomeUnknown); issue 18
    decides exactly: the retry's guard fails, the history block is read, the op is
    found there, and the call returns it as a duplicate: applied once."""
    raw = client(moto_server)
    ack = tracker(moto_server, table, client=raw, mode="sum")
    other = tracker(moto_server, table, mode="sum")
    root = ack.new_edge()
    kids = [ack.new_edge() for _ in range(80)]
    ack.create(TAG, root)
    ack.stamp(TAG, finished=[root], started=kids, op_id="root")

    def crowd() -> None:  # 60 other stamps: the block holding "mine" moves to history
        for i, kid in enumerate(kids[1:61]):
            other.stamp(TAG, finished=[kid], op_id=f"other-{i}")

    script = Script(raw)
    script.lose("UpdateItem", after=crowd).fail("UpdateItem", times=2)
    result = ack.stamp(TAG, finished=[kids[0]], op_id="mine")
    assert result.duplicate and not result.acked
    assert script.pending == 0
    assert ack.stats.events.get("history_reads") == 1
    expected = sum(kids) - sum(kids[:61])  # kids[0] applied exactly once, by the lost copy
    assert other.status(TAG).value == expected == result
