"""Roots and keys as users have them, a failed job that says why, and a run that shows
its progress and prints its report (issue 32, items 3 to 5), on a real Spark
(classic local[2,4]) and the moto server.

A user's own pipeline from docs/spark.md: three CSV files of orders, roots given as
paths, rows keyed by the file Spark reports (``F.input_file_name()``: ``file:///...``).
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.spark.frame import FrameAttempt, FrameTracking

pytestmark = pytest.mark.spark

DAYS = {
    "day1.csv": "id,amount\n1,3\n2,4\n",
    "day 2.csv": "id,amount\n3,5\n4,6\n5,7\n",  # a space: Spark's URI says %20
    "day3.csv": "id,amount\n6,8\n",
}


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("roots"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


@pytest.fixture
def days(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "in"
    folder.mkdir()
    for name, text in DAYS.items():
        (folder / name).write_text(text)
    return sorted(folder / name for name in DAYS)


def test_rows_keyed_by_sparks_uri_match_roots_given_as_paths_and_the_reverse(
    spark: Any, config: AckConfig, days: list[Path], tmp_path: Path
) -> None:
    """Roots given as paths, rows keyed by ``F.input_file_name()`` (``file:///...``); and
    a root given as a URI (percent-encoded: ``day%202.csv``), rows keyed by its plain
    path. Before: ``InvalidConfig: a row's 'file' is 'file:///.../day1.csv', not the key
    of any root of the run``, raised out of ``run``."""
    from pyspark.sql import functions as F

    spaced, day1, day3 = days
    by_uri = (
        spark.read.option("header", True)
        .csv([str(day1), str(day3)])
        .select(F.col("amount").cast("int").alias("amount"), F.input_file_name().alias("file"))
    )
    by_path = spark.createDataFrame(
        [(5, str(spaced)), (6, str(spaced)), (7, str(spaced))], "amount int, file string"
    )
    roots = [spaced.as_uri(), str(day1), str(day3)]
    assert "day%202.csv" in roots[0]

    def job(attempt: FrameAttempt) -> Any:
        return attempt.start(by_uri.unionByName(by_path), "file").select("amount").write(tmp_path / "o")

    report = FrameTracking(spark, config).run(roots, lambda r: r, job)
    assert [(o.root, o.state) for o in report.outcomes] == [(r, "acked") for r in roots], report
    amounts = sorted(r["amount"] for r in spark.read.parquet(str(tmp_path / "o")).collect())
    assert amounts == [3, 4, 5, 6, 7, 8]


def test_a_key_of_no_root_is_a_typed_error_that_shows_a_root_key(
    spark: Any, config: AckConfig, days: list[Path], tmp_path: Path
) -> None:
    """A row of a file that is no root (the run was given two of the three files)."""
    from pyspark.sql import functions as F

    paths = [str(p) for p in days]
    rows = spark.read.option("header", True).csv(paths).withColumn("file", F.input_file_name())
    tracking = FrameTracking(spark, config)
    with pytest.raises(InvalidConfig) as raised:
        tracking.run(
            paths[:2], lambda p: p, lambda a: a.start(rows, "file").select("id").write(tmp_path / "o")
        )
    assert type(raised.value).__name__ == "UnknownRootKey" and raised.value.code == "UnknownRootKey"
    message = str(raised.value)
    assert days[2].as_uri() in message  # the row's key, as Spark gave it
    assert f"roots' keys look like {paths[0]!r}" in message  # and what a root's key is
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").glob("*.parquet"))


def test_a_directory_root_is_the_files_under_it(spark: Any, config: AckConfig, days: list[Path]) -> None:
    """Before: every attempt's job aborted (``a line of no root: file:/...``) and the root
    ended failed, "still pending when its job ended". Now a directory is its files, by
    the rule of ``xor-ack wordcount DIR`` (hidden ones skipped, any depth), under the
    root's one chain; ``path`` names each line's file."""
    from pyspark.sql import functions as F

    folder = days[0].parent
    (folder / ".hidden.csv").write_text("id,amount\n99,99\n")
    (folder / "more").mkdir()
    (folder / "more" / "day4.csv").write_text("id,amount\n7,9\n")
    out = folder.parent / "out"

    def job(attempt: FrameAttempt) -> Any:
        lines = attempt.read_text().where(~F.col("line").startswith("id,"))
        return lines.group_by("path", per_root=True).count().write(out)

    day1 = folder / "day1.csv"
    empty = folder.parent / "empty"
    empty.mkdir()
    report = FrameTracking(spark, config).run([str(folder), str(day1), str(empty)], lambda p: p, job)
    # An empty directory is a root without rows: acked empty.
    assert [(o.state, len(o.attempts)) for o in report.outcomes] == [("acked", 1)] * 3, report
    counts = {(r["xa"], r["path"]): r["count"] for r in _with_keys(spark, out, report)}
    root, single, _ = (o.key for o in report.outcomes)
    assert counts == {
        (root, str(day1)): 2,
        (root, str(folder / "day 2.csv")): 3,
        (root, str(folder / "day3.csv")): 1,
        (root, str(folder / "more" / "day4.csv")): 1,
        (single, str(day1)): 2,  # a file of two roots is read once, for each
    }


def _with_keys(spark: Any, out: Path, report: Any) -> list[Any]:
    """The published rows of ``out`` with their root's key (``xa``), by tag."""
    from pyspark.sql import functions as F

    keys = {o.tag: o.key for o in report.outcomes}
    rows = spark.read.parquet(str(out))
    mapping = F.create_map(*(F.lit(v) for kv in keys.items() for v in kv))
    return rows.withColumn("xa", mapping[F.col("xor_ack_tag")]).collect()


def test_a_failed_job_says_why_in_the_outcome_the_report_and_the_log(
    spark: Any,
    config: AckConfig,
    days: list[Path],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A Python function that raises in every attempt of a task aborts the job. Before:
    the roots ended "still pending when its job ended", the only cause was a
    ``PythonException`` whose first line is "An exception was thrown from the Python
    worker"."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    @F.udf(IntegerType())
    def parse(amount):  # type: ignore[no-untyped-def]  # (hints would ask PySpark to infer an Arrow UDF)
        if amount is None:  # ghost rows (which carry no data) meet the function too
            return None
        if amount == "7":
            raise ValueError(f"bad amount {amount}")
        return int(amount)

    def job(attempt: FrameAttempt) -> Any:
        rows = attempt.spark.read.option("header", True).csv([str(p) for p in days])
        keyed = rows.withColumn("file", F.input_file_name())
        return (
            attempt.start(keyed, "file").with_column("n", parse("amount")).select("n").write(tmp_path / "o")
        )

    caplog.set_level(logging.DEBUG, logger="xor_ack_dynamodb.spark")
    # Roots as Spark's URIs: the keys match exactly, with or without match_key.
    report = FrameTracking(spark, config).run([p.as_uri() for p in days], lambda u: u, job, max_attempts=1)
    why = "PythonException: ValueError: bad amount 7"
    assert report.job_errors == [f"attempt 1: {why}"]
    for outcome in report.outcomes:
        assert (outcome.state, outcome.attempts[-1].reason) == ("failed", f"the job failed: {why}")
    warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and r.name == "xor_ack_dynamodb.spark"
    ]
    assert [r.getMessage() for r in warnings] == [f"attempt 1: the job failed: {why}"]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("Traceback (most recent call last)" in m and "bad amount 7" in m for m in debug), debug
    assert f"job error: attempt 1: {why}" in str(report)


def test_a_run_shows_progress_and_prints_a_summary_table(
    spark: Any, config: AckConfig, days: list[Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: nothing for the whole run, and ``print(report)`` was one long
    ``RunReport(...)`` line."""
    from rich.console import Console

    from xor_ack_dynamodb.spark.progress import RunProgress

    def job(attempt: FrameAttempt) -> Any:
        return attempt.read_text().write(tmp_path / f"o{attempt.number}")

    paths = [str(p) for p in days]
    screen = io.StringIO()
    terminal = RunProgress(spark.sparkContext, Console(file=screen, force_terminal=True, width=100))
    caplog.set_level(logging.INFO, logger="xor_ack_dynamodb.spark.progress")
    with (
        terminal
    ):  # a bar on a terminal (yours), log lines elsewhere (the default display: stderr is captured)
        report = FrameTracking(spark, config).run(paths, lambda p: p, job, observer=terminal, progress=True)
    assert "3/3" in screen.getvalue() and "roots acked" in screen.getvalue()
    lines = [r.getMessage() for r in caplog.records if r.name == "xor_ack_dynamodb.spark.progress"]
    assert (
        lines[0] == "attempt 1: 3 roots; 0 of 3 roots acked" and lines[-1] == "attempt 1: 3 of 3 roots acked"
    )

    rows = dict(report.rows())
    assert (rows["roots"], rows["roots_acked"], rows["roots_failed"], rows["replays"]) == (3, 3, 0, 0)
    assert rows["requests"] == report.counters["requests"] > 0
    text = str(report)
    assert "RunReport(" not in text and "roots_acked" in text
    assert all(str(value) in text for value in rows.values())
    assert report.root_rows() == []

    caplog.clear()
    quiet = FrameTracking(spark, config).run(paths[:1], lambda p: p, job, progress=False)
    assert quiet.outcomes[0].acked
    assert not [r for r in caplog.records if r.name == "xor_ack_dynamodb.spark.progress"]


def test_a_java_error_pyspark_does_not_convert_is_named_by_its_java_class(spark: Any) -> None:
    """Before: ``Py4JJavaError: An error occurred while calling z:java.lang.Class.forName.``
    (py4j's first line, which names the call, not the error)."""
    from py4j.protocol import Py4JJavaError

    from xor_ack_dynamodb.spark.attempts import job_error

    with pytest.raises(Py4JJavaError) as raised:
        spark.sparkContext._jvm.java.lang.Class.forName("no.such.Klass")
    assert job_error(raised.value) == "ClassNotFoundException: no.such.Klass"
