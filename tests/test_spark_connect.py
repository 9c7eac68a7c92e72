"""The DataFrame path under Spark Connect (Spark 4's client model: no SparkContext, no
RDDs), against a Connect server started from the pyspark package (``SparkConnectServer``
through ``spark-submit``, local[2,4]). The client here creates and stamps the chains; the
server's Python workers run the data sources."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table
from spark_helpers import CORPUS, aws_test_env, plain_count, read_counts

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.jobs.wordcount.job import find_inputs, run_wordcount
from xor_ack_dynamodb.spark.frame import FrameTracking, is_connect

pytestmark = pytest.mark.spark


#: What a Connect session sets in os.environ, for the whole process: while it is set,
#: PySpark takes every session (and Column) for a Connect one, and a classic
#: SparkContext cannot start. Restored when this module's session is done, so the other
#: Spark test modules (classic, same process) work whatever the order.
_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


@pytest.fixture(scope="module")
def remote(connect_url: str) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    before = {name: os.environ.get(name) for name in _CONNECT_ENV}
    session = SparkSession.builder.remote(connect_url).create()
    try:
        yield session
    finally:
        session.stop()
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("connect"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


def test_wordcount_under_spark_connect_with_replays(remote: Any, config: AckConfig, tmp_path: Path) -> None:
    assert is_connect(remote)
    inputs = find_inputs([CORPUS])[:10]
    report = run_wordcount(remote, inputs, tmp_path, config, fail_rate=0.01, seed=5, keep_parts=True)
    assert report.api == "frame"
    assert all(f.state == "acked" for f in report.files)
    assert report.totals()["replays"] > 0  # some files met an injected failure
    assert read_counts(tmp_path / "counts.csv") == plain_count(inputs)


def test_the_rdd_job_is_refused_under_spark_connect(remote: Any, config: AckConfig, tmp_path: Path) -> None:
    from xor_ack_dynamodb.errors import InvalidConfig

    with pytest.raises(InvalidConfig, match="no RDDs"):
        run_wordcount(remote, find_inputs([CORPUS]), tmp_path, config, api="rdd")


def test_tracked_frame_operations_under_spark_connect(remote: Any, config: AckConfig, tmp_path: Path) -> None:
    """The generic source (a key column, balanced per partition by ``mapInArrow``), a
    join, an explode, a filter and a grouping, all through Connect."""
    from pyspark.sql import functions as F

    rows = [("o1", "apple banana", "eu"), ("o2", "cherry", "us"), ("o3", "apple", "xx")]
    regions = remote.createDataFrame([("eu",), ("us",)], "region string")

    def job(attempt: Any) -> Any:
        frame = attempt.start(
            remote.createDataFrame(rows, "order string, items string, region string"), "order"
        )
        frame = frame.join(regions, "region", "inner")
        items = frame.explode(F.split("items", " "), "item").where(F.col("item") != "banana")
        return items.group_by("order", "item").count().write(tmp_path / "out")

    tracking = FrameTracking(remote, config)
    report = tracking.run(["o1", "o2", "o3"], lambda k: k, job)
    assert [o.state for o in report.outcomes] == ["acked"] * 3
    written = remote.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r["order"], r["item"], r["count"]) for r in written) == [
        ("o1", "apple", 1),
        ("o2", "cherry", 1),
    ]


def test_command_with_remote(connect_url: str, moto_server: LocalDynamoDB, tmp_path: Path) -> None:
    """``xor-ack wordcount --remote sc://...`` in its own process (no JVM on the client)."""
    inputs = [str(CORPUS / "psalm-023.txt"), str(CORPUS / "sonnet-018.txt")]
    result = subprocess.run(
        [sys.executable, "-m", "xor_ack_dynamodb", "wordcount", *inputs, "--remote", connect_url]
        + ["--endpoint-url", str(moto_server.endpoint_url), "--table", unique_table("remote")]
        + ["--output", str(tmp_path), "--quiet"],
        env={**aws_test_env(), "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent.parent)])},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Spark {connect_url}" in result.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["totals"]["acked"] == 2
    assert read_counts(tmp_path / "counts.csv") == plain_count(Path(p) for p in inputs)


def test_read_backs_are_left_to_the_server(remote: Any, tmp_path: Path) -> None:
    """Under Spark Connect the files are the server's: the client never reads staged
    output itself (``driver_read``), even where it could see the folder."""
    from xor_ack_dynamodb.spark.frame.driver_read import driver_files
    from xor_ack_dynamodb.spark.output import Location

    remote.range(3).write.parquet(str(tmp_path / "staged"))
    assert list((tmp_path / "staged").glob("part-*"))
    assert driver_files(remote, [Location.of(tmp_path / "staged")]) is None
