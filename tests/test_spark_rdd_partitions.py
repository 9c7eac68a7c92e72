"""The RDD word count's shuffles are sized from its input, not to one partition: on two
cores the old default (half the default parallelism, 1 to 8) gave the reduce stage and
the final count one task each, which ran a 25.6M-word reduce on one core for 35.7 s
(issue 32). Real Spark (local[2,4]), the moto server; each Spark job of the run is read
back from Spark's status tracker."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import unique_table

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB
from xor_ack_dynamodb.jobs.wordcount.job import run_wordcount, tokenize

pytestmark = pytest.mark.spark

TEXTS = [f"file {i} says hello world and counts {'word ' * i}again\nand again {i}\n" for i in range(6)]


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("rdd-parts"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    paths = []
    for i, text in enumerate(TEXTS):
        path = tmp_path / "in" / f"{i}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def _job_ids(sc: Any) -> set[int]:
    return set(sc.statusTracker().getJobIdsForGroup(None))


def stage_tasks(sc: Any, before: set[int]) -> list[list[int]]:
    """Per Spark job started since ``before`` (in order), its stages' task counts (map
    stages first: stage ids grow along a job's lineage). Jobs without a stage are left
    out: a tracked run ends with one over no partitions, which only carries its summary
    to Spark's UI (:mod:`xor_ack_dynamodb.spark.metrics`)."""
    tracker = sc.statusTracker()
    jobs = []
    for job_id in sorted(_job_ids(sc) - before):
        info = tracker.getJobInfo(job_id)
        assert info is not None, f"Spark forgot job {job_id}"
        if not info.stageIds:
            continue
        stages = [tracker.getStageInfo(s) for s in sorted(info.stageIds)]
        assert all(s is not None for s in stages), f"Spark forgot a stage of job {job_id}"
        jobs.append([s.numTasks for s in stages])
    return jobs


def _expected(paths: list[Path]) -> Counter[str]:
    return Counter(w for p in paths for w in tokenize(p.read_text(encoding="utf-8")))


@pytest.mark.parametrize("tracked", [True, False], ids=["tracked", "untracked"])
def test_rdd_shuffles_get_the_inputs_partitions(
    spark: Any, config: AckConfig, files: list[Path], tmp_path: Path, tracked: bool
) -> None:
    """Six files on two cores: the job's map side has four partitions (twice the
    default parallelism), and so do its reduce stage and the final count's, each a
    job of a map stage and a reduce stage."""
    sc = spark.sparkContext
    slices = min(len(files), 2 * sc.defaultParallelism)
    assert slices > 1  # the premise: local[2,4]
    before = _job_ids(sc)
    report = run_wordcount(sc, files, tmp_path / "out", config if tracked else None, api="rdd")
    assert report.all_acked
    assert report.counts == _expected(files)
    jobs = stage_tasks(sc, before)
    # The word count (read + count, then sum per (file, word) and write) and the final
    # count (read the acked parts, then sum per word): a map stage and a reduce each.
    assert jobs == [[slices, slices], [slices, slices]], jobs


def test_rdd_partitions_option_sizes_both_shuffles(
    spark: Any, config: AckConfig, files: list[Path], tmp_path: Path
) -> None:
    """``partitions=`` (``--partitions``) still sets the reduce partitions."""
    sc = spark.sparkContext
    slices = min(len(files), 2 * sc.defaultParallelism)
    before = _job_ids(sc)
    report = run_wordcount(sc, files, tmp_path / "out", config, api="rdd", partitions=3)
    assert report.all_acked
    assert report.counts == _expected(files)
    assert stage_tasks(sc, before) == [[slices, 3], [3, 3]]
