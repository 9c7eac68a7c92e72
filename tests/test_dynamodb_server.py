"""Over real HTTP only (a moto server on 127.0.0.1): writes the server already applied
whose responses are lost, trackers racing from threads with their own clients, and the
lifecycle.

The lost responses are real: a ``before-send`` handler on the client's event system sends
the request to the server itself, then reports the connection as closed. botocore then
resends the very same request (same body, same condition), as it does after a lost
response, unless the library sent it once (a stamp's write, which tests the chain's
deadline: stores/dynamodb/resend.py): then the error reaches the library, whose own retry
reads the chain and decides again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError
from botocore.httpsession import URLLib3Session

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, Stamp, XorAckDynamoDB, errors, new_stamp, xor

pytestmark = pytest.mark.server

TAG = "database/file13"


class LostResponse:
    """Makes the next ``operation`` request on ``client`` reach the server and then lose
    its response: the handler sends it itself, records what the table holds right after
    (through ``observer``, another client), and raises ``ConnectionClosedError``, which
    botocore retries by sending the same request again (unless the request was sent
    once, resend.py: then the library's own retry takes over)."""

    def __init__(self, client: Any, operation: str, observe: Callable[[], Any]) -> None:
        self._http = URLLib3Session()
        self._armed = False
        self._observe = observe
        self.first_status: int | None = None
        self.after_first: Any = None
        self.sent = 0
        client.meta.events.register(f"before-send.dynamodb.{operation}", self._before_send)

    def arm(self) -> None:
        self._armed = True

    def _before_send(self, request: Any, **_: Any) -> None:
        self.sent += 1
        if not self._armed:
            return None  # botocore sends it as usual
        self._armed = False
        response = self._http.send(request)
        self.first_status = response.status_code
        self.after_first = self._observe()
        raise ConnectionClosedError(endpoint_url=request.url)


@pytest.fixture
def tracker(moto_server: LocalDynamoDB) -> XorAckDynamoDB:
    table = f"resend-{time.monotonic_ns()}"
    ack = XorAckDynamoDB.from_config(moto_server.config(table))
    ack.create_table()
    return ack


@pytest.fixture
def observer(moto_server: LocalDynamoDB) -> Any:
    return moto_server.client()


def read_item(observer: Any, ack: XorAckDynamoDB, tag: str = TAG) -> dict[str, Any] | None:
    response = observer.get_item(TableName=ack.table, Key={"tagID": {"S": tag}}, ConsistentRead=True)
    item: dict[str, Any] | None = response.get("Item")
    return item


def lose_next(ack: XorAckDynamoDB, observer: Any, operation: str = "PutItem") -> LostResponse:
    """Lose the response of ``ack``'s next ``operation`` (PutItem: a create, or an xor
    stamp's conditional write of the whole item)."""
    return LostResponse(ack.client, operation, lambda: read_item(observer, ack))


# -- the resend test ---------------------------------------------------------------------


def test_resent_stamp_is_applied_once(tracker: XorAckDynamoDB, observer: Any) -> None:
    ack = tracker
    root, c1, c2, c3 = (new_stamp() for _ in range(4))
    ack.create(TAG, root)
    assert ack.stamp(TAG, xor(root, c1, c2, c3)) == xor(c1, c2, c3)
    lost = lose_next(ack, observer)
    before = ack.stats.requests.get("GetItem", 0)
    lost.arm()

    result = ack.stamp(TAG, c1)

    # The first copy reached the server and was applied ...
    assert lost.first_status == 200
    assert lost.after_first["version"] == {"N": "3"}
    assert lost.after_first["stamp"] == {"B": xor(c2, c3)}
    # ... botocore did not send it again (a stamp's write is sent once: resend.py): the
    # library's own retry read the chain (one PutItem for this one stamp, then a GetItem) ...
    assert lost.sent == 1
    assert ack.stats.events.get("retries") == 1
    assert ack.stats.requests.get("GetItem", 0) - before == 1
    # ... and the op id told the tracker it was already applied.
    assert ack.stats.events.get("duplicates") == 1
    assert result == xor(c2, c3) and not result.acked
    status = ack.status(TAG)
    assert (status.stamp, status.version, status.state) == (xor(c2, c3), 3, "pending")
    assert not ack.stamp(TAG, c2).acked
    last = ack.stamp(TAG, c3)
    assert last.acked and last == bytes(16)
    assert ack.status(TAG).state == "acked"


def test_resent_create_is_applied_once(tracker: XorAckDynamoDB, observer: Any) -> None:
    ack = tracker
    root, c1 = new_stamp(), new_stamp()
    lost = lose_next(ack, observer)
    lost.arm()

    created = ack.create(TAG, root)

    assert lost.first_status == 200
    assert lost.after_first["stamp"] == {"B": root} and lost.after_first["version"] == {"N": "1"}
    assert ack.stats.requests == {"PutItem": 2}
    assert ack.stats.events.get("duplicates") == 1
    assert created == root and not created.acked  # not TagExists: it was our own create
    ack.stats.reset()
    assert not ack.stamp(TAG, xor(root, c1)).acked
    assert ack.stats.requests == {"PutItem": 1}  # the resend's answer refreshed the cache
    assert ack.stamp(TAG, c1).acked
    status = ack.status(TAG)
    assert (status.state, status.version) == ("acked", 3)


def test_resent_completing_stamp_is_applied_once(tracker: XorAckDynamoDB, observer: Any) -> None:
    ack = tracker
    root, c1 = new_stamp(), new_stamp()
    ack.create(TAG, root)
    ack.stamp(TAG, xor(root, c1))
    lost = lose_next(ack, observer)
    before = ack.stats.requests.get("GetItem", 0)
    lost.arm()

    done = ack.stamp(TAG, c1)

    assert lost.after_first["state"] == {"S": "acked"}
    assert lost.after_first["stamp"] == {"B": bytes(16)}
    # Sent once (resend.py); the library's own retry read the chain and found its op.
    assert lost.sent == 1
    assert ack.stats.requests.get("GetItem", 0) - before == 1
    assert ack.stats.events.get("duplicates") == 1
    assert done.acked and done == bytes(16)  # not TagAcked: it was our own stamp
    status = ack.status(TAG)
    assert (status.state, status.stamp, status.version) == ("acked", Stamp(bytes(16)), 3)


def test_resent_completing_delete_with_delete_on_ack(moto_server: LocalDynamoDB, observer: Any) -> None:
    table = f"resend-del-{time.monotonic_ns()}"
    ack = XorAckDynamoDB.from_config(moto_server.config(table, delete_on_ack=True))
    ack.create_table()
    root, c1 = new_stamp(), new_stamp()
    ack.create(TAG, root)
    ack.stamp(TAG, xor(root, c1))
    lost = lose_next(ack, observer, "DeleteItem")
    lost.arm()

    done = ack.stamp(TAG, c1)

    assert lost.first_status == 200
    assert lost.after_first is None  # the first copy deleted the item
    assert ack.stats.requests["DeleteItem"] == 2
    assert done.acked and done == bytes(16)  # not TagNotFound
    assert read_item(observer, ack) is None


def test_resent_delete_and_fail(tracker: XorAckDynamoDB, observer: Any) -> None:
    ack = tracker
    ack.create("gone", new_stamp())
    lost = lose_next(ack, observer, "DeleteItem")
    lost.arm()
    ack.delete("gone")  # the resend finds nothing, and that is not TagNotFound
    assert lost.after_first is None and ack.stats.requests["DeleteItem"] == 2
    with pytest.raises(errors.TagNotFound):
        ack.delete("gone")

    ack.create(TAG, new_stamp())
    lost = LostResponse(ack.client, "UpdateItem", lambda: read_item(observer, ack))
    lost.arm()
    status = ack.fail(TAG, "boom")
    assert lost.after_first["state"] == {"S": "failed"}
    assert (status.state, status.reason) == ("failed", "boom")


def naive_stamp(client: Any, table: str, tag: str, delta: bytes) -> Stamp:
    """Read, XOR, conditional write on the old stamp, and again on a lost race: the Node
    package's stamp() with the retry its README asks callers to add. No op ids."""
    while True:
        item = client.get_item(TableName=table, Key={"tagID": {"S": tag}}, ConsistentRead=True)["Item"]
        new = xor(item["stamp"]["B"], delta)
        try:
            client.update_item(
                TableName=table,
                Key={"tagID": {"S": tag}},
                UpdateExpression="SET #s = :new",
                ConditionExpression="#s = :old",
                ExpressionAttributeNames={"#s": "stamp"},
                ExpressionAttributeValues={":new": {"B": bytes(new)}, ":old": {"B": item["stamp"]["B"]}},
            )
            return new
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise


def test_control_naive_retry_undoes_a_resent_stamp(tracker: XorAckDynamoDB, observer: Any) -> None:
    """The same resend on a read-XOR-conditional-write without op ids: the resent write's
    condition fails (its own first copy changed the stamp), the loop reads again and XORs
    the stamp in a second time, which undoes it. The chain never reaches zero."""
    client, table = tracker.client, tracker.table
    root, c1, c2 = new_stamp(), new_stamp(), new_stamp()
    client.put_item(TableName=table, Item={"tagID": {"S": TAG}, "stamp": {"B": root}})
    naive_stamp(client, table, TAG, xor(root, c1, c2))
    lost = lose_next(tracker, observer, "UpdateItem")
    lost.arm()
    naive_stamp(client, table, TAG, c1)
    assert lost.after_first["stamp"] == {"B": c2}  # the first copy was applied ...
    final = naive_stamp(client, table, TAG, c2)  # ... and so was the retry's second XOR
    assert not final.acked
    assert final == c1  # c1 went in twice, so it is still "outstanding"
    assert read_item(observer, tracker)["stamp"] == {"B": c1}  # type: ignore[index]


# -- concurrency -------------------------------------------------------------------------


def test_embedded_server_conditional_writes_are_atomic(moto_server: LocalDynamoDB) -> None:
    """Every optimistic-concurrency guarantee rests on this: two writers cannot both pass
    one condition. A bare moto server breaks it when its request threads interleave
    (forced here with a tiny GIL switch interval); LocalDynamoDB must not."""
    import sys

    table = f"atomic-{time.monotonic_ns()}"
    client = moto_server.client()
    client.create_table(
        TableName=table,
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    key = {"k": {"S": "counter"}}
    client.put_item(TableName=table, Item={**key, "v": {"N": "0"}})
    wins: list[int] = []

    def work() -> None:
        mine = moto_server.client()
        for _ in range(10):
            seen = mine.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["v"]["N"]
            try:
                mine.update_item(
                    TableName=table,
                    Key=key,
                    UpdateExpression="SET v = :new",
                    ConditionExpression="v = :old",
                    ExpressionAttributeValues={":new": {"N": str(int(seen) + 1)}, ":old": {"N": seen}},
                )
                wins.append(1)
            except ClientError as exc:
                assert exc.response["Error"]["Code"] == "ConditionalCheckFailedException"

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
    final = int(client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["v"]["N"])
    assert len(wins) > 8
    assert final == len(wins)  # no successful conditional write was lost


THREADS = 8
CHILDREN_PER_THREAD = 4


def test_concurrent_trackers_end_acked_exactly_at_the_last_stamp(moto_server: LocalDynamoDB) -> None:
    config = moto_server.config(f"race-{time.monotonic_ns()}")
    setup = XorAckDynamoDB.from_config(config)
    setup.create_table()
    root = new_stamp()
    children = [[new_stamp() for _ in range(CHILDREN_PER_THREAD)] for _ in range(THREADS)]
    setup.create(TAG, root)
    setup.stamp(TAG, xor(root, *(c for row in children for c in row)))

    trackers = [XorAckDynamoDB.from_config(config) for _ in range(THREADS)]  # each with its own client
    assert len({id(t.client) for t in trackers}) == THREADS
    barrier = threading.Barrier(THREADS)
    calls: list[tuple[float, float, Stamp]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def work(tracker: XorAckDynamoDB, mine: list[bytes]) -> None:
        try:
            barrier.wait()
            for child in mine:
                started = time.monotonic()
                result = tracker.stamp(TAG, child)
                with lock:
                    calls.append((started, time.monotonic(), result))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(t, c)) for t, c in zip(trackers, children, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert failures == []

    assert len(calls) == THREADS * CHILDREN_PER_THREAD
    acked = [call for call in calls if call[2].acked]
    assert len(acked) == 1
    # The completing write was applied after every other stamp's write, and each of
    # those calls had started before it: the acked call returned after all of them began.
    acked_end = acked[0][1]
    assert all(started <= acked_end for started, _, result in calls if not result.acked)
    final = setup.status(TAG)
    assert final.state == "acked" and final.stamp == bytes(16)
    assert final.version == 2 + THREADS * CHILDREN_PER_THREAD

    stamps = THREADS * CHILDREN_PER_THREAD
    writes = sum(t.stats.requests.get("PutItem", 0) for t in trackers)
    reads = sum(t.stats.requests.get("GetItem", 0) for t in trackers)
    conflicts = sum(t.stats.events.get("conflicts", 0) for t in trackers)
    retries = sum(t.stats.events.get("retries", 0) for t in trackers)
    assert writes == stamps + conflicts
    print(
        f"\n{THREADS} threads x {CHILDREN_PER_THREAD} stamps on one chain: "
        f"{writes / stamps:.2f} write attempts and {(writes + reads) / stamps:.2f} requests per stamp, "
        f"{conflicts} conflicts, {retries} retries, {reads} reads"
    )


def test_threads_sharing_one_tracker(tracker: XorAckDynamoDB) -> None:
    """One tracker (one client, one cache) shared by threads, as its docstring allows."""
    ack = tracker
    root = new_stamp()
    children = [[new_stamp() for _ in range(4)] for _ in range(4)]
    ack.create(TAG, root)
    ack.stamp(TAG, xor(root, *(c for row in children for c in row)))
    results: list[Stamp] = []
    failures: list[BaseException] = []
    barrier = threading.Barrier(len(children))

    def work(mine: list[bytes]) -> None:
        try:
            barrier.wait()
            results.extend(ack.stamp(TAG, child) for child in mine)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(row,)) for row in children]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    assert len(results) == 16 and sum(r.acked for r in results) == 1
    status = ack.status(TAG)
    assert (status.state, status.version) == ("acked", 18)


# -- the lifecycle over HTTP, through a picklable config ---------------------------------


def test_lifecycle_over_http(moto_server: LocalDynamoDB) -> None:
    config = moto_server.config(f"life-{time.monotonic_ns()}", ttl_seconds=120)
    ack = XorAckDynamoDB.from_config(config)
    assert ack.create_table() is True
    assert ack.create_table() is False
    root, c1, c2 = new_stamp(), new_stamp(), new_stamp()
    assert ack.create("a", root) == root
    ack.create("b", root)
    ack.create("c", root)
    assert ack.stamp("a", xor(root, c1, c2), op_id="split") == xor(c1, c2)
    assert ack.stamp("a", xor(root, c1, c2), op_id="split") == xor(c1, c2)
    assert ack.stamp("a", c1) == c2
    before = ack.status("b").expires_at
    assert before is not None
    touched = ack.touch("b", ttl=3600)
    assert touched.expires_at is not None and (touched.expires_at - before).total_seconds() >= 3600 - 120
    assert ack.fail("c", "bad input").state == "failed"
    assert ack.stamp("a", c2).acked
    states = ack.status_many(["a", "b", "c", "nope"])
    assert {t: s.state for t, s in states.items()} == {"a": "acked", "b": "pending", "c": "failed"}
    assert states["c"].reason == "bad input"
    for tag in ("a", "b", "c"):
        ack.delete(tag)
    assert ack.status_many(["a", "b", "c"]) == {}
    with pytest.raises(errors.TagNotFound):
        ack.status("a")
    assert isinstance(ack, XorAckDynamoDB) and isinstance(config, AckConfig)
