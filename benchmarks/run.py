"""Run the suite: ``python -m benchmarks [--seconds S]``.

The Spark word count at scale has its own run: ``python -m benchmarks.spark_scale``
(``make bench-spark``), which writes ``spark_results.{md,png,json}``.

Prints the tables, and writes ``results.md`` (for the README), ``results.png`` and
``results.json`` beside this file (or into ``--out``). Exit status 1 if any workload
left a chain with a wrong value (the benchmarks double as a smoke test).
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

from xor_ack_dynamodb import XorAckDynamoDB

from . import report, workloads
from .report import Results, Target
from .server import ServerProcess
from .workloads import Measured

HERE = Path(__file__).resolve().parent
TABLE = "bench-acks"
ITEM_TAG = "wordcount/corpus/part-00000.txt"
#: Alternating rounds of the limit and the uncontended stamp (their ratio is the figure).
ROUNDS = 3

Step = tuple[str, Callable[[], None]]


def _targets(r: Results) -> list[Target]:
    raw = r.raw1.rate
    quiet = r.one_chain[(1, "plain")]
    targets = [
        Target(
            "uncontended: 1.0 requests per stamp",
            f"{quiet.requests_per_op:.2f}",
            quiet.requests_per_op <= 1.0 + 1e-9,
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
        steps.append(
            (
                "item size of a chain",
                lambda: self.found.__setitem__("sizes", workloads.item_sizes(self.client, TABLE, ITEM_TAG)),
            )
        )
        return steps

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
    parser.add_argument("--out", type=Path, default=HERE, help="where results.{md,png,json} go")
    args = parser.parse_args(argv)
    if "1" not in args.threads.split(","):
        parser.error("--threads must include 1 (the uncontended stamp)")
    console = Console()
    if not console.is_terminal:  # a log file or a pipe: wide enough for the tables
        console = Console(width=150)
    bench = Bench(args, console)

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        server_steps, other_steps = bench.server_steps(), bench.other_steps()
        task = progress.add_task("starting the embedded backend", total=len(server_steps) + len(other_steps))
        with ServerProcess() as server:
            bench.client = workloads.make_client(server.endpoint_url)
            XorAckDynamoDB(TABLE, client=bench.client).create_table()
            for description, step in server_steps:
                progress.update(task, description=description)
                step()
                progress.advance(task)
        for description, step in other_steps:
            progress.update(task, description=description)
            step()
            progress.advance(task)

    results = bench.results()
    for table in report.rich_tables(results):
        console.print(table)
    environment = (
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs shared with other work, "
        f"moto server in a child process, {args.seconds:g} s per timed workload, 16-byte stamps"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(report.markdown(results, environment), encoding="utf-8")
    report.plot(results, args.out / "results.png")
    runs = [m.summary() for m in bench.found.values() if isinstance(m, Measured)]
    document = {
        "environment": environment,
        "runs": runs,
        "memory": results.memory,
        "item_sizes": results.sizes,
        "targets": [t.__dict__ for t in results.targets],
    }
    (args.out / "results.json").write_text(json.dumps(document, indent=2, default=str), encoding="utf-8")
    console.print(f"wrote {args.out / 'results.md'}, {args.out / 'results.png'}, {args.out / 'results.json'}")
    return 0 if all(run["ok"] for run in runs) else 1
