"""XorAckDynamoDB on every backend of the ``client`` fixture (moto in-process, moto over
HTTP, dynalite, DynamoDB Local): the lifecycle, every error with its type/code/tag, expiry decided by the
clock, idempotent stamps, requests per stamp, and bad input refused before any request."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from conftest import Clock, expect, h

from xor_ack_dynamodb import ChainStatus, RetryPolicy, Stamp, XorAckDynamoDB, errors, new_stamp, xor
from xor_ack_dynamodb.stamps import MAX_STAMP_BYTES, MAX_TAG_BYTES

TAG = "database/file13"


def raw(ack: XorAckDynamoDB, tag: str) -> dict[str, Any] | None:
    """The item as the table holds it (read with the client, not the tracker)."""
    response = ack.client.get_item(TableName=ack.table, Key={"tagID": {"S": tag}}, ConsistentRead=True)
    item: dict[str, Any] | None = response.get("Item")
    return item


def scan(ack: XorAckDynamoDB) -> list[dict[str, Any]]:
    items = ack.client.scan(TableName=ack.table, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda item: item["tagID"]["S"])


def returns_all_old(ack: XorAckDynamoDB) -> bool:
    """Whether this backend returns the item on a failed condition (moto does, dynalite
    does not): the request counts of a lost race depend on it."""
    key = {"tagID": {"S": "__probe__"}}
    ack.client.put_item(TableName=ack.table, Item={**key, "stamp": {"B": b"\x01"}})
    try:
        ack.client.put_item(
            TableName=ack.table,
            Item={**key, "stamp": {"B": b"\x02"}},
            ConditionExpression="attribute_not_exists(tagID)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except ClientError as exc:
        return "Item" in exc.response
    finally:
        ack.client.delete_item(TableName=ack.table, Key=key)
    raise AssertionError("the probe's condition should have failed")


# -- the seed README ---------------------------------------------------------------------


def test_seed_readme_walkthrough(ack: XorAckDynamoDB) -> None:
    """The Node README's file/words walkthrough with its exact bytes."""
    created = ack.create(TAG, h("29"))
    assert isinstance(created, Stamp) and created == h("29")
    assert created.acked is False and created.duplicate is False
    steps = [("4c", "65"), ("25", "40"), ("a9", "e9"), ("e9", "00")]
    for i, (inbound, expected) in enumerate(steps):
        result = ack.stamp(TAG, h(inbound))
        assert isinstance(result, Stamp) and result.duplicate is False
        assert result == h(expected)
        assert result.acked is (i == len(steps) - 1)
        status = ack.status(TAG)
        assert status.stamp == h(expected)
        assert status.state == ("acked" if i == len(steps) - 1 else "pending")
    final = ack.status(TAG)
    assert final == ChainStatus(TAG, "acked", Stamp(h("00")), final.expires_at, None, 5)
    assert final.done
    item = raw(ack, TAG)
    assert item is not None
    assert item["state"] == {"S": "acked"} and item["stamp"] == {"B": h("00")}


# -- create ------------------------------------------------------------------------------


def test_create_writes_the_item_with_its_ttl(make_ack: Any, clock: Clock) -> None:
    ack = make_ack(clock=clock, ttl=timedelta(minutes=10))
    stamp = new_stamp()
    assert ack.create(TAG, bytearray(stamp)) == stamp
    item = raw(ack, TAG)
    assert item is not None
    now = int(clock.now)
    assert item["tagID"] == {"S": TAG}
    assert item["stamp"] == {"B": stamp}
    assert item["deadline"] == {"N": str(now + 600)}
    # The TTL attribute is the purge time: deadline + skew (5 s) + retention (1 day).
    assert item["expires_at"] == {"N": str(now + 600 + 5 + 86400)}
    assert item["state"] == {"S": "pending"}
    assert item["version"] == {"N": "1"}
    assert item["seq"] == {"N": "0"} and item["win"] == {"N": "8"} and "trims" not in item
    assert len(item["lin"]["B"]) == 8  # the lineage: history items are keyed by it
    assert "cutn" not in item and "hb" not in item and "rs" not in item
    assert item["created_at"] == item["updated_at"] == {"N": str(now)}
    # The create's op lives in cop (key + payload hash) for the chain's life, not in ops.
    assert item["ops"] == {"L": []} and item["oph"] == {"L": []}
    assert len(item["cop"]["B"]) == 12 and len(item["tok"]["B"]) == 8
    assert "owner" not in item and "reason" not in item and "sum" not in item
    status = ack.status(TAG)
    assert status.state == "pending" and not status.done
    assert status.expires_at == datetime.fromtimestamp(now + 600, tz=UTC)


def test_create_ttl_without_clock_is_now_plus_ttl(ack: XorAckDynamoDB) -> None:
    import time

    before = int(time.time())
    ack.create(TAG, new_stamp())
    after = int(time.time())
    item = raw(ack, TAG)
    assert item is not None
    deadline = int(item["deadline"]["N"])
    assert before + 3600 <= deadline <= after + 3600
    assert int(item["expires_at"]["N"]) == deadline + 5 + 86400


def test_create_all_zero_stamp_is_refused(ack: XorAckDynamoDB) -> None:
    with expect(errors.ZeroBufferNoOp, TAG):
        ack.create(TAG, bytes(16))
    assert ack.stats.total_requests == 0
    assert raw(ack, TAG) is None


def test_create_on_a_live_chain_raises_tag_exists(ack: XorAckDynamoDB) -> None:
    first = new_stamp()
    ack.create(TAG, first)
    before = raw(ack, TAG)
    with expect(errors.TagExists, TAG):
        ack.create(TAG, new_stamp())
    assert raw(ack, TAG) == before
    assert ack.status(TAG).stamp == first


def test_create_overwrites_an_expired_chain(make_ack: Any, clock: Clock) -> None:
    ack = make_ack(clock=clock, ttl=60)
    old = new_stamp()
    ack.create(TAG, old)
    ack.stamp(TAG, new_stamp())
    old_cop = raw(ack, TAG)["cop"]  # type: ignore[index]
    clock.advance(60)  # deadline == now: not expired yet
    with expect(errors.TagExists, TAG):
        ack.create(TAG, new_stamp())
    clock.advance(5)  # past the deadline, within the skew margin: still not overwritable
    assert ack.status(TAG).state == "pending"
    with expect(errors.TagExists, TAG):
        ack.create(TAG, new_stamp())
    clock.advance(1)  # deadline + skew passed: a reader declares it expired
    assert ack.status(TAG).state == "expired"
    assert raw(ack, TAG) is not None  # the item is still there: expiry is decided by the clock
    fresh = new_stamp()
    assert ack.create(TAG, fresh) == fresh
    status = ack.status(TAG)
    assert (status.state, status.stamp, status.version) == ("pending", fresh, 3)
    item = raw(ack, TAG)
    assert item is not None
    assert item["deadline"] == {"N": str(int(clock.now) + 60)}
    assert item["expires_at"] == {"N": str(int(clock.now) + 60 + 5 + 86400)}
    # A new chain starts a new history: no stamp ops, its own create op.
    assert item["ops"] == {"L": []} and item["seq"] == {"N": "0"}
    assert item["cop"] != old_cop
    assert ack.stamp(TAG, fresh).acked


def test_create_overwrites_a_tombstone_only_after_its_retention(make_ack: Any, clock: Clock) -> None:
    ack = make_ack(clock=clock, ttl=60, retention=300)
    stamp = new_stamp()
    ack.create(TAG, stamp)
    ack.stamp(TAG, stamp)
    clock.advance(300)
    with expect(errors.TagExists, TAG):
        ack.create(TAG, new_stamp())
    clock.advance(1)
    again = new_stamp()
    assert ack.create(TAG, again) == again
    assert ack.status(TAG).state == "pending"


def test_create_is_idempotent_per_op_id(ack: XorAckDynamoDB, make_ack: Any) -> None:
    first = new_stamp()
    created = ack.create(TAG, first, op_id="root-1")
    assert created == first and not created.duplicate
    again = ack.create(TAG, first, op_id="root-1")
    assert again == first and again.duplicate and not again.acked
    # A redelivered create with the same op id reports the chain, from another tracker too.
    other = make_ack()
    assert other.create(TAG, first, op_id="root-1").duplicate
    # The op id is bound to its value: the same op id with another value is a caller bug.
    before = raw(ack, TAG)
    requests = other.stats.total_requests
    with expect(errors.OpIdReused, TAG) as info:
        other.create(TAG, new_stamp(), op_id="root-1")
    assert isinstance(info.value, ValueError)
    # The rejected Put (and, where the backend returns no ALL_OLD, the read): no write.
    assert other.stats.total_requests == requests + (1 if returns_all_old(ack) else 2)
    assert raw(ack, TAG) == before
    with expect(errors.TagExists, TAG):
        ack.create(TAG, first, op_id="root-2")
    with expect(errors.TagExists, TAG):
        ack.create(TAG, first)
    status = ack.status(TAG)
    assert (status.stamp, status.version) == (first, 1)


# -- stamp: errors -----------------------------------------------------------------------


def test_stamp_missing_tag_raises_tag_not_found(ack: XorAckDynamoDB) -> None:
    with expect(errors.TagNotFound, "nobody"):
        ack.stamp("nobody", new_stamp())
    assert scan(ack) == []


def test_stamp_failed_chain_raises_tag_failed(ack: XorAckDynamoDB, make_ack: Any) -> None:
    ack.create(TAG, new_stamp())
    ack.fail(TAG, "parser crashed")
    for tracker in (ack, make_ack()):  # with and without a cached value
        with expect(errors.TagFailed, TAG) as info:
            tracker.stamp(TAG, new_stamp())
        assert info.value.reason == "parser crashed"
        assert "parser crashed" in str(info.value)
    assert ack.status(TAG).state == "failed"


def test_stamp_expired_chain_raises_tag_expired(make_ack: Any, clock: Clock) -> None:
    ack = make_ack(clock=clock, ttl=60)
    stamp = new_stamp()
    ack.create(TAG, stamp)
    clock.advance(60)
    edge = new_stamp()
    ack.stamp(TAG, edge)  # at the deadline exactly, still pending
    clock.advance(1)
    before = raw(ack, TAG)
    assert before is not None  # the item exists: DynamoDB's TTL has not removed it
    fresh = make_ack(clock=clock)
    # A writer refuses as soon as the deadline has passed on its clock...
    for tracker in (ack, fresh):
        with expect(errors.TagExpired, TAG):
            tracker.stamp(TAG, xor(stamp, edge))
    assert raw(ack, TAG) == before
    # ...while a reader declares it expired only once the skew margin (5 s) has passed too.
    assert ack.status(TAG).state == "pending"
    clock.advance(5)
    for tracker in (ack, fresh):
        with expect(errors.TagExpired, TAG):
            tracker.stamp(TAG, xor(stamp, edge))
    assert raw(ack, TAG) == before
    status = ack.status(TAG)
    assert status.state == "expired" and status.done


def test_stamp_acked_chain_raises_tag_acked(ack: XorAckDynamoDB, make_ack: Any) -> None:
    stamp = new_stamp()
    ack.create(TAG, stamp)
    assert ack.stamp(TAG, stamp, op_id="last").acked
    before = raw(ack, TAG)
    for tracker in (ack, make_ack()):
        with expect(errors.TagAcked, TAG):
            tracker.stamp(TAG, new_stamp())
    # A duplicate of the op that completed it is not an error: it returns the zero stamp.
    again = make_ack().stamp(TAG, stamp, op_id="last")
    assert again == bytes(16) and again.acked and again.duplicate
    assert raw(ack, TAG) == before


def test_stamp_length_must_match_the_chain(ack: XorAckDynamoDB, make_ack: Any) -> None:
    ack.create(TAG, h("2929"))
    before = raw(ack, TAG)
    for tracker in (ack, make_ack()):
        with expect(errors.BufferLengthsUnequal, TAG) as info:
            tracker.stamp(TAG, h("292929"))
        assert isinstance(info.value, ValueError)
    assert raw(ack, TAG) == before


def test_stamp_all_zero_is_refused(ack: XorAckDynamoDB) -> None:
    ack.create(TAG, h("29"))
    ack.stats.reset()
    with expect(errors.ZeroBufferNoOp, TAG):
        ack.stamp(TAG, h("00"))
    assert ack.stats.total_requests == 0


def test_stale_local_data_only_when_the_budget_is_spent(make_ack: Any) -> None:
    """One attempt, a stale cached value: the race is lost, StaleLocalData escapes, and
    nothing was applied; the same call with the same op id then succeeds."""
    impatient = make_ack(retry=RetryPolicy(max_attempts=1))
    other = make_ack()
    root, edge = new_stamp(), new_stamp()
    impatient.create(TAG, root)
    other.stamp(TAG, edge)
    with expect(errors.StaleLocalData, TAG):
        impatient.stamp(TAG, root, op_id="op-1")
    assert impatient.stats.events.get("conflicts") == 1
    assert other.status(TAG).stamp == xor(root, edge)
    assert impatient.stamp(TAG, root, op_id="op-1") == edge
    assert impatient.stamp(TAG, edge).acked


# -- stamp: idempotency ------------------------------------------------------------------


def test_duplicate_op_id_is_not_applied_twice(ack: XorAckDynamoDB, make_ack: Any) -> None:
    root, child = new_stamp(), new_stamp()
    ack.create(TAG, root)
    first = ack.stamp(TAG, xor(root, child), op_id="msg-123")
    assert first == child
    assert ack.stamp(TAG, xor(root, child), op_id="msg-123") == child
    assert make_ack().stamp(TAG, xor(root, child), op_id="msg-123") == child  # no cache
    assert ack.stats.events.get("duplicates") == 1
    status = ack.status(TAG)
    assert (status.stamp, status.version, status.state) == (child, 2, "pending")
    assert ack.stamp(TAG, child).acked


def test_aba_stale_writer_cannot_drop_other_op_ids(ack: XorAckDynamoDB, make_ack: Any) -> None:
    """The stamp returns to a value a stale writer holds (emit E, then ack E). The write
    token in the condition (new on every write) stops that writer from overwriting the
    op ids it never saw, so a redelivery of those ops is still caught."""
    root, edge, mine = new_stamp(), new_stamp(), new_stamp()
    ack.create(TAG, root)  # ack caches (root, its token)
    other = make_ack()
    other.stamp(TAG, edge, op_id="emit-E")
    assert other.stamp(TAG, edge, op_id="ack-E") == root  # back to the cached value
    assert ack.stamp(TAG, mine, op_id="mine") == xor(root, mine)
    assert ack.stats.events.get("conflicts") == 1  # the stale write was refused
    # Both of the other tracker's ops are still remembered: redeliveries change nothing.
    assert other.stamp(TAG, edge, op_id="emit-E") == xor(root, mine)
    assert make_ack().stamp(TAG, edge, op_id="ack-E") == xor(root, mine)
    status = ack.status(TAG)
    assert (status.stamp, status.version) == (xor(root, mine), 4)


@pytest.mark.parametrize("max_ops", [1, 4])
def test_a_duplicate_is_caught_past_the_window(make_ack: Any, max_ops: int) -> None:
    """The guarantee (issue 18): a duplicate is caught however many other ops landed
    since. Before, the ``max_ops``-th other op pushed X out of the item and X was
    applied a second time; now the item keeps ``max_ops`` to ``max_ops + 40`` op ids
    and a block of 40 moves to a history item before it leaves, where X is found."""
    ack = make_ack(max_ops=max_ops)
    root, edge = new_stamp(), new_stamp()
    ack.create(TAG, root)
    value = ack.stamp(TAG, edge, op_id="X")
    for _ in range(max_ops - 1):
        value = ack.stamp(TAG, new_stamp())
    # max_ops - 1 other ops since X: caught in the item, from a fresh read too.
    assert ack.stamp(TAG, edge, op_id="X") == value
    assert make_ack().stamp(TAG, edge, op_id="X") == value
    assert ack.status(TAG).stamp == value
    for _ in range(max_ops + 40):
        value = ack.stamp(TAG, new_stamp())
    item = raw(ack, TAG)
    assert item is not None and max_ops <= len(item["ops"]["L"]) < max_ops + 40
    assert int(item["cutn"]["N"]) == 40  # X's block moved out
    for tracker in (ack, make_ack()):  # the cached value, and a fresh read
        again = tracker.stamp(TAG, edge, op_id="X")
        assert again == value and again.duplicate  # found in the history: not applied again
    assert ack.status(TAG).stamp == value


# -- stamp: completion -------------------------------------------------------------------


def test_acked_tombstone_kept_for_retention(make_ack: Any, clock: Clock) -> None:
    ack = make_ack(clock=clock, ttl=timedelta(minutes=5), retention=timedelta(hours=2))
    stamp = new_stamp()
    ack.create(TAG, stamp)
    clock.advance(30)
    assert ack.stamp(TAG, stamp).acked
    now = int(clock.now)
    item = raw(ack, TAG)
    assert item is not None
    assert item["expires_at"] == {"N": str(now + 7200)}
    assert item["state"] == {"S": "acked"}
    status = ack.status(TAG)
    assert status.state == "acked"
    assert status.expires_at == datetime.fromtimestamp(now + 7200, tz=UTC)
    clock.advance(7201)
    assert ack.status(TAG).state == "acked"  # past retention a tombstone still reads acked


def test_delete_on_ack_removes_the_item(make_ack: Any) -> None:
    ack = make_ack(delete_on_ack=True)
    root, child = new_stamp(), new_stamp()
    ack.create(TAG, root)
    assert not ack.stamp(TAG, xor(root, child)).acked
    done = ack.stamp(TAG, child)
    assert done.acked and done == bytes(16)
    assert raw(ack, TAG) is None
    with expect(errors.TagNotFound, TAG):
        ack.stamp(TAG, child)
    with expect(errors.TagNotFound, TAG):
        make_ack(delete_on_ack=True).stamp(TAG, new_stamp())
    with expect(errors.TagNotFound, TAG):
        ack.status(TAG)


# -- requests per stamp ------------------------------------------------------------------


def test_sequential_stamps_cost_one_request_each(ack: XorAckDynamoDB) -> None:
    edges = [new_stamp() for _ in range(10)]
    ack.create(TAG, xor(*edges))
    ack.stats.reset()
    for i, edge in enumerate(edges):
        before = ack.stats.total_requests
        result = ack.stamp(TAG, edge)
        assert ack.stats.total_requests - before == 1
        assert result.acked is (i == len(edges) - 1)
    # The xor stamp writes the whole item with one PutItem conditioned on the token.
    assert ack.stats.requests == {"PutItem": 10}
    per_stamp = ack.stats.total_requests / len(edges)
    print(f"\nsequential stamps, one tracker: {per_stamp:.2f} requests per stamp")


def test_stamp_without_a_cached_value_costs_a_read_and_a_write(ack: XorAckDynamoDB, make_ack: Any) -> None:
    root = new_stamp()
    ack.create(TAG, root)
    second = make_ack()
    second.stamp(TAG, new_stamp())
    assert second.stats.requests == {"GetItem": 1, "PutItem": 1}
    uncached = make_ack(cache_size=0)
    for _ in range(3):
        uncached.stamp(TAG, new_stamp())
    assert uncached.stats.requests == {"GetItem": 3, "PutItem": 3}
    print(f"\nstamp without a cached value: {second.stats.total_requests:.2f} requests")


def test_stamp_from_a_stale_cache_succeeds(ack: XorAckDynamoDB, make_ack: Any) -> None:
    root, a, b = new_stamp(), new_stamp(), new_stamp()
    ack.create(TAG, root)
    other = make_ack()
    other.stamp(TAG, a)  # ack's cached value is now stale
    ack.stats.reset()
    assert ack.stamp(TAG, b) == xor(root, a, b)
    if returns_all_old(ack):
        # The failed condition carries the current item: no read needed.
        assert ack.stats.requests == {"PutItem": 2}
    else:
        assert ack.stats.requests == {"PutItem": 2, "GetItem": 1}
    assert ack.stats.events == {"conflicts": 1, "retries": 1}
    print(f"\nstamp from a stale cached value: {ack.stats.total_requests} requests")
    ack.stats.reset()
    assert ack.stamp(TAG, xor(root, a, b)).acked  # and the cache is current again
    assert ack.stats.requests == {"PutItem": 1}


# -- fail / touch / status / delete ------------------------------------------------------


def test_missing_tag_raises_tag_not_found(ack: XorAckDynamoDB) -> None:
    for method in ("fail", "touch", "status", "delete"):
        with expect(errors.TagNotFound, "ghost"):
            getattr(ack, method)("ghost")
    assert scan(ack) == []


def test_touch_extends_expiry(make_ack: Any, clock: Clock) -> None:
    ack = make_ack(clock=clock, ttl=60)
    ack.create(TAG, new_stamp())
    clock.advance(50)
    status = ack.touch(TAG)
    now = int(clock.now)
    assert status.state == "pending"
    assert status.expires_at == datetime.fromtimestamp(now + 60, tz=UTC)
    item = raw(ack, TAG)
    assert item is not None and item["deadline"] == {"N": str(now + 60)}
    assert item["expires_at"] == {"N": str(now + 60 + 5 + 86400)}  # the purge time moves too
    clock.advance(50)  # past the original expiry, within the touched one
    assert ack.status(TAG).state == "pending"
    ack.stamp(TAG, new_stamp())
    status = ack.touch(TAG, ttl=timedelta(hours=1))
    assert status.expires_at == datetime.fromtimestamp(int(clock.now) + 3600, tz=UTC)


def test_expired_chain_cannot_be_touched(make_ack: Any, clock: Clock) -> None:
    ack = make_ack(clock=clock, ttl=60)
    ack.create(TAG, new_stamp())
    clock.advance(61)
    before = raw(ack, TAG)
    with expect(errors.TagExpired, TAG):
        ack.touch(TAG)
    assert raw(ack, TAG) == before


def test_touch_finished_chains(ack: XorAckDynamoDB) -> None:
    stamp = new_stamp()
    ack.create("done", stamp)
    ack.stamp("done", stamp)
    with expect(errors.TagAcked, "done"):
        ack.touch("done")
    ack.create("broken", stamp)
    ack.fail("broken", "boom")
    with expect(errors.TagFailed, "broken") as info:
        ack.touch("broken")
    assert info.value.reason == "boom"


def test_fail_keeps_the_first_reason(make_ack: Any, clock: Clock) -> None:
    ack = make_ack(clock=clock, retention=600)
    ack.create(TAG, new_stamp())
    status = ack.fail(TAG, "first")
    now = int(clock.now)
    assert (status.state, status.reason) == ("failed", "first")
    assert status.expires_at == datetime.fromtimestamp(now + 600, tz=UTC)
    clock.advance(10)
    again = ack.fail(TAG, "second")
    assert (again.state, again.reason) == ("failed", "first")
    assert make_ack(clock=clock).fail(TAG).reason == "first"
    item = raw(ack, TAG)
    assert item is not None
    assert item["reason"] == {"S": "first"} and item["expires_at"] == {"N": str(now + 600)}


def test_fail_on_acked_chain_raises_tag_acked(ack: XorAckDynamoDB) -> None:
    stamp = new_stamp()
    ack.create(TAG, stamp)
    ack.stamp(TAG, stamp)
    with expect(errors.TagAcked, TAG):
        ack.fail(TAG, "too late")
    assert ack.status(TAG).state == "acked"


def test_fail_an_expired_chain(make_ack: Any, clock: Clock) -> None:
    ack = make_ack(clock=clock, ttl=60)
    ack.create(TAG, new_stamp())
    clock.advance(61)
    assert ack.fail(TAG, "timeout").state == "failed"
    assert ack.status(TAG).reason == "timeout"


def test_delete_any_state(ack: XorAckDynamoDB) -> None:
    stamp = new_stamp()
    for tag in ("pending", "acked", "failed"):
        ack.create(tag, stamp)
    ack.stamp("acked", stamp)
    ack.fail("failed")
    for tag in ("pending", "acked", "failed"):
        ack.delete(tag)
        assert raw(ack, tag) is None
        with expect(errors.TagNotFound, tag):
            ack.delete(tag)
    # The tag is free again.
    assert ack.create("pending", stamp) == stamp


def test_status_many_in_chunks(make_ack: Any, clock: Clock) -> None:
    ack = make_ack(clock=clock, ttl=60)
    stamp = new_stamp(8)
    present = [f"file/{i:03d}" for i in range(240)]
    # Most chains written as the Node package writes them (BatchWriteItem, 25 a request).
    for start in range(0, 236, 25):
        ack.client.batch_write_item(
            RequestItems={
                ack.table: [
                    {"PutRequest": {"Item": {"tagID": {"S": t}, "stamp": {"B": stamp}}}}
                    for t in present[start : min(start + 25, 236)]
                ]
            }
        )
    for tag in present[236:]:
        ack.create(tag, stamp)
    ack.stamp(present[237], stamp)
    ack.fail(present[238], "bad")
    clock.advance(66)  # deadline + skew passed: present[236] and [239] are now expired
    missing = [f"missing/{i}" for i in range(10)]
    wanted = present + missing + present[:50]  # duplicates collapse
    ack.stats.reset()
    result = ack.status_many(wanted)
    assert ack.stats.requests == {"BatchGetItem": 3}  # 250 distinct keys, 100 a request
    assert list(result) == present
    assert all(result[t] == ChainStatus(t, "pending", Stamp(stamp), None, None, 0) for t in present[:236])
    assert [result[t].state for t in present[236:]] == ["expired", "acked", "failed", "expired"]
    assert result[present[238]].reason == "bad"
    assert ack.status_many([]) == {}


# -- bad input is refused before any request ---------------------------------------------

BAD_TAGS: list[tuple[object, type[errors.XorAckError]]] = [
    ("", errors.InvalidTag),
    (None, errors.InvalidTagType),
    (13, errors.InvalidTagType),
    (b"database/file13", errors.InvalidTagType),
    ("x" * (MAX_TAG_BYTES + 1), errors.InvalidTag),
    ("é" * 1024 + "x", errors.InvalidTag),  # 1025 characters, 2049 bytes of UTF-8
    ("file\ud800", errors.InvalidTag),  # a lone surrogate has no UTF-8
]

BAD_STAMPS: list[tuple[object, type[errors.XorAckError]]] = [
    (b"", errors.InvalidStamp),
    (bytearray(), errors.InvalidStamp),
    ("29", errors.InvalidStampType),
    (0x29, errors.InvalidStampType),
    (None, errors.InvalidStampType),
    ([0x29], errors.InvalidStampType),
    (b"\x01" * (MAX_STAMP_BYTES + 1), errors.InvalidStamp),
]


def _calls_with_tag(tag: object) -> list[tuple[str, Any]]:
    stamp = h("29")
    return [
        ("create", lambda ack: ack.create(tag, stamp)),
        ("stamp", lambda ack: ack.stamp(tag, stamp)),
        ("fail", lambda ack: ack.fail(tag)),
        ("touch", lambda ack: ack.touch(tag)),
        ("status", lambda ack: ack.status(tag)),
        ("delete", lambda ack: ack.delete(tag)),
        ("status_many", lambda ack: ack.status_many([TAG, tag])),
    ]


def test_bad_tags_are_refused_before_any_request(ack: XorAckDynamoDB) -> None:
    ack.create(TAG, h("29"))
    table = scan(ack)
    requests = ack.stats.total_requests
    for tag, cls in BAD_TAGS:
        for name, call in _calls_with_tag(tag):
            with pytest.raises(cls) as info:
                call(ack)
            assert type(info.value) is cls, (name, tag)
            assert isinstance(info.value, ValueError)
            assert isinstance(info.value, TypeError) is (cls is errors.InvalidTagType)
            assert ack.stats.total_requests == requests, (name, tag)
    assert scan(ack) == table


def test_bad_stamps_are_refused_before_any_request(ack: XorAckDynamoDB) -> None:
    ack.create(TAG, h("29"))
    table = scan(ack)
    requests = ack.stats.total_requests
    for stamp, cls in BAD_STAMPS:
        for name, tag in (("create", "new-tag"), ("stamp", TAG)):
            if name == "stamp" and stamp is None:
                # stamp(tag) with no value is the keyword form without edges.
                cls = errors.InvalidStamp
            with expect(cls, tag) as info:
                getattr(ack, name)(tag, stamp)
            assert isinstance(info.value, ValueError)
            assert isinstance(info.value, TypeError) is (cls is errors.InvalidStampType)
            assert ack.stats.total_requests == requests, (name, stamp)
    for zero in (h("00"), bytes(MAX_STAMP_BYTES)):
        with expect(errors.ZeroBufferNoOp, "new-tag"):
            ack.create("new-tag", zero)
        with expect(errors.ZeroBufferNoOp, TAG):
            ack.stamp(TAG, zero)
    with pytest.raises(errors.InvalidConfig):
        ack.stamp(TAG, h("01"), op_id="")
    with pytest.raises(errors.InvalidConfig):
        ack.fail(TAG, reason=42)  # type: ignore[arg-type]
    with pytest.raises(errors.InvalidConfig):
        ack.touch(TAG, ttl=0)
    assert ack.stats.total_requests == requests
    assert scan(ack) == table


def test_largest_tag_and_stamp_are_accepted(ack: XorAckDynamoDB) -> None:
    for tag in ("t" * MAX_TAG_BYTES, "é" * (MAX_TAG_BYTES // 2), "日本語/ファイル"):
        stamp = new_stamp(MAX_STAMP_BYTES)
        assert ack.create(tag, stamp) == stamp
        assert ack.stamp(tag, stamp).acked
        assert ack.status(tag).state == "acked"


# -- interop with the Node package, and items it cannot read -----------------------------


def test_node_package_item_can_be_stamped(make_ack: Any, clock: Clock) -> None:
    """An item with only {tagID: S, stamp: B}, as the Node package writes it."""
    ack = make_ack(clock=clock)
    ack.client.put_item(TableName=ack.table, Item={"tagID": {"S": TAG}, "stamp": {"B": h("29")}})
    status = ack.status(TAG)
    assert status == ChainStatus(TAG, "pending", Stamp(h("29")), None, None, 0)
    clock.advance(10 * 365 * 86400)  # it never expires
    assert ack.status(TAG).state == "pending"
    assert ack.stamp(TAG, h("4c")) == h("65")
    assert make_ack(clock=clock).stamp(TAG, h("25")) == h("40")
    assert ack.stamp(TAG, h("a9")) == h("e9")
    final = ack.stamp(TAG, h("e9"))
    assert final == h("00") and final.acked
    item = raw(ack, TAG)
    assert item is not None
    assert item["stamp"] == {"B": h("00")} and item["state"] == {"S": "acked"}
    assert item["version"] == {"N": "4"}


def test_node_item_and_a_node_write_in_between(ack: XorAckDynamoDB) -> None:
    """A Node writer (unconditional put of {tagID, stamp}) between two stamps of ours:
    our cached value is stale and the next stamp must still be right."""
    ack.client.put_item(TableName=ack.table, Item={"tagID": {"S": TAG}, "stamp": {"B": h("29")}})
    assert ack.stamp(TAG, h("4c")) == h("65")
    ack.client.put_item(TableName=ack.table, Item={"tagID": {"S": TAG}, "stamp": {"B": h("40")}})
    assert ack.stamp(TAG, h("a9")) == h("e9")
    assert ack.stamp(TAG, h("e9")).acked


UNREADABLE = [
    ("expires_at", {"S": "tomorrow"}),
    ("expires_at", {"N": "1.5"}),
    ("deadline", {"S": "tomorrow"}),
    ("stamp", {"S": "29"}),
    ("state", {"S": "done"}),
    ("version", {"S": "1"}),
    ("ops", {"S": "op"}),
    ("tok", {"S": "token"}),
    ("cop", {"B": b"short"}),
    ("win", {"S": "32"}),
]


def test_unreadable_item_raises_corrupt_item(ack: XorAckDynamoDB) -> None:
    """An attribute of a type the library cannot read: CorruptItem, and nothing written;
    status_many reports such an item as ``corrupt`` and still returns the others."""
    ack.create("readable", h("29"))
    items: dict[str, dict[str, Any]] = {}
    for i, (attribute, value) in enumerate(UNREADABLE):
        tag = f"corrupt/{i}/{attribute}"
        items[tag] = {"tagID": {"S": tag}, "stamp": {"B": h("29")}, attribute: value}
        ack.client.put_item(TableName=ack.table, Item=items[tag])
    for tag, item in items.items():
        checks: list[tuple[str, tuple[Any, ...]]] = [
            ("stamp", (tag, h("4c"))),
            ("status", (tag,)),
        ]
        if "expires_at" not in item:
            # A live item it cannot read is not overwritten. (An item whose expiry is in
            # the past may be; and moto crashes comparing a String expiry to a Number.)
            checks.append(("create", (tag, h("4c"))))
        for method, args in checks:
            with pytest.raises(errors.CorruptItem) as info:
                getattr(ack, method)(*args)
            assert info.value.code == "CorruptItem"
            assert info.value.tag == tag
        many = ack.status_many([tag, "readable"])
        assert list(many) == [tag, "readable"]
        assert many["readable"].state == "pending" and many["readable"].stamp == h("29")
        corrupt = many[tag]
        assert (corrupt.tag, corrupt.state, corrupt.value, corrupt.expires_at) == (tag, "corrupt", None, None)
        assert corrupt.done and corrupt.reason is not None and f"'{attribute_of(tag)}'" in corrupt.reason
        assert raw(ack, tag) == item


def attribute_of(tag: str) -> str:
    """The attribute a corrupt/<i>/<attribute> tag was made unreadable in."""
    return tag.rsplit("/", 1)[1]


def test_one_message_id_may_serve_a_create_and_its_first_stamp(ack: XorAckDynamoDB) -> None:
    """A handler that creates a chain and stamps it while handling one message may use
    that message's id for both: create remembers its op id in a namespace of its own."""
    root, child = new_stamp(), new_stamp()
    ack.create("handler", root, op_id="msg-1")
    after = ack.stamp("handler", xor(root, child), op_id="msg-1")
    assert after == child
    assert ack.stamp("handler", xor(root, child), op_id="msg-1") == child  # a redelivery
    assert ack.stamp("handler", child, op_id="msg-2").acked


def test_status_many_refuses_a_bare_string(ack: XorAckDynamoDB) -> None:
    ack.create("abc", new_stamp())
    before = ack.stats.total_requests
    with pytest.raises(errors.InvalidTagType):
        ack.status_many("abc")
    assert ack.stats.total_requests == before
