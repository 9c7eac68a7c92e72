"""The tracker contract: what every tracker guarantees, on every backend, in both modes.

Each test runs for every configuration of ``harness`` (see ``conftest.py``): plain and
combining trackers, on memory, moto in-process, the moto server, dynalite and DynamoDB
Local, in xor and sum mode.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from conftest import Clock

from xor_ack_dynamodb import errors
from xor_ack_dynamodb.core.chain import BLOCK
from xor_ack_dynamodb.core.messages import Read
from xor_ack_dynamodb.interfaces import AckTracker
from xor_ack_dynamodb.stamps import Stamp, Sum

from .conftest import Harness, requests_of

TAG = "database/file13"


def tree(ack: Any, tag: str = TAG, children: int = 3, **create: Any) -> tuple[Any, list[Any]]:
    """A chain whose root was finished, starting ``children`` edges: returns (root, children)."""
    root = ack.new_edge()
    ack.create(tag, root, **create)
    kids = [ack.new_edge() for _ in range(children)]
    ack.stamp(tag, finished=[root], started=kids, op_id=f"{tag}/root")
    return root, kids


# -- the happy path ----------------------------------------------------------------------


def test_every_tracker_satisfies_the_protocol(harness: Harness, ack: Any) -> None:
    assert isinstance(ack, AckTracker)
    assert ack.mode == harness.mode
    edge = ack.new_edge()
    assert isinstance(edge, bytes) if harness.mode == "xor" else (isinstance(edge, int) and 0 < edge < 2**63)


def test_a_tree_acks_exactly_at_its_last_edge(harness: Harness, ack: Any) -> None:
    root = ack.new_edge()
    created = ack.create(TAG, root)
    assert created == root and not created.acked and not created.duplicate
    assert isinstance(created, Stamp if harness.mode == "xor" else Sum)
    kids = [ack.new_edge() for _ in range(4)]
    first = ack.stamp(TAG, finished=[root], started=kids)
    assert not first.acked
    results = [ack.stamp(TAG, finished=[k]) for k in kids]
    assert [r.acked for r in results] == [False, False, False, True]
    assert results[-1] == harness.zero()
    status = ack.status(TAG)
    assert (status.state, status.mode, status.done) == ("acked", harness.mode, True)
    assert status.value == harness.zero() and status.stamp == status.value


def test_stamps_commute(harness: Harness, ack: Any) -> None:
    root, kids = tree(ack, children=5)
    grandkids = [ack.new_edge() for _ in range(2)]
    order = [("k4", [kids[4]], grandkids), ("g1", [grandkids[1]], []), ("k0", [kids[0]], [])]
    order += [("g0", [grandkids[0]], []), ("k2", [kids[2]], []), ("k1", [kids[1]], []), ("k3", [kids[3]], [])]
    acked = [ack.stamp(TAG, finished=f, started=s, op_id=o).acked for o, f, s in order]
    assert acked == [False] * 6 + [True]


def test_positional_form_takes_the_modes_own_value(harness: Harness, ack: Any) -> None:
    root = ack.new_edge()
    ack.create(TAG, root)
    if harness.mode == "xor":
        assert ack.stamp(TAG, bytearray(root)).acked
        with pytest.raises(errors.InvalidStampType):
            ack.stamp("other", 5)
    else:
        assert ack.stamp(TAG, -root).acked
        with pytest.raises(errors.InvalidStampType):
            ack.stamp("other", b"\x01" * 16)


# -- op ids: duplicates, payloads, the window --------------------------------------------


def test_a_duplicate_stamp_is_applied_once(harness: Harness, ack: Any) -> None:
    root, kids = tree(ack, children=2)
    one = ack.stamp(TAG, finished=[kids[0]], op_id="m1")
    again = ack.stamp(TAG, finished=[kids[0]], op_id="m1")
    assert again == one and again.duplicate and not again.acked
    last = ack.stamp(TAG, finished=[kids[1]], op_id="m2")
    assert last.acked and not last.duplicate
    # A redelivery of the completing op is the same completion; of an earlier op, not.
    replay_last = ack.stamp(TAG, finished=[kids[1]], op_id="m2")
    assert replay_last.acked and replay_last.duplicate
    replay_first = ack.stamp(TAG, finished=[kids[0]], op_id="m1")
    assert replay_first.duplicate and not replay_first.acked and replay_first == harness.zero()


def test_an_op_id_is_bound_to_its_payload(harness: Harness, ack: Any) -> None:
    root, kids = tree(ack, children=2)
    ack.stamp(TAG, finished=[kids[0]], op_id="m1")
    before = ack.status(TAG)
    with pytest.raises(errors.OpIdReused) as info:
        ack.stamp(TAG, finished=[kids[1]], op_id="m1")
    assert info.value.tag == TAG and isinstance(info.value, ValueError)
    assert ack.status(TAG).value == before.value  # nothing written
    with pytest.raises(errors.OpIdReused):
        ack.create("other", ack.new_edge(), op_id="c")  # first create: fine ...
        ack.create("other", ack.new_edge(), op_id="c")  # ... the same op id, another value


def test_create_is_idempotent_per_op_id(harness: Harness, ack: Any) -> None:
    root = ack.new_edge()
    ack.create(TAG, root, op_id="c1")
    again = ack.create(TAG, root, op_id="c1")
    assert again == root and again.duplicate and not again.acked
    with pytest.raises(errors.TagExists):
        ack.create(TAG, root, op_id="c2")
    with pytest.raises(errors.TagExists):
        ack.create(TAG, root)


def test_a_create_op_id_does_not_shadow_a_stamp_op_id(harness: Harness, ack: Any) -> None:
    """One message id for a create and its first stamp (a Lambda doing both)."""
    root = ack.new_edge()
    ack.create(TAG, root, op_id="msg-1")
    result = ack.stamp(TAG, finished=[root], op_id="msg-1")
    assert result.acked and not result.duplicate


def test_duplicates_are_caught_within_the_window(harness: Harness) -> None:
    ack = harness.make(max_ops=4)
    root, kids = tree(ack, children=8)
    first = ack.stamp(TAG, finished=[kids[0]], op_id="x")
    for i in range(1, 4):  # three other ops since: still inside a window of 4
        ack.stamp(TAG, finished=[kids[i]], op_id=f"o{i}")
    again = ack.stamp(TAG, finished=[kids[0]], op_id="x")
    assert again.duplicate and again != first  # the current value: the chain moved on


def test_the_window_is_the_chains_not_the_writers(harness: Harness) -> None:
    """A writer configured with a smaller max_ops cannot shrink another's window."""
    wide = harness.make(max_ops=32)
    narrow = harness.make(max_ops=2)
    root, kids = tree(wide, children=12)
    wide.stamp(TAG, finished=[kids[0]], op_id="early")
    for i in range(1, 10):
        narrow.stamp(TAG, finished=[kids[i]], op_id=f"n{i}")
    assert narrow.stamp(TAG, finished=[kids[0]], op_id="early").duplicate
    assert wide.stamp(TAG, finished=[kids[0]], op_id="early").duplicate


def test_the_op_list_stays_bounded_and_keeps_its_window(harness: Harness) -> None:
    """Past many stamps (sum mode trims its op list in separate writes) the chain still
    catches the last ``window`` op ids and its op list never grows past window + slack."""
    ack = harness.make(max_ops=4)
    root, kids = tree(ack, children=60)
    for i, kid in enumerate(kids[:-1]):
        ack.stamp(TAG, finished=[kid], op_id=f"k{i}")
    for i in range(55, 59):
        assert ack.stamp(TAG, finished=[kids[i]], op_id=f"k{i}").duplicate
    assert ack.status(TAG).state == "pending"
    stored = harness.plain(ack).store.execute(Read(TAG))
    assert 4 <= len(stored.ops) < 4 + BLOCK
    assert ack.stamp(TAG, finished=[kids[-1]], op_id="last").acked


# -- states --------------------------------------------------------------------------------


def test_stamps_on_finished_or_missing_chains_are_refused(harness: Harness, ack: Any) -> None:
    with pytest.raises(errors.TagNotFound) as missing:
        ack.stamp("nope", finished=[ack.new_edge()])
    assert missing.value.tag == "nope"
    root = ack.new_edge()
    ack.create("acked", root)
    ack.stamp("acked", finished=[root])
    with pytest.raises(errors.TagAcked):
        ack.stamp("acked", finished=[ack.new_edge()])
    ack.create("failed", ack.new_edge())
    ack.fail("failed", "it broke")
    before = ack.status("failed")
    with pytest.raises(errors.TagFailed) as failed:
        ack.stamp("failed", finished=[ack.new_edge()])
    assert failed.value.reason == "it broke"
    # Refused, not applied and then reported: the chain is as the fail left it, whatever
    # the stamp's edge (a sum that a stamp took below zero is also reported failed).
    assert ack.status("failed") == before


def test_fail_keeps_the_first_reason_and_refuses_acked(harness: Harness, ack: Any) -> None:
    ack.create(TAG, ack.new_edge())
    first = ack.fail(TAG, "first")
    assert (first.state, first.reason) == ("failed", "first")
    assert ack.fail(TAG, "second").reason == "first"
    root = ack.new_edge()
    ack.create("done", root)
    ack.stamp("done", finished=[root])
    with pytest.raises(errors.TagAcked):
        ack.fail("done")
    with pytest.raises(errors.TagNotFound):
        ack.fail("nope")


def test_expiry_with_the_skew_margin(harness: Harness, clock: Clock) -> None:
    ack = harness.make(ttl=60, skew=5)
    root, kids = tree(ack, children=2)
    clock.advance(61)  # past the deadline on this writer's clock
    with pytest.raises(errors.TagExpired):
        ack.stamp(TAG, finished=[kids[0]])
    with pytest.raises(errors.TagExpired):
        ack.touch(TAG)
    assert ack.status(TAG).state == "pending"  # readers wait for the skew margin
    with pytest.raises(errors.TagExists):
        ack.create(TAG, ack.new_edge())  # nor may a create take it over yet
    clock.advance(5)
    status = ack.status(TAG)
    assert status.state == "expired" and status.done
    fresh = ack.new_edge()
    assert ack.create(TAG, fresh) == fresh  # a timed-out chain is overwritten
    assert ack.status(TAG).state == "pending"


def test_a_redelivered_create_never_revives_an_expired_chain(harness: Harness, clock: Clock) -> None:
    ack = harness.make(ttl=60)
    root = ack.new_edge()
    ack.create(TAG, root, op_id="create-1")
    clock.advance(120)
    again = ack.create(TAG, root, op_id="create-1")
    assert again.duplicate
    assert ack.status(TAG).state == "expired"


def test_an_expired_chain_can_be_failed_and_reads_expired_until_then(harness: Harness, clock: Clock) -> None:
    ack = harness.make(ttl=60)
    ack.create(TAG, ack.new_edge())
    clock.advance(3600)
    assert ack.status(TAG).state == "expired"
    assert ack.fail(TAG, "timed out").state == "failed"


def test_touch_extends_a_pending_chain(harness: Harness, clock: Clock) -> None:
    ack = harness.make(ttl=60)
    root, kids = tree(ack, children=1)
    clock.advance(50)
    status = ack.touch(TAG)
    assert status.state == "pending"
    clock.advance(50)  # 100 s after the create, 50 after the touch
    assert ack.touch(TAG, ttl=300).state == "pending"
    clock.advance(250)
    assert ack.stamp(TAG, finished=[kids[0]]).acked
    with pytest.raises(errors.TagAcked):
        ack.touch(TAG)
    with pytest.raises(errors.TagNotFound):
        ack.touch("nope")


# -- owners, modes ---------------------------------------------------------------------------


def test_calls_naming_an_owner_are_refused_on_anothers_chain(harness: Harness, ack: Any) -> None:
    root, kids = tree(ack, children=2, owner="run-1")
    assert ack.status(TAG).owner == "run-1"
    before = requests_of(ack)
    for call in (
        lambda: ack.stamp(TAG, finished=[kids[0]], owner="run-2"),
        lambda: ack.fail(TAG, owner="run-2"),
        lambda: ack.touch(TAG, owner="run-2"),
    ):
        with pytest.raises(errors.NotOwner) as info:
            call()
        assert info.value.tag == TAG
    assert requests_of(ack) > before  # refused by the store's condition, not guessed
    assert ack.status(TAG).state == "pending"
    assert not ack.stamp(TAG, finished=[kids[0]], owner="run-1").acked
    assert ack.stamp(TAG, finished=[kids[1]]).acked  # naming no owner checks none


def test_a_tracker_refuses_a_chain_of_the_other_mode(harness: Harness) -> None:
    mine = harness.make()
    other = harness.make(mode="sum" if harness.mode == "xor" else "xor")
    other.create(TAG, other.new_edge())
    with pytest.raises(errors.ChainModeMismatch):
        mine.stamp(TAG, finished=[mine.new_edge()])


# -- many at once -----------------------------------------------------------------------------


def test_status_many_and_delete(harness: Harness, ack: Any) -> None:
    for i in range(5):
        ack.create(f"t{i}", ack.new_edge())
    ack.fail("t1", "x")
    found = ack.status_many(["t0", "t1", "missing", "t4", "t0"])
    assert list(found) == ["t0", "t1", "t4"]
    assert [found[t].state for t in found] == ["pending", "failed", "pending"]
    with pytest.raises(errors.InvalidTagType):
        ack.status_many("t0")
    ack.delete("t0")
    with pytest.raises(errors.TagNotFound):
        ack.status("t0")
    with pytest.raises(errors.TagNotFound):
        ack.delete("t0")


def test_concurrent_writers_ack_exactly_once(atomic_harness: Harness) -> None:
    """Many threads stamp children of one chain: exactly one sees acked, and the chain
    is acked. Plain trackers get one each (as separate processes would); a combining
    tracker is shared by all the threads (what it is for)."""
    if atomic_harness.kind == "combining":
        trackers = [atomic_harness.make()] * 8
    else:
        trackers = [atomic_harness.make() for _ in range(8)]
    root = trackers[0].new_edge()
    trackers[0].create(TAG, root)
    kids = [trackers[0].new_edge() for _ in range(24)]
    trackers[0].stamp(TAG, finished=[root], started=kids)
    seen: list[bool] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        for kid in kids[i::8]:
            result = trackers[i].stamp(TAG, finished=[kid], op_id=f"kid-{kids.index(kid)}")
            with lock:
                seen.append(result.acked)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == [False] * 23 + [True]
    assert trackers[0].status(TAG).state == "acked"


# -- bad input ----------------------------------------------------------------------------------


#: Calls with bad arguments (the tracker and a good edge given), by what is wrong.
BAD_CALLS: dict[str, Any] = {
    "empty tag": lambda a, e: a.stamp("", finished=[e]),
    "int tag": lambda a, e: a.stamp(5, finished=[e]),
    "no stamp": lambda a, e: a.stamp(TAG),
    "both forms": lambda a, e: a.stamp(TAG, e, finished=[e]),
    "one edge, not a list": lambda a, e: a.stamp(TAG, finished=e),
    "zero delta": lambda a, e: a.stamp(TAG, finished=[e], started=[e]),
    "empty op id": lambda a, e: a.stamp(TAG, finished=[e], op_id=""),
    "empty owner": lambda a, e: a.stamp(TAG, finished=[e], owner=""),
    "int op id": lambda a, e: a.create(TAG, e, op_id=7),
    "int reason": lambda a, e: a.fail(TAG, reason=3),
    "zero ttl": lambda a, e: a.touch(TAG, ttl=0),
    "str ttl": lambda a, e: a.touch(TAG, ttl="soon"),
    "str tags": lambda a, e: a.status_many("t0"),
}


def test_bad_input_is_refused_before_any_request(harness: Harness, ack: Any) -> None:
    edge = ack.new_edge()
    ack.create(TAG, ack.new_edge())
    for case, call in BAD_CALLS.items():
        before = requests_of(ack)
        with pytest.raises(errors.XorAckError) as info:
            call(ack, edge)
        assert isinstance(info.value, (ValueError, TypeError)), case
        assert requests_of(ack) == before, f"{case}: a request was sent"


def test_values_of_the_wrong_shape_are_refused(harness: Harness, ack: Any) -> None:
    with pytest.raises(errors.ZeroBufferNoOp):
        ack.create(TAG, harness.zero())
    if harness.mode == "xor":
        root = ack.new_edge()
        ack.create(TAG, root)
        with pytest.raises(errors.BufferLengthsUnequal):
            ack.stamp(TAG, finished=[b"\x01" * 8])
        with pytest.raises(errors.InvalidStamp):
            ack.stamp(TAG, finished=[b""])
    else:
        with pytest.raises(errors.InvalidStamp):
            ack.stamp(TAG, finished=[2**64])
        with pytest.raises(errors.InvalidStamp):
            ack.stamp(TAG, finished=[-1])
        with pytest.raises(errors.InvalidStamp):
            ack.create(TAG, 10**38)
        with pytest.raises(errors.InvalidStampType):
            ack.stamp(TAG, finished=[True])


# -- delete_on_ack -------------------------------------------------------------------------------


def test_delete_on_ack(harness: Harness) -> None:
    ack = harness.make(delete_on_ack=True)
    root = ack.new_edge()
    ack.create(TAG, root)
    done = ack.stamp(TAG, finished=[root], op_id="last")
    assert done.acked
    with pytest.raises(errors.TagNotFound):
        ack.status(TAG)
    with pytest.raises(errors.TagNotFound):  # documented: duplicate or not
        ack.stamp(TAG, finished=[root], op_id="last")
    with pytest.raises(errors.InvalidConfig):  # a redelivered create would start a new chain
        ack.create("other", ack.new_edge(), op_id="c")
