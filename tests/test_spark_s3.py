"""``s3://`` inputs, tracked end to end on moto's S3 (the moto server serves S3 too).

The pip package's Spark has no S3 file system (no S3A or EMRFS jars, none on PyPI), so
``read_text`` finds none and reads ``s3://`` roots with its Arrow reader (boto3 on the
executors); on EMR the same call reads them with Spark's own reader."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest
from conftest import unique_table
from spark_helpers import read_counts

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.cli import main
from xor_ack_dynamodb.spark import FrameTracking, OutputRefused
from xor_ack_dynamodb.spark.frame.sources import BAD_BYTES_NOTE, has_filesystem

pytestmark = pytest.mark.spark


@pytest.fixture
def bucket(moto_server: LocalDynamoDB, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str]:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", str(moto_server.endpoint_url))
    s3 = boto3.session.Session(region_name="us-east-1").client("s3", endpoint_url=moto_server.endpoint_url)
    name = unique_table("in").lower()
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="in/a.txt", Body=b"one two\r\ntwo three three\n")
    s3.put_object(Bucket=name, Key="in/b.txt", Body=b"caf\xe9 four\nfour")
    return s3, name


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("s3"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


def test_s3_inputs_are_tracked_end_to_end(
    spark: Any, config: AckConfig, bucket: tuple[Any, str], tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    _, name = bucket
    assert not has_filesystem(spark, "s3")  # so the Arrow reader reads them here
    roots = [f"s3://{name}/in/a.txt", f"s3://{name}/in/b.txt", f"s3://{name}/in/gone.txt"]

    def job(attempt: Any) -> Any:
        words = attempt.read_text().explode(F.split("line", r"[^\p{L}]+"), "word").where(F.col("word") != "")
        return words.group_by("word").count().write(tmp_path / "out")

    report = FrameTracking(spark, config).run(roots, lambda r: r, job, max_attempts=2)
    a, b, gone = report.outcomes
    assert (a.state, b.state) == ("acked", "acked")
    assert b.notes == [BAD_BYTES_NOTE]
    assert gone.state == "failed" and "NoSuchKey" in (gone.attempts[0].reason or "")
    rows = spark.read.parquet(str(tmp_path / "out")).groupBy("word").sum("count").collect()
    assert {r["word"]: r["sum(count)"] for r in rows} == {"one": 1, "two": 2, "three": 2, "caf": 1, "four": 2}


@pytest.mark.parametrize("api", ["frame", "rdd"])
def test_the_word_count_reads_an_s3_prefix(
    moto_server: LocalDynamoDB, bucket: tuple[Any, str], tmp_path: Path, api: str
) -> None:
    _, name = bucket
    table = unique_table("s3wc")
    status = main(
        ["wordcount", f"s3://{name}/in/", "--api", api, "--endpoint-url", str(moto_server.endpoint_url)]
        + ["--table", table, "--output", str(tmp_path), "--quiet"]
    )
    assert status == 0
    assert read_counts(tmp_path / "counts.csv") == Counter(
        {"two": 2, "three": 2, "four": 2, "one": 1, "caf": 1}
    )
    report = json.loads((tmp_path / "report.json").read_text())
    assert [f["path"] for f in report["files"]] == [f"s3://{name}/in/a.txt", f"s3://{name}/in/b.txt"]
    assert report["totals"]["acked"] == 2


def test_a_write_to_s3_is_refused_where_spark_has_no_s3_file_system(
    spark: Any, config: AckConfig, bucket: tuple[Any, str]
) -> None:
    _, name = bucket
    tracking = FrameTracking(spark, config)
    with pytest.raises(OutputRefused, match="no file system"):
        tracking.run(
            ["a"],
            lambda r: r,
            lambda a: a.read_text(lambda r: f"s3://{name}/in/a.txt").write(f"s3://{name}/out"),
        )
