"""Many chains at once: create_many, stamp_many, touch_many (at scale: test_batch_scale.py).

Each call of a batch gets exactly what it would get alone (the same sans-IO calls run in
lockstep); the batch costs one BatchGetItem per 100 reads and one TransactWriteItems per
100 writes, or single writes where the backend has no transactions (dynalite). The
asyncio trackers run the very same test bodies (each call a task of one event loop,
through ``aio_helpers.Blocking``) on every backend but moto in-process, which does not
serve aiobotocore.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aio_helpers import Blocking, LoopThread
from aio_scripted import AsyncScript
from botocore.config import Config
from conftest import HAS_AIOBOTOCORE, Clock, unique_table
from scripted import Script

from xor_ack_dynamodb import LocalDynamoDB, MemoryAck, StampSpec, XorAckDynamoDB, errors
from xor_ack_dynamodb.aio import AsyncMemoryAck, AsyncXorAckDynamoDB, async_dynamodb_client
from xor_ack_dynamodb.retry import RetryPolicy

BACKENDS = ["memory", "inproc", "server", "dynalite", "ddblocal"]
#: Run in the async test leg alone (Makefile's test-async: its venv has aiobotocore).
ASYNC_BACKENDS = (
    ["async-memory", "async-server", "async-dynalite", "async-ddblocal"] if HAS_AIOBOTOCORE else []
)


@pytest.fixture(scope="module")
def loop() -> Iterator[LoopThread]:
    """One event loop (in a thread) for the module's asyncio trackers."""
    thread = LoopThread()
    yield thread
    thread.close()


@pytest.fixture(params=BACKENDS + ASYNC_BACKENDS)
def make(request: pytest.FixtureRequest, clock: Clock) -> Any:
    """``make(**options)``: trackers on one fresh table of the backend (memory: one
    store); for ``async-*``, asyncio trackers shown to the test as sync ones."""
    kind, _, backend = str(request.param).rpartition("-")
    if backend == "memory":
        first: list[Any] = []

        def memory(**options: Any) -> Any:
            options.setdefault("clock", clock)
            ack = (AsyncMemoryAck if kind else MemoryAck)(share=first[0] if first else None, **options)
            first.append(ack)
            return Blocking(ack, request.getfixturevalue("loop")) if kind else ack

        return memory
    client = request.getfixturevalue(f"{backend}_client")
    table = unique_table("batch")
    XorAckDynamoDB(table, client=client).create_table()

    def dynamodb(**options: Any) -> Any:
        options.setdefault("clock", clock)
        if kind:
            loop = request.getfixturevalue("loop")
            ack = AsyncXorAckDynamoDB(table, client=loop.client(client.meta.endpoint_url), **options)
            return Blocking(ack, loop)
        return XorAckDynamoDB(table, client=client, **options)

    dynamodb.backend = backend  # type: ignore[attr-defined]
    return dynamodb


@pytest.mark.parametrize("mode", ["xor", "sum"])
def test_a_batch_does_what_one_call_each_would(make: Any, mode: str) -> None:
    ack = make(mode=mode, ttl=600)
    roots = {f"file-{i}": ack.new_edge() for i in range(150)}
    ack.create("file-7", roots["file-7"])  # already there: TagExists for it alone
    created = ack.create_many(roots, op_ids={t: f"{t}/create" for t in roots}, owner="run-1")
    assert isinstance(created["file-7"], errors.TagExists)
    assert sum(not isinstance(v, Exception) and not v.acked for v in created.values()) == 149
    again = ack.create_many({"file-1": roots["file-1"]}, op_ids={"file-1": "file-1/create"})
    assert again["file-1"].duplicate  # type: ignore[union-attr]
    # Finish each root, starting one child each; one chain failed meanwhile.
    kids = {t: ack.new_edge() for t in roots}
    ack.fail("file-3", "broken")
    specs = [
        StampSpec(t, finished=(roots[t],), started=(kids[t],), op_id=f"{t}/root", owner="run-1")
        for t in roots
        if t != "file-7"
    ]
    before = ack.stats.total_requests
    half = ack.stamp_many(specs)
    spent = ack.stats.total_requests - before
    assert isinstance(half["file-3"], errors.TagFailed)
    assert all(not isinstance(v, Exception) and not v.acked for t, v in half.items() if t != "file-3")
    if not isinstance(ack, MemoryAck) and getattr(make, "backend", "") != "dynalite":
        assert spent <= 8, spent  # 149 chains: two reads and two transactions (and a few retries)
    # The same op ids again are duplicates, and a stamp of another owner is refused.
    assert all(v.duplicate for t, v in ack.stamp_many(specs[:5]).items() if t != "file-3")  # type: ignore[union-attr]
    refused = ack.stamp_many([StampSpec("file-9", finished=(kids["file-9"],), owner="run-2")])
    assert isinstance(refused["file-9"], errors.NotOwner)
    done = ack.stamp_many(
        [StampSpec(t, finished=(kids[t],), op_id=f"{t}/kid") for t in roots if t not in ("file-3", "file-7")]
    )
    assert all(not isinstance(v, Exception) and v.acked for v in done.values())
    states = ack.status_many(list(roots))
    assert sum(s.state == "acked" for s in states.values()) == 148
    assert states["file-3"].state == "failed"


def test_touch_many_is_a_heartbeat(make: Any, clock: Clock) -> None:
    ack = make(ttl=60)
    roots = {f"t{i}": ack.new_edge() for i in range(120)}
    ack.create_many(roots)
    ack.stamp("t0", roots["t0"])  # acked: not touched
    clock.advance(50)
    touched = ack.touch_many(list(roots), ttl=60)
    assert isinstance(touched["t0"], errors.TagAcked)
    assert all(getattr(v, "state", None) == "pending" for t, v in touched.items() if t != "t0")
    clock.advance(50)  # 100 s after the create, 50 after the heartbeat: still pending
    assert ack.status("t5").state == "pending"
    assert ack.stamp("t5", roots["t5"]).acked


def test_a_batch_runs_in_groups_with_progress_and_a_summary(make: Any) -> None:
    """Groups of 100, several at once (one at a time on moto in-process, which is not
    thread-safe), progress after each, failures by type, missing tags named."""
    ack = make(ttl=600)
    roots = {f"g{i:03}": ack.new_edge() for i in range(250)}
    ack.create("g007", ack.new_edge())
    concurrency = 1 if getattr(make, "backend", "") == "inproc" else 3
    seen: list[tuple[int, int]] = []
    created = ack.create_many(roots, concurrency=concurrency, progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (0, 250) and seen[-1] == (250, 250) and len(seen) == 4, seen
    assert created.failures_by_type() == {"TagExists": ["g007"]}
    assert created.summary() == "250 chains: 249 ok, 1 failed (TagExists 1)"
    states = ack.status_many(["nope-1", *roots, "nope-2"], concurrency=concurrency)
    assert states.missing == ["nope-1", "nope-2"] and list(states) == list(roots)
    assert states.summary() == "252 tags: 250 found (pending 250), 2 missing"


def test_bad_batches_are_refused_before_any_request(make: Any) -> None:
    ack = make()
    edge = ack.new_edge()
    before = ack.stats.total_requests
    with pytest.raises(errors.InvalidConfig):
        ack.stamp_many([StampSpec("a", edge), StampSpec("a", edge)])
    with pytest.raises(errors.InvalidTag):
        ack.create_many({"": edge})
    with pytest.raises(errors.InvalidConfig):
        ack.stamp_many([("a", edge)])  # type: ignore[list-item]
    with pytest.raises(errors.InvalidConfig):
        ack.touch_many(["a", "a"])
    assert ack.stats.total_requests == before


@pytest.mark.server
def test_a_transaction_whose_response_is_lost_is_applied_once(moto_server: LocalDynamoDB) -> None:
    """The transaction lands and its response is lost; botocore does not resend it (a
    transaction is sent once, resend.py): the library's retry reads every chain, finds
    each stamp's op, and applies none twice."""
    raw = boto3.client(
        "dynamodb",
        endpoint_url=moto_server.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"mode": "standard", "total_max_attempts": 3}),
    )
    table = unique_table("batch-lost")
    ack = XorAckDynamoDB(table, client=raw, retry=RetryPolicy(initial_wait=0.001, max_wait=0.01))
    ack.create_table()
    roots = {f"c{i}": ack.new_edge() for i in range(30)}
    ack.create_many(roots)
    script = Script(raw)
    script.lose("TransactWriteItems")
    done = ack.stamp_many([StampSpec(t, roots[t], op_id=f"{t}/last") for t in roots])
    assert script.pending == 0
    assert all(not isinstance(v, Exception) and v.acked for v in done.values()), done
    assert ack.stats.events["retries"] >= 1  # the library's own retry found them
    assert all(s.state == "acked" for s in ack.status_many(list(roots)).values())


@pytest.mark.server
@pytest.mark.aio
def test_an_async_transaction_whose_response_is_lost_is_applied_once(moto_server: LocalDynamoDB) -> None:
    """The same on the asyncio tracker (aiobotocore does not resend the transaction
    either): its batch retry (tenacity's ``AsyncRetrying``) reads every chain again and
    applies none twice."""
    table = unique_table("batch-lost-aio")
    XorAckDynamoDB(table, client=moto_server.client()).create_table()

    async def main() -> None:
        async with async_dynamodb_client(
            region="us-east-1",
            endpoint_url=moto_server.endpoint_url,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            retry=RetryPolicy(http_attempts=3),
        ) as client:
            quick = RetryPolicy(initial_wait=0.001, max_wait=0.01)
            ack = AsyncXorAckDynamoDB(table, client=client, retry=quick)
            roots = {f"c{i}": ack.new_edge() for i in range(30)}
            await ack.create_many(roots)
            script = AsyncScript(client)
            script.lose("TransactWriteItems")
            done = await ack.stamp_many([StampSpec(t, roots[t], op_id=f"{t}/last") for t in roots])
            assert script.pending == 0
            assert all(not isinstance(v, Exception) and v.acked for v in done.values()), done
            assert ack.stats.events["retries"] >= 1  # the library's own retry found them
            assert all(s.state == "acked" for s in (await ack.status_many(list(roots))).values())

    asyncio.run(main())


@pytest.mark.parametrize("backend", ["inproc", "server", "ddblocal"])
def test_a_sum_chain_completed_by_a_later_writer_is_acked_once(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """Another writer's ADD lands right after a batch's transaction commits (before the
    batch reads anything back) and brings the sum to zero: exactly one caller, the one
    whose write reached zero, sees ``acked``."""
    client = request.getfixturevalue(f"{backend}_client")
    table = unique_table("batch-later")
    batch = XorAckDynamoDB(table, client=client, mode="sum")
    batch.create_table()
    other = XorAckDynamoDB(table, client=client, mode="sum")
    first, second = batch.new_edge(), batch.new_edge()
    batch.create("hot", first + second)
    results = {}

    def between(**_: Any) -> None:  # after the commit, before the read back
        client.meta.events.unregister("after-call.dynamodb.TransactWriteItems", between)
        results["other"] = other.stamp("hot", finished=[second], op_id="other")

    client.meta.events.register("after-call.dynamodb.TransactWriteItems", between)
    results["batch"] = batch.stamp_many([StampSpec("hot", finished=(first,), op_id="batch")])["hot"]
    assert results["other"].acked
    assert not results["batch"].acked  # type: ignore[union-attr]
    assert batch.status("hot").state == "acked"
