"""The tracked word count, written out: database -> files -> words.

    .venv/bin/python examples/wordcount.py [FILE_OR_DIR ...]

One ack chain per file. Each file fans out into its words (one stamp acks the file and
starts every word); words are counted through a shuffle, carrying their pending edges;
the counts are written durably and only then acked. A file's chain reaches zero exactly
when all its words are in written output; files whose chains failed are replayed.

This is the pipeline `xor-ack wordcount --api rdd` runs (xor_ack_dynamodb/jobs/wordcount/rdd.py), without
the reporting. It uses the embedded DynamoDB (a moto server in this process) and Spark
local[*]; see docs/spark.md for a cluster and real DynamoDB.
"""

from __future__ import annotations

import operator
import sys
import tempfile
from collections import Counter
from pathlib import Path

from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.jobs.wordcount.job import find_inputs, tokenize
from xor_ack_dynamodb.spark import CsvPartitionWriter, TrackedRDD, Tracking, read_csv_parts
from xor_ack_dynamodb.spark.context import get_context

CORPUS = Path(__file__).resolve().parent / "data"


def words_of(path: str) -> list[tuple[str, str]]:
    """A file's words, each with the file it came from (runs on the executors)."""
    return [(path, word) for word in tokenize(Path(path).read_text(encoding="utf-8"))]


def main(argv: list[str]) -> int:
    files = [str(p) for p in find_inputs(argv or [CORPUS])]
    with LocalDynamoDB() as dynamodb, tempfile.TemporaryDirectory() as out:
        config = dynamodb.config("wordcount-example")  # picklable: executors build their own client
        XorAckDynamoDB.from_config(config).create_table()
        sc, _ = get_context(app_name="wordcount example")
        try:
            tracking = Tracking(sc, config)

            def job(files_rdd: TrackedRDD[str], attempt: int) -> None:
                writer = CsvPartitionWriter(
                    f"{out}/attempt-{attempt}",
                    header=("file", "word", "count"),
                    to_row=lambda rec: (*rec[0], rec[1]),
                )
                (
                    files_rdd.fan_out(words_of, "split")  # file -> (file, word): each keeps its file's root
                    .map(lambda fw: (fw, 1), "one")
                    .reduce_by_key(operator.add, 2, "count")  # per (file, word): one root a record
                    .sink(writer, "write")  # write durably; the committed job acks its files
                )

            report = tracking.run(files, lambda path: path, job)  # tags add the run id and a nonce
        finally:
            sc.stop()

        # Only the rows of the attempt whose chain ended acked count, once per file.
        acked = {(o.root, len(o.attempts)) for o in report.outcomes if o.acked}
        counts: Counter[str] = Counter()
        for path, attempt in acked:
            for row in read_csv_parts(f"{out}/attempt-{attempt}"):
                if row["file"] == path:
                    counts[row["word"]] += int(row["count"])

    for outcome in report.outcomes:
        print(f"{outcome.state:8} {len(outcome.attempts)} attempt(s)  {outcome.tag}")
    print(f"{sum(counts.values())} words, {len(counts)} distinct; top: {counts.most_common(5)}")
    print(f"DynamoDB requests: {report.counters['requests']}")
    return 0 if all(o.acked for o in report.outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
