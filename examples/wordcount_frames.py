"""The tracked word count on DataFrames, written out: files -> lines -> words -> counts.

    .venv/bin/python examples/wordcount_frames.py [FILE_OR_DIR ...] [--remote sc://host:port]

One ack chain per file, created by this process while Spark reads. Files are read in
splits by the ``xor_ack_text`` source; words are extracted and counted per file in the
JVM; the ``xor_ack_sink`` source writes the counts and its commit records one XOR per
file; this process then stamps each file's chain once. Files whose chains failed are
replayed; the total counts only the rows of chains that ended acked.

This is the pipeline `xor-ack wordcount` runs (xor_ack_dynamodb/jobs/wordcount/frame.py),
without the reporting. It uses the embedded DynamoDB (a moto server in this process)
and Spark local[*], or a Spark Connect server with ``--remote``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.jobs.wordcount.job import find_inputs
from xor_ack_dynamodb.spark.context import get_session
from xor_ack_dynamodb.spark.frame import FrameAttempt, FrameTracking

CORPUS = Path(__file__).resolve().parent / "data"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("inputs", nargs="*")
    parser.add_argument("--remote")
    args = parser.parse_args(argv)
    files = [str(p) for p in find_inputs(args.inputs or [CORPUS])]
    with LocalDynamoDB() as dynamodb, tempfile.TemporaryDirectory() as out:
        config = dynamodb.config("wordcount-frames-example")
        XorAckDynamoDB.from_config(config).create_table()
        spark, created = get_session(remote=args.remote, app_name="wordcount frames example")
        try:
            tracking = FrameTracking(spark, config)

            def job(attempt: FrameAttempt) -> Any:
                lines = attempt.read_text()  # columns path, offset, line; every split accounted for
                words = lines.explode(F.regexp_extract_all("line", F.lit(r"\p{L}+"), 0), "word")
                counts = words.with_column("word", F.lower("word")).group_by("word").count()  # per file
                return counts.write(f"{out}/attempt-{attempt.number}")  # write, commit, then ack

            report = tracking.run(files, lambda path: path, job)

            # A total across files, exact under replay: the rows of acked chains only.
            attempts = sorted({len(o.attempts) for o in report.outcomes if o.acked})
            written = spark.read.parquet(*[f"{out}/attempt-{n}" for n in attempts])
            totals = tracking.acked_rows(written, report).groupBy("word").agg(F.sum("count").alias("n"))
            top = totals.orderBy(F.desc("n"), "word").limit(5).collect()
            words = totals.agg(F.sum("n")).collect()[0][0]
        finally:
            if created:
                spark.stop()

    for outcome in report.outcomes:
        print(f"{outcome.state:8} {len(outcome.attempts)} attempt(s)  {outcome.key}")
    print(f"{words} words; top: {[(r['word'], r['n']) for r in top]}")
    print(f"DynamoDB requests: {report.counters['requests']}")
    return 0 if all(o.acked for o in report.outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
