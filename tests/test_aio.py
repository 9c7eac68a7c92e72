"""The asyncio tracker beyond the contract suite (which runs it on every backend too):
many tasks on one chain in one event loop, a write whose response is lost, and tasks
cancelled mid-stamp.

Every test runs on the backends that serve aiobotocore over HTTP with DynamoDB's
atomicity: the serialized moto server and dynalite (and DynamoDB Local once the suite's
conftest has its ``ddblocal_client`` fixture). Faults are injected on aiobotocore's real
request path (``aio_scripted.AsyncScript``, the ``before-send`` hook).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

import conftest
import pytest
from aio_scripted import AsyncScript

from xor_ack_dynamodb import XorAckDynamoDB, errors
from xor_ack_dynamodb.aio import AsyncXorAckDynamoDB, async_dynamodb_client
from xor_ack_dynamodb.retry import RetryPolicy

pytestmark = pytest.mark.server

TAG = "database/file13"
BACKENDS = ["server_client", "dynalite_client"] + (
    ["ddblocal_client"] if hasattr(conftest, "ddblocal_client") else []
)
#: Many tasks on one xor chain lose many races: a budget that 64 of them cannot exhaust.
#: Its read timeout is long too: 64 requests queued on a one-at-a-time server of a loaded
#: machine can wait past the derived 5 s, and a timed-out write that was applied comes
#: back as a duplicate, which is not the race this test is about.
PATIENT = RetryPolicy(max_attempts=400, max_seconds=120, initial_wait=0.002, max_wait=0.2, read_timeout=60)


@pytest.fixture(params=BACKENDS, ids=lambda name: name.removesuffix("_client"))
def endpoint(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(request.param).meta.endpoint_url)


@pytest.fixture(params=["xor", "sum"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def table(endpoint: str, request: pytest.FixtureRequest) -> str:
    name = conftest.unique_table("aio")
    sync_client = request.getfixturevalue(request.node.callspec.params["endpoint"])
    XorAckDynamoDB(name, client=sync_client).create_table()
    return name


Body = Callable[[AsyncXorAckDynamoDB, Any], Awaitable[None]]


def run(endpoint: str, table: str, body: Body, http_attempts: int = 3, **options: Any) -> None:
    """Run ``body(tracker, client)`` in a new event loop, on a new aiobotocore client
    (botocore's standard retries: ``http_attempts`` attempts a request)."""

    async def main() -> None:
        async with async_dynamodb_client(
            region="us-east-1",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            retry=RetryPolicy(http_attempts=http_attempts),
        ) as client:
            await body(AsyncXorAckDynamoDB(table, client=client, **options), client)

    asyncio.run(main())


async def tree(ack: AsyncXorAckDynamoDB, children: int) -> list[Any]:
    """A chain whose root was finished, starting ``children`` edges."""
    root = ack.new_edge()
    await ack.create(TAG, root)
    kids = [ack.new_edge() for _ in range(children)]
    await ack.stamp(TAG, finished=[root], started=kids, op_id="root")
    return kids


# -- many tasks, one chain ----------------------------------------------------------------


def test_64_tasks_on_one_chain_ack_exactly_once(endpoint: str, table: str, mode: str) -> None:
    async def body(ack: AsyncXorAckDynamoDB, client: Any) -> None:
        kids = await tree(ack, 64)
        ack.stats.reset()
        results = await asyncio.gather(
            # First deliveries: op ids the library draws, known to be first (an op id the
            # caller names is checked from its bound: those still in flight when block 0
            # moves to history would pay a refused ADD and a read, test_once_history.py).
            *(ack.stamp(TAG, finished=[kid]) for kid in kids)
        )
        assert sorted(r.acked for r in results) == [False] * 63 + [True]
        assert not any(r.duplicate for r in results)
        status = await ack.status(TAG)
        assert status.state == "acked" and status.version is not None
        requests, events = ack.stats.requests, ack.stats.events
        print(f"\n{mode}: {ack.stats.snapshot()}")
        if mode == "xor":
            # The tasks really raced: writes lost to others' and were planned again.
            assert events.get("conflicts", 0) > 0
            # (and the write that moves block 0 to history wrote it first: one PutItem
            # each; 65 ops move one block)
            assert requests.get("PutItem", 0) == 64 + events["conflicts"] + events.get("history_writes", 0)
        else:
            # Sum mode never loses a race: one ADD a stamp, one write storing acked.
            assert events.get("conflicts", 0) == 0
            assert requests["UpdateItem"] == 64 + events.get("trims", 0) + events.get("trims_skipped", 0)
            assert requests["PutItem"] == 1 + events.get("history_writes", 0) and events["completions"] == 1
            assert events.get("history_writes", 0) == events.get("trims", 0) == 1  # block 0, once

    run(endpoint, table, body, mode=mode, retry=PATIENT)


# -- a write applied whose response is lost -------------------------------------------------


WRITE = "PutItem|UpdateItem"


@pytest.mark.parametrize("then_fail", [0, 2], ids=["resent", "resends-fail"])
def test_a_write_whose_response_is_lost_is_applied_once(
    endpoint: str, table: str, mode: str, then_fail: int
) -> None:
    """The server applies a stamp and its response is lost. aiobotocore never resends a
    stamp's write (it tests the chain's deadline: resend.py), so the library's own retry
    takes over at once (``resent``), or, in sum mode, its retried ADDs fail twice more
    first (``resends-fail``; in xor mode the retry reads the chain and finds the op, and
    sends no write for a fault to fail). The stamp counts once, and the last stamp alone
    reports acked."""

    async def body(ack: AsyncXorAckDynamoDB, client: Any) -> None:
        kids = await tree(ack, 3)
        before = (await ack.status(TAG)).value
        script = AsyncScript(client)
        fails = then_fail if mode == "sum" else 0  # xor: no write of the retry's to fail
        script.lose(WRITE).fail(WRITE, times=fails)
        first = await ack.stamp(TAG, finished=[kids[0]], op_id="k0")
        assert script.pending == 0
        assert not first.acked
        assert first == (await ack.status(TAG)).value
        if mode == "xor":
            assert first == bytes(a ^ b for a, b in zip(before, kids[0], strict=True))
        else:
            assert first == before - kids[0]
        assert ack.stats.events.get("retries", 0) >= 1  # the library's retry found it
        # The completing stamp's response is lost too: it still reports acked, once.
        second = await ack.stamp(TAG, finished=[kids[1]], op_id="k1")
        script.lose(WRITE).fail(WRITE, times=fails)
        last = await ack.stamp(TAG, finished=[kids[2]], op_id="k2")
        assert script.pending == 0
        assert not second.acked and last.acked
        assert (await ack.status(TAG)).state == "acked"
        with pytest.raises(errors.TagAcked):
            await ack.stamp(TAG, finished=[ack.new_edge()])

    run(endpoint, table, body, mode=mode, retry=RetryPolicy(max_attempts=10, initial_wait=0.001))


# -- cancellation ---------------------------------------------------------------------------


@pytest.mark.parametrize("sent", [False, True], ids=["before-sending", "after-the-server-applied"])
def test_a_task_cancelled_mid_stamp_leaves_the_chain_exact(
    endpoint: str, table: str, mode: str, sent: bool
) -> None:
    """A task is cancelled while its stamp's write is in flight: before it reached the
    server, or after the server applied it. Either way the stamp counts once or not at
    all, and stamping again with the same op id tells which (``duplicate``)."""

    async def body(ack: AsyncXorAckDynamoDB, client: Any) -> None:
        kids = await tree(ack, 2)
        before = await ack.status(TAG)
        script = AsyncScript(client)
        script.hold(WRITE, sent=sent)
        task = asyncio.create_task(ack.stamp(TAG, finished=[kids[0]], op_id="k0"))
        await asyncio.wait_for(script.holding.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        middle = await ack.status(TAG)
        assert (middle.value != before.value) is sent  # applied exactly when it was sent
        again = await ack.stamp(TAG, finished=[kids[0]], op_id="k0")
        assert again.duplicate is sent
        after = await ack.status(TAG)
        assert after.value == again and after.state == "pending"
        if sent:
            assert after.value == middle.value  # not applied a second time
        assert (await ack.stamp(TAG, finished=[kids[1]], op_id="k1")).acked

    run(endpoint, table, body, mode=mode)


def test_random_cancellations_under_contention_leave_the_chain_exact(
    endpoint: str, table: str, mode: str
) -> None:
    """24 tasks stamp one chain; half of them are cancelled at random moments (a fixed
    seed), wherever they are: reading, planning, backing off, or with a write in flight.
    Each cancelled stamp is then delivered again with its op id: the chain ends acked,
    and exactly one of all the stamps that returned reports it."""
    rng = random.Random(14)

    async def body(ack: AsyncXorAckDynamoDB, client: Any) -> None:
        kids = await tree(ack, 24)
        tasks = [asyncio.create_task(ack.stamp(TAG, finished=[k], op_id=f"k{i}")) for i, k in enumerate(kids)]
        doomed = rng.sample(range(len(tasks)), len(tasks) // 2)
        for i in doomed:
            await asyncio.sleep(rng.uniform(0, 0.01))
            tasks[i].cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        cancelled = [i for i, o in enumerate(outcomes) if isinstance(o, asyncio.CancelledError)]
        raised = [o for o in outcomes if isinstance(o, Exception)]  # CancelledError is not one
        assert not raised
        assert cancelled, "no task was cancelled mid-stamp"
        results = [o for o in outcomes if not isinstance(o, BaseException)]
        redelivered = [await ack.stamp(TAG, finished=[kids[i]], op_id=f"k{i}") for i in cancelled]
        assert sum(r.acked for r in results + redelivered) == 1
        assert (await ack.status(TAG)).state == "acked"
        print(f"\n{len(cancelled)} cancelled, {sum(r.duplicate for r in redelivered)} of them had landed")

    run(endpoint, table, body, mode=mode, retry=PATIENT)


# -- the client -------------------------------------------------------------------------------


def test_async_with_closes_only_a_client_it_built(
    endpoint: str, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", endpoint)

    async def main() -> None:
        async with AsyncXorAckDynamoDB(table) as ack:  # from the environment
            built = await ack.get_client()
            await ack.create(TAG, ack.new_edge())
        assert built._endpoint.http_session._sessions is None  # closed
        async with async_dynamodb_client() as client:
            async with AsyncXorAckDynamoDB(table, client=client) as ack:
                assert (await ack.status(TAG)).state == "pending"
            assert client._endpoint.http_session._sessions is not None  # still the caller's
            await client.describe_table(TableName=table)

    asyncio.run(main())


# -- the table --------------------------------------------------------------------------------


def test_a_missing_table_and_a_wrong_key_are_typed_errors(
    endpoint: str, request: pytest.FixtureRequest
) -> None:
    """As for the sync tracker (``test_table.py``): every call on a missing table raises
    ``TableNotFound``; on a table keyed otherwise, ``create_table`` and every call raise
    ``TableSchemaMismatch``, whatever words the backend's ValidationException uses (the
    async path asks DescribeTable, awaited, when they do not say)."""
    missing, wrong = conftest.unique_table("absent"), conftest.unique_table("wrong")
    sync_client = request.getfixturevalue(request.node.callspec.params["endpoint"])
    sync_client.create_table(
        TableName=wrong,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )

    def calls(ack: AsyncXorAckDynamoDB) -> list[Awaitable[Any]]:
        edge = ack.new_edge()
        return [
            ack.create("t", edge),
            ack.stamp("t", edge),
            ack.fail("t"),
            ack.touch("t"),
            ack.status("t"),
            ack.status_many(["t"]),
            ack.delete("t"),
        ]

    async def body(ack: AsyncXorAckDynamoDB, client: Any) -> None:
        for call in calls(ack):
            with pytest.raises(errors.TableNotFound) as info:
                await call
            assert repr(missing) in str(info.value)
        other = AsyncXorAckDynamoDB(wrong, client=client)
        with pytest.raises(errors.TableSchemaMismatch):
            await other.create_table()
        for call in calls(other):
            with pytest.raises(errors.TableSchemaMismatch) as mismatch:
                await call
            assert repr(wrong) in str(mismatch.value)
        assert (await client.scan(TableName=wrong))["Items"] == []

    run(endpoint, missing, body)


# -- every request type, every fault kind -------------------------------------------------------

KINDS = ("lose", "fail", "throttle", "refuse")
#: Each request type the library sends, and a call whose job is that request (xor mode
#: unless the request is sum mode's ADD).
CALLS = {
    "GetItem": "status",
    "PutItem": "stamp",
    "UpdateItem": "sum-stamp",
    "DeleteItem": "delete",
    "BatchGetItem": "status_many",
}


#: Faults beyond botocore's resends for every kind; within them only for a lost response
#: (for the others, botocore's resend simply succeeds: nothing for the library to tell).
#: botocore never resends a stamp's PutItem or a sum ADD (resend.py): every fault on them
#: reaches the library.
MATRIX = [
    pytest.param(kind, op, beyond, id=f"{kind}-{op}-{'beyond' if beyond else 'within'}-botocore")
    for kind in KINDS
    for op in CALLS
    for beyond in (False, True)
    if beyond or kind == "lose"
]


@pytest.mark.parametrize("kind, operation, beyond_botocore", MATRIX)
def test_every_request_type_survives_every_fault_kind(
    moto_server: Any, kind: str, operation: str, beyond_botocore: bool
) -> None:
    """The first requests of one type meet one kind of fault (once, or as many times as
    botocore's 2 attempts, so that the library's own retry takes over; a stamp's PutItem
    and a sum ADD are never resent by botocore, so their first fault reaches it): the call
    still does exactly its job (as ``reliability/test_faults.py`` checks the sync
    tracker)."""
    table = conftest.unique_table("matrix")
    XorAckDynamoDB(table, client=moto_server.client()).create_table()
    times = 2 if beyond_botocore else 1  # the client makes 2 attempts a request
    mode = "sum" if operation == "UpdateItem" else "xor"

    async def body(ack: AsyncXorAckDynamoDB, client: Any) -> None:
        root, kid = ack.new_edge(), ack.new_edge()
        await ack.create(TAG, root)
        await ack.stamp(TAG, finished=[root], started=[kid])
        fresh = AsyncXorAckDynamoDB(table, client=client, mode=mode, retry=FAST)  # a cold cache
        script = AsyncScript(client)
        if kind == "lose":  # applied, response lost; then resends fail until botocore gives up
            # (a stamp's PutItem is not resent, and the library's retry reads the chain:
            # it sends no PutItem for a second fault to fail)
            script.lose(operation).fail(operation, times=0 if operation == "PutItem" else times - 1)
        else:
            getattr(script, kind)(operation, times)
        call = CALLS[operation]
        if call == "status":
            assert (await fresh.status(TAG)).state == "pending"
        elif call in ("stamp", "sum-stamp"):
            done = await fresh.stamp(TAG, finished=[kid], op_id="kid")
            assert done.acked
            assert (await fresh.status(TAG)).state == "acked"
        elif call == "delete":
            await fresh.delete(TAG)
            with pytest.raises(errors.TagNotFound):
                await fresh.status(TAG)
        else:
            assert (await fresh.status_many([TAG, "absent"]))[TAG].state == "pending"
        assert script.pending == 0
        # A sum ADD or a stamp's PutItem whose response was lost is never resent by
        # botocore (resend.py): the library's guarded retry takes over at once.
        library_retries = beyond_botocore or (kind == "lose" and operation in ("UpdateItem", "PutItem"))
        assert (fresh.stats.events.get("retries", 0) > 0) is library_retries

    run(str(moto_server.endpoint_url), table, body, http_attempts=2, mode=mode)


FAST = RetryPolicy(max_attempts=10, initial_wait=0.001, max_wait=0.01)
