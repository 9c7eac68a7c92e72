"""MemoryAck: the same lifecycle and errors as XorAckDynamoDB, in memory, with the ack
package's callbacks and Storm's rotating expiry."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from conftest import expect, h

from xor_ack_dynamodb import ChainStatus, CombiningTracker, MemoryAck, Stamp, errors, new_stamp, xor
from xor_ack_dynamodb.core.chain import op_key
from xor_ack_dynamodb.stamps import MAX_STAMP_BYTES, MAX_TAG_BYTES

TAG = "database/file13"


class Events:
    """Records the callbacks."""

    def __init__(self) -> None:
        self.acked: list[str] = []
        self.failed: list[tuple[str, str | None]] = []

    def tracker(self, **options: Any) -> MemoryAck:
        def on_failed(tag: str, reason: str | None) -> None:
            self.failed.append((tag, reason))

        return MemoryAck(on_acked=self.acked.append, on_failed=on_failed, **options)


@pytest.fixture
def events() -> Events:
    return Events()


def test_seed_readme_walkthrough(events: Events) -> None:
    ack = events.tracker()
    created = ack.create(TAG, h("29"))
    assert isinstance(created, Stamp) and created == h("29") and not created.acked
    assert not created.duplicate
    steps = [("4c", "65"), ("25", "40"), ("a9", "e9"), ("e9", "00")]
    for i, (inbound, expected) in enumerate(steps):
        result = ack.stamp(TAG, h(inbound))
        assert isinstance(result, Stamp) and result == h(expected) and not result.duplicate
        assert result.acked is (i == 3)
        assert events.acked == ([TAG] if i == 3 else [])
    assert ack.status(TAG) == ChainStatus(TAG, "acked", Stamp(h("00")), None, None, 5)
    assert events.failed == []


def test_errors_with_type_code_and_tag(events: Events) -> None:
    ack = events.tracker()
    with expect(errors.ZeroBufferNoOp, TAG):
        ack.create(TAG, h("0000"))
    for method in ("fail", "touch", "status", "delete"):
        with expect(errors.TagNotFound, TAG):
            getattr(ack, method)(TAG)
    with expect(errors.TagNotFound, TAG):
        ack.stamp(TAG, h("2929"))
    ack.create(TAG, h("2929"))
    with expect(errors.TagExists, TAG):
        ack.create(TAG, h("1111"))
    with expect(errors.ZeroBufferNoOp, TAG):
        ack.stamp(TAG, h("0000"))
    with expect(errors.BufferLengthsUnequal, TAG):
        ack.stamp(TAG, h("29"))
    assert ack.status(TAG).stamp == h("2929")

    ack.create("done", h("01"))
    ack.stamp("done", h("01"))
    with expect(errors.TagAcked, "done"):
        ack.stamp("done", h("02"))
    with expect(errors.TagAcked, "done"):
        ack.fail("done")
    with expect(errors.TagAcked, "done"):
        ack.touch("done")

    ack.create("broken", h("01"))
    ack.fail("broken", "bad record")
    with expect(errors.TagFailed, "broken") as info:
        ack.stamp("broken", h("01"))
    assert info.value.reason == "bad record"
    with expect(errors.TagFailed, "broken"):
        ack.touch("broken")

    ack.create("late", h("01"))
    for _ in range(3):
        ack.rotate()
    with expect(errors.TagExpired, "late"):
        ack.stamp("late", h("01"))
    with expect(errors.TagExpired, "late"):
        ack.touch("late")


def test_bad_input_is_refused_and_changes_nothing() -> None:
    ack = MemoryAck()
    ack.create(TAG, h("29"))
    for tag, cls in [
        ("", errors.InvalidTag),
        (None, errors.InvalidTagType),
        (b"t", errors.InvalidTagType),
        ("x" * (MAX_TAG_BYTES + 1), errors.InvalidTag),
        ("t\udc80", errors.InvalidTag),
    ]:
        calls: list[tuple[str, tuple[Any, ...]]] = [
            ("create", (tag, h("29"))),
            ("stamp", (tag, h("29"))),
            ("fail", (tag,)),
            ("touch", (tag,)),
            ("status", (tag,)),
            ("delete", (tag,)),
            ("status_many", ([TAG, tag],)),
        ]
        for method, args in calls:
            with pytest.raises(cls) as info:
                getattr(ack, method)(*args)
            assert type(info.value) is cls
    for stamp, scls in [
        (b"", errors.InvalidStamp),
        ("29", errors.InvalidStampType),
        (41, errors.InvalidStampType),
        (b"\x01" * (MAX_STAMP_BYTES + 1), errors.InvalidStamp),
    ]:
        with expect(scls, TAG):
            ack.stamp(TAG, stamp)  # type: ignore[arg-type]
        with expect(scls, "other"):
            ack.create("other", stamp)  # type: ignore[arg-type]
    assert len(ack) == 1
    assert ack.status(TAG) == ChainStatus(TAG, "pending", Stamp(h("29")), None, None, 1)
    with pytest.raises(errors.InvalidConfig):
        MemoryAck(buckets=1)
    with pytest.raises(errors.InvalidConfig):
        MemoryAck(max_ops=0)


def test_fail_calls_on_failed_once_and_keeps_the_first_reason(events: Events) -> None:
    ack = events.tracker()
    ack.create(TAG, new_stamp())
    status = ack.fail(TAG, "first")
    assert (status.state, status.reason) == ("failed", "first")
    again = ack.fail(TAG, "second")
    assert (again.state, again.reason) == ("failed", "first")
    assert events.failed == [(TAG, "first")]
    assert events.acked == []


def test_rotate_expires_after_buckets_rotations(events: Events) -> None:
    ack = events.tracker(buckets=3)
    ack.create(TAG, h("29"))
    assert ack.rotate() == []
    assert ack.rotate() == []
    assert ack.status(TAG).state == "pending" and events.failed == []
    assert ack.rotate() == [TAG]
    assert events.failed == [(TAG, "timeout")]
    status = ack.status(TAG)
    assert (status.state, status.reason, status.done) == ("expired", "timeout", True)
    # Failing a timed-out chain records the failure but does not report it twice.
    assert ack.fail(TAG, "replayed").state == "failed"
    assert events.failed == [(TAG, "timeout")]


def test_stamping_does_not_reset_expiry_but_touch_does(events: Events) -> None:
    ack = events.tracker(buckets=3)
    ack.create("stamped", h("2929"))
    ack.create("touched", h("2929"))
    ack.rotate()
    ack.rotate()
    ack.stamp("stamped", h("0101"))
    assert ack.touch("touched").state == "pending"
    assert ack.rotate() == ["stamped"]
    ack.rotate()
    assert ack.status("touched").state == "pending"
    assert ack.rotate() == ["touched"]  # three rotations after the touch
    assert events.failed == [("stamped", "timeout"), ("touched", "timeout")]


def test_expired_chain_may_be_created_again(events: Events) -> None:
    ack = events.tracker(buckets=2)
    ack.create(TAG, h("29"))
    ack.rotate()
    ack.rotate()
    assert ack.status(TAG).state == "expired"
    assert ack.create(TAG, h("4c")) == h("4c")
    assert ack.status(TAG).state == "pending"
    assert ack.stamp(TAG, h("4c")).acked
    assert events.acked == [TAG]


def test_tombstones_are_forgotten_a_cycle_later(events: Events) -> None:
    ack = events.tracker(buckets=3)
    ack.create("acked", h("01"))
    ack.create("failed", h("01"))
    ack.create("expired", h("01"))
    ack.rotate()
    ack.stamp("acked", h("01"))
    ack.fail("failed")
    ack.rotate()
    assert ack.rotate() == ["expired"]
    assert len(ack) == 3
    assert ack.status("acked").state == "acked" and ack.status("failed").state == "failed"
    ack.rotate()  # the acked and failed tombstones were finished 3 rotations ago
    with pytest.raises(errors.TagNotFound):
        ack.status("acked")
    with pytest.raises(errors.TagNotFound):
        ack.status("failed")
    ack.rotate()
    assert ack.status("expired").state == "expired"
    assert ack.rotate() == []  # a timed-out chain is not reported again ...
    assert len(ack) == 0  # ... and is forgotten 3 rotations after it timed out
    assert events.failed == [("failed", None), ("expired", "timeout")]
    with pytest.raises(errors.TagNotFound):
        ack.status("expired")
    assert ack.create("acked", h("02")) == h("02")  # the tag is free again


def test_op_id_idempotency(events: Events) -> None:
    ack = events.tracker()
    root, child = new_stamp(), new_stamp()
    assert ack.create(TAG, root, op_id="root") == root
    again = ack.create(TAG, root, op_id="root")
    assert again == root and again.duplicate and not again.acked
    with pytest.raises(errors.OpIdReused):  # an op id names one payload
        ack.create(TAG, new_stamp(), op_id="root")
    assert ack.stamp(TAG, xor(root, child), op_id="m1") == child
    assert ack.stamp(TAG, xor(root, child), op_id="m1") == child
    assert ack.status(TAG).stamp == child
    assert ack.stamp(TAG, child, op_id="m2").acked
    again = ack.stamp(TAG, child, op_id="m2")  # a duplicate of the completing op
    assert again.acked and again.duplicate and again == bytes(16)
    late = ack.stamp(TAG, xor(root, child), op_id="m1")  # a duplicate of an earlier op
    assert late == bytes(16) and late.duplicate and not late.acked
    assert events.acked == [TAG]  # reported once


def test_a_duplicate_is_caught_past_the_window() -> None:
    """Issue 18: the window no longer bounds the guarantee. Before, the 3rd other op
    pushed X out of a window of 3 and X was applied again; now X's op moves to the
    chain's history with its block and is found there."""
    ack = MemoryAck(max_ops=3)
    root, edge = new_stamp(), new_stamp()
    ack.create(TAG, root)
    value = ack.stamp(TAG, edge, op_id="X")
    for _ in range(2):
        value = ack.stamp(TAG, new_stamp())
    assert ack.stamp(TAG, edge, op_id="X") == value  # 2 < 3 others since: in the window
    for _ in range(3 + 2 * 40):
        value = ack.stamp(TAG, new_stamp())
    stored = ack.store.peek(TAG)
    assert stored is not None and stored.find(op_key("X", "stamp")) is None  # moved out
    again = ack.stamp(TAG, edge, op_id="X")
    assert again == value and again.duplicate  # found in history: not applied again
    assert ack.status(TAG).stamp == value


def test_status_many_and_delete() -> None:
    ack = MemoryAck()
    for i in range(5):
        ack.create(f"t{i}", h("29"))
    ack.fail("t1", "x")
    result = ack.status_many(["t0", "t1", "nope", "t0", "t4"])
    assert list(result) == ["t0", "t1", "t4"]
    assert result["t1"].state == "failed" and result["t0"].state == "pending"
    ack.delete("t0")
    with pytest.raises(errors.TagNotFound):
        ack.delete("t0")
    assert "t0" not in ack.status_many(["t0"])
    assert len(ack) == 4


def test_callbacks_may_call_the_tracker() -> None:
    seen: list[ChainStatus] = []
    ack: MemoryAck

    def on_acked(tag: str) -> None:
        seen.append(ack.status(tag))
        ack.delete(tag)

    def on_failed(tag: str, reason: str | None) -> None:
        seen.append(ack.status(tag))

    ack = MemoryAck(on_acked=on_acked, on_failed=on_failed)
    ack.create("a", h("29"))
    ack.stamp("a", h("29"))
    ack.create("b", h("29"))
    ack.fail("b", "boom")
    assert [(s.tag, s.state) for s in seen] == [("a", "acked"), ("b", "failed")]
    assert len(ack) == 1


def test_threads_stamping_one_chain_ack_it_once(events: Events) -> None:
    ack = events.tracker()
    threads, per_thread = 8, 50
    root = new_stamp()
    children = [[new_stamp() for _ in range(per_thread)] for _ in range(threads)]
    ack.create(TAG, root)
    ack.stamp(TAG, xor(root, *(c for row in children for c in row)))
    barrier = threading.Barrier(threads)
    results: list[Stamp] = []
    lock = threading.Lock()

    def work(mine: list[bytes]) -> None:
        barrier.wait()
        for child in mine:
            result = ack.stamp(TAG, child)
            with lock:
                results.append(result)

    workers = [threading.Thread(target=work, args=(row,)) for row in children]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert len(results) == threads * per_thread
    assert sum(r.acked for r in results) == 1
    assert events.acked == [TAG]
    status = ack.status(TAG)
    assert status.state == "acked" and status.version == 2 + threads * per_thread


def test_memory_one_message_id_may_serve_a_create_and_its_first_stamp() -> None:
    ack = MemoryAck()
    root, child = new_stamp(), new_stamp()
    ack.create("handler", root, op_id="msg-1")
    assert ack.stamp("handler", xor(root, child), op_id="msg-1") == child
    assert ack.stamp("handler", child, op_id="msg-2").acked


def test_memory_status_many_refuses_a_bare_string() -> None:
    with pytest.raises(errors.InvalidTagType):
        MemoryAck().status_many("abc")


@pytest.mark.parametrize("mode", ["xor", "sum"])
def test_callbacks_fire_under_a_combining_tracker(mode: str) -> None:
    acked: list[str] = []
    ack = CombiningTracker(MemoryAck(mode=mode, on_acked=acked.append))
    root = ack.new_edge()
    ack.create(TAG, root)
    assert ack.stamp(TAG, finished=[root], op_id="last").acked
    assert ack.stamp(TAG, finished=[root], op_id="last").duplicate  # a redelivery: not reported again
    assert acked == [TAG]
