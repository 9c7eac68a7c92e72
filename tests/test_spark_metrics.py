"""A tracked run's figures reach Spark (xor_ack_dynamodb.spark.metrics): on classic Spark
every job of the run carries the run's job tag and its attempt's description, and a job
with no task carries the run's final figures, read back here from Spark's own status
store (what the UI's Jobs page shows), on the DataFrame and the RDD path; the thread's
own description and tags are restored after the run. Under Spark Connect the run's
operations carry its tags. Real Spark (local[2], session-wide) against the moto server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table
from pyspark import cloudpickle

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.spark import CsvPartitionWriter, FrameTracking, RDDTracking, RunReport
from xor_ack_dynamodb.spark.metrics import METRICS, parse_summary, run_tag, summary

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("metrics"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


def spark_jobs(sc: Any, tag: str) -> list[dict[str, Any]]:
    """The jobs Spark's status store holds with ``tag``, in order: description, tasks."""
    jobs = sc._jsc.sc().statusStore().jobsList(None)
    found = []
    for i in range(jobs.length()):
        job = jobs.apply(i)
        tags = job.jobTags()
        if tag in {tags.apply(k) for k in range(tags.length())}:
            description = job.description()
            text = description.get() if description.isDefined() else None
            found.append({"id": job.jobId(), "description": text, "tasks": job.numTasks()})
    return sorted(found, key=lambda j: j["id"])


def check_published(sc: Any, report: RunReport, run_id: str, attempts: list[int]) -> dict[str, int]:
    """The run's jobs in Spark: each attempt's jobs described as that attempt with its
    number of roots, then one job of no task whose description holds the run's figures
    (equal to the report's); returns those figures. Spark's status store is fed by its
    listener bus, asynchronously: the run's last jobs may reach it after the run
    returns, so this waits for the bus to drain first (Spark's own wait: up to 10 s)."""
    sc._jsc.sc().listenerBus().waitUntilEmpty()
    jobs = spark_jobs(sc, run_tag(run_id))
    *work, last = jobs
    labels = [j["description"] for j in work]
    expected = [f"xor-ack run {run_id} attempt {n}: {roots} roots" for n, roots in enumerate(attempts, 1)]
    assert sorted(set(labels)) == sorted(expected), labels
    assert labels == sorted(labels, key=expected.index)  # attempt 1's jobs before attempt 2's
    assert last["tasks"] == 0
    parsed = parse_summary(last["description"])
    assert parsed is not None and parsed[0] == run_id
    assert parsed[1] == report.figures()
    assert list(parsed[1]) == list(METRICS)
    return parsed[1]


def test_a_dataframe_run_publishes_its_attempts_and_figures(
    spark: Any, config: AckConfig, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    rows = [("o1", "apple"), ("o2", "pear"), ("o3", "fig")]

    def job(attempt: Any) -> Any:
        frame = attempt.start(attempt.spark.createDataFrame(rows, "order string, item string"), "order")
        if attempt.number == 1:
            frame = frame.fail_when(F.col("order") == "o2", "not yet")
        return frame.write(tmp_path / f"a{attempt.number}")

    sc = spark.sparkContext
    sc.setJobDescription("the caller's own description")
    tracking = FrameTracking(spark, config, heartbeat=False)
    try:
        report = tracking.run([r[0] for r in rows], lambda k: k, job, max_attempts=2)
        assert sc.getLocalProperty("spark.job.description") == "the caller's own description"
    finally:
        sc.setJobDescription(None)
    assert [o.state for o in report.outcomes] == ["acked"] * 3
    values = check_published(sc, report, tracking.run_id, [3, 1])
    assert values["roots"] == values["roots_acked"] == 3
    assert values["roots_failed"] == values["roots_expired"] == values["roots_missing"] == 0
    assert values["replays"] == 1
    # Attempt 1 stamps o1 and o3 and fails o2's chain; attempt 2 stamps o2's new chain.
    assert values["stamps"] == report.counters["stamps"] == 3
    assert values["requests"] == report.counters["requests"] > 0
    assert values["heartbeats"] == 0  # heartbeat=False
    # The run's tag is gone from the thread: a later job is not the run's.
    before = spark_jobs(sc, run_tag(tracking.run_id))
    spark.range(3).count()
    assert spark_jobs(sc, run_tag(tracking.run_id)) == before


def _fail_r2_first(attempt: int) -> Any:
    def check(pair: Any) -> Any:
        if attempt == 1 and pair[0] == "r2":
            raise ValueError("r2 fails its first attempt")
        return pair

    return check


def test_an_rdd_run_publishes_its_attempts_and_figures(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    sc = spark.sparkContext
    tracking = RDDTracking(sc, config)

    def job(started: Any, attempt: int) -> None:
        writer = CsvPartitionWriter(str(tmp_path / f"a{attempt}"), header=("key", "n"))
        pairs = started.fan_out(lambda root: [(root, 1)]).map(_fail_r2_first(attempt))
        pairs.reduce_by_key(lambda a, b: a + b, 1).sink(writer)

    report = tracking.run(["r1", "r2", "r3"], lambda r: r, job, max_attempts=2)
    assert [o.state for o in report.outcomes] == ["acked"] * 3
    values = check_published(sc, report, tracking.run_id, [3, 1])
    assert values["roots_acked"] == 3 and values["replays"] == 1
    assert values["requests"] == report.counters["requests"] > 0
    assert sc.getLocalProperty("spark.job.description") is None


def test_a_run_that_raises_leaves_the_thread_as_it_was(spark: Any, config: AckConfig) -> None:
    sc = spark.sparkContext
    tracking = FrameTracking(spark, config, heartbeat=False)
    with pytest.raises(Exception, match="same key"):
        tracking.run(["a", "a"], lambda k: k, lambda attempt: None)
    assert sc.getLocalProperty("spark.job.description") is None
    spark.range(2).count()
    assert spark_jobs(sc, run_tag(tracking.run_id)) == []


def test_summary_round_trip_and_tags() -> None:
    values = {name: n for n, name in enumerate(METRICS)}
    assert parse_summary(summary("20261125T000000Z-ab12", values)) == ("20261125T000000Z-ab12", values)
    assert parse_summary("xor-ack run r attempt 1: 3 roots") is None
    assert run_tag("a,b") == "xor-ack-run-a_b"


def test_a_connect_run_tags_its_operations(connect_url: str, config: AckConfig, tmp_path: Path) -> None:
    from spark_helpers import remote_session

    seen: list[set[str]] = []
    with remote_session(connect_url) as remote:

        def job(attempt: Any) -> Any:
            seen.append(set(remote.getTags()))
            rows = remote.createDataFrame([("o1", "a"), ("o2", "b")], "order string, item string")
            return attempt.start(rows, "order").write(tmp_path / f"a{attempt.number}")

        tracking = FrameTracking(remote, config, heartbeat=False)
        report = tracking.run(["o1", "o2"], lambda k: k, job)
        after = set(remote.getTags())
    assert [o.state for o in report.outcomes] == ["acked", "acked"]
    tag = run_tag(tracking.run_id)
    assert seen == [{tag, f"{tag}-attempt-1"}]
    assert after == set()
