"""The results as tables (rich for the terminal, markdown for the README) and a plot."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from .processes import ProcessRun
from .workloads import Measured

__all__ = ["Results", "Target", "rich_tables", "markdown", "plot", "plot_processes", "process_rows"]


@dataclass
class Target:
    what: str
    measured: str
    met: bool | None  # None: not measured (pending)
    bound: str = ""  # what limits it, when not met


@dataclass
class Results:
    raw1: Measured
    raw_n: Measured
    one_chain: dict[tuple[int, str], Measured]  # (threads, "plain"|"combined")
    distinct: Measured
    memory: dict[str, float]
    sizes: list[dict[str, Any]]
    tag: str
    targets: list[Target]
    processes: list[ProcessRun] = field(default_factory=list)
    process_pending: dict[str, str] = field(default_factory=dict)  # backend -> why not measured
    process_stamps: int = 0

    @property
    def threads(self) -> list[int]:
        return sorted({t for t, _ in self.one_chain})

    def process_run(self, backend: str, mode: str, processes: int) -> ProcessRun | None:
        for run in self.processes:
            if (run.backend, run.mode, run.processes) == (backend, mode, processes):
                return run
        return None


_MAIN_HEADER = [
    "workload",
    "threads",
    "per s",
    "÷ limit",
    "requests /stamp",
    "attempts /stamp",
    "p50 ms",
    "p99 ms",
    "failed",
    "final value",
]


def _f(value: float, digits: int = 2) -> str:
    return (
        "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"
    )


def _row(label: str, m: Measured, raw: float) -> list[str]:
    return [
        label,
        str(m.threads),
        f"{m.rate:.0f}",
        _f(m.rate / raw),
        _f(m.requests_per_op),
        _f(m.writes_per_op),
        _f(m.percentile_ms(0.5), 1),
        _f(m.percentile_ms(0.99), 1),
        str(m.failed),
        "ok" if m.ok else "WRONG",
    ]


def main_rows(r: Results) -> list[list[str]]:
    raw = r.raw1.rate
    rows = [
        _row("limit: raw conditional write", r.raw1, raw),
        _row("raw conditional writes, own items", r.raw_n, raw),
    ]
    for threads in r.threads:
        for mode in ("plain", "combined"):
            m = r.one_chain.get((threads, mode))
            if m is not None:
                label = "one chain" if mode == "plain" else "one chain, combiner"
                if threads == 1 and mode == "plain":
                    label = "one chain, uncontended"
                rows.append(_row(label, m, raw))
    rows.append(_row("distinct chains", r.distinct, raw))
    scaling = _row(f"distinct chains ÷ raw writes at {r.distinct.threads} threads", r.distinct, r.raw_n.rate)
    rows.append([scaling[0], scaling[1], "", scaling[3]] + [""] * 6)
    return rows


def other_rows(r: Results) -> list[list[str]]:
    rows: list[list[str]] = []
    m = r.memory
    rows.append(
        [
            f"MemoryAck holding {int(m['chains']):,} open chains",
            f"peak {m['peak_mib']:.1f} MiB, {m['bytes_per_chain']:.0f} bytes a chain retained",
        ]
    )
    for s in r.sizes:
        what = (
            f"{s['mode']} chain item at its largest: the ADD that crossed max_ops + 40, before its move"
            if s.get("largest")
            else f"{s['mode']} chain item after {s['stamps']} stamps"
        )
        rows.append([f"{what} ({s['ops']} op ids)", f"{s['bytes']} bytes, {s['wcu']} WCU a write"])
    return rows


_PROCESS_HEADER = [
    "backend",
    "processes",
    "mode",
    "stamps/s",
    "requests /stamp",
    "p50 ms",
    "p99 ms",
    "p99 ÷ p50",
    "conflicts",
    "trims (refused)",
    "completions",
    "WCU /stamp",
    "largest item",
    "budget spent",
    "result",
]


def process_rows(r: Results) -> list[list[str]]:
    """One row a run: the backend, then for each process count xor beside sum."""
    rows: list[list[str]] = []
    for backend in dict.fromkeys(run.backend for run in r.processes):
        for n in sorted({run.processes for run in r.processes if run.backend == backend}):
            for mode in ("xor", "sum"):
                run = r.process_run(backend, mode, n)
                if run is None:
                    continue
                units = run.wcu_per_stamp if run.backend == "DynamoDB Local" else float("nan")
                rows.append(
                    [
                        backend,
                        str(n),
                        mode,
                        f"{run.rate:.0f}",
                        f"{run.requests_per_stamp:.3f}",
                        _f(run.p(0.5), 0),
                        _f(run.p(0.99), 0),
                        _f(run.p(0.99) / run.p(0.5), 1),
                        str(run.events.get("conflicts", 0)),
                        f"{run.events.get('trims', 0)} ({run.events.get('trims_skipped', 0)})",
                        str(run.events.get("completions", 0)),
                        _f(units, 2),
                        f"{run.max_item_bytes} B / {run.max_ops} ids",
                        str(run.failed),
                        "ok" if run.ok else "WRONG: " + "; ".join(run.problems[:2]),
                    ]
                )
    for backend, reason in r.process_pending.items():
        rows.append([backend, "", "", f"pending: {reason}"] + [""] * (len(_PROCESS_HEADER) - 4))
    return rows


def target_rows(r: Results) -> list[list[str]]:
    rows = []
    for t in r.targets:
        met = "pending" if t.met is None else ("yes" if t.met else "no")
        rows.append([t.what, t.measured, met, t.bound])
    return rows


def rich_tables(r: Results) -> list[Table]:
    main = Table(
        title="stamp() on the embedded backend (moto server over HTTP); "
        "limit = raw conditional writes, 1 thread"
    )
    for i, name in enumerate(_MAIN_HEADER):
        main.add_column(name, justify="left" if i == 0 else "right")
    for row in main_rows(r):
        main.add_row(*row)
    other = Table(title="memory, item size")
    other.add_column("figure")
    other.add_column("value")
    for row in other_rows(r):
        other.add_row(*row)
    procs = Table(
        title=f"one chain finished by N processes ({r.process_stamps} stamps each), xor and sum mode"
    )
    for i, name in enumerate(_PROCESS_HEADER):
        procs.add_column(name, justify="left" if i in (0, 2, 12, 14) else "right")
    for row in process_rows(r):
        procs.add_row(*row)
    targets = Table(title="targets")
    for name in ("target", "measured", "met", "bounded by"):
        targets.add_column(name)
    for row in target_rows(r):
        targets.add_row(*row, style=None if row[2] == "yes" else "yellow")
    return [main, procs, other, targets] if r.processes or r.process_pending else [main, other, targets]


def _md(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(r: Results, environment: str) -> str:
    return (
        "\n\n".join(
            [
                "<!-- written by `make bench` (benchmarks/run.py); do not edit by hand -->",
                f"Measured in one run: {environment}. Ratios and requests per stamp are the figures "
                "that travel between machines; absolute rates and latencies are this machine's.",
                _md(_MAIN_HEADER, main_rows(r)),
                f"One chain finished by N processes, {r.process_stamps} stamps each (one process: "
                f"{r.process_stamps * 32} stamps, one writer; spawned processes, "
                "each with its own client and tracker, released together by a barrier; every stamp a "
                "stamp with an op id the library draws: nothing to check). *requests/stamp* "
                "counts every request the processes made (botocore's resends, sum mode's history "
                "writes, trims and its completion write included); *WCU/stamp* is what DynamoDB Local "
                "reported with `ReturnConsumedCapacity` for the "
                "successful writes (computed from item sizes, as AWS does), plus one unit for each "
                "refused write (a lost race, a refused trim: AWS bills those too, at least a unit); "
                "*largest item* is the chain's item after a write, sized by AWS's rules; *budget "
                "spent* counts calls that raised `StaleLocalData` and were made again.",
                _md(_PROCESS_HEADER, process_rows(r)),
                "![requests per stamp, latency and stamps/s against processes on one chain](processes.png)",
                _md(["figure", "value"], other_rows(r)),
                _md(["target", "measured", "met", "bounded by"], target_rows(r)),
                "![stamps per second and requests per stamp against threads on one chain](results.png)",
            ]
        )
        + "\n"
    )


def plot(r: Results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    threads = r.threads
    raw = r.raw1.rate
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode, style in (("plain", "o-"), ("combined", "s-")):
        series = [r.one_chain[(t, mode)] for t in threads if (t, mode) in r.one_chain]
        xs = [m.threads for m in series]
        label = "stamp()" if mode == "plain" else "stamp() with the combiner"
        left.plot(xs, [m.rate / raw for m in series], style, label=label)
        right.plot(xs, [m.requests_per_op for m in series], style, label=label)
    left.plot([r.distinct.threads], [r.distinct.rate / raw], "^", label="stamp(), one chain per thread")
    left.plot(
        [r.raw_n.threads], [r.raw_n.rate / raw], "v", color="grey", label="raw writes, one item per thread"
    )
    left.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="raw conditional write, 1 thread")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    ratios = [m.rate / raw for m in r.one_chain.values() if m.rate > 0] or [1.0]
    ticks = [2.0**k for k in range(-8, 8) if min(ratios) / 2 <= 2.0**k <= max(ratios) * 2]
    left.set_yticks(ticks, [f"{t:g}" for t in ticks])
    left.minorticks_off()
    left.set_xticks(threads, [str(t) for t in threads])
    left.set_xlabel("threads on one chain")
    left.set_ylabel("stamps/s ÷ raw conditional writes/s")
    left.set_title("throughput")
    left.legend(fontsize=8)
    right.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    right.set_xscale("log", base=2)
    right.set_xticks(threads, [str(t) for t in threads])
    right.set_xlabel("threads on one chain")
    right.set_ylabel("DynamoDB requests per stamp")
    right.set_title("cost")
    right.legend(fontsize=8)
    fig.suptitle("xor-ack-dynamodb on a moto server over HTTP (one run)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_processes(r: Results, path: Path) -> None:
    """Requests per stamp, p50/p99 and stamps/s against processes on one chain, xor and
    sum mode on each backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (cost, latency, rate) = plt.subplots(1, 3, figsize=(14, 4.4))
    counts = sorted({run.processes for run in r.processes})
    styles = {("xor", 0): "o-", ("sum", 0): "s-", ("xor", 1): "o--", ("sum", 1): "s--"}
    colors = {"xor": "tab:red", "sum": "tab:blue"}
    for b, backend in enumerate(dict.fromkeys(run.backend for run in r.processes)):
        for mode in ("xor", "sum"):
            series = [x for n in counts if (x := r.process_run(backend, mode, n)) is not None]
            if not series:
                continue
            xs = [run.processes for run in series]
            style, color = styles[(mode, b % 2)], colors[mode]
            label = f"{mode}, {backend}"
            cost.plot(xs, [run.requests_per_stamp for run in series], style, color=color, label=label)
            latency.plot(xs, [run.p(0.99) for run in series], style, color=color, label=f"p99 {label}")
            latency.plot(
                xs, [run.p(0.5) for run in series], style, color=color, alpha=0.35, label=f"p50 {label}"
            )
            rate.plot(xs, [run.rate for run in series], style, color=color, label=label)
    cost.axhline(1.05, color="grey", linestyle=":", linewidth=1, label="1.05 (sum-mode target)")
    for ax in (cost, latency, rate):
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(n) for n in counts])
        ax.minorticks_off()
        ax.set_xlabel("processes on one chain")
    cost.set_ylabel("DynamoDB requests per stamp")
    cost.set_title("cost")
    latency.set_yscale("log")
    latency.set_ylabel("per-stamp latency, ms (faint: p50)")
    latency.set_title("latency")
    rate.set_ylabel("stamps/s")
    rate.set_title("throughput (2 cores shared with the backend)")
    cost.legend(fontsize=7)
    latency.legend(fontsize=6, ncol=2)
    fig.suptitle(f"one chain finished by N processes, {r.process_stamps} stamps each (one run)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
