"""Long-running and handed-over Spark runs as their own driver process, for the
standalone cluster test (a classic driver cannot switch masters inside the test process).

``python tests/cluster_jobs.py MASTER WORKDIR`` runs, against an embedded moto server:

- ``heartbeat``: a tracked RDD job whose work after its chains exist outlasts the chains'
  TTL (3 s, skew 1 s), with the driver's heartbeat on; its chains must end acked;
- ``handed``: chains a Lambda-style caller created (plain ``create`` with an owner, the
  edge handed over in the rows), continued and completed by a DataFrame job; a chain of
  another owner is refused and left untouched.

It prints one JSON line with what each scenario saw.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

TTL, SKEW, WORK = 3, 1, 6.0
OWNER = "lambda-cluster"


def _slow(pair: Any) -> Any:
    time.sleep(WORK)
    return pair


def heartbeat(spark: Any, dynamodb: Any, workdir: Path) -> dict[str, Any]:
    from xor_ack_dynamodb import XorAckDynamoDB
    from xor_ack_dynamodb.spark import CsvPartitionWriter, Tracking

    config = dynamodb.config("cluster-beat", ttl_seconds=TTL, skew_seconds=SKEW)
    XorAckDynamoDB.from_config(config).create_table()
    writer = CsvPartitionWriter(str(workdir / "beat"), header=("key", "n"))

    def job(started: Any, attempt: int) -> None:
        # The chains exist once the first stage ends; the slow map runs after it.
        pairs = started.fan_out(lambda root: [(root, 1)])
        pairs.reduce_by_key(lambda a, b: a + b, 2).map(_slow).sink(writer)

    clock = time.monotonic()
    report = Tracking(spark.sparkContext, config).run(["r1", "r2"], lambda r: r, job, max_attempts=1)
    return {
        "seconds": round(time.monotonic() - clock, 1),
        "states": [o.state for o in report.outcomes],
        "touches": report.counters["heartbeat.touches"],
        "beat_requests": report.counters["heartbeat.requests"],
    }


def handed(spark: Any, dynamodb: Any, workdir: Path) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from xor_ack_dynamodb import XorAckDynamoDB
    from xor_ack_dynamodb.spark import FrameTracking, handed_from_rows, run_handed_frames

    config = dynamodb.config("cluster-handed")
    tracker = XorAckDynamoDB.from_config(config)
    tracker.create_table()
    rows = []
    for tag, owner, items in (("up/a", OWNER, ["apple banana", "apple"]), ("up/other", "someone", ["x"])):
        edge = os.urandom(16)
        tracker.create(tag, edge, owner=owner)
        rows += [(tag, edge.hex(), OWNER, item) for item in items]
    frame = spark.createDataFrame(
        rows, "xor_ack_tag string, xor_ack_edge string, xor_ack_owner string, item string"
    )
    other = tracker.status("up/other").version

    def job(attempt: Any) -> Any:
        tracked = attempt.start(frame, "xor_ack_tag").select("xor_ack_tag", "item")
        words = tracked.explode(F.split("item", " "), "word")
        return words.group_by("word").count().write(workdir / "handed", tag_column="chain")

    report = run_handed_frames(FrameTracking(spark, config), handed_from_rows(frame), job)
    written = spark.read.parquet(str(workdir / "handed")).collect()
    return {
        "states": {o.key: o.state for o in report.outcomes},
        "chains": {t: s.state for t, s in tracker.status_many(["up/a", "up/other"]).items()},
        "other_untouched": tracker.status("up/other").version == other,
        "written": sorted((r["chain"], r["word"], r["count"]) for r in written),
    }


def main(master: str, workdir: Path) -> dict[str, Any]:
    from xor_ack_dynamodb import LocalDynamoDB
    from xor_ack_dynamodb.spark.context import get_session

    spark, _ = get_session(master)
    with LocalDynamoDB() as dynamodb:
        return {
            "master": spark.sparkContext.master,
            "heartbeat": heartbeat(spark, dynamodb, workdir),
            "handed": handed(spark, dynamodb, workdir),
        }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))))
