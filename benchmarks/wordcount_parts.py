"""Where the tracked DataFrame word count's time goes, one mechanism at a time.

    .venv/bin/python -m benchmarks.wordcount_parts [--rounds 3] [--sizes 1,10] [--out DIR]

The plain job of :mod:`benchmarks.wordcount_vs_plain` (``spark.read.text(folder)``,
split on ``[^\\p{L}]+``, lower-case, ``groupBy("word").count()``), then the same query
with each per-row mechanism of the tracked job added on top of the step before, built
from the library's own pieces:

1. ``plain``: the plain job's query;
2. ``nfc``: the word rule's normalization of each line
   (:func:`~xor_ack_dynamodb.spark.frame.sources.nfc`);
3. ``root``: each line's root, by :func:`~xor_ack_dynamodb.spark.frame.keys.match_key`
   of ``_metadata.file_path`` and a broadcast join to the roots' table, a line of no root
   raising (what :func:`~xor_ack_dynamodb.spark.frame.sources.read_text` does);
4. ``notes``: the side channel of bad bytes (``observe`` of ``collect_set``);
5. ``minmax``: the root's ``min`` and ``max`` beside the count (a group's tag);
6. ``read_text``: the library's own build of steps 2 to 4, with step 5's aggregate (a
   check that the steps add up to what the library runs).

Each step is a fresh process (a cold JVM, as a user's job starts). Timed: the query's
action (its physical planning, the broadcast, the job) and the JVM's CPU seconds over it,
from ``/proc``; not timed: the session's start and building the DataFrame. The steps run
in a rotating order, ``--rounds`` times; the table gives per step the median seconds, the
median of the rounds' ratios to ``plain`` and the step's own share (the median of the
rounds' differences between its ratio and the step before's). Every step sums the counts
in one more small aggregate, collected: the words and distinct words must be the plain
step's, or the run exits 1.

Writes ``wordcount_parts.{json,md}`` into ``--out`` (default: beside this file).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .wordcount_vs_plain import HERE, PYTHON, Corpus, base_corpus, larger

#: The steps, each with its label in the table.
STEPS = ("plain", "nfc", "root", "notes", "minmax", "read_text")
LABELS = dict(zip(STEPS, ("plain", "+ NFC", "+ root", "+ notes", "+ min/max", "read_text"), strict=True))

#: One step in one process: ``python -c STEP STEP_INDEX FOLDER`` prints a json line.
STEP = r"""
import glob, json, os, sys, time
from pyspark.sql import Observation, SparkSession, functions as F
step, folder = int(sys.argv[1]), sys.argv[2]
spark = SparkSession.builder.master("local[*]").config("spark.ui.showConsoleProgress", "false").getOrCreate()
from xor_ack_dynamodb.spark.frame.columns import CHAIN, local_table
from xor_ack_dynamodb.spark.frame.keys import match_key
from xor_ack_dynamodb.spark.frame.sources import TextRoot, nfc, read_text
from xor_ack_dynamodb.spark.frame.tracked import Probes
files = sorted(f for f in glob.glob(os.path.join(folder, "*")) if os.path.isfile(f))
if step == 5:
    build, _ = read_text(spark, [TextRoot(i, p) for i, p in enumerate(files)])
    lines = build(Probes()).select(F.col(CHAIN).alias("c"), "line")
else:
    lines = spark.read.text(folder)
    lines = lines.select(F.lit(0).alias("c"), F.col("_metadata.file_path").alias("k"), "value")
    if step >= 2:
        roots = local_table(spark, {"k": ("string", files), "r": ("int", list(range(len(files))))})
        roots = roots.select(match_key(F.col("k")).alias("k"), "r")
        lines = lines.select(match_key(F.col("k")).alias("k"), "value").join(F.broadcast(roots), "k", "left")
        stray = F.raise_error(F.concat(F.lit("a line of no root: "), F.col("k"))).cast("int")
        root = F.coalesce(F.col("r"), stray)
        lines = lines.select(root.alias("c"), "value")
    if step >= 3:
        note = F.when(~F.is_valid_utf8("value"), F.lit("bad bytes"))
        noted = F.collect_set(F.when(note.isNotNull(), F.struct("c", note)))
        lines = lines.observe(Observation(), noted.alias("notes"))
    lines = lines.select("c", (nfc("value") if step >= 1 else F.col("value")).alias("line"))
words = lines.select("c", F.explode(F.split("line", r"[^\p{L}]+")).alias("word")).where(F.col("word") != "")
words = words.select("c", F.lower("word").alias("word")).groupBy("word")
if step >= 4:
    counts = words.agg(F.count(F.lit(1)).alias("n"), F.min("c"), F.max("c"))
else:
    counts = words.agg(F.count(F.lit(1)).alias("n"))
pid = spark._jvm.java.lang.ProcessHandle.current().pid()
def cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
clock, before = time.perf_counter(), cpu()
total = counts.agg(F.sum("n"), F.count(F.lit(1))).collect()[0]
seconds, used = time.perf_counter() - clock, cpu() - before
print(json.dumps({"seconds": seconds, "cpu": used, "words": total[0], "distinct": total[1]}))
spark.stop()
"""


def one_run(step: int, corpus: Corpus) -> dict[str, Any]:
    """``STEP`` number ``step`` over ``corpus``, in a fresh process."""
    env = {**os.environ, "PYSPARK_PYTHON": PYTHON}
    done = subprocess.run(
        [PYTHON, "-c", STEP, str(step), corpus.spark_path], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"step {STEPS[step]!r} exited {done.returncode}:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def one_size(corpus: Corpus, rounds: int) -> dict[str, Any]:
    """Every step ``rounds`` times, the order rotating each round."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in STEPS}
    for r in range(rounds):
        order = list(range(len(STEPS)))
        order = order[r % len(order) :] + order[: r % len(order)]
        for step in order:
            found = one_run(step, corpus)
            runs[STEPS[step]].append(found)
            print(
                f"  round {r + 1}/{rounds} {STEPS[step]:10} "
                f"run {found['seconds']:6.2f} s  cpu {found['cpu']:6.1f} s",
                flush=True,
            )
    plain = runs["plain"]
    steps: dict[str, dict[str, Any]] = {}
    for name, measured in runs.items():
        steps[name] = {
            "median_seconds": round(statistics.median(f["seconds"] for f in measured), 2),
            "median_ratio": round(
                statistics.median(f["seconds"] / p["seconds"] for f, p in zip(measured, plain, strict=True)),
                3,
            ),
            "median_cpu": round(statistics.median(f["cpu"] for f in measured), 1),
            "median_cpu_ratio": round(
                statistics.median(f["cpu"] / p["cpu"] for f, p in zip(measured, plain, strict=True)), 3
            ),
            "runs": measured,
        }
    same = all(
        (f["words"], f["distinct"]) == (plain[0]["words"], plain[0]["distinct"])
        for measured in runs.values()
        for f in measured
    )
    return {
        "files": len(corpus.files),
        "words": plain[0]["words"],
        "rounds": rounds,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
        ).stdout.strip(),
        "same_counts": same,
        "steps": steps,
    }


def share(result: dict[str, Any], name: str) -> float:
    """The median, over the rounds, of step ``name``'s ratio to plain less the step
    before's (the runs of one round are paired)."""
    previous = STEPS[STEPS.index(name) - 1]
    plain, mine, before = (result["steps"][n]["runs"] for n in ("plain", name, previous))
    return float(
        statistics.median(
            (m["seconds"] - b["seconds"]) / p["seconds"] for p, m, b in zip(plain, mine, before, strict=True)
        )
    )


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| input | step | median run s | median ratio to plain | the step's own share "
        "| median JVM CPU s | median CPU ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for result in results:
        for name in STEPS:
            step = result["steps"][name]
            own = "" if name in ("plain", "read_text") else f"{share(result, name):+.2f}"
            lines.append(
                f"| {result['files']:,} files / {result['words']:,} words | {LABELS[name]} "
                f"| {step['median_seconds']:.2f} | {step['median_ratio']:.2f} | {own} "
                f"| {step['median_cpu']:.1f} | {step['median_cpu_ratio']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", help="a directory of text files instead of the Debian notices")
    parser.add_argument("--sizes", default="1,10", help="the corpus times each (default 1,10)")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    base = base_corpus(args.corpus)
    if base.spark_path != str(base.folder):
        parser.error("the steps read one folder of files: give a corpus without nested folders")
    results = []
    for size in (int(k) for k in args.sizes.split(",")):
        corpus = larger(base, size)
        print(f"{len(corpus.files):,} files:", flush=True)
        results.append(one_size(corpus, args.rounds))
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "wordcount_parts.json").write_text(json.dumps(results, indent=2) + "\n")
        (args.out / "wordcount_parts.md").write_text(table(results))
    print(table(results))
    return 0 if all(r["same_counts"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
