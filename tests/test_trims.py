"""Sum mode's op-list trims (issue 10): a trim never cuts into the window, however many
trims race; a list far past its threshold is trimmed in requests DynamoDB accepts; and a
trim that fails never turns the stamp it follows (already applied) into an error.

The store-level tests run on every DynamoDB backend and in memory: the trim's condition
(``size(ops) >= count + window``) and its ``REMOVE`` of indexes are exactly where the
backends differ (dynalite removes list indexes one by one).
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from conftest import unique_table

from xor_ack_dynamodb import LocalDynamoDB, MemoryAck, XorAckDynamoDB
from xor_ack_dynamodb.core.algebra import SumAlgebra
from xor_ack_dynamodb.core.chain import Chain, Op
from xor_ack_dynamodb.core.messages import Read, Rejected, Trim, Written
from xor_ack_dynamodb.core.rules import MAX_TRIM, ChainRules

TAG = "fan-out/part-0001"
WINDOW = 32


def _ops(n: int) -> tuple[Op, ...]:
    return tuple(Op(secrets.token_bytes(8), secrets.token_bytes(4)) for _ in range(n))


def _chain(ops: tuple[Op, ...], value: int) -> Chain:
    now = int(time.time())
    return Chain(
        tag=TAG,
        mode="sum",
        value=value,
        deadline=now + 3600,
        purge_at=now + 3600 + 5 + 86400,
        token=secrets.token_bytes(8),
        version=1 + len(ops),
        seq=len(ops),
        ops=ops,
        window=WINDOW,
        create_op=Op(secrets.token_bytes(8), secrets.token_bytes(4)),
        created_at=now,
        updated_at=now,
    )


@pytest.fixture(params=["memory", "inproc", "server", "dynalite", "ddblocal"])
def sum_ack(request: pytest.FixtureRequest) -> Any:
    """A sum-mode tracker in memory, and on each DynamoDB backend."""
    if request.param == "memory":
        return MemoryAck(mode="sum", ttl=3600)
    client = request.getfixturevalue(f"{request.param}_client")
    tracker = XorAckDynamoDB(unique_table("trims"), client=client, mode="sum")
    tracker.create_table()
    return tracker


def _seed(ack: Any, ops: tuple[Op, ...], value: int) -> None:
    """Store a pending chain holding ``ops`` (as if that many stamps had landed)."""
    chain = _chain(ops, value)
    if isinstance(ack, MemoryAck):
        ack.store._chains[TAG] = chain  # noqa: SLF001 - the store's own record, as a create leaves it
    else:
        ack.client.put_item(TableName=ack.table, Item=ack.codec.encode(chain))


def test_racing_trims_never_cut_into_the_window(sum_ack: Any) -> None:
    """Two writers crossed thresholds before either trim landed (or botocore resent one):
    every trim that still finds count + window ops applies, the rest are refused, and the
    window's most recent ops always stay, in order."""
    ops = _ops(60)
    _seed(sum_ack, ops, 12345)
    store = sum_ack.store
    assert isinstance(store.execute(Trim(TAG, 20, WINDOW)), Written)  # 60 -> 40
    assert isinstance(store.execute(Trim(TAG, 20, WINDOW)), Rejected)  # 40 < 20 + 32: refused
    assert isinstance(store.execute(Trim(TAG, 8, WINDOW)), Written)  # 40 -> 32
    assert isinstance(store.execute(Trim(TAG, 1, WINDOW)), Rejected)  # never below the window
    kept = store.execute(Read(TAG))
    assert [op.key for op in kept.ops] == [op.key for op in ops[-WINDOW:]]
    assert [op.digest for op in kept.ops] == [op.digest for op in ops[-WINDOW:]]
    assert kept.value == 12345 and kept.trims == 2


def test_a_list_far_past_its_threshold_is_trimmed_in_requests_dynamodb_accepts(sum_ack: Any) -> None:
    """A list that fell far behind (lost trims, a burst of writers) is trimmed by at most
    MAX_TRIM ops a request: DynamoDB refuses a REMOVE of about 190 ops (its expressions
    are limited to 4 KB), which would leave the list growing for good."""
    backlog = _ops(251)
    edge = 7_000_000_000_000_000_001
    _seed(sum_ack, backlog, edge + 99)
    sum_ack.stats.reset()
    value = sum_ack.stamp(TAG, finished=[edge], op_id="crossing")  # 252 ops: a threshold crossed
    assert value == 99 and not value.acked
    assert sum_ack.stats.events.get("trims") == 1
    stored = sum_ack.store.execute(Read(TAG))
    assert len(stored.ops) == 252 - MAX_TRIM
    assert [op.key for op in stored.ops[:-1]] == [op.key for op in backlog[MAX_TRIM:]]
    assert sum_ack.stamp(TAG, finished=[edge], op_id="crossing").duplicate  # still remembered


def test_the_trim_cap_keeps_the_expression_within_dynamodbs_limit() -> None:
    rules = ChainRules(SumAlgebra(), window=WINDOW)
    crossing = _chain(_ops(WINDOW + 20 * 30), 1)  # 30 thresholds past: 600 ops to remove
    assert rules.trim_count(crossing, 1) == MAX_TRIM
    paths = ", ".join(f"#ops[{i}], #oph[{i}]" for i in range(MAX_TRIM))
    assert len("REMOVE " + paths + " ADD #tr :one") < 4096


def _error(url: str, status: int, code: str) -> AWSResponse:
    """An error response as DynamoDB's JSON protocol writes it."""
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": code}).encode()
    headers = HTTPHeaders()
    headers["Content-Type"] = "application/x-amz-json-1.0"
    headers["Content-Length"] = str(len(body))

    class Raw:
        def stream(self, *_: Any, **__: Any) -> Any:
            yield body

    return AWSResponse(url, status, headers, Raw())


@pytest.mark.server
@pytest.mark.parametrize("failure", ["validation", "server_error"])
def test_a_failed_trim_never_fails_the_stamp_it_follows(moto_server: LocalDynamoDB, failure: str) -> None:
    """The trim is housekeeping after an applied stamp: refused outright by DynamoDB (a
    ValidationException) or failing past botocore's retries (500s), the stamp still
    returns its value, exactly once applied, and the next threshold trims."""
    client = moto_server.client()
    tracker = XorAckDynamoDB(unique_table("trim-fails"), client=client, mode="sum")
    tracker.create_table()
    edge = 5_000_000_000_000_000_003
    _seed(tracker, _ops(WINDOW + 19), edge + 1)  # the next stamp crosses window + slack

    failed: list[str] = []

    def refuse_trims(request: Any, **_: Any) -> AWSResponse | None:
        if b"REMOVE" not in (request.body or b""):
            return None
        failed.append(failure)
        if failure == "validation":
            return _error(request.url, 400, "ValidationException")
        return _error(request.url, 500, "InternalServerError")  # every botocore attempt

    client.meta.events.register_first("before-send.dynamodb.UpdateItem", refuse_trims)
    value = tracker.stamp(TAG, finished=[edge], op_id="applied")
    assert value == 1 and not value.acked and not value.duplicate
    assert len(failed) == (1 if failure == "validation" else 3)  # botocore tried 3 times
    assert tracker.stats.events.get("trims_failed" if failure == "validation" else "trims_lost") == 1
    stored = tracker.store.execute(Read(TAG))
    assert (stored.value, len(stored.ops)) == (1, WINDOW + 20)  # applied once, not trimmed
    client.meta.events.unregister("before-send.dynamodb.UpdateItem", refuse_trims)
    assert tracker.stamp(TAG, finished=[edge], op_id="applied").duplicate
