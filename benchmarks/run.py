"""Run the suite: ``python -m benchmarks [--seconds S] [--process-stamps N]``.

The Spark word count at scale has its own run: ``python -m benchmarks.spark_scale``
(``make bench-spark``), which writes ``spark_results.{md,png,json}``.

Prints the tables, and writes ``results.md`` (for the README), ``results.png``,
``processes.png`` and ``results.json`` beside this file (or into ``--out``). Exit status
1 if any workload left a chain with a wrong value, or a chain finished by many processes
did not end acked with exactly one caller told so (the benchmarks double as a smoke test).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from xor_ack_dynamodb import DynamoDBLocal, XorAckDynamoDB

from . import processes, report, workloads
from .processes import ProcessPool, ProcessRun
from .report import Results, Target
from .server import ServerProcess
from .workloads import Measured

HERE = Path(__file__).resolve().parent
TABLE = "bench-acks"
ITEM_TAG = "wordcount/corpus/part-00000.txt"
#: The chains whose item sizes are read: a tag as long as the word count's, one per mode.
ITEM_TAGS = {"xor": ITEM_TAG, "sum": "wordcount/corpus/part-00001.txt"}
#: Alternating rounds of the limit and the uncontended stamp (their ratio is the figure).
ROUNDS = 3

#: The backends the process runs use, as the tables name them.
MOTO, DDBLOCAL = "moto server", "DynamoDB Local"
#: The process count at which the issue's targets are checked.
TARGET_PROCESSES = 32

Step = tuple[str, Callable[[], None]]


def _process_targets(r: Results) -> list[Target]:
    """Issue 10's targets: sum mode on one chain of 32 processes, and the item size."""
    targets: list[Target] = []
    for backend in (MOTO, DDBLOCAL):
        run = r.process_run(backend, "sum", TARGET_PROCESSES)
        xor = r.process_run(backend, "xor", TARGET_PROCESSES)
        if run is None:
            reason = r.process_pending.get(backend, "not run")
            targets.append(
                Target(f"{TARGET_PROCESSES} processes, one chain, sum mode ({backend})", reason, None)
            )
            continue
        beside = "" if xor is None else f"; xor mode: {xor.requests_per_stamp:.2f}"
        extra = run.total_requests - run.stamps
        targets.append(
            Target(
                f"{TARGET_PROCESSES} processes, one chain, sum mode ({backend}): ≤ 1.05 requests per stamp, "
                "trims and the completion write included",
                f"{run.requests_per_stamp:.3f} ({run.stamps} stamps, {extra} more requests: "
                f"{run.events.get('trims', 0)} trims, {run.events.get('trims_skipped', 0)} refused, "
                f"{run.events.get('completions', 0)} completion{beside})",
                run.requests_per_stamp <= 1.05,
                "a history write and a trim per 40 stamps past the first `max_ops` + 40 (48), one completion",
            )
        )
        ratio = run.p(0.99) / run.p(0.5)
        beside = "" if xor is None else f"; xor mode: {xor.p(0.99) / xor.p(0.5):.0f} ×"
        targets.append(
            Target(
                f"{TARGET_PROCESSES} processes, one chain, sum mode ({backend}): p99 ≤ 10 × p50",
                f"{ratio:.1f} × ({run.p(0.99):.0f} ms ÷ {run.p(0.5):.0f} ms{beside})",
                ratio <= 10,
                "queueing at the backend",
            )
        )
    largest = [s for s in r.sizes if s.get("largest")]
    if largest:
        s = largest[0]
        spare = 1024 - s["bytes"]
        targets.append(
            Target(
                f"sum-mode item at its largest (max_ops + 40 = {s['ops']} op ids, a {s['tag_bytes']}-byte "
                "tag): ≤ 1 KB, 1 WCU a write",
                f"{s['bytes']} bytes ({spare} to spare: tags up to {s['tag_bytes'] + spare} bytes fit)",
                s["bytes"] <= 1024,
                "14 bytes an op id (8-byte key, 4-byte payload hash, list overheads)",
            )
        )
    return targets


def _targets(r: Results) -> list[Target]:
    raw = r.raw1.rate
    quiet = r.one_chain[(1, "plain")]
    history = quiet.events.get("history_writes", 0)
    targets = [
        Target(
            "uncontended: 1.0 requests per stamp, besides one history write per 40 stamps",
            f"{(quiet.requests - history) / quiet.ops:.2f} + {history / quiet.ops:.3f} "
            f"({history} history writes for {quiet.ops} stamps)",
            quiet.requests - history <= quiet.ops,
            "each block of 40 op ids that leaves a chain's item is written to its history "
            "first (docs/concepts.md)",
        ),
        Target(
            "uncontended: stamp rate ≥ 0.85 × raw conditional-write rate",
            f"{quiet.rate / raw:.2f} × ({quiet.rate:.0f}/s ÷ {raw:.0f}/s)",
            quiet.rate / raw >= 0.85,
            "client-side CPU per stamp (validation, expression building, parsing) on top of the same request",
        ),
    ]
    plain8, combined8 = r.one_chain.get((8, "plain")), r.one_chain.get((8, "combined"))
    if plain8 is not None and combined8 is not None:
        targets += [
            Target(
                "8 threads, one chain, no combiner: ≤ 3 requests per stamp",
                f"{plain8.requests_per_op:.2f}",
                plain8.requests_per_op <= 3.0,
                "lost races: each costs one request (ALL_OLD spares the read)",
            ),
            Target(
                "8 threads, one chain, combiner: ≤ 0.5 requests per stamp",
                f"{combined8.requests_per_op:.2f}",
                combined8.requests_per_op <= 0.5,
                "batch size: at most one stamp per thread rides in a write",
            ),
            Target(
                "8 threads, one chain: combiner ≥ 3 × the stamps/s without it",
                f"{combined8.rate / plain8.rate:.1f} × ({combined8.rate:.0f}/s ÷ {plain8.rate:.0f}/s)",
                combined8.rate >= 3 * plain8.rate,
                "one write in flight per chain: a batch waits for the previous write",
            ),
        ]
    targets += _process_targets(r)
    for t in targets:
        if t.met:
            t.bound = ""
    return targets


class Bench:
    """One run of the suite: the steps, and what they found."""

    def __init__(self, args: argparse.Namespace, console: Console) -> None:
        self.args = args
        self.console = console
        self.threads = [int(t) for t in args.threads.split(",")]
        self.found: dict[str, Any] = {}
        self.rounds: dict[str, list[Measured]] = {}
        self.client: Any = None
        self.process_counts = [int(n) for n in args.processes.split(",")] if args.processes else []
        self.process_modes = args.process_modes.split(",")
        self.process_runs: list[ProcessRun] = []
        self.process_pending: dict[str, str] = {}
        self.pool: ProcessPool | None = None

    def log(self, m: Measured) -> None:
        self.console.log(
            f"{m.name} ({m.mode}) x{m.threads}: {m.rate:.0f}/s, {m.requests_per_op:.2f} requests/stamp, "
            f"p99 {m.percentile_ms(0.99):.1f} ms" + ("" if m.ok else "  [red]final value WRONG[/red]")
        )

    def measure(self, key: str, thunk: Callable[[], Measured]) -> Callable[[], None]:
        def step() -> None:
            self.found[key] = thunk()
            self.log(self.found[key])

        return step

    def alternate(
        self,
        key_a: str,
        run_a: Callable[[float], Measured],
        key_b: str,
        run_b: Callable[[float], Measured],
        last: bool,
    ) -> None:
        """One round of each of a pair; after the last, merge each side's rounds."""
        seconds = self.args.seconds * 2 / ROUNDS
        for key, run in ((key_a, run_a), (key_b, run_b)):
            self.rounds.setdefault(key, []).append(run(seconds))
            if last:
                self.found[key] = Measured.merge(self.rounds[key])
                self.log(self.found[key])

    def one_chain(self, threads: int, combined: bool) -> Measured:
        return workloads.stamps_on_one_chain(self.client, TABLE, threads, self.args.seconds, combined)

    def server_steps(self) -> list[Step]:
        """Steps on the embedded backend (``self.client`` is set when they run)."""
        top = max(self.threads)
        steps: list[Step] = []

        # Pairs measured in alternating rounds, merged: the machine's load (other
        # processes) drifts, and the ratio within each pair is the figure.
        pairs: list[tuple[str, str, Callable[[float], Measured], str, Callable[[float], Measured]]] = [
            (
                "limit and uncontended stamp()",
                "raw1",
                lambda s: workloads.raw_updates(self.client, TABLE, 1, s),
                "one/1/plain",
                lambda s: workloads.stamps_on_one_chain(self.client, TABLE, 1, s, False),
            ),
            (
                f"raw writes and stamp() on distinct chains, {top} threads",
                "raw_n",
                lambda s: workloads.raw_updates(self.client, TABLE, top, s),
                "distinct",
                lambda s: workloads.stamps_on_distinct_chains(self.client, TABLE, top, s),
            ),
        ]
        for label, key_a, run_a, key_b, run_b in pairs:
            for i in range(ROUNDS):
                step = partial(self.alternate, key_a, run_a, key_b, run_b, i == ROUNDS - 1)
                steps.append((f"{label}, round {i + 1}", step))
        for n in self.threads:
            for mode in ("plain", "combined"):
                if (n, mode) != (1, "plain"):  # measured with the limit
                    one = partial(self.one_chain, n, mode == "combined")
                    steps.append((f"one chain, {n} threads, {mode}", self.measure(f"one/{n}/{mode}", one)))
        steps.append(("item size of a chain, both modes", self.item_sizes))
        return steps

    def item_sizes(self) -> None:
        self.found["sizes"] = [
            size
            for mode in ("xor", "sum")
            for size in workloads.item_sizes(self.client, TABLE, ITEM_TAGS[mode], mode)
        ]

    def process_steps(self, backend: str, endpoint: Callable[[], str]) -> list[Step]:
        """One chain finished by N processes, xor then sum for each N, on ``backend``
        (whose endpoint is known when the steps run)."""
        steps: list[Step] = []
        for n in self.process_counts:
            for mode in self.process_modes:
                label = f"one chain, {n} processes, {mode} mode, {backend}"
                steps.append((label, partial(self.one_chain_processes, backend, endpoint, mode, n)))
        return steps

    def one_chain_processes(self, backend: str, endpoint: Callable[[], str], mode: str, n: int) -> None:
        if self.pool is None:  # started here, after the thread runs, so as not to disturb them
            self.pool = ProcessPool(max(self.process_counts), self.process_counts)
        # One writer makes as many stamps as the target's processes together, so that
        # its chain moves history blocks too.
        stamps = self.args.process_stamps * (TARGET_PROCESSES if n == 1 else 1)
        run = processes.one_chain_many_processes(self.pool, backend, endpoint(), TABLE, mode, n, stamps)
        self.process_runs.append(run)
        self.console.log(
            f"one chain, {n} processes, {mode} mode, {backend}: {run.rate:.0f} stamps/s, "
            f"{run.requests_per_stamp:.3f} requests/stamp, "
            f"p50 {run.p(0.5):.0f} ms, p99 {run.p(0.99):.0f} ms, "
            f"{run.events.get('conflicts', 0)} conflicts, {run.events.get('trims', 0)} trims, "
            f"largest item {run.max_item_bytes} bytes"
            + ("" if run.ok else f"  [red]NOT OK: {'; '.join(run.problems[:3])}[/red]")
        )

    def other_steps(self) -> list[Step]:
        """Steps after the backend is stopped."""
        return [
            (
                f"MemoryAck, {self.args.chains:,} chains",
                lambda: self.found.__setitem__("memory", workloads.memory_ack_peak(self.args.chains)),
            )
        ]

    def results(self) -> Results:
        one_chain = {}
        for key, m in self.found.items():
            if key.startswith("one/"):
                _, n, mode = key.split("/")
                one_chain[(int(n), mode)] = m
        results = Results(
            raw1=self.found["raw1"],
            raw_n=self.found["raw_n"],
            one_chain=one_chain,
            distinct=self.found["distinct"],
            memory=self.found["memory"],
            sizes=self.found["sizes"],
            tag=ITEM_TAG,
            targets=[],
            processes=self.process_runs,
            process_pending=self.process_pending,
            process_stamps=self.args.process_stamps,
        )
        results.targets = _targets(results)
        return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="length of each timed workload (default 3)"
    )
    parser.add_argument(
        "--threads", default="1,2,4,8,16", help="thread counts on one chain (default 1,2,4,8,16)"
    )
    parser.add_argument("--chains", type=int, default=100_000, help="open chains in the MemoryAck figure")
    parser.add_argument(
        "--processes",
        default=",".join(map(str, processes.PROCESS_COUNTS)),
        help="process counts finishing one chain, xor and sum mode (default 8,16,32,64; '' for none)",
    )
    parser.add_argument(
        "--process-stamps",
        type=int,
        default=10,
        help="stamps each process makes on the shared chain (default 10)",
    )
    parser.add_argument(
        "--process-modes",
        default="xor,sum",
        help="chain modes of the process runs (default xor,sum; 'sum' for sum mode's cost alone)",
    )
    parser.add_argument(
        "--no-ddblocal", action="store_true", help="run the process workloads on the moto server only"
    )
    parser.add_argument("--out", type=Path, default=HERE, help="where results.{md,png,json} go")
    args = parser.parse_args(argv)
    if "1" not in args.threads.split(","):
        parser.error("--threads must include 1 (the uncontended stamp)")
    if not args.process_modes or not set(args.process_modes.split(",")) <= {"xor", "sum"}:
        parser.error("--process-modes takes xor, sum or xor,sum")
    if args.process_stamps < 1:
        parser.error("--process-stamps must be at least 1")
    console = Console()
    if not console.is_terminal:  # a log file or a pipe: wide enough for the tables
        console = Console(width=190)
    bench = Bench(args, console)

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        endpoints: dict[str, str] = {}
        server_steps = bench.server_steps() + bench.process_steps(MOTO, lambda: endpoints[MOTO])
        ddb_steps = [] if args.no_ddblocal else bench.process_steps(DDBLOCAL, lambda: endpoints[DDBLOCAL])
        other_steps = bench.other_steps()
        task = progress.add_task(
            "starting the embedded backend", total=len(server_steps) + len(ddb_steps) + len(other_steps)
        )

        def run(steps: list[Step]) -> None:
            for description, step in steps:
                progress.update(task, description=description)
                step()
                progress.advance(task)

        try:
            with ServerProcess() as server:
                endpoints[MOTO] = server.endpoint_url
                bench.client = workloads.make_client(server.endpoint_url)
                XorAckDynamoDB(TABLE, client=bench.client).create_table()
                run(server_steps)
            if args.no_ddblocal:
                bench.process_pending[DDBLOCAL] = "left out (--no-ddblocal)"
            elif ddb_steps:
                progress.update(task, description="starting DynamoDB Local")
                try:
                    ddb = DynamoDBLocal().start()
                except Exception as exc:  # noqa: BLE001 - no java or no jar: say so, measure the rest
                    bench.process_pending[DDBLOCAL] = (
                        f"DynamoDB Local did not start ({exc}); `make dynamodb-local`"
                    )
                    progress.advance(task, len(ddb_steps))
                else:
                    try:
                        endpoints[DDBLOCAL] = ddb.endpoint_url or ""
                        XorAckDynamoDB(TABLE, client=ddb.client()).create_table()
                        run(ddb_steps)
                    finally:
                        ddb.stop()
        finally:
            if bench.pool is not None:
                bench.pool.close()
        run(other_steps)

    results = bench.results()
    for table in report.rich_tables(results):
        console.print(table)
    environment = (
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs shared with other work, "
        f"moto server in a child process, {args.seconds:g} s per timed workload, 16-byte stamps; "
        f"process runs: {args.process_stamps} stamps a process, on the moto server and on DynamoDB Local"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(report.markdown(results, environment), encoding="utf-8")
    report.plot(results, args.out / "results.png")
    if results.processes:
        report.plot_processes(results, args.out / "processes.png")
    runs = [m.summary() for m in bench.found.values() if isinstance(m, Measured)]
    document = {
        "environment": environment,
        "runs": runs,
        "processes": [run.summary() for run in results.processes],
        "process_pending": results.process_pending,
        "memory": results.memory,
        "item_sizes": results.sizes,
        "targets": [t.__dict__ for t in results.targets],
    }
    (args.out / "results.json").write_text(json.dumps(document, indent=2, default=str), encoding="utf-8")
    console.print(f"wrote {args.out / 'results.md'}, {args.out / 'results.png'}, {args.out / 'results.json'}")
    return 0 if all(run["ok"] for run in runs) and all(r.ok for r in results.processes) else 1
