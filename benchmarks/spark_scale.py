"""The word count at real scale: DataFrame and RDD pipelines, tracked and untracked, on
``local[*]`` and on a standalone cluster, in one run.

    .venv/bin/python -m benchmarks.spark_scale [--rounds 2] [--masters local,cluster]
        [--backends moto,ddblocal] [--files 520] [--words 1050000] [--big-mib 64] [--out DIR]

The corpus is built reproducibly (:mod:`benchmarks.corpus`: 520 real-looking files,
about a million words, seed 2024) into ``benchmarks/.corpus/`` and counted once in plain
Python (the reference every run must match exactly). Backends (``--backends``): the
embedded moto server in a child process (as in ``python -m benchmarks``) and Amazon's
DynamoDB Local (``ddblocal``, Java, also a child process on the same CPUs), or one
``--endpoint-url``. Before Spark starts, the driver's own requests are timed on each
backend without Spark (:mod:`benchmarks.driver_requests`: 520 creates and stamps, the
per-request cost that the tracked wall time pays).

Per master, one SparkSession: a warm-up of every mode on 40 files (JVM, Python workers,
query compilation), then ``--rounds`` rounds of: each pipeline untracked, the DataFrame
one with an in-memory tracker, and, per backend, each pipeline tracked on xor chains and
on sum chains (and, on DynamoDB Local, the DataFrame pipeline with its creates and stamps
as transactions). Wall time is the job's own (``report.json``'s
``wall_seconds``: read, count, write, ack, final aggregation, outputs), best of the
rounds. Peak Python worker memory is the largest peak resident set of any Spark Python
worker during the run (``benchmarks/memory.py``). Then, on ``local[*]``, one file of
``--big-mib`` MiB through both tracked pipelines: the DataFrame path reads it in splits
(bounded memory per task); the RDD path reads each file as one record.

Writes ``spark_results.json``, ``spark_results.md`` (the README's table) and
``spark_results.png`` beside this file (or into ``--out``). Exit status 1 if any run
was not exact or left a file not acked.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .corpus import CorpusSpec, build_corpus
from .memory import WorkerMemory

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: (api, mode) run once per master: untracked, and (DataFrame only: its executors never
#: call DynamoDB) tracked with an in-memory tracker in the driver, which isolates what
#: tracking costs Spark itself from what the backend's requests cost.
BASE_MODES = [("frame", "untracked"), ("frame", "in-memory"), ("rdd", "untracked")]
TARGETS = {"frame": 1.15, "rdd": 1.5}
BACKEND_LABELS = {"moto": "moto server", "ddblocal": "DynamoDB Local", "endpoint": "endpoint"}


def tracked_modes(backends: list[str]) -> list[tuple[str, str]]:
    """(api, mode) of the tracked runs: ``tracked/<backend>/<chain mode>[/txn]``."""
    modes = []
    for backend_name in backends:
        for api in ("frame", "rdd"):
            for chains in ("xor", "sum"):
                modes.append((api, f"tracked/{backend_name}/{chains}"))
        if backend_name == "ddblocal":
            modes.append(("frame", f"tracked/{backend_name}/xor/txn"))
    return modes


def reference_count(paths: list[Path]) -> Counter[str]:
    """Word counts by the documented rule, in plain Python (no regex, no Spark): NFC,
    maximal runs of ``str.isalpha()`` characters, lower-cased."""
    counts: Counter[str] = Counter()
    for path in paths:
        text = unicodedata.normalize("NFC", path.read_bytes().decode("utf-8", "replace"))
        word: list[str] = []
        for char in text + " ":
            if char.isalpha():
                word.append(char)
            elif word:
                counts["".join(word).lower()] += 1
                word = []
    return counts


def ensure_corpus(spec: CorpusSpec) -> list[Path]:
    """The corpus for ``spec`` in ``benchmarks/.corpus/``, built unless already there."""
    directory = HERE / ".corpus" / f"seed{spec.seed}-{spec.files}f-{spec.words}w"
    marker = directory / ".complete"
    if not marker.exists():
        shutil.rmtree(directory, ignore_errors=True)
        build_corpus(directory, spec)
        marker.write_text(json.dumps(spec.__dict__))
    from xor_ack_dynamodb.jobs.wordcount.job import find_inputs

    return find_inputs([directory])


@contextmanager
def backend(name: str, endpoint: str | None) -> Iterator[str]:
    if endpoint:
        yield endpoint
        return
    if name == "ddblocal":
        from xor_ack_dynamodb import DynamoDBLocal

        with DynamoDBLocal() as local:
            yield local.config("unused").endpoint_url or ""
        return
    from .server import ServerProcess

    with ServerProcess() as server:
        yield server.endpoint_url


@contextmanager
def master_url(name: str, workdir: Path, cores: int) -> Iterator[str]:
    if name == "local":
        yield "local[*]"
        return
    from xor_ack_dynamodb.testing.spark_servers import standalone_cluster

    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    with standalone_cluster(workdir / "cluster", cores=cores, memory="2g", env=env) as url:
        yield url


def one_run(
    spark: Any, inputs: list[Path], out: Path, configs: dict[str, Any], api: str, mode: str
) -> dict[str, Any]:
    """One word count; ``mode`` is ``untracked``, ``in-memory`` or
    ``tracked/<backend>/<chain mode>[/txn]`` (``configs`` maps backends to configs)."""
    import dataclasses

    from xor_ack_dynamodb import MemoryAck
    from xor_ack_dynamodb.jobs.wordcount.job import run_wordcount

    shutil.rmtree(out, ignore_errors=True)
    options: dict[str, Any] = {}
    config = None
    if mode == "in-memory":
        options["tracker"] = MemoryAck()
        config = next(iter(configs.values()))
    elif mode.startswith("tracked/"):
        _, name, chains, *rest = mode.split("/")
        config = dataclasses.replace(configs[name], mode=chains)
        if rest == ["txn"]:
            options["transactions"] = True
    with WorkerMemory() as memory:
        report = run_wordcount(spark, inputs, out, config, api=api, **options)
    totals = report.totals()
    return {
        "api": api,
        "mode": mode,
        "wall_seconds": report.wall_seconds,
        "phases": report.phases,
        "words": totals["words"],
        "requests": totals["dynamodb_requests"],
        "requests_per_word": totals["requests_per_word"],
        "acked": totals["acked"],
        "files": totals["files"],
        "all_acked": report.all_acked,
        "peak_worker_mib": round(memory.peak_mib, 1),
        "counters": {k: v for k, v in report.requests.items() if k.startswith(("time_ms", "requests"))},
        "counts": report.counts,
    }


def summarize(runs: list[dict[str, Any]], reference: Counter[str]) -> dict[str, Any]:
    best = min(runs, key=lambda r: r["wall_seconds"])
    return {
        "wall_seconds": round(best["wall_seconds"], 3),
        "walls": [round(r["wall_seconds"], 3) for r in runs],
        "phases": {k: round(v, 3) for k, v in best["phases"].items()},
        "requests": best["requests"],
        "requests_per_word": best["requests_per_word"],
        "words": best["words"],
        "peak_worker_mib": max(r["peak_worker_mib"] for r in runs),
        "exact": all(r["counts"] == reference for r in runs),
        "all_acked": all(r["all_acked"] for r in runs),
        "counters": best["counters"],
    }


def run_master(
    name: str,
    inputs: list[Path],
    reference: Counter[str],
    configs: dict[str, Any],
    args: argparse.Namespace,
    tmp: Path,
) -> dict[str, Any]:
    from xor_ack_dynamodb.spark.context import get_session

    print(f"== {name}", flush=True)
    with master_url(name, tmp, args.cores) as url:
        spark, _ = get_session(url, app_name=f"bench spark {name}")
        try:
            master = spark.sparkContext.master
            parallelism = spark.sparkContext.defaultParallelism
            modes = BASE_MODES + tracked_modes(list(configs))
            for api, mode in modes:  # warm-up: JVM, Python workers, query compilation
                one_run(spark, inputs[:40], tmp / "warm", configs, api, mode)
            runs: dict[str, list[dict[str, Any]]] = {}
            for round_number in range(args.rounds):
                for api, mode in modes:
                    run = one_run(spark, inputs, tmp / "out", configs, api, mode)
                    runs.setdefault(f"{api}/{mode}", []).append(run)
                    print(
                        f"  round {round_number + 1} {api:5} {mode:24} "
                        f"{run['wall_seconds']:6.2f} s  {run['requests']:5} requests  "
                        f"peak worker {run['peak_worker_mib']:.0f} MiB  exact {run['counts'] == reference}",
                        flush=True,
                    )
            big = big_file_runs(spark, configs, args, tmp) if name == "local" and args.big_mib else {}
        finally:
            spark.stop()
    return {
        "master": master,
        "parallelism": parallelism,
        "modes": {key: summarize(value, reference) for key, value in runs.items()},
        "big_file": big,
    }


def big_file_runs(spark: Any, configs: dict[str, Any], args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One file of ``--big-mib`` MiB (sample text repeated) through both tracked
    pipelines: wall time, peak worker memory, exactness."""
    sample = b"".join(p.read_bytes() for p in sorted((REPO / "examples" / "data").iterdir()) if p.is_file())
    sample = sample.rstrip(b"\n") + b"\n"
    copies = max(1, (args.big_mib << 20) // len(sample))
    path = tmp / "big.txt"
    with path.open("wb") as handle:
        for _ in range(copies):
            handle.write(sample)
    block = tmp / "block.txt"
    block.write_bytes(sample)
    reference = Counter({w: n * copies for w, n in reference_count([block]).items()})
    out: dict[str, Any] = {"mib": round(path.stat().st_size / (1 << 20), 1)}
    out["backend"] = BACKEND_LABELS.get(next(iter(configs)), "")
    for api in ("frame", "rdd"):
        first = next(iter(configs))
        run = one_run(spark, [path], tmp / "big-out", configs, api, f"tracked/{first}/xor")
        out[api] = {
            "wall_seconds": round(run["wall_seconds"], 2),
            "peak_worker_mib": run["peak_worker_mib"],
            "exact": run["counts"] == reference,
            "acked": run["all_acked"],
            "words": run["words"],
        }
        print(
            f"  big file {out['mib']} MiB, {api}: {run['wall_seconds']:.1f} s, peak worker "
            f"{run['peak_worker_mib']:.0f} MiB, exact {run['counts'] == reference}",
            flush=True,
        )
    path.unlink()
    return out


def _waiting(t: dict[str, Any]) -> float:
    """Seconds the driver waited on DynamoDB after (or for) the job: its stamps, its
    reads, and the creates it still waited for when the write returned."""
    keys = ("time_ms.stamps", "time_ms.settle", "time_ms.create_wait")
    return sum(t["counters"].get(k, 0) for k in keys) / 1000


def _mode_label(mode: str) -> tuple[str, str]:
    _, name, chains, *rest = mode.split("/")
    return BACKEND_LABELS.get(name, name), chains + (", transactions" if rest else "")


def markdown(results: dict[str, Any]) -> str:
    corpus = results["corpus"]
    lines = [
        "<!-- written by `make bench-spark` (benchmarks/spark_scale.py); do not edit by hand -->",
        "",
        f"Measured in one run: {results['machine']}; corpus {corpus['files']} files, "
        f"{corpus['words']:,} words, {corpus['distinct']:,} distinct "
        f"({corpus['mib']} MiB, built by `benchmarks/corpus.py`, seed {corpus['seed']}); "
        f"{results['backend']}; wall time = the job's own (read, count, write, ack, final aggregation), "
        f"best of {results['rounds']} after a warm-up; peak worker = largest peak RSS of a Spark "
        "Python worker; driver waiting = the driver's stamps, reads and the creates it still "
        "waited for after the write (creates run in the background during the job).",
        "",
        "| master | pipeline | backend | chains | untracked s | tracked s | tracked ÷ untracked | target "
        "| in-memory tracker s (÷ untracked) | DynamoDB requests | requests / word "
        "| driver waiting s | peak worker MiB (untracked / tracked) | exact | all acked |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for master in results["masters"]:
        for api in ("frame", "rdd"):
            u = master["modes"][f"{api}/untracked"]
            memory = master["modes"].get(f"{api}/in-memory")
            in_memory = (
                f"{memory['wall_seconds']:.2f} ({memory['wall_seconds'] / u['wall_seconds']:.2f})"
                if memory
                else "n/a (executors call DynamoDB)"
            )
            for key, t in master["modes"].items():
                if not key.startswith(f"{api}/tracked/"):
                    continue
                where, chains = _mode_label(key.split("/", 1)[1])
                ratio = t["wall_seconds"] / u["wall_seconds"]
                lines.append(
                    f"| {master['label']} | {'DataFrame' if api == 'frame' else 'RDD'} | {where} | {chains} "
                    f"| {u['wall_seconds']:.2f} | {t['wall_seconds']:.2f} | {ratio:.2f} | ≤ {TARGETS[api]} "
                    f"| {in_memory} | {t['requests']} | {t['requests_per_word']:.4f} | {_waiting(t):.2f} "
                    f"| {u['peak_worker_mib']:.0f} / {t['peak_worker_mib']:.0f} "
                    f"| {'yes' if u['exact'] and t['exact'] else 'NO'} "
                    f"| {'yes' if t['all_acked'] else 'NO'} |"
                )
    lines += ["", *request_costs(results), "", *bounds(results)]
    big = next((m["big_file"] for m in results["masters"] if m["big_file"]), None)
    if big:
        lines += [
            "",
            f"One file of {big['mib']} MiB, tracked (xor chains, {big.get('backend', '')}), local[*]:",
            "",
            "| pipeline | wall s | peak worker MiB | exact | acked |",
            "|---|---|---|---|---|",
        ]
        for api in ("frame", "rdd"):
            b = big[api]
            label = "DataFrame (32 MiB splits, 4 MiB chunks)" if api == "frame" else "RDD (one record a file)"
            lines.append(
                f"| {label} "
                f"| {b['wall_seconds']:.1f} | {b['peak_worker_mib']:.0f} | {'yes' if b['exact'] else 'NO'} "
                f"| {'yes' if b['acked'] else 'NO'} |"
            )
    return "\n".join(lines) + "\n"


def request_costs(results: dict[str, Any]) -> list[str]:
    """The driver's requests timed without Spark, per backend (same run)."""
    costs = results.get("request_costs", {})
    if not costs:
        return []
    n = next(iter(costs.values()))["n"]
    lines = [
        f"The DataFrame driver's requests without Spark ({n} creates, then {n} completing stamps, "
        "10 threads; `benchmarks/driver_requests.py`), same run:",
        "",
        "| backend | chains | single requests: creates s / stamps s | requests | ms per request "
        "| transactions of 100: creates s / stamps s | requests |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, cost in costs.items():
        for chains in ("xor", "sum"):
            single, txn = cost[chains]["single"], cost[chains]["transactions"]
            many = (
                f"{txn['create_s']:.2f} / {txn['stamp_s']:.2f} | {txn['requests']}"
                if "create_s" in txn
                else f"{txn['skipped']} | –"
            )
            lines.append(
                f"| {BACKEND_LABELS.get(name, name)} | {chains} "
                f"| {single['create_s']:.2f} / {single['stamp_s']:.2f} "
                f"| {single['requests']} | {single['ms_per_request']:.2f} | {many} |"
            )
    return lines


def bounds(results: dict[str, Any]) -> list[str]:
    """What the targets leave for DynamoDB, per master and pipeline: the budget
    (target × untracked − what tracking costs Spark itself, the in-memory run, where
    there is one), per file and per request, against each backend's measured cost."""
    files = results["corpus"]["files"]
    costs = results.get("request_costs", {})
    lines = [
        "What the targets leave for DynamoDB: budget = target × untracked − the tracked run "
        "without a backend (DataFrame: in-memory tracker; RDD: untracked, it has no such run), "
        f"over {files} files; a request fits when the backend's ms per request (10 in flight, "
        "above) is under the budget per request:",
        "",
        "| master | pipeline | untracked s (ms per file) | target s | without a backend s "
        "| budget ms per file | requests per file (xor) | budget ms per request | "
        + " | ".join(f"{BACKEND_LABELS.get(n, n)} ms per request" for n in costs)
        + " |",
        "|---|---|---|---|---|---|---|---|" + "---|" * len(costs),
    ]
    for master in results["masters"]:
        for api in ("frame", "rdd"):
            u = master["modes"][f"{api}/untracked"]["wall_seconds"]
            memory = master["modes"].get(f"{api}/in-memory")
            floor = memory["wall_seconds"] if memory else u
            budget = TARGETS[api] * u - floor
            tracked = [
                v
                for k, v in master["modes"].items()
                if k.startswith(f"{api}/tracked/") and k.endswith("/xor")
            ]
            per_file = tracked[0]["requests"] / files if tracked else 0.0
            per_request = 1000 * budget / files / per_file if per_file else 0.0
            measured = " | ".join(f"{c['xor']['single']['ms_per_request']:.2f}" for c in costs.values())
            lines.append(
                f"| {master['label']} | {'DataFrame' if api == 'frame' else 'RDD'} "
                f"| {u:.2f} ({1000 * u / files:.2f}) "
                f"| {TARGETS[api] * u:.2f} | {floor:.2f} | {1000 * budget / files:.3f} | {per_file:.2f} "
                f"| {per_request:.3f} | {measured} |"
            )
    return lines


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, untracked, memory = [], [], []
    series: dict[str, list[float]] = {}
    waits: dict[str, list[float]] = {}
    for master in results["masters"]:
        for api in ("frame", "rdd"):
            u = master["modes"][f"{api}/untracked"]
            m = master["modes"].get(f"{api}/in-memory")
            labels.append(f"{master['label']}\n{'DataFrame' if api == 'frame' else 'RDD'}")
            untracked.append(u["wall_seconds"])
            memory.append(m["wall_seconds"] if m else 0.0)
            for key, t in master["modes"].items():
                if key.startswith(f"{api}/tracked/") and "/txn" not in key:
                    name = ", ".join(_mode_label(key.split("/", 1)[1]))
                    series.setdefault(name, []).append(t["wall_seconds"])
                    waits.setdefault(name, []).append(_waiting(t))
    columns = 2 + len(series)
    width = 0.8 / columns
    fig, ax = plt.subplots(figsize=(10, 4.6))
    x = list(range(len(labels)))
    ax.bar([i - 0.4 + width / 2 for i in x], untracked, width, label="untracked", color="#9ab")
    ax.bar(
        [i - 0.4 + 1.5 * width for i in x], memory, width, label="tracked, in-memory tracker", color="#e9a"
    )
    colors = ["#c55", "#e83", "#56b", "#3a8", "#a5c", "#777"]
    for j, (name, walls) in enumerate(series.items()):
        if len(walls) != len(labels):
            continue
        offset = -0.4 + (2.5 + j) * width
        ax.bar([i + offset for i in x], walls, width, label=f"tracked: {name}", color=colors[j % len(colors)])
        ax.bar([i + offset for i in x], waits[name], width, color="#222", alpha=0.35)
        for i, (u, t) in enumerate(zip(untracked, walls, strict=True)):
            ax.annotate(f"×{t / u:.1f}", (i + offset, t), ha="center", va="bottom", fontsize=6)
    ax.set_xticks(x, labels)
    ax.set_ylabel("wall seconds (best of rounds); dark: driver waiting on DynamoDB")
    ax.set_title(
        f"word count, {results['corpus']['files']} files, {results['corpus']['words'] / 1e6:.2f}M words; "
        f"{results['backend_short']}"
    )
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--masters", default="local,cluster")
    parser.add_argument("--backends", default="moto,ddblocal", help="moto, ddblocal (comma-separated)")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2, help="the cluster worker's cores")
    parser.add_argument("--files", type=int, default=CorpusSpec.files)
    parser.add_argument("--words", type=int, default=CorpusSpec.words)
    parser.add_argument("--seed", type=int, default=CorpusSpec.seed)
    parser.add_argument("--big-mib", type=int, default=64, help="the big file's size (0: leave it out)")
    parser.add_argument("--endpoint-url", help="one DynamoDB endpoint instead of the local backends")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        os.environ.setdefault(name, value)
    os.environ.setdefault("AWS_REGION", "us-east-1")
    backends = ["endpoint"] if args.endpoint_url else [b for b in args.backends.split(",") if b]
    unknown = set(backends) - set(BACKEND_LABELS)
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}")

    spec = CorpusSpec(args.files, args.words, args.seed)
    started = time.perf_counter()
    load_before = os.getloadavg()[1]
    inputs = ensure_corpus(spec)
    reference = reference_count(inputs)
    words, distinct = sum(reference.values()), len(reference)
    print(f"corpus: {len(inputs)} files, {words:,} words, {distinct:,} distinct", flush=True)
    from contextlib import ExitStack

    from xor_ack_dynamodb import AckConfig, XorAckDynamoDB

    from .driver_requests import measure

    masters = []
    request_costs: dict[str, Any] = {}
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="xor-ack-spark-"))
        configs: dict[str, Any] = {}
        for name in backends:
            endpoint = stack.enter_context(backend(name, args.endpoint_url))
            config = AckConfig(
                table="bench-spark-scale",
                endpoint_url=endpoint,
                region="us-east-1",
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )
            XorAckDynamoDB.from_config(config).create_table()
            configs[name] = config
            requests_config = AckConfig(**{**config.__dict__, "table": "bench-driver-requests"})
            XorAckDynamoDB.from_config(requests_config).create_table()
            # moto's TransactWriteItems deep-copies the table once per item (18 s for 520
            # creates beside 520 items, measured): left out there.
            print(f"driver requests on {name} ...", flush=True)
            request_costs[name] = measure(requests_config, len(inputs), transactions=name != "moto")
            print(json.dumps(request_costs[name]), flush=True)
        for name in args.masters.split(","):
            result = run_master(name, inputs, reference, configs, args, Path(tmp))
            result["label"] = "local[*]" if name == "local" else f"standalone ({args.cores} cores)"
            masters.append(result)
    labels = [BACKEND_LABELS[b] for b in backends]
    results = {
        "machine": f"Python {platform.python_version()}, {os.cpu_count()} CPUs shared with other work "
        f"(5-minute load average {load_before:.1f} at the start, {os.getloadavg()[1]:.1f} at the end)",
        "corpus": {
            "files": len(inputs),
            "words": sum(reference.values()),
            "distinct": len(reference),
            "mib": round(sum(p.stat().st_size for p in inputs) / (1 << 20), 1),
            "seed": spec.seed,
        },
        "backend": "DynamoDB at " + args.endpoint_url
        if args.endpoint_url
        else "backends: " + " and ".join(labels) + ", each in a child process on the same 2 CPUs",
        "backend_short": "DynamoDB endpoint"
        if args.endpoint_url
        else " and ".join(labels) + " on the same CPUs",
        "rounds": args.rounds,
        "request_costs": request_costs,
        "masters": masters,
        "seconds": round(time.perf_counter() - started, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "spark_results.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "spark_results.md").write_text(markdown(results))
    plot(results, args.out / "spark_results.png")
    print(markdown(results))
    ok = all(m["exact"] and m["all_acked"] for master in masters for m in master["modes"].values())
    for master in masters:
        for key, t in master["modes"].items():
            api = key.split("/")[0]
            if "/tracked/" in f"/{key}":
                u = master["modes"][f"{api}/untracked"]
                print(
                    f"{master['label']} {key}: tracked ÷ untracked "
                    f"{t['wall_seconds'] / u['wall_seconds']:.2f}"
                )
    bigs = [m["big_file"]["frame"] for m in masters if m["big_file"]]
    big_ok = all(b["exact"] and b["acked"] for b in bigs)
    return 0 if ok and big_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
