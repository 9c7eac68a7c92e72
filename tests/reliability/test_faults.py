"""Fault injection against a moto server over HTTP: lost responses, throttling, 500s and
connection errors on every request type, under many threads stamping random trees, in
xor mode and in sum mode.

The server is the embedded ``LocalDynamoDB``, which applies requests one at a time, as
DynamoDB applies each conditional write atomically (moto alone does not); the mixed
scenario runs on DynamoDB Local too (and, in sum mode, on dynalite). The clients
are configured explicitly: botocore standard retry mode, 4 attempts per request
(``faults.client_config``); the library's own budget is its default ``RetryPolicy()``
(50 attempts, 60 s) unless a test says otherwise.
"""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import ClientError
from conftest import expect

from xor_ack_dynamodb import LocalDynamoDB, RetryPolicy, XorAckDynamoDB, new_stamp, xor
from xor_ack_dynamodb.core.chain import BLOCK
from xor_ack_dynamodb.errors import BatchIncomplete, StaleLocalData, TagNotFound
from xor_ack_dynamodb.stamps import RESERVED_PREFIX

from .faults import FAULT_KINDS, FaultInjector, FaultRates, UnprocessedKeys
from .runner import RunResult, TrackerFactory, make_trees, run_trees, settle, unique_table
from .sizes import SIZE, record_figures
from .workload import Tree

pytestmark = pytest.mark.server

RATE = 0.3
SCENARIOS: dict[str, FaultRates] = {
    **{kind: FaultRates.only(kind, RATE) for kind in FAULT_KINDS},
    "mixed": FaultRates(0.075, 0.075, 0.075, 0.075),
}
BOTOCORE_ATTEMPTS = 4


#: The trackers' partition key (the default).
KEY = "tagID"


def _table_items(client: Any, table: str) -> list[dict[str, Any]]:
    """The chain items left in ``table``. History blocks (keys under the reserved
    prefix) outlive a deleted chain until their TTL, by design (docs/expiry.md): each must
    carry one."""
    items = list(client.scan(TableName=table, ConsistentRead=True).get("Items", []))
    history = [i for i in items if next(iter(i[KEY].values())).startswith(RESERVED_PREFIX)]
    assert all("expires_at" in i for i in history), history[:1]
    return [i for i in items if i not in history]


def _delete_all(tags: list[str], factory: TrackerFactory) -> list[BaseException]:
    """DeleteItem on every chain, through the faults, from the scenario's threads."""
    tracker = factory()

    def delete(tag: str) -> BaseException | None:
        try:
            tracker.delete(tag)
        except Exception as exc:  # noqa: BLE001
            return exc
        return None

    with ThreadPoolExecutor(SIZE.threads) as pool:
        return [e for e in pool.map(delete, tags) if e is not None]


@dataclass
class Outcome:
    """What one fault scenario did and left."""

    scenario: str
    backend: str
    mode: str
    seed: int
    chains: int
    result: RunResult
    injector: FaultInjector
    delete_errors: list[BaseException]
    leftovers: list[dict[str, Any]]
    trims: bool = False


def _run_scenario(
    server: Any, scenario: str, backend: str, mode: str, seed: int, *, trims: bool = False
) -> Outcome:
    """Random trees of ``mode`` stamped from many threads through faulty clients, on a
    table of their own; then read back and deleted through the faults.

    ``trims`` (sum mode): trees that pass the op list's window + slack, so that every
    chain's list is trimmed under the faults, each chain's stamps made by one thread
    (chains in parallel). The library catches a duplicate only while fewer than
    ``max_ops`` other ops have landed on the chain since the original, and at these fault
    rates a resend can come seconds later (botocore's backoff): with one writer a chain,
    no resend outlives the window. A window of 4 (trims at 4 + slack = 24 ops) keeps the
    trees short; the trim is the same request whatever the window. Concurrent writers on
    one chain are the other scenarios' business, on trees within the window."""
    rng = random.Random(seed)
    injector = FaultInjector(SCENARIOS[scenario], seed=seed)
    table = unique_table(f"faults-{mode}-{scenario}".replace("_", "-") + ("-trims" if trims else ""))
    factory = TrackerFactory(
        server.endpoint_url or "", table, injector, BOTOCORE_ATTEMPTS, mode=mode, max_ops=4 if trims else 32
    )
    reader = factory()
    reader.create_table()  # CreateTable & co. are not injected into: not chain traffic
    if trims:
        past = reader.max_ops + BLOCK
        trees = make_trees(SIZE.trim_chains, rng, "trims", past + 12, mode, min_nodes=past + 4)
        assert all(t.size >= past for t in trees), [t.size for t in trees]
    else:
        count = SIZE.sum_chains if mode == "sum" else SIZE.chains
        trees = make_trees(count, rng, scenario, SIZE.max_nodes, mode)
    assert all(t.depth() >= 3 for t in trees)

    if trims:
        result, truths = run_trees(
            trees, factory, threads=len(trees), batch=len(trees), rng=rng, serial_chains=True
        )
    else:
        result, truths = run_trees(trees, factory, threads=SIZE.threads, batch=SIZE.batch, rng=rng)
    # Read back in small batches so BatchGetItem meets the faults too.
    for start in range(0, len(trees), 4):
        group = {t.tag: truths[t.tag] for t in trees[start : start + 4]}
        settle(result, group, reader)
    delete_errors = _delete_all([t.tag for t in trees], factory)
    leftovers = _table_items(server.client(), table)

    record_figures(
        f"faults: {scenario}"
        + ("" if backend == "moto_server" else f" ({backend})")
        + f", {mode} mode"
        + (", op lists trimmed" if trims else ""),
        chains=result.chains,
        stamps=result.stamps,
        faults=dict(injector.injected),
        faults_by_operation={f"{k}/{op}": n for (k, op), n in injector.by_operation.items()},
        requests=sum(injector.sent.values()),
        lost_acks=result.verdict.lost_acks,
        false_acks=result.verdict.false_acks,
        corrupt=result.verdict.corrupt,
        escaped_errors=len(result.errors) + len(delete_errors),
        max_attempts=result.max_attempts,
        trims={k: v for k, v in result.events.items() if k.startswith("trims")},
        seconds=round(result.seconds, 1),
        seed=seed,
    )
    return Outcome(
        scenario, backend, mode, seed, len(trees), result, injector, delete_errors, leftovers, trims
    )


def _check(o: Outcome) -> None:
    """0 lost, 0 false acks, nothing corrupt, no error escaped, every chain acked and then
    deleted, and the faults did happen."""
    result, injector = o.result, o.injector
    label = f"{o.mode} mode, {o.scenario} on {o.backend}, seed {o.seed}"
    assert result.errors == [], (label, Counter(type(e).__name__ for e in result.errors))
    verdict = (result.verdict.lost_acks, result.verdict.false_acks, result.verdict.corrupt)
    assert verdict == (0, 0, 0), (label, result.verdict.problems[:10])
    assert result.verdict.stamps_ok + result.verdict.wide_checks == result.stamps, label
    assert result.final_states == Counter({"acked": o.chains}), (label, result.not_acked[:5])
    assert o.delete_errors == [], label
    assert o.leftovers == [], label
    assert injector.total() > 0.1 * sum(injector.sent.values()), label  # the faults did happen
    for kind, rate in SCENARIOS[o.scenario].as_dict().items():
        if rate:
            assert injector.injected[kind] > 0, (label, kind)
    if o.trims:  # the op lists were trimmed, under the faults
        assert result.events["trims"] > 0, (label, result.events)


def _run_together(
    request: pytest.FixtureRequest, backend: str, mode: str, cases: list[tuple[str, bool]], seed: int
) -> None:
    """Run ``cases`` ((scenario, trims) pairs) of ``mode`` on ``backend`` at once, each on
    its own table with its own clients and threads, and check every outcome. They wait on
    botocore's backoff far more than they compute: together they take about the time of
    the slowest, and every failed scenario is reported, not only the first."""
    server = request.getfixturevalue(backend)
    with ThreadPoolExecutor(len(cases)) as pool:
        runs = [
            pool.submit(_run_scenario, server, scenario, backend, mode, seed + i, trims=trims)
            for i, (scenario, trims) in enumerate(cases)
        ]
        outcomes = [run.result() for run in runs]
    failed = []
    for outcome in outcomes:
        try:
            _check(outcome)
        except AssertionError as exc:
            failed.append(str(exc))
    assert failed == [], "\n".join(failed)


#: xor mode: every scenario on the serialized moto server; the mixed one on Amazon's
#: engine too. (scenario, trims) pairs.
CASES: dict[str, list[tuple[str, bool]]] = {
    "moto_server": [(s, False) for s in SCENARIOS],
    "ddblocal": [("mixed", False)],
}


@pytest.mark.parametrize("backend", CASES)
def test_faults_never_lose_nor_fake_an_ack(request: pytest.FixtureRequest, backend: str, seed: int) -> None:
    """Random trees stamped from many threads through faulty clients: every returned
    value is one the applied stamps can explain, exactly one call per chain reports
    acked, and every chain ends acked."""
    _run_together(request, backend, "xor", CASES[backend], seed)


#: Sum mode: every scenario on the moto server, and the mixed one with trees long enough
#: to trim their op lists; the mixed one on DynamoDB Local and on dynalite (which returns
#: no ALL_OLD: a refused ADD is judged on a read).
SUM_CASES: dict[str, list[tuple[str, bool]]] = {
    "moto_server": [(s, False) for s in SCENARIOS] + [("mixed", True)],
    "ddblocal": [("mixed", False)],
    "dynalite": [("mixed", False)],
}


@pytest.mark.parametrize("backend", SUM_CASES)
def test_faults_never_lose_nor_fake_an_ack_in_sum_mode(
    request: pytest.FixtureRequest, backend: str, seed: int
) -> None:
    """The same scenarios in sum mode (one ADD a stamp; the completing writer's follow-up
    write; duplicates recognized from the op list by the ADD's own condition), checked by
    the same model in the sum group."""
    _run_together(request, backend, "sum", SUM_CASES[backend], seed)


#: Each request type the library sends, and the calls that send it: (operation, call).
REQUESTS = [
    ("GetItem", "status"),
    ("PutItem", "stamp"),  # an xor stamp's conditional write of the whole item
    ("PutItem", "stamp-no-op-id"),  # the library's retries must keep the op id it drew
    ("PutItem", "create"),
    ("UpdateItem", "fail"),
    ("UpdateItem", "sum-stamp"),  # a sum-mode stamp: one conditional ADD
    ("DeleteItem", "delete"),
    ("BatchGetItem", "status_many"),
]


def _one_request(call: str, factory: TrackerFactory, injector: FaultInjector) -> None:
    """Make a tracker send (at least) one request through the faults with ``call`` and
    check its outcome. The chain it works on is set up with the faults off."""
    mode = "sum" if call == "sum-stamp" else "xor"
    setup = XorAckDynamoDB(factory.table, client=factory.client(), mode=mode)
    tag = "chain"
    edge = setup.new_edge()
    injector.enabled = False
    setup.create(tag, edge)
    injector.enabled = True
    # A cold cache: its stamp must read first.
    tracker = XorAckDynamoDB(factory.table, client=factory.client(), mode=mode, retry=factory.retry)
    if call == "status":
        assert tracker.status(tag).state == "pending"
    elif call in ("stamp", "stamp-no-op-id", "sum-stamp"):
        op_id = None if call == "stamp-no-op-id" else f"{tag}/finish"
        done = tracker.stamp(tag, finished=[edge], op_id=op_id)  # not TagAcked for its own write
        assert done.acked and done == (0 if call == "sum-stamp" else bytes(len(edge)))  # type: ignore[arg-type]
        status = tracker.status(tag)
        # Written once: xor create + stamp; sum create + ADD + the write that stores acked.
        assert (status.state, status.version) == ("acked", 3 if call == "sum-stamp" else 2)
    elif call == "create":
        root = new_stamp()
        created = tracker.create("fresh", root, op_id="fresh/create")
        assert created == root and not created.acked  # not TagExists: it was this call's own
        status = tracker.status("fresh")
        assert (status.state, status.stamp, status.version) == ("pending", root, 1)
    elif call == "fail":
        status = tracker.fail(tag, "boom")
        assert (status.state, status.reason) == ("failed", "boom")
        after = tracker.status(tag)
        assert (after.state, after.reason, after.version) == ("failed", "boom", 2)  # failed once
    elif call == "delete":
        tracker.delete(tag)
        with pytest.raises(TagNotFound):
            tracker.status(tag)
    else:
        assert tracker.status_many([tag, "absent-tag"])[tag].state == "pending"


@pytest.mark.parametrize("beyond_botocore", [False, True], ids=["within-botocore", "beyond-botocore"])
@pytest.mark.parametrize(("operation", "call"), REQUESTS, ids=[f"{o}-{c}" for o, c in REQUESTS])
@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_every_request_type_survives_every_fault_kind(
    moto_server: LocalDynamoDB, kind: str, operation: str, call: str, beyond_botocore: bool
) -> None:
    """The first requests of one type fail (once, or more times than botocore retries, so
    that the library's own retry has to take over); the call still does exactly its job.
    A stamp's PutItem is never resent by botocore (resend.py): once its response is lost,
    the library's retry reads the chain and finds the op, and sends no PutItem for a
    further fault to hit."""
    botocore_attempts = 2
    limit = botocore_attempts + 1 if beyond_botocore else 1
    injector = FaultInjector(FaultRates.only(kind, 1.0), operations=frozenset({operation}), limit=limit)
    table = unique_table("matrix")
    factory = TrackerFactory(moto_server.endpoint_url or "", table, injector, botocore_attempts)
    injector.enabled = False
    factory().create_table()
    _one_request(call, factory, injector)
    found_by_a_read = kind == "lost_response" and call in ("stamp", "stamp-no-op-id")
    injected = 1 if found_by_a_read else limit
    assert injector.injected[kind] == injected
    assert injector.by_operation[(kind, operation)] == injected


def test_low_retry_budget_escapes_only_typed_errors_and_restamping_converges(
    moto_server: LocalDynamoDB, seed: int
) -> None:
    """With RetryPolicy(max_attempts=2) and botocore at 1 attempt, races and faults do
    escape, but only as StaleLocalData or the original (transient) ClientError; stamping
    the failed ones again with the same op id completes every chain, consistently."""
    rng = random.Random(seed)
    injector = FaultInjector(FaultRates(throttle=0.15, server_error=0.15), seed=seed)
    table = unique_table("low-budget")
    tight = RetryPolicy(max_attempts=2, initial_wait=0.001, max_wait=0.005)
    factory = TrackerFactory(
        moto_server.endpoint_url or "", table, injector, botocore_attempts=1, retry=tight
    )
    reader = factory(RetryPolicy())
    reader.create_table()
    trees = make_trees(SIZE.low_budget_chains, rng, "low", SIZE.max_nodes)
    failed: list[tuple[Tree, int]] = []

    def remember(tree: Tree, node: int, exc: BaseException) -> None:
        failed.append((tree, node))

    result, truths = run_trees(trees, factory, threads=8, batch=len(trees), rng=rng, on_error=remember)
    kinds = Counter(type(e).__name__ for e in result.errors)
    assert result.errors, "the budget was meant to be too low"
    for exc in result.errors:
        assert isinstance(exc, (StaleLocalData, ClientError)), repr(exc)
        if isinstance(exc, ClientError):
            assert exc.response["Error"]["Code"] in {
                "ProvisionedThroughputExceededException",
                "ThrottlingException",
                "InternalServerError",
            }

    # Replay what failed, same op ids, with a sound budget (faults still on). A chain
    # whose create failed had none of its stamps tried: create it and run them all.
    patient = factory(RetryPolicy())
    escaped_on_replay = 0
    replay = [(t, [n]) for t, n in failed if n >= 0]
    for tree in {t.tag: t for t, n in failed if n < 0}.values():
        patient.create(tree.tag, tree.edges[0], op_id=f"{tree.tag}/create")
        replay.append((tree, list(range(tree.size))))
    for tree, nodes in replay:
        truth = truths[tree.tag]
        for n in nodes:
            before = truth.start(n)
            try:
                value = patient.stamp(tree.tag, tree.stamp(n), op_id=tree.op_id(n))
            except Exception:  # noqa: BLE001
                escaped_on_replay += 1
                continue
            truth.returned_value(n, value, before)
    settle(result, truths, reader)
    record_figures(
        "faults: retry budget too low",
        chains=result.chains,
        stamps=result.stamps,
        faults=dict(injector.injected),
        requests=sum(injector.sent.values()),
        lost_acks=result.verdict.lost_acks,
        false_acks=result.verdict.false_acks,
        corrupt=result.verdict.corrupt,
        escaped_errors=escaped_on_replay,
        typed_escapes=dict(kinds),
        max_attempts=result.max_attempts,
        seed=seed,
    )
    assert escaped_on_replay == 0
    assert (result.verdict.lost_acks, result.verdict.false_acks, result.verdict.corrupt) == (0, 0, 0), (
        result.verdict.problems[:10]
    )
    assert result.final_states == Counter({"acked": len(trees)}), result.not_acked[:5]
    for tree in trees:
        assert reader.status(tree.tag).stamp == bytes(16)


def test_a_lost_completing_write_is_not_applied_twice(moto_server: LocalDynamoDB) -> None:
    """The simplest form of the hazard, checked exactly: the write that completes a chain
    is applied, its response lost; botocore does not resend it (a stamp's write is sent
    once, resend.py) and the library's retry decides again: the chain stays acked and
    the call returns acked (a naive retry would XOR the edge back in)."""
    injector = FaultInjector(
        FaultRates.only("lost_response", 1.0), operations=frozenset({"PutItem"}), limit=1
    )
    table = unique_table("lost")
    factory = TrackerFactory(moto_server.endpoint_url or "", table, injector, BOTOCORE_ATTEMPTS)
    tracker = factory()
    tracker.create_table()
    root, child = new_stamp(), new_stamp()
    injector.enabled = False
    tracker.create("t", root)
    assert not tracker.stamp("t", xor(root, child)).acked
    injector.enabled = True
    assert tracker.stamp("t", child).acked
    assert injector.injected["lost_response"] == 1
    status = tracker.status("t")
    assert status.state == "acked" and status.stamp.acked


@pytest.mark.parametrize("completing", [True, False], ids=["completing", "midway"])
def test_a_stamp_without_op_id_lost_beyond_botocore_is_applied_once(
    moto_server: LocalDynamoDB, completing: bool
) -> None:
    """No op_id given: the library draws one. The write is applied and its response lost;
    botocore does not resend it (a stamp's write is sent once, resend.py), so the
    library's own retry takes over: it must retry under the same op id, find it applied,
    and return the value once applied; a completing stamp returns acked (a fresh op id
    per retry would apply it twice, or raise TagAcked for its own write)."""
    injector = FaultInjector(
        FaultRates(),
        operations=frozenset({"PutItem"}),  # the xor-mode stamp's write
        script=("lost_response",),
    )
    factory = TrackerFactory(moto_server.endpoint_url or "", unique_table("no-op-id"), injector, 2)
    tracker = factory()
    tracker.create_table()
    root, child = new_stamp(), new_stamp()
    injector.enabled = False
    tracker.create("t", root)
    assert not tracker.stamp("t", xor(root, child)).acked  # child is the one open edge
    injector.enabled = True
    delta = child if completing else new_stamp()
    tracker.stats.reset()
    value = tracker.stamp("t", delta)
    assert injector.injected == Counter({"lost_response": 1})
    assert tracker.stats.events.get("retries") == 1  # the library's own retry ran
    expected = xor(child, delta) if not completing else bytes(16)
    assert value == expected and value.acked is completing
    status = tracker.status("t")
    assert status.stamp == expected
    assert status.state == ("acked" if completing else "pending")
    item = moto_server.client().get_item(TableName=factory.table, Key={"tagID": {"S": "t"}})["Item"]
    assert int(item["version"]["N"]) == 3  # create, the first stamp, this one: once


def _statuses_setup(moto_server: LocalDynamoDB, injector: UnprocessedKeys, retry: RetryPolicy) -> Any:
    """A table with 130 chains in three states; the tracker whose client has ``injector``
    attached, and the tags."""
    table = unique_table("unprocessed")
    setup = XorAckDynamoDB(table, client=moto_server.client())
    setup.create_table()
    tags = [f"chain/{i:03d}" for i in range(130)]
    stamp = new_stamp()
    for tag in tags:
        setup.create(tag, stamp)
    setup.stamp(tags[1], stamp)
    setup.fail(tags[2], "bad input")
    reader = XorAckDynamoDB(table, client=injector.attach(moto_server.client()), retry=retry)
    return reader, tags


def test_status_many_asks_again_for_unprocessed_keys(moto_server: LocalDynamoDB, seed: int) -> None:
    """The first three BatchGetItem answers leave half their keys unprocessed; every
    retry asks for exactly the keys left over, and every status comes back."""
    injector = UnprocessedKeys(fraction=0.5, times=3, seed=seed)
    reader, tags = _statuses_setup(moto_server, injector, RetryPolicy(initial_wait=0.001, max_wait=0.01))
    wanted = [*tags, "missing/1", "missing/2"]
    statuses = reader.status_many(wanted)
    assert list(statuses) == tags
    assert [statuses[t].state for t in tags[:4]] == ["pending", "acked", "failed", "pending"]
    assert all(statuses[t].state == "pending" for t in tags[3:])
    assert len(injector.left) == 3
    assert reader.stats.requests["BatchGetItem"] == len(injector.asked) == 2 + 3  # 2 pages, 3 retries
    # Page 1 (100 keys) loses half three times; each retry asks for exactly what was left.
    assert [len(k) for k in injector.asked] == [100, 50, 25, 13, 32]
    assert injector.asked[1:4] == injector.left


@pytest.mark.parametrize("stubborn", [2, 3], ids=["last-attempt-succeeds", "budget-spent"])
def test_status_many_raises_batch_incomplete_when_keys_stay_unprocessed(
    moto_server: LocalDynamoDB, stubborn: int, seed: int
) -> None:
    """RetryPolicy(max_attempts=3): keys still unprocessed after the third answer raise
    BatchIncomplete (never a partial result); unprocessed twice, the third answer
    completes it."""
    injector = UnprocessedKeys(fraction=0.1, times=stubborn, seed=seed)
    reader, tags = _statuses_setup(
        moto_server, injector, RetryPolicy(max_attempts=3, initial_wait=0.001, max_wait=0.01)
    )
    if stubborn == 3:
        with expect(BatchIncomplete, None) as info:
            reader.status_many(tags[:50])
        assert f"{len(injector.left[-1])} keys still unprocessed" in str(info.value)
    else:
        assert list(reader.status_many(tags[:50])) == tags[:50]
    assert len(injector.asked) == 3 and len(injector.left) == stubborn
