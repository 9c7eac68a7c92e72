"""The tracked word count against the plain PySpark job a user would write instead, as
whole processes, as a user starts them.

    .venv/bin/python -m benchmarks.wordcount_vs_plain [--pairs 3] [--masters local,cluster]
        [--corpus DIR] [--sizes 1,10] [--jobs plain,staged,frame,rdd] [--out DIR]

Every job is given the data as it lies: the corpus's folder (a glob of it where its
files sit in nested folders), as a user writes the job. Four commands per round, in
rotating order: (a) the plain PySpark DataFrame word count as a user writes it
(:data:`PLAIN`: ``spark.read.text(folder)`` with default settings, ``split`` on
``[^\\p{L}]+``, lower-case, empties dropped, ``explode``, ``groupBy("word").count()``,
CSV write), (b) ``xor-ack wordcount FOLDER`` (tracked, DataFrame path) and (c)
``xor-ack wordcount --api rdd FOLDER`` (tracked, RDD path), both on the embedded
default backend (the moto server the command starts itself), and (d) :data:`STAGED`:
the plain job with the Spark work that exactness per file takes and no tracking at all
(counts per file and word written as Parquet, read back per file, then counted per word
from there; the input listed by the driver, as (b) lists it), the floor of the tracked
DataFrame job. Each round's ratios b/a, c/a and d/a are a pair; the report gives the
median of at least three, per size. The counts of (b), (c) and (d) must equal
(a)'s exactly and every file must end acked.

Corpus: the UTF-8 ``copyright`` files under ``/usr/share/doc`` (the Debian packages'
notices: 710 files and 2,555,041 words on the machine the issue was measured on);
where there are fewer than 700, a reproducible corpus of 710 real-looking files and
2.5 million words is built (:mod:`benchmarks.corpus`). Each size after the first
(``--sizes``: multiples of it, default 1 and 10: 7,100 files and 25.6M words) is that
corpus with each file copied that many times under new names
(:func:`benchmarks.corpus.replicate`, into ``benchmarks/.corpus/<name>-x<k>/``, kept
between runs). Peak memory: the largest peak
resident set of the driver's JVM, the driver's Python process and any Python worker;
CPU seconds: every process of the command's tree, and the JVM's JIT compiler threads
apart, with the median of each round's CPU ratio to the plain run (locally: a cluster's
executors are not in the tree); both sampled from ``/proc``. Also on a standalone
cluster (``--masters cluster``, started from the pyspark package).

Bytecode: the interpreter's packages and this repository's are compiled first
(:func:`compile_bytecode`), as ``pip install`` leaves an installation: the project's own
installs use ``--no-compile`` and this machine sets ``PYTHONDONTWRITEBYTECODE``, where every
process would compile each module it imports, again, and a job that imports more (boto3,
this package) would pay for it in every run.

Writes ``wordcount_vs_plain.{json,md,png}`` beside this file (or into ``--out``). Exit
status 1 if any run was not exact or left a file not acked.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import csv
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .memory import peak_kib

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
XOR_ACK = str(Path(PYTHON).with_name("xor-ack"))

#: The job a user would write without tracking (run as ``python -c PLAIN MASTER OUT
#: FOLDER``, where FOLDER is the corpus's folder or a glob of its nested folders).
PLAIN = """
import sys
from pyspark.sql import SparkSession, functions as F
master, out, folder = sys.argv[1], sys.argv[2], sys.argv[3]
spark = SparkSession.builder.master(master).appName("plain wordcount").getOrCreate()
words = spark.read.text(folder).select(F.explode(F.split("value", r"[^\\p{L}]+")).alias("word"))
counts = words.where(F.col("word") != "").select(F.lower("word").alias("word")).groupBy("word").count()
counts.write.mode("overwrite").option("header", "true").csv(out)
spark.stop()
"""

#: The plain job with the Spark work of exactness per file (each file's counts staged
#: apart, read back per file, then the final count from the staged rows), untracked, and
#: its input listed by the driver as the tracked job lists it: the floor of the tracked
#: DataFrame job, so that tracked / staged is what tracking itself costs. (Run as
#: ``python -c STAGED MASTER OUT LIST``: LIST a file of the input paths, one a line.)
STAGED = """
import sys
from pyspark.sql import SparkSession, functions as F
master, out = sys.argv[1], sys.argv[2]
files = open(sys.argv[3], encoding="utf-8", errors="surrogateescape").read().splitlines()
spark = SparkSession.builder.master(master).appName("plain wordcount, staged per file").getOrCreate()
# The driver lists the input files, as the tracked job does (no 710-task listing job).
spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", str(len(files) + 1))
lines = spark.read.text(files).select(F.col("_metadata.file_path").alias("file"), "value")
words = lines.select("file", F.explode(F.split("value", r"[^\\p{L}]+")).alias("word"))
words = words.where(F.col("word") != "").select("file", F.lower("word").alias("word"))
words.groupBy("file", "word").count().write.mode("overwrite").parquet(out + "/staged")
staged = spark.read.schema("file string, word string, count bigint").parquet(out + "/staged")
assert len(staged.groupBy("file").agg(F.sum("count")).collect()) == len(files)
totals = staged.groupBy("word").agg(F.sum("count").alias("count"))
totals.write.mode("overwrite").option("header", "true").csv(out + "/counts")
spark.stop()
"""


def debian_corpus(minimum: int = 700) -> list[str] | None:
    """The UTF-8 ``/usr/share/doc/<package>/copyright`` files, copied to
    ``benchmarks/.debian-corpus/<package>.txt`` (many packages share one notice through a
    link: copies make them the distinct files a user would have), or None if fewer than
    ``minimum``."""
    root = HERE / ".debian-corpus"
    found = []
    for path in sorted(Path("/usr/share/doc").glob("*/copyright")):
        try:
            data = path.read_bytes()
            data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        copy = root / f"{path.parent.name}.txt"
        if not copy.exists() or copy.read_bytes() != data:
            root.mkdir(exist_ok=True)
            copy.write_bytes(data)
        found.append(str(copy))
    return found if len(found) >= minimum else None


def built_corpus() -> list[str]:
    from .corpus import CorpusSpec, build_corpus

    root = HERE / ".corpus-plain"
    build_corpus(root, CorpusSpec(files=710, words=2_500_000))
    return sorted(str(p) for p in root.rglob("*") if p.is_file())


@dataclass(frozen=True)
class Corpus:
    """A folder of input files as every job is given it: ``folder`` (to ``xor-ack
    wordcount``), ``spark_path`` (to ``spark.read.text``: the folder, or a glob when the
    files sit in nested folders) and ``files`` (the paths, for the staged job and the
    checks)."""

    folder: Path
    spark_path: str
    files: list[str]


def corpus_of(folder: Path) -> Corpus:
    """The :class:`Corpus` of every file under ``folder`` but hidden ones. Spark's text
    reader reads a folder's own files, not its subfolders': files in nested folders
    are read through a glob of their depth, which must then be the same for all."""
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(x.startswith((".", "_")) for x in p.relative_to(folder).parts)
    )
    depths = {len(p.relative_to(folder).parts) for p in files}
    if len(depths) != 1:
        raise SystemExit(
            f"{folder}: files at depths {sorted(depths)}; give a folder whose files sit at one depth"
        )
    depth = depths.pop()
    spark_path = str(folder) if depth == 1 else str(folder / "/".join("*" * depth))
    return Corpus(folder, spark_path, [str(p) for p in files])


def base_corpus(folder: str | None) -> Corpus:
    """The corpus of ``--corpus`` ``folder``, or else the Debian notices (a built corpus
    where there are too few)."""
    if folder:
        return corpus_of(Path(folder).resolve())
    files = debian_corpus() or built_corpus()
    return corpus_of(Path(files[0]).parent if ".debian-corpus" in files[0] else HERE / ".corpus-plain")


def larger(base: Corpus, times: int) -> Corpus:
    """``base`` with each file ``times`` times (:func:`benchmarks.corpus.replicate`), in
    ``benchmarks/.corpus/<base's folder>-x<times>/`` (gitignored); built once, checked
    byte for byte on later runs."""
    from .corpus import replicate

    if times == 1:
        return base
    folder = HERE / ".corpus" / f"{base.folder.name.lstrip('.')}-x{times}"
    replicate(base.folder, [Path(f) for f in base.files], folder, times)
    return corpus_of(folder)


def _kind(root: bool, cmdline: bytes) -> str | None:
    """Which peak a process counts in: the JVM, a Python worker, or the driver."""
    if b"java" in cmdline.split(b"\0")[0]:
        return "jvm"
    if b"pyspark.daemon" in cmdline or b"pyspark.worker" in cmdline or b"pyspark/daemon.py" in cmdline:
        return "workers"
    return "driver" if root else None


#: Linux's name (15 characters at most) of the JVM's JIT compiler threads.
_JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")


def _cpu_seconds(stat: str) -> float:
    """User + system CPU seconds from a ``/proc/.../stat`` line."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class PeakMemory:
    """Peak resident set (MiB) of a process tree's JVM, driver Python and Python
    workers, and the tree's CPU seconds (all its processes, and the JVM's JIT compiler
    threads apart), polled from ``/proc`` while a command runs. Each process counts with
    its last poll (every 0.1 s; the compiler threads every 0.5 s), so up to one interval
    of a process's last CPU time is missed, and the time of a compiler thread the JVM
    stops after its last poll; executors a cluster's workers start are not in the
    tree."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peaks: dict[str, int] = {"jvm": 0, "driver": 0, "workers": 0}
        self.cpu: dict[int, float] = {}
        self.jit: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _tree(self) -> list[tuple[int, bytes, str]]:
        children: dict[int, list[int]] = {}
        stats: dict[int, str] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text()
                    parent = int(stat.rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                children.setdefault(parent, []).append(int(entry.name))
                stats[int(entry.name)] = stat
        out, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            try:
                out.append((pid, Path(f"/proc/{pid}/cmdline").read_bytes(), stats.get(pid, "")))
            except OSError:
                continue
            todo += children.get(pid, [])
        return out

    def _jit_seconds(self, pid: int) -> float:
        """The CPU seconds of ``pid``'s JIT compiler threads (0 once it has exited)."""
        total = 0.0
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            return total
        for task in tasks:
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue
            if stat[stat.index("(") + 1 : stat.rindex(")")] in _JIT_THREADS:
                total += _cpu_seconds(stat)
        return total

    def _poll(self) -> None:
        tick = 0
        while not self._stop.wait(0.1):
            tick += 1
            for pid, cmdline, stat in self._tree():
                if stat:
                    self.cpu[pid] = max(self.cpu.get(pid, 0.0), _cpu_seconds(stat))
                kind = _kind(pid == self.root, cmdline)
                if kind is None:
                    continue
                if kind == "jvm" and tick % 5 == 0:
                    self.jit[pid] = max(self.jit.get(pid, 0.0), self._jit_seconds(pid))
                self.peaks[kind] = max(self.peaks[kind], peak_kib(pid))

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def mib(self) -> dict[str, float]:
        return {k: round(v / 1024, 1) for k, v in self.peaks.items()}

    def cpu_seconds(self) -> dict[str, float]:
        """``{"all": the tree's CPU seconds, "jit": its JVMs' compiler threads'}``."""
        return {"all": round(sum(self.cpu.values()), 2), "jit": round(sum(self.jit.values()), 2)}


def run(command: list[str], env: dict[str, str]) -> tuple[float, dict[str, float], dict[str, float], str]:
    """Wall seconds, peak memory, CPU seconds (:class:`PeakMemory`) and output of
    ``command``."""
    clock = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    with PeakMemory(process.pid) as memory:
        output, _ = process.communicate()
    seconds = time.perf_counter() - clock
    if process.returncode != 0:
        raise RuntimeError(
            f"{command[:3]} exited {process.returncode}:\n{output.decode(errors='replace')[-3000:]}"
        )
    return seconds, memory.mib(), memory.cpu_seconds(), output.decode(errors="replace")


def read_plain(out: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for part in out.glob("part-*.csv"):
        with open(part, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                counts[row["word"]] += int(row["count"])
    return counts


def read_tracked(out: Path) -> tuple[Counter[str], dict[str, Any]]:
    with open(out / "counts.csv", newline="", encoding="utf-8") as handle:
        counts = Counter({r["word"]: int(r["count"]) for r in csv.DictReader(handle)})
    return counts, json.loads((out / "report.json").read_text())


def backend_cpu(pid: int | None) -> float:
    """CPU seconds the process ``pid`` and every process below it have used so far (0
    without one): DynamoDB Local's server is a child of the process started for it."""
    if pid is None:
        return 0.0
    stats: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks = int(fields[11]) + int(fields[12])
        stats[int(entry.name)] = (int(fields[1]), ticks / os.sysconf("SC_CLK_TCK"))
    tree, total = {pid}, 0.0
    for _ in range(8):  # a few levels: the launcher, java, its helpers
        tree |= {p for p, (parent, _) in stats.items() if parent in tree}
    for p in tree:
        total += stats.get(p, (0, 0.0))[1]
    return total


def one_master(
    master: str,
    corpus: Corpus,
    pairs: int,
    work: Path,
    env: dict[str, str],
    jobs: list[str],
    ddb_local: Any = None,
) -> dict[str, Any]:
    files = corpus.files
    work.mkdir(parents=True, exist_ok=True)
    listing = work / "inputs.txt"
    listing.write_text("\n".join(files) + "\n", encoding="utf-8", errors="surrogateescape")
    every = {
        "plain": lambda out: [PYTHON, "-c", PLAIN, master, str(out), corpus.spark_path],
        "staged": lambda out: [PYTHON, "-c", STAGED, master, str(out), str(listing)],
        "frame": lambda out: [
            XOR_ACK,
            "wordcount",
            "--master",
            master,
            "--output",
            str(out),
            "--quiet",
            str(corpus.folder),
        ],
        "rdd": lambda out: [
            XOR_ACK,
            "wordcount",
            "--api",
            "rdd",
            "--master",
            master,
            "--output",
            str(out),
            "--quiet",
            str(corpus.folder),
        ],
    }
    for api in ("frame", "rdd"):
        # The tracker in the driver's memory (the library's own cost: every request
        # answered at once) and DynamoDB Local (its own process: its CPU is measured
        # apart, as a real backend's is not on the driver's cores).
        every[f"{api}-memory"] = lambda out, api=api: [*every[api](out), "--memory"]
        every[f"{api}-ddblocal"] = lambda out, api=api: [
            *every[api](out),
            "--endpoint-url",
            ddb_local.endpoint_url if ddb_local else "",
            "--table",
            f"wc-{out.name}",
        ]
    commands = {name: every[name] for name in every if name in jobs}
    compared = [name for name in commands if name != "plain"]
    load = [os.getloadavg()]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in commands}
    reference: Counter[str] | None = None
    exact = True
    order = list(commands)
    for round_ in range(pairs):
        turn = round_ % len(order)
        for name in order[turn:] + order[:turn]:
            out = work / f"{name}-{round_}"
            backend = ddb_local.pid if ddb_local is not None and name.endswith("-ddblocal") else None
            before = backend_cpu(backend)
            seconds, memory, cpu, _ = run(commands[name](out), env)
            entry: dict[str, Any] = {"seconds": round(seconds, 2), "memory_mib": memory, "cpu_seconds": cpu}
            if backend is not None:
                entry["backend_cpu_seconds"] = round(backend_cpu(backend) - before, 2)
            if name in ("plain", "staged"):
                counts = read_plain(out if name == "plain" else out / "counts")
            else:
                counts, report = read_tracked(out)
                totals = report["totals"]
                entry.update(
                    acked=totals["acked"] == totals["files"] == len(files),
                    requests=totals["dynamodb_requests"],
                    requests_per_word=totals["requests_per_word"],
                    requests_per_root=round(totals["dynamodb_requests"] / max(1, len(files)), 4),
                    phases=report.get("phases", {}),
                )
                exact &= entry["acked"]
            reference = reference if reference is not None else counts
            entry["exact"] = counts == reference
            exact &= entry["exact"]
            runs[name].append(entry)
            print(
                f"{master} {len(files)} files round {round_}: {name} {seconds:.1f} s, CPU {cpu} s, {memory}, "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            load.append(os.getloadavg())
    ratios = {
        name: [runs[name][i]["seconds"] / runs["plain"][i]["seconds"] for i in range(pairs)]
        for name in compared
    }
    cpu_ratios = {
        name: [
            runs[name][i]["cpu_seconds"]["all"] / runs["plain"][i]["cpu_seconds"]["all"] for i in range(pairs)
        ]
        for name in compared
    }
    words = sum(reference.values()) if reference else 0
    return {
        "master": master,
        "files": len(files),
        "words": words,
        "input": corpus.spark_path,
        "load_1min": [round(x[0], 1) for x in load],
        "runs": runs,
        "ratios": {k: [round(r, 3) for r in v] for k, v in ratios.items()},
        "median_ratio": {k: round(statistics.median(v), 3) for k, v in ratios.items()},
        "cpu_ratios": {k: [round(r, 3) for r in v] for k, v in cpu_ratios.items()},
        "median_cpu_ratio": {k: round(statistics.median(v), 3) for k, v in cpu_ratios.items()},
        "exact": exact,
    }


#: The jobs: the plain one, the staged floor, and the tracked ones per API and backend
#: (the embedded moto server by default; ``-memory``: a MemoryAck in the driver;
#: ``-ddblocal``: DynamoDB Local in a process of its own).
JOBS = {
    "plain": "plain PySpark",
    "staged": "plain PySpark, staged per file (untracked)",
    "frame": "xor-ack wordcount",
    "rdd": "xor-ack wordcount --api rdd",
    "frame-memory": "xor-ack wordcount --memory",
    "rdd-memory": "xor-ack wordcount --api rdd --memory",
    "frame-ddblocal": "xor-ack wordcount, DynamoDB Local",
    "rdd-ddblocal": "xor-ack wordcount --api rdd, DynamoDB Local",
}


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| master, input | job | median wall s | median ratio to plain | median CPU s (JIT) "
        "| median CPU ratio | requests per word | peak MiB (JVM / driver / worker) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        local = result["master"].startswith("local")
        where = f"{result['master']}, {result['files']:,} files / {result['words'] / 1e6:.2f}M words"
        for name in JOBS:
            if name not in result["runs"]:
                continue
            runs = result["runs"][name]
            wall = statistics.median(r["seconds"] for r in runs)
            ratio = "1" if name == "plain" else f"{result['median_ratio'][name]:.2f}"
            # On a cluster the executors are not in the command's process tree.
            cpu = cpu_ratio = "-"
            if local:
                total = statistics.median(r["cpu_seconds"]["all"] for r in runs)
                jit = statistics.median(r["cpu_seconds"]["jit"] for r in runs)
                cpu = f"{total:.1f} ({jit:.1f})"
                cpu_ratio = "1" if name == "plain" else f"{result['median_cpu_ratio'][name]:.2f}"
            rpw = "-" if name in ("plain", "staged") else f"{runs[-1]['requests_per_word']:.5f}"
            memory = max(runs, key=lambda r: r["memory_mib"]["jvm"])["memory_mib"]
            label = JOBS[name]
            backend = [r["backend_cpu_seconds"] for r in runs if r.get("backend_cpu_seconds")]
            if backend:  # DynamoDB Local's own process (a run before the tree was counted: 0)
                label += f" (backend CPU {statistics.median(backend):.1f} s)"
            lines.append(
                f"| {where} | {label} | {wall:.1f} | {ratio} | {cpu} | {cpu_ratio} "
                f"| {rpw} | "
                f"{memory['jvm']:.0f} / {memory['driver']:.0f} / {memory['workers']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.2 * len(results), 3.6), squeeze=False)
    for ax, result in zip(axes[0], results, strict=True):
        names = [n for n in JOBS if n in result["runs"]]
        values = [[r["seconds"] for r in result["runs"][n]] for n in names]
        ax.boxplot(values, tick_labels=names)
        ax.tick_params(axis="x", labelrotation=30)
        ax.set_title(f"{result['master']}: {result['files']} files, {result['words']:,} words")
        ax.set_ylabel("wall seconds (whole process)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def compile_bytecode() -> None:
    """Compile every module of this interpreter's packages and of the repository's package
    to ``__pycache__``, as ``pip install`` does by default (module doc, "Bytecode")."""
    for folder in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        compileall.compile_dir(folder, quiet=2, workers=0)
    compileall.compile_dir(str(HERE.parent / "xor_ack_dynamodb"), quiet=2, workers=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--masters", default="local")
    parser.add_argument("--corpus", help="a directory of text files instead of the Debian notices")
    parser.add_argument("--sizes", default="1,10", help="the corpus times each (default 1,10)")
    parser.add_argument("--jobs", default="plain,staged,frame,rdd", help="which jobs to run (plain always)")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    base = base_corpus(args.corpus)
    sizes = [int(k) for k in args.sizes.split(",")]
    jobs = ["plain", *(j for j in args.jobs.split(",") if j != "plain")]
    unknown = set(jobs) - set(JOBS)
    if unknown:
        parser.error(f"unknown jobs: {sorted(unknown)}")
    compile_bytecode()
    env = {**os.environ, "PYSPARK_PYTHON": PYTHON}
    if any(j.endswith("-ddblocal") for j in jobs):  # DynamoDB Local takes any credentials
        fake = {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
        env = {**fake, **env}
    results = []
    with contextlib.ExitStack() as stack:
        ddb_local = None
        if any(j.endswith("-ddblocal") for j in jobs):
            from xor_ack_dynamodb.testing.dynamodb_local import DynamoDBLocal

            ddb_local = stack.enter_context(DynamoDBLocal())
        temp = stack.enter_context(tempfile.TemporaryDirectory(prefix="wc-vs-plain-"))
        for master in args.masters.split(","):
            for size in sizes:
                corpus = larger(base, size)
                work = Path(temp) / f"{master}-x{size}"
                if master == "cluster":
                    from xor_ack_dynamodb.testing.spark_servers import standalone_cluster

                    with standalone_cluster(Path(temp) / f"cluster-x{size}", cores=2, memory="2g") as url:
                        result = one_master(url, corpus, args.pairs, work, env, jobs, ddb_local)
                    result["master"] = "standalone cluster"
                else:
                    result = one_master("local[*]", corpus, args.pairs, work, env, jobs, ddb_local)
                results.append(result)
                write(results, args.out)  # after each size: a long run's figures so far
    print(table(results))
    return 0 if all(r["exact"] for r in results) else 1


def write(results: list[dict[str, Any]], out: Path) -> None:
    """``wordcount_vs_plain.{json,md,png}`` of ``results`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "wordcount_vs_plain.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "wordcount_vs_plain.md").write_text(table(results))
    plot(results, out / "wordcount_vs_plain.png")


if __name__ == "__main__":
    sys.exit(main())
