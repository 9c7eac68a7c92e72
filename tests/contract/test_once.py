"""The whole-life contract (issue 18): a stamp is applied at most once per op id for
its chain's lineage, however many other stamps landed in between; where the history
that would tell is gone, ``OutcomeUnknown``, never a guess. For every tracker kind
(plain, combining, async), on every backend, in both modes (see ``conftest.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Clock

from xor_ack_dynamodb import errors
from xor_ack_dynamodb.core.chain import op_key
from xor_ack_dynamodb.core.messages import Read
from xor_ack_dynamodb.stamps import Position
from xor_ack_dynamodb.stores.dynamodb.item import ItemCodec

from .conftest import ONCE, Harness, _configs, _served, requests_of

TAG = "fan-out/object-7"


@pytest.fixture(params=_configs(backends=ONCE))
def harness(request: pytest.FixtureRequest, clock: Clock) -> Iterator[Harness]:
    """Every tracker kind, both modes, in memory and on DynamoDB (a moto server)."""
    yield from _served(request, clock)


def fan(ack: Any, children: int, tag: str = TAG) -> list[Any]:
    """A chain whose root finished and started ``children`` edges."""
    root = ack.new_edge()
    ack.create(tag, root)
    kids = [ack.new_edge() for _ in range(children)]
    ack.stamp(tag, finished=[root], started=kids, op_id=f"{tag}/root")
    return kids


def finish(ack: Any, kids: list[Any], prefix: str = "other") -> Any:
    """Stamp each of ``kids`` finished, each with its own op id, after the chain's
    start (the stamps other work makes); the last value."""
    value = None
    for i, kid in enumerate(kids):
        value = ack.stamp(TAG, finished=[kid], op_id=f"{prefix}-{i}")
    return value


def stored(harness: Harness, ack: Any) -> Any:
    """The chain as its store holds it."""
    return harness.plain(ack).store.execute(Read(TAG))


def events(ack: Any, name: str) -> int:
    return int(ack.stats.events.get(name, 0))


# -- duplicates after any number of other stamps ----------------------------------------


def _duplicate_after(harness: Harness, others: int) -> None:
    ack = harness.make()
    kids = fan(ack, others + 2)
    first = ack.stamp(TAG, finished=[kids[0]], op_id="dup")
    value = finish(ack, kids[1 : others + 1])
    chain = stored(harness, ack)
    if first.position.seq <= chain.cut_seq:  # its block moved to history
        assert chain.find(op_key("dup", "stamp")) is None
    for tracker in (ack, harness.make()):  # the one that stamped it, and one that never saw the chain
        again = tracker.stamp(TAG, finished=[kids[0]], op_id="dup")
        assert again.duplicate and not again.acked and again == value
    assert again.position == first.position  # where the op landed
    assert ack.status(TAG).value == value
    assert ack.stamp(TAG, finished=[kids[-1]], op_id="last").acked


@pytest.mark.parametrize("others", [34, 60])
def test_a_duplicate_after_many_other_stamps_is_applied_once(guard_harness: Harness, others: int) -> None:
    """A redelivery (the same op id, nothing else said) after 34 or 60 other stamps:
    the issue's scenarios, where the 32-op window let the copy apply again. Found in
    the item (34) or in its history (60), by the tracker that stamped it and by one
    that never saw the chain."""
    _duplicate_after(guard_harness, others)


def test_a_duplicate_after_500_other_stamps_is_applied_once(long_harness: Harness) -> None:
    _duplicate_after(long_harness, 500)


def test_every_op_of_a_long_chain_is_still_known(long_harness: Harness) -> None:
    """Every op of a chain past several history blocks, delivered again: each is found
    (in the item or its history), none applied twice, the chain acks at its last edge."""
    harness = long_harness
    ack = harness.make()
    kids = fan(ack, 130)
    finish(ack, kids[:-1], prefix="kid")
    before = ack.status(TAG).value
    for i in range(0, 129, 16):
        assert ack.stamp(TAG, finished=[kids[i]], op_id=f"kid-{i}").duplicate
    assert ack.stamp(TAG, finished=[kids[0]], op_id="kid-0", after=None).duplicate
    assert ack.status(TAG).value == before
    assert stored(harness, ack).cut_seq >= 80  # history holds at least two blocks
    assert ack.stamp(TAG, finished=[kids[-1]], op_id="kid-129").acked


# -- what each caller knows, and what it costs ---------------------------------------------


def test_what_the_check_costs(harness: Harness) -> None:
    """An op id the library draws (no ``op_id``): nothing to check. A named op is
    checked from the chain's start: nothing more while no op has left the item; after
    that, the history blocks are read once per tracker (blocks never change: it keeps
    them), so the next named op of the same tracker is one request again, and a tracker
    that has no view of the chain reads them once."""
    ack = harness.make()
    kids = fan(ack, 60)
    requests = requests_of(ack)
    ack.stamp(TAG, finished=[kids[55]], op_id="before-any-move")  # whole life, nothing moved yet
    assert events(ack, "history_reads") == 0
    if harness.mode == "sum":
        assert requests_of(ack) - requests == 1
    finish(ack, kids[:50])
    assert stored(harness, ack).cut_seq > 0  # the chain has history
    reads, requests = events(ack, "history_reads"), requests_of(ack)
    ack.stamp(TAG, finished=[kids[50]])  # a drawn op id
    assert events(ack, "history_reads") == reads
    if harness.mode == "sum":
        assert requests_of(ack) - requests == 1  # one ADD
    other = harness.make()
    requests = requests_of(other)
    other.stamp(TAG, finished=[kids[51]], op_id="new-2")  # the whole life: one history read
    assert events(other, "history_reads") == 1
    if harness.mode == "sum":  # the guarded ADD refused, the read, the ADD again
        assert requests_of(other) - requests == 3
    reads, requests = events(other, "history_reads"), requests_of(other)
    other.stamp(TAG, finished=[kids[52]], op_id="new-3")  # its blocks are kept: no read
    assert events(other, "history_reads") == reads
    if harness.mode == "sum" and harness.backend != "memory":  # (MemoryAck keeps no last value)
        assert requests_of(other) - requests == 1


def test_a_redelivery_that_knows_its_parents_position_reads_from_there(harness: Harness) -> None:
    """A child stamped with ``after=`` its parent's position: a copy is looked for
    since then only (no history read while that is in the item), and found wherever
    it is."""
    ack = harness.make()
    kids = fan(ack, 60)
    grandchild = ack.new_edge()
    parent = ack.stamp(TAG, finished=[kids[0]], started=[grandchild], op_id="parent")
    child = ack.stamp(TAG, finished=[grandchild], op_id="child", after=parent.position)
    assert child.position.seq == parent.position.seq + 1
    reads = events(ack, "history_reads")
    assert ack.stamp(TAG, finished=[grandchild], op_id="child", after=parent.position).duplicate
    assert events(ack, "history_reads") == reads  # still in the item: no read
    value = finish(ack, kids[1:51], prefix="first-delivery")
    fresh = harness.make()  # a redelivery handled elsewhere: no view of the chain
    again = fresh.stamp(TAG, finished=[grandchild], op_id="child", after=parent.position)
    assert again.duplicate and again == value and events(fresh, "history_reads") == 1
    moved = Position.parse(str(parent.position))  # through a message and back
    assert harness.make().stamp(TAG, finished=[grandchild], op_id="child", after=moved).duplicate


def test_a_child_sent_again_by_its_parent_is_a_duplicate(harness: Harness) -> None:
    """The serverless race: a parent redelivered after its children landed sends them
    again. Each copy is checked from its parent's position, as every delivery is, and
    finds the original."""
    ack = harness.make()
    kids = fan(ack, 60)
    grandchild = ack.new_edge()
    parent = ack.stamp(TAG, finished=[kids[0]], started=[grandchild], op_id="parent")
    original = ack.stamp(TAG, finished=[grandchild], op_id="child", after=parent.position)
    value = finish(ack, kids[1:51])
    assert stored(harness, ack).cut_seq >= original.position.seq  # the child's op is in history
    redelivered = ack.stamp(TAG, finished=[kids[0]], started=[grandchild], op_id="parent")
    assert redelivered.duplicate and redelivered.position == parent.position
    copy = ack.stamp(TAG, finished=[grandchild], op_id="child", after=redelivered.position)
    assert copy.duplicate and copy == value
    assert ack.status(TAG).value == value


# -- what cannot be told -------------------------------------------------------------------


def _drop_block(harness: Harness, ack: Any, lineage: bytes, index: int) -> None:
    """Lose history block ``index`` (as an early TTL sweep, or a lost write, would)."""
    if harness.backend == "memory":
        assert harness.plain(ack).store.drop_history(TAG, lineage, index)
        return
    key = ItemCodec("tagID").history_key(TAG, lineage, index)
    assert "Attributes" in harness.client.delete_item(
        TableName=harness.table, Key=key, ReturnValues="ALL_OLD"
    )


def test_a_missing_history_block_makes_the_answer_unknowable(harness: Harness) -> None:
    ack = harness.make()
    kids = fan(ack, 60)
    first = ack.stamp(TAG, finished=[kids[0]], op_id="dup")
    finish(ack, kids[1:51])
    _drop_block(harness, ack, first.position.lineage, 0)
    before = ack.status(TAG)
    with pytest.raises(errors.OutcomeUnknown) as info:
        harness.make().stamp(TAG, finished=[kids[0]], op_id="dup")
    assert info.value.tag == TAG and "block 0" in str(info.value)
    assert ack.status(TAG) == before  # nothing written
    # The tracker that wrote the block keeps it (a block never changes): it can tell.
    assert ack.stamp(TAG, finished=[kids[0]], op_id="dup").duplicate
    assert ack.status(TAG) == before
    # A stamp that says its copies can only be after the lost block is not affected.
    recent = ack.stamp(TAG, finished=[kids[51]])
    assert not ack.stamp(TAG, finished=[kids[52]], op_id="later", after=recent.position).duplicate


# -- lineage, expiry -------------------------------------------------------------------------


def test_a_chain_created_again_is_a_new_lineage(harness: Harness, clock: Clock) -> None:
    """An op applied on a chain that expired is not a duplicate on the chain created
    again under its tag (a new lineage, with positions and history of its own), and a
    duplicate there is caught there."""
    ack = harness.make(ttl=60)
    kids = fan(ack, 4)
    old = ack.stamp(TAG, finished=[kids[0]], op_id="op")
    clock.advance(66)
    new_kids = fan(ack, 60)
    fresh = ack.stamp(TAG, finished=[new_kids[0]], op_id="op")
    assert not fresh.duplicate and fresh.position.lineage != old.position.lineage
    value = finish(ack, new_kids[1:51])
    stale = ack.stamp(TAG, finished=[new_kids[0]], op_id="op", after=old.position)
    assert stale.duplicate and stale == value  # the old lineage's position: checked whole


def test_create_can_keep_a_chain_that_timed_out(harness: Harness, clock: Clock) -> None:
    ack = harness.make(ttl=60, retention=600)
    ack.create(TAG, ack.new_edge())
    clock.advance(66)
    assert ack.status(TAG).state == "expired"
    with pytest.raises(errors.TagExists) as info:
        ack.create(TAG, ack.new_edge(), replace_expired=False)
    assert "expired" in str(info.value)
    assert ack.status(TAG).state == "expired"
    done = ack.new_edge()
    ack.create("done", done)
    ack.stamp("done", finished=[done])
    clock.advance(601)  # a tombstone past its retention is replaced all the same
    fresh = ack.new_edge()
    assert ack.create("done", fresh, replace_expired=False) == fresh
    assert ack.create(TAG, fresh) == fresh  # by default an expired chain is replaced
    with pytest.raises(errors.InvalidConfig):
        ack.create("other", fresh, replace_expired="no")


def test_a_negative_sum_fails_the_chain(sum_harness: Harness) -> None:
    """Edges are positive and every finished edge was started: a sum below zero proves
    a stamp was applied twice. The chain fails at once, with that reason."""
    ack = sum_harness.make()
    ack.create(TAG, 100)
    ack.stamp(TAG, finished=[100], started=[10, 5], op_id="root")
    assert ack.stamp(TAG, finished=[10], op_id="a") == 5
    with pytest.raises(errors.TagFailed) as info:
        ack.stamp(TAG, finished=[10], op_id="a-again")
    assert "negative" in (info.value.reason or "")
    status = ack.status(TAG)
    assert status.state == "failed" and "negative" in (status.reason or "")


# -- lost responses ------------------------------------------------------------------------


def test_a_lost_write_outrun_by_50_stamps_is_decided_exactly(harness: Harness) -> None:
    """A stamp lands, its response is lost, and 50 other stamps move it to history
    before anything is sent again (botocore's own resend included: for a sum ADD it
    would pass ``NOT contains(ops, :op)`` and apply twice). The call ends exact."""
    h = harness
    ack, script = h.faulty()
    other = h.bystander()
    kids = fan(other, 60)
    value: list[Any] = []

    def crowd() -> None:
        value.append(finish(other, kids[1:51]))

    script.lose(h.write(), after=crowd)
    result = ack.stamp(TAG, finished=[kids[0]])  # a random op id: a first delivery
    assert script.pending == 0
    final = other.status(TAG).value
    assert result == final and not result.acked
    # The lost write landed before the crowd: the crowd's last value already holds it,
    # and the retry changes nothing (a second application would finish kids[0] again).
    assert final == value[0]


def test_a_retry_from_a_stale_lineage_never_applies_twice(harness: Harness, clock: Clock) -> None:
    """The writer's cache holds the chain's earlier lineage (50 ops long); the chain
    expired and was created again. Its stamp lands on the new lineage, the response is
    lost, 50 others move it out (the new lineage's ``cutn`` is 40, below the cached
    ``seq``: a guard without the lineage would pass). botocore does not resend it (a
    stamp's write is sent once, resend.py; on a server in sum mode the retry's first
    two ADDs fail too): the retry's guard names the old lineage, is refused, and the new
    lineage's history finds the op."""
    h = harness
    ack, script = h.faulty(ttl=60, cache_size=1000)
    other = h.bystander(ttl=60)
    first = fan(ack, 51)
    finish(ack, first[:50], prefix="lineage-1")
    clock.advance(66)
    kids = fan(other, 60)

    def crowd() -> None:
        finish(other, kids[1:51])

    script.lose(h.write(), after=crowd)
    if h.backend != "memory" and h.mode == "sum":
        script.fail(h.write(), times=2)  # the library's own retried ADDs (xor: it reads)
    result = ack.stamp(TAG, finished=[kids[0]])
    assert script.pending == 0
    final = other.status(TAG).value
    assert result == final
    assert other.stamp(TAG, finished=kids[51:], op_id="rest").acked  # exact: kids[0] applied once


# -- races ---------------------------------------------------------------------------------


def test_racing_writers_and_block_moves_lose_no_op(race_harness: Harness) -> None:
    """Six writers finish 90 children of one chain at once: history blocks move
    while they race (sum mode: one writer owns each block; xor: the writer whose
    write crosses it). Every op is still known afterwards and the chain acks once."""
    h = race_harness
    trackers = [h.make()] * 6 if h.kind == "combining" else [h.make() for _ in range(6)]
    kids = fan(trackers[0], 91)
    seen: list[bool] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        for n in range(i, 90, 6):
            result = trackers[i].stamp(TAG, finished=[kids[n]], op_id=f"kid-{n}")
            with lock:
                seen.append(result.acked)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [False] * 90
    checker = h.make()
    for n in range(0, 90, 7):
        assert checker.stamp(TAG, finished=[kids[n]], op_id=f"kid-{n}").duplicate
    assert stored(h, checker).cut_seq >= 2 * 40
    assert checker.stamp(TAG, finished=[kids[90]], op_id="kid-90").acked
