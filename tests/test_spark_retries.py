"""Spark task retries: tasks die on their first attempt after their step's work
(RDD path) or in the write stage (DataFrame path), Spark runs them again (local[2,4]: up
to 4 attempts per task), and every chain must still end exactly acked: each write
applied once (a retry's copy recognised by its op id, or never sent twice: Spark's
commit protocol keeps one attempt per partition and the driver reads back what
committed), no chain reopened, none acked before all its output was written."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import unique_table
from pyspark import cloudpickle
from spark_helpers import CORPUS, corpus_files, plain_count, read_counts

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.jobs.wordcount.job import WordCountReport, find_inputs, run_wordcount
from xor_ack_dynamodb.spark import DieOnFirstAttempt

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@dataclass(frozen=True)
class RecordingDie(DieOnFirstAttempt):
    """:class:`DieOnFirstAttempt` that first leaves a mark in ``marks`` (so the test can
    see that tasks really died)."""

    marks: str = ""

    def __call__(self, step: str, partition: int) -> None:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is not None and context.attemptNumber() == 0 and any(step.endswith(s) for s in self.steps):
            Path(self.marks, f"{step}-{partition}").touch()
        super().__call__(step, partition)


def _killed(marks: Path) -> set[str]:
    return {p.name.rsplit("-", 1)[0] for p in marks.iterdir()}


@pytest.fixture
def sc(spark: Any) -> Any:
    return spark.sparkContext


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("retries"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


def _check_exactly_acked(report: WordCountReport, config: AckConfig, output: Path) -> None:
    assert read_counts(output / "counts.csv") == plain_count(corpus_files())
    assert all(f.state == "acked" and f.attempts == 1 for f in report.files), "no replay may be needed"
    statuses = XorAckDynamoDB.from_config(config).status_many(f.tag for f in report.files)
    for f in report.files:
        status = statuses[f.tag]
        assert status.state == "acked" and status.stamp.acked
        # One write for the create, then exactly one stamp for the whole sink: a retried
        # write applied twice would add a version (and undo itself: no zero).
        assert status.version == 2, f.path


def test_rdd_tasks_dying_after_their_flush(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    # The first step of each task to flush dies (later steps of a task run in its retry).
    steps = ("read_words", "write_counts")
    hook = RecordingDie(steps=steps, marks=str(marks))
    report = run_wordcount(
        spark,
        find_inputs([CORPUS]),
        tmp_path,
        config,
        api="rdd",
        after_flush=hook,
        keep_parts=True,
        partitions=4,
    )
    assert {k.split("-", 1)[1] for k in _killed(marks)} == set(steps)
    _check_exactly_acked(report, config, tmp_path)
    _check_driver_only(report)


def _check_driver_only(report: WordCountReport) -> None:
    """Executors send nothing: the driver's one create and one stamp per file, whatever
    tasks were retried (nothing re-sent)."""
    assert report.requests["requests.PutItem"] == 2 * len(report.files)
    assert report.requests["duplicates"] == 0


def test_rdd_python_workers_crashing_after_their_flush(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    steps = ("count_word", "sum_counts.unpack")
    hook = RecordingDie(steps=steps, exit_process=True, marks=str(marks))
    report = run_wordcount(
        spark,
        find_inputs([CORPUS]),
        tmp_path,
        config,
        api="rdd",
        after_flush=hook,
        keep_parts=True,
        partitions=3,
    )
    assert {k.split("-", 1)[1] for k in _killed(marks)} == set(steps)
    _check_exactly_acked(report, config, tmp_path)
    _check_driver_only(report)


@pytest.mark.parametrize("exit_process", [False, True], ids=["task-fails", "worker-killed"])
def test_frame_write_tasks_dying_on_their_first_attempt(
    spark: Any, config: AckConfig, tmp_path: Path, exit_process: bool
) -> None:
    """Every task of the write stage dies on its first attempt, after computing its rows
    (a raised error, or its Python worker killed): Spark runs it again, its commit
    protocol keeps one attempt per partition, each chain gets one create and one stamp,
    and the published output is exact."""
    from pyspark.sql import functions as F

    from xor_ack_dynamodb.spark import FrameTracking

    marks = tmp_path / "marks"
    marks.mkdir()
    out = tmp_path / "out"

    @F.pandas_udf("string")  # type: ignore[call-overload]
    def dying(words: pd.Series) -> pd.Series:
        import os

        from pyspark import TaskContext

        context = TaskContext.get()
        if context is not None and context.attemptNumber() == 0:
            Path(marks, str(context.partitionId())).touch()
            if exit_process:
                os._exit(1)
            raise RuntimeError("the task dies")
        return words

    def job(attempt: Any) -> Any:
        lines = attempt.read_text()
        words = lines.explode(F.split("line", r"[^\p{L}]+"), "word").where(F.col("word") != "")
        counts = words.with_column("word", F.lower("word")).group_by("word").count()
        return counts.with_column("word", dying(F.col("word"))).write(out)

    files = [str(p) for p in corpus_files()]
    # Three write tasks, kept apart (adaptive execution would coalesce them into one).
    settings = {"spark.sql.shuffle.partitions": "3", "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        report = FrameTracking(spark, config).run(files, lambda p: p, job, max_attempts=1)
    finally:
        for key in settings:
            spark.conf.unset(key)
    assert len(list(marks.iterdir())) >= 2
    assert {o.state for o in report.outcomes} == {"acked"}
    totals = spark.read.parquet(str(out)).groupBy("word").agg(F.sum("count").alias("n")).collect()
    assert {r["word"]: r["n"] for r in totals} == plain_count(corpus_files())
    statuses = XorAckDynamoDB.from_config(config).status_many(o.tag for o in report.outcomes)
    assert {(s.state, s.version) for s in statuses.values()} == {("acked", 2)}


