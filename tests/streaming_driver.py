"""A tracked streaming query as its own Spark driver process (what the standalone
cluster test runs: a classic driver cannot switch masters inside the test process).

``python tests/streaming_driver.py MASTER WORKDIR`` lands four files, runs a file-source
query whose first run fails in the write (every write task raises), restarts it from
the checkpoint, and prints one JSON line: the files, the keys each batch report acked,
each chain's state and writes, and whether the written rows equal the files' lines
exactly.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any


def main(master: str, workdir: Path) -> dict[str, Any]:
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as F
    from spark_helpers import land

    from xor_ack_dynamodb import LocalDynamoDB, XorAckDynamoDB
    from xor_ack_dynamodb.spark import StreamTracking, TrackedFrame
    from xor_ack_dynamodb.spark.context import get_session

    inbox, checkpoint, out = workdir / "inbox", workdir / "checkpoint", workdir / "out"
    inbox.mkdir(parents=True)
    files = {f"f{i}.txt": [f"line {j} of file {i}" for j in range(i + 1)] for i in range(4)}
    clock = time.time() - 100
    for i, (name, lines) in enumerate(files.items()):
        land(inbox, name, lines, clock + i)

    def job(frame: TrackedFrame, batch_id: int) -> TrackedFrame:
        return frame.select("path", "value")

    def failing(frame: TrackedFrame, batch_id: int) -> TrackedFrame:  # every write task raises
        fail = F.when(F.col("value").isNotNull(), F.raise_error(F.lit("injected sink failure")))
        return frame.select("path", F.coalesce(fail.cast("string"), F.col("value")).alias("value"))

    spark, _ = get_session(master, conf={"spark.task.maxFailures": "2"})
    with LocalDynamoDB() as dynamodb:
        config = dynamodb.config("stream-cluster")
        XorAckDynamoDB.from_config(config).create_table()

        def run(batch_job: Any = job) -> StreamTracking:
            tracking = StreamTracking(config, batch_job, stream_id="cluster", location=out, key="path")
            lines = (
                spark.readStream.format("text")
                .option("maxFilesPerTrigger", 2)
                .load(str(inbox))
                .select("value", F.col("_metadata.file_path").alias("path"))
            )
            query = (
                lines.writeStream.foreachBatch(tracking)
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            return tracking

        try:
            run(failing)
            first_failed = False
        except StreamingQueryException:
            first_failed = True
        tracking = run()
        reports = tracking.reports()
        tags = [tracking.tag(k) for r in reports for k in r.acked]
        statuses = XorAckDynamoDB.from_config(config).status_many(tags)
        rows = spark.read.parquet(str(out / "batch-*")).collect()
        written = Counter((Path(r["path"]).name, r["value"]) for r in rows)
        expected = Counter((name, line) for name, lines in files.items() for line in lines)
        return {
            "master": spark.sparkContext.master,
            "first_failed": first_failed,
            "files": sorted(files),
            "acked": sorted(Path(k).name for r in reports for k in r.acked),
            "chains": sorted({(s.state, s.version) for s in statuses.values()}),
            "exact": written == expected,
            "rows": sum(written.values()),
        }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))))
