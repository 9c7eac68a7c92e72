"""Regressions of issue 18 ("exactly once for a chain's whole life"): each test here
failed on the code before it (the issue's note quotes the failures) and passes now.

They use only the API that existed before (op ids, no ``after=``/``first=``), so that
they run on both; faults are scripted on the real botocore request path
(``scripted.Script``) against the moto server, whose requests are serialized.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Clock, unique_table
from regression_clients import client, sum_tracker, tracker
from scripted import Script

from xor_ack_dynamodb import LocalDynamoDB, MemoryAck, XorAckDynamoDB, errors, new_stamp, xor

TAG = "database/file13"


@pytest.fixture
def table(moto_server: LocalDynamoDB) -> str:
    name = unique_table("once")
    XorAckDynamoDB(name, client=client(moto_server)).create_table()
    return name


def fan_out(ack: Any, children: int, op_id: str = "root") -> list[Any]:
    """A chain whose root finished and started ``children`` edges."""
    root = ack.new_edge()
    kids = [ack.new_edge() for _ in range(children)]
    ack.create(TAG, root)
    if ack.mode == "sum":
        ack.stamp(TAG, finished=[root], started=kids, op_id=op_id)
    else:
        ack.stamp(TAG, xor(root, *kids), op_id=op_id)
    return kids


@pytest.mark.server
def test_botocores_resend_of_an_add_after_its_op_moved_out_is_not_applied_again(
    moto_server: LocalDynamoDB, table: str
) -> None:
    """Sum mode. A stamp's ADD lands, its response is lost, 60 other stamps land (the op
    list is trimmed past it), and botocore resends the ADD: its ``NOT contains(ops,
    :op)`` no longer sees the op. Before: applied a second time, the call returned
    normally. Now botocore does not resend it; the library's guarded retry finds the op
    in the chain's history."""
    raw = client(moto_server)
    ack = tracker(moto_server, table, client=raw, mode="sum")
    other = tracker(moto_server, table, mode="sum")
    kids = fan_out(ack, 80)

    def crowd() -> None:
        for i, kid in enumerate(kids[1:61]):
            other.stamp(TAG, finished=[kid], op_id=f"other-{i}")

    script = Script(raw)
    script.lose("UpdateItem", after=crowd)
    result = ack.stamp(TAG, finished=[kids[0]])  # a random op id: only botocore resends it
    assert script.pending == 0
    expected = sum(kids) - sum(kids[:61])
    assert other.status(TAG).value == expected  # kids[0] subtracted once
    assert result == expected and not result.acked


@pytest.mark.server
def test_a_stale_lineage_in_the_cache_never_lets_a_retry_apply_twice(
    moto_server: LocalDynamoDB, table: str
) -> None:
    """Sum mode. A tracker's cache holds the chain of an earlier lineage (100 stamps:
    seq 101). The chain expires and is created again; the tracker's stamp on the new
    lineage lands, its response is lost, 60 others land (trimmed past it), botocore's
    resends fail. Before: the retry's guard ``cutn <= 101`` (the old lineage's seq)
    passed trivially and the stamp was applied twice. Now the guard names its lineage."""
    raw, clock = client(moto_server), Clock()
    ack = tracker(moto_server, table, client=raw, mode="sum", ttl=60, clock=clock)
    other = tracker(moto_server, table, mode="sum", ttl=60, clock=clock)
    first = fan_out(ack, 100, op_id="lineage-1")
    for kid in first[:-1]:
        ack.stamp(TAG, finished=[kid])  # the cache now holds lineage 1 at seq 100
    clock.advance(120)  # past the deadline and the skew margin: expired
    root = other.new_edge()
    kids = [other.new_edge() for _ in range(80)]
    other.create(TAG, root)  # a new lineage under the same tag
    other.stamp(TAG, finished=[root], started=kids, op_id="lineage-2")

    def crowd() -> None:
        for i, kid in enumerate(kids[1:61]):
            other.stamp(TAG, finished=[kid], op_id=f"other-{i}")

    script = Script(raw)
    script.lose("UpdateItem", after=crowd).fail("UpdateItem", times=2)
    result = ack.stamp(TAG, finished=[kids[0]])
    assert script.pending == 0
    expected = sum(kids) - sum(kids[:61])
    assert other.status(TAG).value == expected == result


@pytest.mark.server
def test_an_xor_stamp_lost_and_outrun_by_other_stamps_is_decided_exactly(
    moto_server: LocalDynamoDB, table: str
) -> None:
    """Xor mode. A stamp's write lands, its response is lost, 60 other stamps land
    (more than the window); botocore does not resend it (resend.py). Before: the
    history no longer covered the write, so OutcomeUnknown. Now the op is found in the
    chain's history: a duplicate, applied once."""
    raw = client(moto_server)
    ack = tracker(moto_server, table, client=raw)
    other = tracker(moto_server, table)
    kids = fan_out(ack, 80)

    def crowd() -> None:
        for i, kid in enumerate(kids[1:61]):
            other.stamp(TAG, kid, op_id=f"other-{i}")

    script = Script(raw)
    script.lose("PutItem", after=crowd)
    result = ack.stamp(TAG, kids[0], op_id="mine")
    assert script.pending == 0
    assert result.duplicate and not result.acked
    assert other.status(TAG).value == xor(*kids[61:]) == result


def test_rotate_racing_a_stamp_never_acks_a_timed_out_chain() -> None:
    """MemoryAck, xor mode: a stamp based on the chain as read before a rotation timed
    it out. Before: rotate kept the chain's token, the stamp's write passed its token
    condition, wrote the pre-timeout chain back and completed it: both
    ``on_failed(timeout)`` and ``on_acked`` fired. Now the timeout changes the token."""
    acked: list[str] = []
    failed: list[tuple[str, str | None]] = []
    ack = MemoryAck(
        buckets=2, cache_size=100, on_acked=acked.append, on_failed=lambda tag, why: failed.append((tag, why))
    )
    root = new_stamp()
    ack.create(TAG, root)  # the tracker's cache holds the chain as created
    ack.rotate()
    assert ack.rotate() == [TAG]
    assert failed == [(TAG, "timeout")]
    with pytest.raises(errors.TagExpired):
        ack.stamp(TAG, root)
    assert acked == []
    assert ack.status(TAG).state == "expired"


@pytest.mark.server
def test_a_chain_deleted_after_its_transaction_committed_reads_not_found(
    moto_server: LocalDynamoDB, table: str
) -> None:
    """A batch touch commits its transaction, then the chain is deleted before the
    read-back. Before: the read-back answered ``Written(None)`` and ``TouchCall`` hit an
    ``assert`` (an AssertionError in the results). Now: ``TagNotFound``."""
    raw, other = client(moto_server), client(moto_server)
    ack = tracker(moto_server, table, client=raw)
    ack.create("gone", new_stamp())
    ack.create("kept", new_stamp())
    script = Script(raw)
    script.before("BatchGetItem", lambda: other.delete_item(TableName=table, Key={"tagID": {"S": "gone"}}))
    out = ack.touch_many(["gone", "kept"], ttl=600)
    assert script.pending == 0
    assert isinstance(out["gone"], errors.TagNotFound), out
    assert not isinstance(out["kept"], Exception) and out["kept"].state == "pending"


@pytest.mark.parametrize("backend", ["memory", "inproc"])
def test_a_negative_sum_fails_the_chain_at_once(request: pytest.FixtureRequest, backend: str) -> None:
    """Sum mode: an edge finished twice (a double application) takes the sum below zero.
    Before: the stamp returned the negative sum and the chain stayed pending, wrong,
    until it expired. Now the chain fails at once with that reason."""
    ack = sum_tracker(None if backend == "memory" else request.getfixturevalue("inproc_client"), "negative")
    ack.create(TAG, 100)
    ack.stamp(TAG, finished=[100], started=[10, 5], op_id="root")
    assert ack.stamp(TAG, finished=[10], op_id="a") == 5
    with pytest.raises(errors.TagFailed) as info:
        ack.stamp(TAG, finished=[10], op_id="a-again")  # 5 - 10: some stamp applied twice
    assert "negative" in (info.value.reason or "")
    status = ack.status(TAG)
    assert status.state == "failed" and "negative" in (status.reason or "")
    with pytest.raises(errors.TagFailed):
        ack.stamp(TAG, finished=[5], op_id="b")
