"""CombiningTracker against DynamoDB over HTTP (the moto server, dynalite and DynamoDB
Local), with real threads.

Where a test needs stamps to be queued behind a write in flight, it holds that write in
botocore's ``before-send`` hook of the tracker's own client (nothing is faked: the
request is only delayed) and waits until the others have queued.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import BotoCoreError, ClientError
from conftest import unique_table
from reliability.faults import FaultInjector, FaultRates, client_config

from xor_ack_dynamodb import AckTracker, RetryPolicy, Stamp, StampSpec, XorAckDynamoDB, errors, new_stamp, xor
from xor_ack_dynamodb.combiner import CombiningTracker
from xor_ack_dynamodb.core.chain import UNKNOWN_DIGEST, Op, op_key, payload_digest

pytestmark = pytest.mark.server

TAG = "hot/root"
WAIT = 30.0


@pytest.fixture(params=["moto-server", "dynalite", "ddblocal"])
def backend(request: pytest.FixtureRequest) -> Any:
    """A DynamoDB over HTTP: the moto server, dynalite (which does not return the item on
    a failed condition, so lost races take the consistent-read fallback) and DynamoDB
    Local."""
    return request.getfixturevalue("moto_server" if request.param == "moto-server" else request.param)


def tracker(server: Any, table: str | None = None, **options: Any) -> XorAckDynamoDB:
    """A tracker with its own client on the moto server; creates the table if new."""
    ack = XorAckDynamoDB(table or unique_table("comb"), client=server.client(), **options)
    if table is None:
        ack.create_table()
    return ack


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


class OnWrite:
    """Runs ``actions[n]`` inside botocore's before-send hook of the n-th PutItem request
    (1-based) of ``client`` (an xor stamp's conditional write of the whole item), before
    the request is sent."""

    def __init__(self, client: Any, actions: dict[int, Callable[[], object]]) -> None:
        self.actions = actions
        self.count = 0
        self._lock = threading.Lock()
        client.meta.events.register("before-send.dynamodb.PutItem", self._hook)

    def _hook(self, **_: Any) -> None:
        with self._lock:
            self.count += 1
            n = self.count
        action = self.actions.get(n)
        if action is not None:
            action()


class Caller(threading.Thread):
    """One ``stamp()`` call on its own thread; keeps its result or its error."""

    def __init__(
        self, combiner: CombiningTracker, delta: bytes, op_id: str | None = None, tag: str = TAG
    ) -> None:
        super().__init__(daemon=True)
        self.combiner, self.tag, self.delta, self.op_id = combiner, tag, delta, op_id
        self.result: Stamp | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.combiner.stamp(self.tag, self.delta, op_id=self.op_id)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            self.error = exc

    def outcome(self) -> Stamp | BaseException:
        self.join(WAIT)
        assert not self.is_alive(), "stamp() did not return"
        if self.error is not None:
            return self.error
        assert self.result is not None
        return self.result


def queue_behind_held_write(
    combiner: CombiningTracker,
    first: Caller,
    others: list[Caller],
    before_release: Callable[[], object] | None = None,
) -> None:
    """Start ``first``, hold its write, queue ``others`` in order behind it, then let
    the write go (after ``before_release``)."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        assert release.wait(WAIT)

    OnWrite(combiner.tracker.client, {1: hold})
    first.start()
    assert entered.wait(WAIT)
    for n, caller in enumerate(others, 1):
        caller.start()
        wait_for(lambda n=n: combiner.waiting(TAG) == n, f"{n} stamps queued")  # type: ignore[misc]
    if before_release is not None:
        before_release()
    release.set()


def item_of(ack: XorAckDynamoDB, tag: str = TAG) -> dict[str, Any]:
    item: dict[str, Any] = ack.client.get_item(
        TableName=ack.table, Key={"tagID": {"S": tag}}, ConsistentRead=True
    )["Item"]
    return item


def stored_ops(ack: XorAckDynamoDB, tag: str = TAG) -> list[Op]:
    """The chain's op list as stored: op keys with their payload hashes."""
    item = item_of(ack, tag)
    keys, hashes = item["ops"]["L"], item["oph"]["L"]
    assert len(keys) == len(hashes)
    return [Op(k["B"], d["B"]) for k, d in zip(keys, hashes, strict=True)]


def stamp_op(op_id: str, delta: bytes) -> Op:
    """How a chain remembers ``stamp(tag, delta, op_id=op_id)``."""
    return Op(op_key(op_id, "stamp"), payload_digest("stamp", bytes(delta)))


def is_marker(op: Op) -> bool:
    """A combined write's batch marker: a random key stored with no payload hash."""
    return op.digest == UNKNOWN_DIGEST


def create_op(op_id: str, root: bytes) -> dict[str, bytes]:
    """The ``cop`` attribute of a chain created with ``op_id``: its key and value hash."""
    return {"B": op_key(op_id, "create") + payload_digest("create", bytes(root))}


def test_threads_on_one_chain_match_a_sequential_order(backend: Any) -> None:
    threads, per_thread = 16, 6
    ack = tracker(backend, max_ops=200)
    combiner = CombiningTracker(ack)
    deltas = {f"t{i}-{k}": new_stamp() for i in range(threads) for k in range(per_thread)}
    root = xor(*deltas.values())
    ack.create(TAG, root, op_id="create")
    ack.stats.reset()
    results: dict[str, Stamp] = {}
    start = threading.Barrier(threads)

    def work(i: int) -> None:
        start.wait()
        for k in range(per_thread):
            op = f"t{i}-{k}"
            results[op] = combiner.stamp(TAG, deltas[op], op_id=op)

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(WAIT * 4)
    assert len(results) == len(deltas)

    status = ack.status(TAG)
    assert status.state == "acked" and status.stamp.acked
    assert [op for op, r in results.items() if r.acked] and sum(r.acked for r in results.values()) == 1
    # Each result is the value after that stamp: walking value -> result from the root
    # visits every stamp once and ends at zero, which gives the order they were applied.
    by_before = {bytes(xor(r, deltas[op])): op for op, r in results.items()}
    assert len(by_before) == len(results)
    order, value = [], bytes(root)
    while value in by_before:
        op = by_before.pop(value)
        order.append(op)
        value = bytes(results[op])
    assert not by_before and not any(value)
    # Every merged stamp's op (key and payload hash) is in the item, in that order; each
    # combined write put one batch marker ahead of its stamps; the create's op is kept
    # apart, for the chain's life.
    ops = stored_ops(ack)
    assert [op for op in ops if not is_marker(op)] == [stamp_op(op, deltas[op]) for op in order]
    assert item_of(ack)["cop"] == create_op("create", root)
    stats = ack.stats.snapshot()
    stamps = len(deltas)
    assert stats.get("combined", 0) > 0
    assert stats["requests"] < stamps, stats  # fewer than one request a stamp
    assert stats["requests.PutItem"] == stats["batches"]
    markers = sum(map(is_marker, ops))
    assert 0 < markers <= stats["batches"] and not is_marker(ops[-1])  # markers lead their stamps


def test_uncontended_stamps_cost_one_request_each(backend: Any) -> None:
    ack = tracker(backend)
    combiner = CombiningTracker(ack)
    deltas = [new_stamp() for _ in range(10)]
    ack.create(TAG, xor(*deltas))
    ack.stats.reset()
    results = [combiner.stamp(TAG, d) for d in deltas]
    assert [r.acked for r in results] == [False] * 9 + [True]
    assert ack.stats.requests == {"PutItem": 10}
    assert not any(map(is_marker, stored_ops(ack)))  # a write of one stamp needs no marker
    assert combiner.waiting(TAG) == 0 and not combiner._queues  # nothing left behind


def test_duplicates_in_one_batch_and_across_batches_are_applied_once(backend: Any) -> None:
    ack = tracker(backend)
    combiner = CombiningTracker(ack)
    root, d0, da, db = new_stamp(), new_stamp(), new_stamp(), new_stamp()
    ack.create(TAG, root, op_id="create")
    ack.stats.reset()
    first = Caller(combiner, d0, "first")
    a, a_again, b = Caller(combiner, da, "a"), Caller(combiner, da, "a"), Caller(combiner, db, "b")
    queue_behind_held_write(combiner, first, [a, a_again, b])

    assert first.outcome() == xor(root, d0)
    assert a.outcome() == xor(root, d0, da)
    assert a_again.outcome() == xor(root, d0, da)  # the value at its turn, not applied again
    assert b.outcome() == xor(root, d0, da, db)
    assert not any(c.result.duplicate for c in (first, a, b))  # type: ignore[union-attr]
    assert a_again.result.duplicate  # type: ignore[union-attr]
    # a, a again and b: one write. The batch's duplicate was decided on the cached value,
    # and a stamp is only ever judged a duplicate on a fresh read: one GetItem first.
    assert ack.stats.requests == {"PutItem": 2, "GetItem": 1}
    assert ack.stats.events.get("duplicates") == 1
    assert ack.status(TAG).stamp == xor(root, d0, da, db)
    ops = stored_ops(ack)
    assert ops[0] == stamp_op("first", d0)  # written alone: no marker
    assert is_marker(ops[1]) and ops[2:] == [stamp_op("a", da), stamp_op("b", db)]
    assert item_of(ack)["cop"] == create_op("create", root)

    # Delivered again in a later batch: the chain knows it.
    again = combiner.stamp(TAG, da, op_id="a")
    assert again == xor(root, d0, da, db) and again.duplicate and not again.acked
    assert combiner.stamp(TAG, d0, op_id="first") == xor(root, d0, da, db)
    # The same op id with another stamp is a caller bug, caught before anything is written.
    with pytest.raises(errors.OpIdReused):
        combiner.stamp(TAG, new_stamp(), op_id="b")
    assert ack.status(TAG).stamp == xor(root, d0, da, db)
    assert ack.stats.events.get("duplicates") == 3


def test_stamps_after_the_batch_reaches_zero_get_tag_acked(backend: Any) -> None:
    ack = tracker(backend)
    combiner = CombiningTracker(ack)
    d0, da, db = new_stamp(), new_stamp(), new_stamp()
    ack.create(TAG, xor(d0, da))
    first, a, b, a_again = (
        Caller(combiner, d0),
        Caller(combiner, da, "a"),
        Caller(combiner, db),
        Caller(combiner, da, "a"),
    )
    queue_behind_held_write(combiner, first, [a, b, a_again])

    assert not first.outcome().acked  # type: ignore[union-attr]
    done = a.outcome()
    assert isinstance(done, Stamp) and done.acked
    late = b.outcome()
    assert type(late) is errors.TagAcked and late.tag == TAG
    again = a_again.outcome()  # a duplicate is not an error, as one by one
    assert again == Stamp(bytes(16))
    # A duplicate of the completing op: it still reports the completion, as a duplicate.
    assert isinstance(again, Stamp) and again.acked and again.duplicate
    status = ack.status(TAG)
    assert status.state == "acked" and status.stamp.acked
    assert stored_ops(ack)[-1] == stamp_op("a", da)


def test_stamps_after_the_batch_completes_a_deleted_on_ack_chain(backend: Any) -> None:
    """With delete_on_ack the completing write stores the acked tombstone, then deletes
    it: a stamp of the same batch after the completion gets TagAcked (as one racing the
    delete would), one arriving after the delete TagNotFound."""
    ack = tracker(backend, delete_on_ack=True)
    combiner = CombiningTracker(ack)
    d0, da, db = new_stamp(), new_stamp(), new_stamp()
    ack.create(TAG, xor(d0, da))
    ack.stats.reset()
    first, a, b = Caller(combiner, d0), Caller(combiner, da), Caller(combiner, db)
    queue_behind_held_write(combiner, first, [a, b])

    assert not first.outcome().acked  # type: ignore[union-attr]
    assert a.outcome().acked  # type: ignore[union-attr]
    late = b.outcome()
    assert type(late) is errors.TagAcked and late.tag == TAG
    # first alone; then a and b in one write (the tombstone), then its delete. b's refusal
    # was decided on the cached value, and a refusal is only ever decided on a fresh read:
    # one GetItem before that write.
    assert ack.stats.requests == {"PutItem": 2, "GetItem": 1, "DeleteItem": 1}
    with pytest.raises(errors.TagNotFound):
        ack.status(TAG)
    with pytest.raises(errors.TagNotFound):
        combiner.stamp(TAG, db)


@pytest.mark.parametrize("attempts", [1, 50])
def test_a_failed_chain_fails_every_waiting_caller(backend: Any, attempts: int) -> None:
    # With a budget of one attempt the lost race itself must tell TagFailed, not
    # StaleLocalData, as stamp() does.
    ack = tracker(backend, retry=RetryPolicy(max_attempts=attempts))
    other = tracker(backend, ack.table)  # another process's tracker, own client
    combiner = CombiningTracker(ack)
    ack.create(TAG, new_stamp())
    callers = [Caller(combiner, new_stamp()) for _ in range(5)]
    queue_behind_held_write(combiner, callers[0], callers[1:], before_release=lambda: other.fail(TAG, "boom"))

    for caller in callers:
        outcome = caller.outcome()
        assert type(outcome) is errors.TagFailed, outcome
        assert outcome.tag == TAG and outcome.reason == "boom"
    assert len({id(c.error) for c in callers}) == len(callers)  # each caller its own error
    status = other.status(TAG)
    assert status.state == "failed" and status.version == 2  # created, failed: nothing else


def test_a_stamp_of_the_wrong_length_fails_alone(backend: Any) -> None:
    ack = tracker(backend)
    combiner = CombiningTracker(ack)
    root, d0, da, db = new_stamp(), new_stamp(), new_stamp(), new_stamp()
    ack.create(TAG, root)
    first, a, short, b = (
        Caller(combiner, d0),
        Caller(combiner, da),
        Caller(combiner, new_stamp(8)),
        Caller(combiner, db),
    )
    queue_behind_held_write(combiner, first, [a, short, b])

    assert first.outcome() == xor(root, d0)
    assert a.outcome() == xor(root, d0, da)
    error = short.outcome()
    assert type(error) is errors.BufferLengthsUnequal and error.tag == TAG
    assert b.outcome() == xor(root, d0, da, db)
    assert ack.status(TAG).stamp == xor(root, d0, da, db)


def test_a_failed_merged_write_is_reported_to_every_caller_in_it(backend: Any) -> None:
    ack = tracker(backend, retry=RetryPolicy(max_attempts=1))
    other = tracker(backend, ack.table)
    combiner = CombiningTracker(ack)
    root, d0, dx, da, db = new_stamp(), new_stamp(), new_stamp(), new_stamp(), new_stamp()
    ack.create(TAG, root)
    # The second write (a and b together) loses a race to another tracker, and the
    # budget allows one attempt.
    OnWrite(ack.client, {2: lambda: other.stamp(TAG, dx)})
    first, a, b = Caller(combiner, d0), Caller(combiner, da, "a"), Caller(combiner, db, "b")
    queue_behind_held_write(combiner, first, [a, b])

    assert first.outcome() == xor(root, d0)
    for caller in (a, b):
        outcome = caller.outcome()
        assert type(outcome) is errors.StaleLocalData and outcome.tag == TAG
    assert a.error is not b.error
    assert ack.status(TAG).stamp == xor(root, d0, dx)  # nothing of the failed batch applied
    # The callers try again with the same op ids: applied once each.
    assert combiner.stamp(TAG, da, op_id="a") == xor(root, d0, dx, da)
    assert combiner.stamp(TAG, db, op_id="b") == xor(root, d0, dx, da, db)


def test_bad_input_is_refused_before_queueing(backend: Any) -> None:
    ack = tracker(backend)
    combiner = CombiningTracker(ack)
    ack.stats.reset()
    with pytest.raises(errors.ZeroBufferNoOp):
        combiner.stamp(TAG, bytes(16))
    with pytest.raises(errors.InvalidTag):
        combiner.stamp("", new_stamp())
    with pytest.raises(errors.InvalidStampType):
        combiner.stamp(TAG, "not bytes")  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidConfig):
        combiner.stamp(TAG, new_stamp(), op_id="")
    with pytest.raises(errors.TagNotFound):
        combiner.stamp(TAG, new_stamp())
    assert ack.stats.requests == {"GetItem": 1}
    assert not combiner._queues
    with pytest.raises(TypeError):
        CombiningTracker(object())  # type: ignore[arg-type]


def test_delegated_methods(backend: Any) -> None:
    ack = tracker(backend)
    combiner = CombiningTracker(ack)
    assert combiner.tracker is ack and combiner.stats is ack.stats and combiner.mode == "xor"
    assert isinstance(combiner, AckTracker)
    assert len(combiner.new_edge()) == 16  # type: ignore[arg-type]
    stamp = new_stamp()
    combiner.create(TAG, stamp)
    assert combiner.touch(TAG).state == "pending"
    assert combiner.status_many([TAG])[TAG].stamp == stamp
    assert combiner.fail(TAG, "x").state == "failed"
    combiner.delete(TAG)
    with pytest.raises(errors.TagNotFound):
        combiner.status(TAG)


def test_threads_on_one_chain_under_fault_injection(backend: Any) -> None:
    """Lost responses (applied, then resent by botocore, or decided again by the
    library's retry for a write botocore does not resend), throttling and server errors
    on every request: callers retry a failed call with the same op id, and the chain
    still ends exactly at zero with every stamp applied once."""
    threads, per_thread = 8, 8
    setup = tracker(backend, max_ops=200)
    injector = FaultInjector(FaultRates(lost_response=0.15, throttle=0.1, server_error=0.05), seed=7)
    client = boto3.client("dynamodb", endpoint_url=backend.endpoint_url, config=client_config(max_attempts=3))
    ack = XorAckDynamoDB(setup.table, client=injector.attach(client), max_ops=200)
    combiner = CombiningTracker(ack)
    deltas = {f"t{i}-{k}": new_stamp() for i in range(threads) for k in range(per_thread)}
    setup.create(TAG, xor(*deltas.values()), op_id="create")
    failures: list[BaseException] = []
    acked: list[str] = []

    def work(i: int) -> None:
        for k in range(per_thread):
            op = f"t{i}-{k}"
            for _ in range(20):
                try:
                    if combiner.stamp(TAG, deltas[op], op_id=op).acked:
                        acked.append(op)
                    break
                except (ClientError, BotoCoreError, errors.RequestFailed, errors.StaleLocalData) as exc:
                    failures.append(exc)
            else:
                raise AssertionError(f"{op} never went through")

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(WAIT * 4)
    injector.close()

    assert injector.injected["lost_response"] > 0 and injector.total() > 5
    status = setup.status(TAG)
    assert status.state == "acked" and status.stamp.acked
    ops = [op for op in stored_ops(setup) if not is_marker(op)]
    assert sorted(op.key for op in ops) == sorted(op_key(op, "stamp") for op in deltas)  # each once
    assert set(ops) == {stamp_op(op, delta) for op, delta in deltas.items()}
    assert item_of(setup)["cop"] == create_op("create", xor(*deltas.values()))
    # Exactly one call reported the completion: the one whose op completed the chain
    # (or its retry, when the first try's outcome was hidden by a fault).
    assert len(acked) == 1, acked


class Interrupted(Exception):
    """Raised in the main thread by a signal handler, as KeyboardInterrupt would be."""


def test_a_caller_interrupted_while_queued_leaves_the_queue_working(backend: Any) -> None:
    ack = tracker(backend)
    combiner = CombiningTracker(ack)
    root, d0, dm, db = new_stamp(), new_stamp(), new_stamp(), new_stamp()
    ack.create(TAG, root)
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        assert release.wait(WAIT)

    OnWrite(ack.client, {1: hold})
    first = Caller(combiner, d0)
    first.start()
    assert entered.wait(WAIT)
    after = Caller(combiner, db)

    def queue_b_then_interrupt() -> None:
        wait_for(lambda: combiner.waiting(TAG) == 1, "the main thread queued")
        after.start()
        wait_for(lambda: combiner.waiting(TAG) == 2, "b queued")
        os.kill(os.getpid(), signal.SIGUSR1)

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        threading.Thread(target=queue_b_then_interrupt, daemon=True).start()
        with pytest.raises(Interrupted):
            combiner.stamp(TAG, dm)  # queued behind the held write, in the main thread
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert combiner.waiting(TAG) == 1  # only b is left
    release.set()

    assert first.outcome() == xor(root, d0)
    assert after.outcome() == xor(root, d0, db)  # b was led; the interrupted stamp never written
    assert ack.status(TAG).stamp == xor(root, d0, db)
    assert not combiner._queues


def test_the_batch_calls_go_straight_to_the_wrapped_tracker(moto_server: Any) -> None:
    """docs/guarantees.md: a combiner's ``create_many``/``stamp_many``/``touch_many`` are
    the wrapped tracker's, uncombined: one transaction each way, and each chain gets
    what the single call would give it."""
    ack = tracker(moto_server)
    combiner = CombiningTracker(ack)
    roots = {f"c{i}": new_stamp() for i in range(3)}
    created = combiner.create_many(roots, op_ids={t: f"{t}/create" for t in roots})
    assert {t: v.acked for t, v in created.items()} == dict.fromkeys(roots, False)  # type: ignore[union-attr]
    before = ack.stats.requests["TransactWriteItems"]
    done = combiner.stamp_many([StampSpec(t, finished=(roots[t],), op_id=f"{t}/end") for t in ("c0", "c1")])
    assert {t: v.acked for t, v in done.items()} == {"c0": True, "c1": True}  # type: ignore[union-attr]
    assert ack.stats.requests["TransactWriteItems"] == before + 1
    touched = combiner.touch_many(["c1", "c2"], ttl=60)
    assert isinstance(touched["c1"], errors.TagAcked) and touched["c2"].state == "pending"  # type: ignore[union-attr]
    assert combiner.status("c2").stamp == roots["c2"]
