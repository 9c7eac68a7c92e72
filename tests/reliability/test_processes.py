"""Process faults and the hot chain: worker processes (and threads) stamping over HTTP.

Workers are ``python -m tests.reliability.worker`` processes talking to the session's
moto server; they are killed with SIGKILL at random points of their progress, in the
middle of requests as often as between them.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import reduce

import pytest

from xor_ack_dynamodb import LocalDynamoDB, RetryPolicy, XorAckDynamoDB, new_stamp, xor
from xor_ack_dynamodb.errors import TagExpired

from .faults import FaultInjector, FaultRates
from .procs import Worker
from .runner import TrackerFactory, make_trees, unique_table
from .sizes import SIZE, record_figures
from .workload import Tree

pytestmark = pytest.mark.server

TTL = 600


def _jobs(trees: list[Tree]) -> list[tuple[str, str, str]]:
    return [(t.tag, t.stamp(n).hex(), t.op_id(n)) for t in trees for n in range(t.size)]


def _check_chain(tree: Tree, reader: XorAckDynamoDB, sure: set[int], maybe: set[int]) -> str | None:
    """None if the stored chain is what some set of applied stamps between ``sure`` and
    ``sure | maybe`` gives, and its state agrees with that set's open edges."""
    status = reader.status(tree.tag)
    candidates = sorted(maybe - sure)
    for mask in range(1 << len(candidates)):
        applied = sure | {n for i, n in enumerate(candidates) if mask >> i & 1}
        open_edges = tree.open_edges(applied)
        value = reduce(lambda a, n: a ^ int.from_bytes(tree.edges[n], "big"), open_edges, 0)
        if value.to_bytes(16, "big") == status.stamp:
            if status.state == "acked" and open_edges:
                return f"{tree.tag}: acked with open edges {sorted(open_edges)}"
            if not open_edges and status.state != "acked":
                return f"{tree.tag}: every edge finished but state is {status.state}"
            return None
    return f"{tree.tag}: stored value matches no set of applied stamps (corrupt)"


def test_sigkilled_workers_replayed_complete_or_expire(moto_server: LocalDynamoDB, seed: int) -> None:
    """Rounds of two workers stamping the same chains' jobs; in every round but the last,
    each is SIGKILLed mid-work: once it has returned a random number of its stamps (at
    most two thirds), 0-3 ms later, so inside its next stamp, before, during or after its
    request. Kill moments follow the workers' progress, not the clock, so they land in
    the middle of the work on a fast machine as on a slow one."""
    rng = random.Random(seed)
    endpoint = moto_server.endpoint_url or ""
    table = unique_table("kill")
    factory = TrackerFactory(endpoint, table, FaultInjector(FaultRates(), enabled=False))
    reader = factory()
    reader.create_table()
    trees = make_trees(SIZE.kill_chains, rng, "kill", SIZE.max_nodes)
    for tree in trees:
        reader.create(tree.tag, tree.edges[0])
    abandoned = trees[: max(2, len(trees) // 4)]  # stamped in round 0 only, then left to expire
    live = trees[len(abandoned) :]
    by_op = {t.op_id(n): (t, n) for t in trees for n in range(t.size)}
    sure: dict[str, set[int]] = {t.tag: set() for t in trees}
    maybe: dict[str, set[int]] = {t.tag: set() for t in trees}
    kills = 0
    killed_mid_work = 0
    problems: list[str] = []  # a chain acked early, or corrupt
    errors: list[str] = []  # errors that escaped a worker's stamp()

    for round_ in range(SIZE.kill_rounds + 1):
        last = round_ == SIZE.kill_rounds
        jobs = _jobs(trees if round_ == 0 else live)
        rng.shuffle(jobs)
        half = len(jobs) // 2
        workers = [Worker(endpoint, table, part) for part in (jobs[:half], jobs[half:])]
        for w in workers:
            w.wait_ready()
        killers = []
        if not last:
            for w in workers:
                at = rng.randint(1, max(1, 2 * len(w.jobs) // 3))
                killers.append(threading.Thread(target=_kill_after, args=(w, at, rng.uniform(0, 0.003))))
        for k in killers:
            k.start()
        for w in workers:
            w.go()
        for k in killers:
            k.join()
        for w in workers:
            w.wait()
            kills += w.killed
            killed_mid_work += w.killed_mid_work()
            for line in w.lines:
                tree, node = by_op[line["op"]]
                if line["ok"]:
                    sure[tree.tag].add(node)
                else:
                    errors.append(f"{line['op']}: {line['error']}")
            if (op := w.in_flight()) is not None:
                tree, node = by_op[op]
                maybe[tree.tag].add(node)
        # After every round, killed or not: never acked early, never corrupt.
        for tree in trees:
            if (problem := _check_chain(tree, reader, sure[tree.tag], maybe[tree.tag])) is not None:
                problems.append(problem)

    # A tracker whose clock is past every deadline and the skew margin (5 s).
    later = XorAckDynamoDB(
        table, client=factory.client(), clock=lambda: time.time() + reader.ttl_seconds + 60
    )
    states = later.status_many([t.tag for t in trees])
    expired = [t.tag for t in abandoned if states[t.tag].state == "expired"]
    with pytest.raises(TagExpired):
        later.stamp(abandoned[0].tag, abandoned[0].stamp(0), op_id="late")
    record_figures(
        "process kills (SIGKILL)",
        chains=len(trees),
        stamps=sum(t.size for t in trees),
        faults={"sigkill": kills},
        killed_mid_work=killed_mid_work,
        seed=seed,
        lost_acks=sum(1 for t in live if states[t.tag].state != "acked"),
        false_acks=sum(1 for p in problems if "acked with open" in p),
        corrupt=sum(1 for p in problems if "corrupt" in p),
        escaped_errors=len(errors),
        expired_reported=len(expired),
    )
    assert problems == []
    assert errors == []
    assert killed_mid_work == kills == 2 * SIZE.kill_rounds  # both workers, every round, mid-work
    assert all(states[t.tag].state == "acked" and states[t.tag].stamp.acked for t in live)
    # Abandoned chains were stamped only partly (a whole tree before the kills of round
    # 0 is possible): an incomplete one reads expired, never acked.
    for tree in abandoned:
        complete = sure[tree.tag] | maybe[tree.tag] == set(range(tree.size))
        assert states[tree.tag].state == ("acked" if complete and states[tree.tag].stamp.acked else "expired")
    assert expired


def _kill_after(worker: Worker, stamps: int, delay: float) -> None:
    """SIGKILL ``worker`` ``delay`` seconds after it has returned ``stamps`` stamps."""
    if worker.wait_for_lines(stamps):
        time.sleep(delay)
        worker.kill()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@pytest.mark.parametrize("backend", ["moto", "dynalite", "ddblocal"])
def test_hot_chain_many_threads_and_processes(request: pytest.FixtureRequest, backend: str) -> None:
    """One chain, its root fanned out to many children; 16 threads here and 4 worker
    processes stamp the children at once. Budget: RetryPolicy(max_attempts=400,
    max_seconds=600), as a hot chain is expected to lose many races. On dynalite, which
    returns no item on a failed condition, every lost race costs a consistent read."""
    server = request.getfixturevalue("moto_server" if backend == "moto" else backend)
    endpoint = server.endpoint_url or ""
    table = unique_table("hot")
    meter = FaultInjector(FaultRates(), enabled=False)
    budget = RetryPolicy(max_attempts=400, max_seconds=600)
    factory = TrackerFactory(endpoint, table, meter, retry=budget)
    setup = factory()
    setup.create_table()
    root = new_stamp()
    children = [new_stamp() for _ in range(SIZE.hot_children)]
    setup.create("hot", root)
    assert not setup.stamp("hot", xor(root, *children), op_id="root").acked

    jobs = [("hot", c.hex(), f"child-{i}") for i, c in enumerate(children)]
    random.Random(3).shuffle(jobs)
    writers = SIZE.hot_threads + SIZE.hot_processes
    shares = [jobs[i::writers] for i in range(writers)]
    workers = [
        Worker(endpoint, table, share, max_attempts=budget.max_attempts, max_seconds=budget.max_seconds)
        for share in shares[SIZE.hot_threads :]
    ]
    for w in workers:
        w.wait_ready()
    results: list[tuple[bool, int, float]] = []  # (acked, requests, seconds)
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(SIZE.hot_threads + 1)

    def thread(share: list[tuple[str, str, str]]) -> None:
        tracker = factory()
        start.wait()
        for tag, hex_, op in share:
            sent = meter.requests_on_this_thread()
            t0 = time.perf_counter()
            try:
                value = tracker.stamp(tag, bytes.fromhex(hex_), op_id=op)
            except Exception as exc:  # noqa: BLE001
                with lock:
                    errors.append(exc)
                continue
            with lock:
                results.append(
                    (value.acked, meter.requests_on_this_thread() - sent, time.perf_counter() - t0)
                )

    began = time.perf_counter()
    with ThreadPoolExecutor(SIZE.hot_threads) as pool:
        futures = [pool.submit(thread, share) for share in shares[: SIZE.hot_threads]]
        start.wait()
        for w in workers:
            w.go()
        for f in futures:
            f.result()
    for w in workers:
        assert w.wait() == 0
        for line in w.lines:
            if line["ok"]:
                results.append((line["acked"], line["requests"], line["seconds"]))
            else:
                errors.append(RuntimeError(line["error"]))
    elapsed = time.perf_counter() - began

    attempts = [r for _, r, _ in results]
    latencies = [s for _, _, s in results]
    status = setup.status("hot")
    figures = dict(
        chains=1,
        stamps=len(children) + 1,
        requests=sum(attempts),
        writers=f"{SIZE.hot_threads} threads + {SIZE.hot_processes} processes",
        lost_acks=int(status.state != "acked"),
        false_acks=sum(a for a, _, _ in results) - 1
        if status.state == "acked"
        else sum(a for a, _, _ in results),
        escaped_errors=len(errors),
        max_attempts=max(attempts, default=0),
        mean_attempts=round(statistics.fmean(attempts), 2) if attempts else None,
        p50_ms=round(1000 * _percentile(latencies, 0.5), 1) if latencies else None,
        p99_ms=round(1000 * _percentile(latencies, 0.99), 1) if latencies else None,
        stamps_per_second=round(len(results) / elapsed, 1),
    )
    record_figures(f"hot chain ({backend})", **figures)
    print(f"\nhot chain: {figures}")
    assert errors == []
    assert len(results) == len(children)
    assert sum(a for a, _, _ in results) == 1  # exactly one stamp saw the chain reach zero...
    assert status.state == "acked" and status.stamp.acked  # ...and it is acked
