"""Tracked vs untracked word count on the bundled corpus, in one SparkContext.

Prints DynamoDB requests per word and the wall time of each run (the JVM and the
embedded moto server are started once, before the first timed run; runs alternate so
that neither side gets all the warm caches).

    .venv/bin/python benchmarks/spark_wordcount.py [--rounds 3] [--master local[2]] [--scale 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from xor_ack_dynamodb import LocalDynamoDB
from xor_ack_dynamodb.spark.context import get_context
from xor_ack_dynamodb.wordcount import default_corpus, find_inputs, run_wordcount


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--scale", type=int, default=1, help="repeat each file's text this many times")
    args = parser.parse_args()
    inputs = find_inputs([default_corpus()])
    scaled = tempfile.TemporaryDirectory()
    if args.scale > 1:  # as many files (chains), SCALE times the words
        for path in inputs:
            text = path.read_text(encoding="utf-8")
            (Path(scaled.name) / path.name).write_text(text * args.scale, encoding="utf-8")
        inputs = find_inputs([scaled.name])
    sc, _ = get_context(args.master, app_name="bench wordcount")
    times: dict[str, list[float]] = {"tracked": [], "untracked": []}
    per_word: list[float] = []
    with LocalDynamoDB() as local, tempfile.TemporaryDirectory() as tmp:
        config = local.config("bench-wordcount")
        config.connect().create_table()
        run_wordcount(sc, inputs, Path(tmp) / "warmup", config)  # JVM, workers, boto3 imports
        for n in range(args.rounds):
            for mode in ("untracked", "tracked"):
                report = run_wordcount(
                    sc, inputs, Path(tmp) / f"{mode}-{n}", config if mode == "tracked" else None
                )
                assert report.all_acked
                times[mode].append(report.wall_seconds)
                if mode == "tracked":
                    per_word.append(report.totals()["requests_per_word"])
    sc.stop()
    words = report.totals()["words"]
    tracked, untracked = statistics.median(times["tracked"]), statistics.median(times["untracked"])
    scaled.cleanup()
    print(f"corpus: {len(inputs)} files x{args.scale}, {words} words; {args.master}; {args.rounds} rounds")
    print(f"requests per word: {statistics.median(per_word):.4f} (target <= 0.05)")
    ratio = tracked / untracked
    print(f"wall seconds, median: tracked {tracked:.2f}, untracked {untracked:.2f}, ratio {ratio:.2f}")
    for mode, runs in times.items():
        print(f"{mode} runs: {[round(t, 2) for t in runs]}")


if __name__ == "__main__":
    main()
