"""One chain finished by many processes: xor mode and sum mode side by side.

A fan-out as a serverless pipeline runs it: the root's work starts ``processes x
stamps`` children with one stamp; then each child is finished by one stamp from one of
``processes`` worker processes, each stamp with an op id the library draws (nothing
to check but its own copies: the floor of the contention cost) or, with ``named``, with
an op id of its own checked from the root stamp's position (a serverless child's stamp:
the check its guard carries, and the history reads once the chain's blocks move).
Every worker is spawned (not forked: its own interpreter, as a Lambda function is its
own process), builds its own client and tracker from an
:class:`~xor_ack_dynamodb.AckConfig` as a function would, and waits at a barrier; the
barrier releases them all at once, and each then stamps its children one after the
other as fast as it can. The in-process combiner cannot help here: no two stamps share
a process.

The workers are started once (:class:`ProcessPool`) and serve every run, on every
backend; each run gets new trackers (cold caches: a worker's first xor stamp reads) on
clients kept per endpoint. A botocore hook on each client meters what the run cost:
the write and read capacity units the backend reported (DynamoDB Local computes them
from item sizes, as AWS does; moto reports flat figures), and the size of the chain's
item after every write, by AWS's rules (:mod:`.itemsize`).
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any

from .itemsize import WRITES, ItemMeter

__all__ = ["PROCESS_COUNTS", "ProcessPool", "ProcessRun", "one_chain_many_processes", "percentile_ms"]

#: Processes finishing one chain, by default.
PROCESS_COUNTS = (1, 8, 16, 32, 64)
#: The workers' HTTP read timeout, in seconds (see :func:`_config`).
READ_TIMEOUT = 120.0
#: How long any party waits at the barrier or for a result before the run is abandoned.
_PATIENCE = 900.0
_runs = itertools.count()


def percentile_ms(latencies: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``latencies`` (seconds), in milliseconds (NaN for none)."""
    if not latencies:
        return float("nan")
    ordered = sorted(latencies)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass(frozen=True)
class Job:
    """What one worker does in one run: finish ``edges`` on ``tag``, one stamp each."""

    endpoint_url: str
    table: str
    mode: str
    tag: str
    edges: tuple[bytes | int, ...]
    processes: int  # the run's size: which barrier to wait at
    after: str | None = None  # named op ids checked from this position (None: drawn op ids)


@dataclass
class Part:
    """What one worker saw in one run."""

    index: int
    latencies: list[float] = field(default_factory=list)
    acked: int = 0  # stamps that returned acked (exactly one, over all workers)
    failed: int = 0  # calls that spent the retry budget (StaleLocalData) and were made again
    requests: dict[str, int] = field(default_factory=dict)  # botocore's resends included
    events: dict[str, int] = field(default_factory=dict)
    write_units: float = 0.0
    read_units: float = 0.0
    writes_ok: int = 0
    item_bytes: list[int] = field(default_factory=list)  # the item's size after each write
    item_ops: int = 0  # the most op ids seen in the item after a write
    # For each stamp: the stamps of other processes that landed since this process's view
    # of the chain (-1: no view yet), and the history reads the stamp made.
    stale: list[tuple[int, int]] = field(default_factory=list)
    started: float = 0.0
    finished: float = 0.0
    error: str | None = None


def _config(endpoint_url: str, table: str, mode: str, max_ops: int = 8) -> Any:
    """What a function is configured with: the library's defaults, but for the HTTP read
    timeout. With dozens of processes on two cores a local server queues requests for
    seconds, and the default 5 s read timeout (sized for DynamoDB's milliseconds) would
    turn that queueing into botocore resends; the runs measure contention, not that."""
    from xor_ack_dynamodb import AckConfig, RetryPolicy
    from xor_ack_dynamodb.testing.moto_server import LOCAL_KEY_ID, LOCAL_REGION, LOCAL_SECRET

    return AckConfig(
        table=table,
        endpoint_url=endpoint_url,
        region=LOCAL_REGION,
        aws_access_key_id=LOCAL_KEY_ID,
        aws_secret_access_key=LOCAL_SECRET,
        mode=mode,  # type: ignore[arg-type]
        max_ops=max_ops,
        retry=RetryPolicy(read_timeout=READ_TIMEOUT),
    )


def _stamp_all(index: int, job: Job, clients: dict[str, tuple[Any, ItemMeter]], barrier: Barrier) -> Part:
    from xor_ack_dynamodb import XorAckDynamoDB
    from xor_ack_dynamodb.errors import StaleLocalData
    from xor_ack_dynamodb.stamps import Position
    from xor_ack_dynamodb.stores.dynamodb.clients import client_for

    part = Part(index)
    tracker: Any = None
    try:
        config = _config(job.endpoint_url, job.table, job.mode)
        if job.endpoint_url not in clients:
            client = client_for(config)
            clients[job.endpoint_url] = (client, ItemMeter(client))
        client, meter = clients[job.endpoint_url]
        tracker = XorAckDynamoDB.from_config(config, client)
        # Open the connection (as a warm function would have it); the tracker's cache
        # stays cold, as a new function's is.
        client.describe_table(TableName=job.table)
        meter.reset()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, after the barrier
        part.error = f"setup: {exc!r}"
    barrier.wait(_PATIENCE)
    part.started = time.monotonic()
    if part.error is not None:
        return part
    after = None if job.after is None else Position.parse(job.after)
    try:
        for edge in job.edges:
            began = time.perf_counter()
            view = tracker.driver.cache.get(job.tag)
            reads = tracker.stats.events.get("history_reads", 0)
            while True:
                try:
                    if after is None:  # an op id the library draws: nothing to check but its own copies
                        value = tracker.stamp(job.tag, finished=[edge])
                    else:  # a serverless child's: named, checked from its parent's position
                        value = tracker.stamp(job.tag, finished=[edge], op_id=f"edge:{edge!r}", after=after)
                    break
                except StaleLocalData:  # the budget was spent on lost races: nothing of this
                    part.failed += 1  # call landed (its own lost writes it decides itself)
            part.latencies.append(time.perf_counter() - began)
            part.acked += bool(value.acked)
            since = -1 if view is None or value.position is None else value.position.seq - view.seq - 1
            part.stale.append((since, tracker.stats.events.get("history_reads", 0) - reads))
    except Exception as exc:  # noqa: BLE001
        part.error = repr(exc)
    part.finished = time.monotonic()
    part.requests = tracker.stats.requests
    part.events = tracker.stats.events
    part.write_units, part.read_units, part.writes_ok = meter.write_units, meter.read_units, meter.writes_ok
    part.item_bytes, part.item_ops = meter.item_bytes, meter.item_ops
    return part


def _serve(index: int, conn: Connection, barriers: dict[int, Barrier]) -> None:
    """A worker: run jobs until it is sent None."""
    clients: dict[str, tuple[Any, ItemMeter]] = {}
    while True:
        job = conn.recv()
        if job is None:
            return
        conn.send(_stamp_all(index, job, clients, barriers[job.processes]))


class ProcessPool:
    """``size`` spawned worker processes, and one barrier per run size in ``counts``
    (barriers are inherited at spawn: they cannot travel through a pipe). Context
    manager."""

    def __init__(self, size: int, counts: Sequence[int]) -> None:
        if max(counts) > size:
            raise ValueError("a run cannot use more processes than the pool holds")
        context = mp.get_context("spawn")
        self.barriers = {n: context.Barrier(n + 1) for n in sorted(set(counts))}
        self.workers: list[tuple[Any, Connection]] = []
        for index in range(size):
            mine, theirs = context.Pipe()
            process = context.Process(target=_serve, args=(index, theirs, self.barriers), daemon=True)
            process.start()
            theirs.close()
            self.workers.append((process, mine))

    def run(self, jobs: list[Job]) -> list[Part]:
        """Hand one job to each of the first ``len(jobs)`` workers, release them together
        (the parent is the barrier's last party) and collect what each saw."""
        workers = self.workers[: len(jobs)]
        for (_, conn), job in zip(workers, jobs, strict=True):
            conn.send(job)
        self.barriers[len(jobs)].wait(_PATIENCE)
        parts: list[Part] = []
        for _, conn in workers:
            if not conn.poll(_PATIENCE):
                raise RuntimeError("a worker process did not report within the patience limit")
            parts.append(conn.recv())
        return parts

    def close(self) -> None:
        for _, conn in self.workers:
            try:
                conn.send(None)
            except OSError:
                pass
        for process, conn in self.workers:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join()
            conn.close()
        self.workers = []

    def __enter__(self) -> ProcessPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class ProcessRun:
    """One chain finished by ``processes`` processes."""

    backend: str
    mode: str
    processes: int
    stamps: int  # the finishing stamps (the root's create and fan-out stamp not counted)
    seconds: float  # from the barrier's release to the last worker's last stamp
    named: bool = False  # op ids named and checked from the root's position (else drawn)
    window: int = 8  # the chain's max_ops (its creator's; the workers keep the chain's)
    latencies: list[float] = field(repr=False, default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    acked_returns: int = 0
    write_units: float = 0.0  # reported for the successful writes
    read_units: float = 0.0
    writes_ok: int = 0
    item_bytes: list[int] = field(repr=False, default_factory=list)
    max_ops: int = 0
    stale: list[tuple[int, int]] = field(repr=False, default_factory=list)  # see Part.stale
    final_state: str = ""
    ok: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    @property
    def rate(self) -> float:
        return self.stamps / self.seconds if self.seconds > 0 else 0.0

    @property
    def requests_per_stamp(self) -> float:
        return self.total_requests / self.stamps if self.stamps else float("nan")

    @property
    def refused_writes(self) -> int:
        """Write requests that did not succeed: lost races, refused trims."""
        return sum(self.requests.get(op, 0) for op in WRITES) - self.writes_ok

    @property
    def wcu_per_stamp(self) -> float:
        """Write units a stamp: those the backend reported for the successful writes, and
        one for each refused write (AWS bills a write whose condition fails, at least one
        unit; its error carries no figure)."""
        return (self.write_units + self.refused_writes) / self.stamps if self.stamps else float("nan")

    def p(self, q: float) -> float:
        return percentile_ms(self.latencies, q)

    @property
    def max_item_bytes(self) -> int:
        return max(self.item_bytes, default=0)

    @property
    def writes_over_1kb(self) -> int:
        return sum(1 for size in self.item_bytes if size > 1024)

    def staleness(self) -> dict[str, int]:
        """How stale the processes' views were, and which stamps read history: with no
        view (a process's first stamp), with a view more than ``window`` stamps old
        (where a trim can have passed it), within the window (none should)."""
        older = [s for s in self.stale if s[0] > self.window]
        within = [s for s in self.stale if 0 <= s[0] <= self.window]
        gaps = sorted(s[0] for s in self.stale if s[0] >= 0)
        return {
            "median_since_view": gaps[len(gaps) // 2] if gaps else 0,
            "max_since_view": gaps[-1] if gaps else 0,
            "no_view": sum(1 for s in self.stale if s[0] < 0),
            "no_view_reads": sum(s[1] for s in self.stale if s[0] < 0),
            "over_window": len(older),
            "over_window_reads": sum(s[1] for s in older),
            "within_window_reads": sum(s[1] for s in within),
        }

    def summary(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "mode": self.mode,
            "processes": self.processes,
            "stamps": self.stamps,
            "named": self.named,
            "window": self.window,
            "seconds": round(self.seconds, 3),
            "rate": round(self.rate, 1),
            "requests": dict(self.requests),
            "requests_per_stamp": round(self.requests_per_stamp, 4),
            "p50_ms": round(self.p(0.50), 2),
            "p99_ms": round(self.p(0.99), 2),
            "events": dict(self.events),
            "failed": self.failed,
            "acked_returns": self.acked_returns,
            "write_units": self.write_units,
            "read_units": self.read_units,
            "writes_ok": self.writes_ok,
            "refused_writes": self.refused_writes,
            "wcu_per_stamp": round(self.wcu_per_stamp, 4),
            "max_item_bytes": self.max_item_bytes,
            "max_ops": self.max_ops,
            "writes_sized": len(self.item_bytes),
            "writes_over_1kb": self.writes_over_1kb,
            "staleness": self.staleness(),
            "final_state": self.final_state,
            "ok": self.ok,
            "problems": self.problems,
        }


def one_chain_many_processes(
    pool: ProcessPool,
    backend: str,
    endpoint_url: str,
    table: str,
    mode: str,
    processes: int,
    stamps: int,
    named: bool = False,
    max_ops: int = 8,
) -> ProcessRun:
    """Create a chain, start ``processes x stamps`` children with one stamp, and have
    ``processes`` workers of ``pool`` finish ``stamps`` children each: with op ids the
    library draws, or (``named``) with an op id each, checked from the root stamp's
    position (a serverless child's stamp); the chain is created with window ``max_ops``
    (a chain keeps its creator's). The run is ``ok`` when every stamp returned,
    exactly one returned ``acked``, and the chain reads ``acked`` holding zero."""
    from xor_ack_dynamodb import XorAckDynamoDB

    tracker = XorAckDynamoDB.from_config(_config(endpoint_url, table, mode, max_ops))
    tag = f"fan-out/{backend}/{mode}/{processes}/{next(_runs)}"
    root = tracker.new_edge()
    children = [tracker.new_edge() for _ in range(processes * stamps)]
    tracker.create(tag, root)
    started = tracker.stamp(tag, finished=[root], started=children)
    after = str(started.position) if named and started.position is not None else None
    plain = [bytes(c) if isinstance(c, bytes) else int(c) for c in children]
    jobs = [
        Job(endpoint_url, table, mode, tag, tuple(plain[i * stamps : (i + 1) * stamps]), processes, after)
        for i in range(processes)
    ]
    parts = pool.run(jobs)
    run = ProcessRun(backend, mode, processes, processes * stamps, 0.0, named=named, window=max_ops)
    run.seconds = max(p.finished for p in parts) - min(p.started for p in parts)
    for part in parts:
        run.latencies += part.latencies
        run.requests.update(part.requests)
        run.events.update(part.events)
        run.failed += part.failed
        run.acked_returns += part.acked
        run.write_units += part.write_units
        run.read_units += part.read_units
        run.writes_ok += part.writes_ok
        run.item_bytes += part.item_bytes
        run.max_ops = max(run.max_ops, part.item_ops)
        run.stale += part.stale
        if part.error is not None:
            run.problems.append(f"worker {part.index}: {part.error}")
    status = tracker.status(tag)
    run.final_state = status.state
    if len(run.latencies) != run.stamps:
        run.problems.append(f"{len(run.latencies)} of {run.stamps} stamps returned")
    if run.acked_returns != 1:
        run.problems.append(f"{run.acked_returns} stamps returned acked (exactly one should)")
    if status.state != "acked" or not status.value.acked:
        run.problems.append(f"the chain reads {status.state} holding {status.value!r}")
    run.ok = not run.problems
    return run
