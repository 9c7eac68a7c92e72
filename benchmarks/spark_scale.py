"""The word count at real scale: DataFrame and RDD pipelines, tracked and untracked, on
``local[*]`` and on a standalone cluster, in one run.

    .venv/bin/python -m benchmarks.spark_scale [--rounds 2] [--masters local,cluster]
        [--files 520] [--words 1050000] [--big-mib 64] [--out DIR]

The corpus is built reproducibly (:mod:`benchmarks.corpus`: 520 real-looking files,
about a million words, seed 2024) into ``benchmarks/.corpus/`` and counted once in plain
Python (the reference every run must match exactly). The embedded backend is a moto
server in a child process (as in ``python -m benchmarks``), or ``--endpoint-url``.

Per master, one SparkSession: a warm-up of every mode on 40 files (JVM, Python workers,
query compilation), then ``--rounds`` rounds of (frame untracked, frame tracked, rdd
untracked, rdd tracked). Wall time is the job's own (``report.json``'s
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
#: (api, mode): untracked, tracked against the backend, and (DataFrame only: its
#: executors never call DynamoDB) tracked with an in-memory tracker in the driver, which
#: isolates what tracking costs Spark itself from what the backend's requests cost.
MODES = [
    ("frame", "untracked"),
    ("frame", "tracked"),
    ("frame", "in-memory"),
    ("rdd", "untracked"),
    ("rdd", "tracked"),
]
TARGETS = {"frame": 1.15, "rdd": 1.5}


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
    from xor_ack_dynamodb.wordcount import find_inputs

    return find_inputs([directory])


@contextmanager
def backend(endpoint: str | None) -> Iterator[str]:
    if endpoint:
        yield endpoint
        return
    from .server import ServerProcess

    with ServerProcess() as server:
        yield server.endpoint_url


@contextmanager
def master_url(name: str, workdir: Path, cores: int) -> Iterator[str]:
    if name == "local":
        yield "local[*]"
        return
    from xor_ack_dynamodb.spark.servers import standalone_cluster

    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    with standalone_cluster(workdir / "cluster", cores=cores, memory="2g", env=env) as url:
        yield url


def one_run(spark: Any, inputs: list[Path], out: Path, config: Any, api: str, mode: str) -> dict[str, Any]:
    from xor_ack_dynamodb import MemoryAck
    from xor_ack_dynamodb.wordcount import run_wordcount

    shutil.rmtree(out, ignore_errors=True)
    options: dict[str, Any] = {"tracker": MemoryAck()} if mode == "in-memory" else {}
    with WorkerMemory() as memory:
        report = run_wordcount(
            spark, inputs, out, None if mode == "untracked" else config, api=api, **options
        )
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
    name: str, inputs: list[Path], reference: Counter[str], config: Any, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    from xor_ack_dynamodb.spark.context import get_session

    print(f"== {name}", flush=True)
    with master_url(name, tmp, args.cores) as url:
        spark, _ = get_session(url, app_name=f"bench spark {name}")
        try:
            master = spark.sparkContext.master
            parallelism = spark.sparkContext.defaultParallelism
            for api, mode in MODES:  # warm-up: JVM, Python workers, query compilation
                one_run(spark, inputs[:40], tmp / "warm", config, api, mode)
            runs: dict[str, list[dict[str, Any]]] = {}
            for round_number in range(args.rounds):
                for api, mode in MODES:
                    run = one_run(spark, inputs, tmp / "out", config, api, mode)
                    runs.setdefault(f"{api}/{mode}", []).append(run)
                    print(
                        f"  round {round_number + 1} {api:5} {mode:9} "
                        f"{run['wall_seconds']:6.2f} s  {run['requests']:5} requests  "
                        f"peak worker {run['peak_worker_mib']:.0f} MiB  exact {run['counts'] == reference}",
                        flush=True,
                    )
            big = big_file_runs(spark, config, args, tmp) if name == "local" and args.big_mib else {}
        finally:
            spark.stop()
    return {
        "master": master,
        "parallelism": parallelism,
        "modes": {key: summarize(value, reference) for key, value in runs.items()},
        "big_file": big,
    }


def big_file_runs(spark: Any, config: Any, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
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
    for api in ("frame", "rdd"):
        run = one_run(spark, [path], tmp / "big-out", config, api, "tracked")
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
        "Python worker.",
        "",
        "| master | pipeline | untracked s | tracked s | tracked ÷ untracked | target "
        "| tracked, in-memory tracker s (÷ untracked) | DynamoDB requests | requests / word "
        "| driver waiting on DynamoDB s | peak worker MiB (untracked / tracked) | exact | all acked |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for master in results["masters"]:
        for api in ("frame", "rdd"):
            u = master["modes"][f"{api}/untracked"]
            t = master["modes"][f"{api}/tracked"]
            ratio = t["wall_seconds"] / u["wall_seconds"]
            calls = sum(v for k, v in t["counters"].items() if k in ("time_ms.stamps", "time_ms.settle"))
            calls += t["counters"].get("time_ms.create_wait", 0)
            memory = master["modes"].get(f"{api}/in-memory")
            in_memory = (
                f"{memory['wall_seconds']:.2f} ({memory['wall_seconds'] / u['wall_seconds']:.2f})"
                if memory
                else "n/a (executors call DynamoDB)"
            )
            lines.append(
                f"| {master['label']} | {'DataFrame' if api == 'frame' else 'RDD'} | {u['wall_seconds']:.2f} "
                f"| {t['wall_seconds']:.2f} | {ratio:.2f} | ≤ {TARGETS[api]} | {in_memory} | {t['requests']} "
                f"| {t['requests_per_word']:.4f} | {calls / 1000:.2f} "
                f"| {u['peak_worker_mib']:.0f} / {t['peak_worker_mib']:.0f} "
                f"| {'yes' if u['exact'] and t['exact'] else 'NO'} | {'yes' if t['all_acked'] else 'NO'} |"
            )
    big = next((m["big_file"] for m in results["masters"] if m["big_file"]), None)
    if big:
        lines += [
            "",
            f"One file of {big['mib']} MiB, tracked, local[*]:",
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


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, untracked, tracked, inside, memory = [], [], [], [], []
    for master in results["masters"]:
        for api in ("frame", "rdd"):
            u = master["modes"][f"{api}/untracked"]
            t = master["modes"][f"{api}/tracked"]
            m = master["modes"].get(f"{api}/in-memory")
            labels.append(f"{master['label']}\n{'DataFrame' if api == 'frame' else 'RDD'}")
            untracked.append(u["wall_seconds"])
            tracked.append(t["wall_seconds"])
            memory.append(m["wall_seconds"] if m else 0.0)
            calls = t["counters"].get("time_ms.stamps", 0) + t["counters"].get("time_ms.settle", 0)
            inside.append((calls + t["counters"].get("time_ms.create_wait", 0)) / 1000)
    fig, ax = plt.subplots(figsize=(8.5, 4.4))
    x = range(len(labels))
    ax.bar([i - 0.27 for i in x], untracked, 0.27, label="untracked", color="#9ab")
    ax.bar(list(x), memory, 0.27, label="tracked, in-memory tracker (DataFrame)", color="#e9a")
    ax.bar([i + 0.27 for i in x], tracked, 0.27, label="tracked, moto server", color="#c55")
    ax.bar([i + 0.27 for i in x], inside, 0.27, label="… of which the driver waits on DynamoDB", color="#822")
    for i, (u, t, m) in enumerate(zip(untracked, tracked, memory, strict=True)):
        ax.annotate(f"×{t / u:.2f}", (i + 0.27, t), ha="center", va="bottom", fontsize=8)
        if m:
            ax.annotate(f"×{m / u:.2f}", (i, m), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("wall seconds (best of rounds)")
    ax.set_title(
        f"word count, {results['corpus']['files']} files, {results['corpus']['words'] / 1e6:.2f}M words; "
        f"{results['backend_short']}"
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--masters", default="local,cluster")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2, help="the cluster worker's cores")
    parser.add_argument("--files", type=int, default=CorpusSpec.files)
    parser.add_argument("--words", type=int, default=CorpusSpec.words)
    parser.add_argument("--seed", type=int, default=CorpusSpec.seed)
    parser.add_argument("--big-mib", type=int, default=64, help="the big file's size (0: leave it out)")
    parser.add_argument("--endpoint-url", help="a DynamoDB endpoint instead of the embedded moto server")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        os.environ.setdefault(name, value)
    os.environ.setdefault("AWS_REGION", "us-east-1")

    spec = CorpusSpec(args.files, args.words, args.seed)
    started = time.perf_counter()
    load_before = os.getloadavg()[1]
    inputs = ensure_corpus(spec)
    reference = reference_count(inputs)
    words, distinct = sum(reference.values()), len(reference)
    print(f"corpus: {len(inputs)} files, {words:,} words, {distinct:,} distinct", flush=True)
    from xor_ack_dynamodb import AckConfig

    masters = []
    with backend(args.endpoint_url) as endpoint, tempfile.TemporaryDirectory(prefix="xor-ack-spark-") as tmp:
        config = AckConfig(
            table="bench-spark-scale",
            endpoint_url=endpoint,
            region="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        config.connect().create_table()
        for name in args.masters.split(","):
            result = run_master(name, inputs, reference, config, args, Path(tmp))
            result["label"] = "local[*]" if name == "local" else f"standalone ({args.cores} cores)"
            masters.append(result)
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
        else "the embedded backend, a moto server in a child process on the same 2 CPUs",
        "backend_short": "DynamoDB endpoint" if args.endpoint_url else "moto server on the same CPUs",
        "rounds": args.rounds,
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
        for api in ("frame", "rdd"):
            t, u = master["modes"][f"{api}/tracked"], master["modes"][f"{api}/untracked"]
            print(f"{master['label']} {api}: tracked ÷ untracked {t['wall_seconds'] / u['wall_seconds']:.2f}")
    bigs = [m["big_file"]["frame"] for m in masters if m["big_file"]]
    big_ok = all(b["exact"] and b["acked"] for b in bigs)
    return 0 if ok and big_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
