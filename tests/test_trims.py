"""Sum mode's op-list trims (issues 10 and 18): a trim removes exactly one history
block, at its fixed place, once, however many trims race or are resent, and never cuts
into the window; a list far past its threshold is moved out in requests DynamoDB
accepts, its history written first; and a move that fails never turns the stamp it
follows (already applied) into an error.

The store-level tests run on every DynamoDB backend and in memory: the trim's condition
(``cutn = :cut AND lin = :lineage AND size(ops) >= count + window``) and its ``REMOVE`` of
indexes are exactly where the backends differ (dynalite removes list indexes one by one).
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
from regression_clients import sum_tracker

from xor_ack_dynamodb import LocalDynamoDB, MemoryAck, XorAckDynamoDB
from xor_ack_dynamodb.core.algebra import SumAlgebra
from xor_ack_dynamodb.core.chain import BLOCK, UNKNOWN_DIGEST, Chain, Op, op_key
from xor_ack_dynamodb.core.messages import Read, ReadHistory, Rejected, Trim, Written
from xor_ack_dynamodb.core.rules import ChainRules
from xor_ack_dynamodb.stores.dynamodb.codec import RequestCodec
from xor_ack_dynamodb.stores.dynamodb.item import ItemCodec

TAG = "fan-out/part-0001"
WINDOW = 32


def _ops(n: int) -> tuple[Op, ...]:
    return tuple(Op(secrets.token_bytes(8), secrets.token_bytes(4)) for _ in range(n))


LINEAGE = b"lineage1"


def _chain(ops: tuple[Op, ...], value: int, lineage: bytes | None = LINEAGE) -> Chain:
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
        lineage=lineage,
        create_op=Op(secrets.token_bytes(8), secrets.token_bytes(4)),
        created_at=now,
        updated_at=now,
    )


@pytest.fixture(params=["memory", "inproc", "server", "dynalite", "ddblocal"])
def sum_ack(request: pytest.FixtureRequest) -> Any:
    """A sum-mode tracker in memory, and on each DynamoDB backend."""
    memory = request.param == "memory"
    return sum_tracker(None if memory else request.getfixturevalue(f"{request.param}_client"), "trims")


def _seed(ack: Any, ops: tuple[Op, ...], value: int, lineage: bytes | None = LINEAGE) -> None:
    """Store a pending chain holding ``ops`` (as if that many stamps had landed)."""
    chain = _chain(ops, value, lineage)
    if isinstance(ack, MemoryAck):
        ack.store._chains[TAG] = chain  # noqa: SLF001 - the store's own record, as a create leaves it
    else:
        ack.client.put_item(TableName=ack.table, Item=ack.codec.encode(chain))


def test_racing_trims_remove_each_block_once_and_never_cut_into_the_window(sum_ack: Any) -> None:
    """Two writers moved the same block (or botocore resent a trim): the block is
    removed once, by whichever lands first (the others find ``cutn`` moved on); a trim
    naming another lineage, or one that would cut into the window, is refused."""
    ops = _ops(100)
    _seed(sum_ack, ops, 12345)
    store = sum_ack.store
    first = Trim(TAG, BLOCK, WINDOW, cut=0, lineage=LINEAGE)
    assert isinstance(store.execute(first), Written)  # positions 1..40 out
    assert isinstance(store.execute(first), Rejected)  # the same block again: refused
    assert isinstance(store.execute(Trim(TAG, BLOCK, WINDOW, cut=40, lineage=b"another1")), Rejected)
    assert isinstance(
        store.execute(Trim(TAG, BLOCK, WINDOW, cut=40, lineage=LINEAGE)), Rejected
    )  # 60 < 40 + 32
    kept = store.execute(Read(TAG))
    assert [op.key for op in kept.ops] == [op.key for op in ops[BLOCK:]]
    assert [op.digest for op in kept.ops] == [op.digest for op in ops[BLOCK:]]
    assert (kept.value, kept.cut_seq, kept.lineage) == (12345, 40, LINEAGE)


def test_a_trim_sent_again_over_a_long_list_removes_its_block_once(sum_ack: Any) -> None:
    """The same trim twice (botocore's resend, or two writers that own the same block
    on a hot chain) while the list still holds more than two blocks past the window:
    ``size(ops)`` would let the second one through, so only ``cutn = :cut`` keeps it
    from removing the next block, whose history nobody has written yet; and only
    ``lin = :lineage`` keeps a trim of another lineage out."""
    ops = _ops(3 * BLOCK + WINDOW + 10)
    _seed(sum_ack, ops, 777)
    store = sum_ack.store
    for cut in (0, BLOCK):  # the first block (no cutn yet) and the next
        trim = Trim(TAG, BLOCK, WINDOW, cut=cut, lineage=LINEAGE)
        assert isinstance(store.execute(trim), Written)
        assert isinstance(store.execute(trim), Rejected)
    # A trim of another lineage (a writer that saw the chain before it was created
    # again under the tag) at the right place, with ops enough: only lin = :lineage refuses it.
    assert isinstance(store.execute(Trim(TAG, BLOCK, WINDOW, cut=2 * BLOCK, lineage=b"another1")), Rejected)
    kept = store.execute(Read(TAG))
    assert [op.key for op in kept.ops] == [op.key for op in ops[2 * BLOCK :]]
    assert kept.cut_seq == 2 * BLOCK


def test_a_list_far_past_its_threshold_is_moved_out_in_requests_dynamodb_accepts(sum_ack: Any) -> None:
    """A list that fell far behind (lost moves, a burst of writers) is moved out by the
    writer that owns the next block, several blocks at a time, one trim request per
    block (DynamoDB refuses a REMOVE of about 190 ops: its expressions are limited to 4
    KB), each block's history written first: the ops it held are still found."""
    backlog = (Op(op_key("early", "stamp"), UNKNOWN_DIGEST),) + _ops(WINDOW + 6 * BLOCK - 2)
    edge = 7_000_000_000_000_000_001
    _seed(sum_ack, backlog, edge + 99)
    sum_ack.stats.reset()
    # The op at position 32 + 6 * 40 owns block 5: it moves blocks 0..3 (at most 4).
    value = sum_ack.stamp(TAG, finished=[edge], op_id="crossing")
    assert value == 99 and not value.acked and value.position.seq == WINDOW + 6 * BLOCK
    assert sum_ack.stats.events.get("trims") == 4
    assert sum_ack.stats.events.get("history_writes") == 1
    stored = sum_ack.store.execute(Read(TAG))
    assert (len(stored.ops), stored.cut_seq) == (WINDOW + 2 * BLOCK, 4 * BLOCK)
    assert [op.key for op in stored.ops[:-1]] == [op.key for op in backlog[4 * BLOCK :]]
    found = sum_ack.store.execute(ReadHistory(TAG, LINEAGE, (0, 1, 2, 3, 4)))
    assert sorted(found.blocks) == [0, 1, 2, 3]
    assert [op.key for op in found.blocks[0]] == [op.key for op in backlog[:BLOCK]]
    assert sum_ack.stamp(TAG, finished=[edge], op_id="crossing").duplicate  # in the item
    assert sum_ack.stamp(TAG, finished=[edge], op_id="early").duplicate  # in history block 0


def test_the_trim_cap_keeps_the_expression_within_dynamodbs_limit() -> None:
    codec = RequestCodec("acks", ItemCodec("tagID"), ChainRules(SumAlgebra(), window=WINDOW))
    trim = codec.prepare(Trim(TAG, BLOCK, WINDOW, cut=4000, lineage=LINEAGE)).kwargs
    assert len(trim["UpdateExpression"]) + len(trim["ConditionExpression"]) < 4096


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
    _seed(tracker, _ops(WINDOW + BLOCK - 1), edge + 1)  # the next stamp owns block 0

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
    assert (stored.value, len(stored.ops)) == (1, WINDOW + BLOCK)  # applied once, not trimmed
    client.meta.events.unregister("before-send.dynamodb.UpdateItem", refuse_trims)
    assert tracker.stamp(TAG, finished=[edge], op_id="applied").duplicate
