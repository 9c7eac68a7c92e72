"""The driver's heartbeat: a job that outlives its chains' TTL ends acked on both Spark
paths while the heartbeat runs, and the same job ends expired without it (so the test
can fail); the heartbeat itself keeps live chains pending, lets ended ones drop out,
stops with its block, and a chain it no longer touches expires."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table
from pyspark import cloudpickle

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.spark import CsvPartitionWriter, FrameTracking, Tracking
from xor_ack_dynamodb.spark.heartbeat import Heartbeat, HeartbeatPolicy

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: Chains time out 3 s after their last write; status reads ``expired`` 1 s later.
TTL = 3
SKEW = 1
#: Seconds of work the jobs do after their chains exist: more than TTL + SKEW.
WORK = 7.0


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("beat"), ttl_seconds=TTL, skew_seconds=SKEW)
    XorAckDynamoDB.from_config(config).create_table()
    return config


def _no_heartbeat_thread() -> bool:
    return not [t for t in threading.enumerate() if t.name == "xor-ack-heartbeat"]


def _slow(pair: Any) -> Any:
    time.sleep(WORK / 2)  # two records in one partition
    return pair


def _rdd_job(out: Path) -> Any:
    writer = CsvPartitionWriter(str(out), header=("key", "n"))

    def job(started: Any, attempt: int) -> None:
        # The chains are created as the first stage ends (before the shuffle); the slow
        # map runs in the second stage, after they exist.
        pairs = started.fan_out(lambda root: [(root, 1)])
        pairs.reduce_by_key(lambda a, b: a + b, 1).map(_slow).sink(writer)

    return job


@pytest.mark.parametrize("beat", [True, False], ids=["heartbeat", "no-heartbeat"])
def test_rdd_job_longer_than_the_ttl(spark: Any, config: AckConfig, tmp_path: Path, beat: bool) -> None:
    tracking = Tracking(spark.sparkContext, config, heartbeat=beat)
    clock = time.monotonic()
    report = tracking.run(["r1", "r2"], lambda r: r, _rdd_job(tmp_path / "out"), max_attempts=1)
    assert time.monotonic() - clock > TTL + SKEW
    states = [o.state for o in report.outcomes]
    counters = report.counters
    assert _no_heartbeat_thread()
    if beat:
        print("rdd heartbeat:", {k: v for k, v in counters.items() if k.startswith("heartbeat.")})
        assert states == ["acked", "acked"]
        assert counters["heartbeat.touches"] >= 2 and counters["heartbeat.requests"] > 0
    else:
        assert states == ["expired", "expired"]
        assert counters["heartbeat.beats"] == 0 and counters["heartbeat.requests"] == 0


def _slow_udf(value: str | None) -> str | None:
    if value is not None:
        # WORK per row, not per job: the rows may run in parallel tasks, and the chains
        # are created in the background as the job starts (later on a loaded machine).
        time.sleep(WORK)
    return value


@pytest.mark.parametrize("beat", [True, False], ids=["heartbeat", "no-heartbeat"])
def test_frame_job_longer_than_the_ttl(spark: Any, config: AckConfig, tmp_path: Path, beat: bool) -> None:
    from pyspark.sql import functions as F

    def job(attempt: Any) -> Any:
        rows = attempt.spark.createDataFrame([("o1", "a"), ("o2", "b")], "order string, item string")
        frame = attempt.start(rows, "order")
        slow = F.udf(_slow_udf, "string")
        return frame.with_column("item", slow(F.col("item"))).write(tmp_path / f"a{attempt.number}")

    tracking = FrameTracking(spark, config, heartbeat=beat)
    clock = time.monotonic()
    report = tracking.run(["o1", "o2"], lambda k: k, job, max_attempts=1)
    assert time.monotonic() - clock > TTL + SKEW
    states = [o.state for o in report.outcomes]
    assert _no_heartbeat_thread()
    if beat:
        print("frame heartbeat:", {k: v for k, v in report.counters.items() if k.startswith("heartbeat.")})
        assert states == ["acked", "acked"]
        assert report.counters["heartbeat.touches"] >= 2
    else:
        assert states == ["expired", "expired"]
        assert report.counters["heartbeat.requests"] == 0


@pytest.mark.parametrize("method", ["batch", "single"])
def test_the_heartbeat_keeps_live_chains_and_drops_ended_ones(config: AckConfig, method: str) -> None:
    tracker = XorAckDynamoDB.from_config(config)
    owner = "run-1"
    for tag in ("live", "done", "theirs"):
        tracker.create(tag, b"\x01" * 8, owner=owner if tag != "theirs" else "other")
    tracker.stamp("done", b"\x01" * 8, owner=owner)
    policy = HeartbeatPolicy(interval=0.5, method=method)
    beat = Heartbeat(
        XorAckDynamoDB.from_config(config), ["live", "done", "theirs", "later"], owner=owner, policy=policy
    )
    with beat:
        time.sleep(1.2)
        tracker.create("later", b"\x02" * 8, owner=owner)  # created while the job runs
        time.sleep(TTL + SKEW + 0.5)
        assert beat.live == {"live", "later"}
    assert _no_heartbeat_thread()
    statuses = tracker.status_many(["live", "later"])
    assert statuses["live"].state == statuses["later"].state == "pending"  # past their first deadline
    figures = beat.figures()
    assert figures["heartbeat.not_yet"] >= 1 and figures["heartbeat.dropped"] == 2
    assert figures["heartbeat.requests"] > 0 and figures["heartbeat.requests_per_chain_minute_x1000"]
    # Touched no more (its driver gone): it expires.
    time.sleep(TTL + SKEW + 1.1)
    assert tracker.status("live").state == "expired"


def test_bad_heartbeat_settings_are_refused_before_any_request(spark: Any, config: AckConfig) -> None:
    for bad in (0, -1, True, "1"):
        with pytest.raises(InvalidConfig, match="interval"):
            HeartbeatPolicy(interval=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfig, match="method"):
        HeartbeatPolicy(method="often")  # type: ignore[arg-type]
    with pytest.raises(InvalidConfig, match="threads"):
        HeartbeatPolicy(method="single", threads=0)
    with pytest.raises(InvalidConfig, match="heartbeat"):
        Tracking(spark.sparkContext, config, heartbeat="yes")  # type: ignore[arg-type]
