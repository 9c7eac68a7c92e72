"""The same jobs on a Spark standalone cluster (a master and a worker on 127.0.0.1,
started with bin/spark-class of the installed pyspark package): nothing depends on
local mode. Each job runs as the `xor-ack wordcount` command in its own process, with
the embedded moto server in that driver process; the worker's executors reach it over
HTTP like any DynamoDB endpoint. One cluster serves both pipelines."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from spark_helpers import REPO, aws_test_env, corpus_files, plain_count, read_counts, standalone_cluster

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    workdir = tmp_path_factory.mktemp("cluster")
    with standalone_cluster(workdir, env=aws_test_env()) as master:
        yield master, workdir


@pytest.mark.parametrize("api", ["frame", "rdd"])
def test_wordcount_on_a_standalone_cluster(cluster: tuple[str, Path], tmp_path: Path, api: str) -> None:
    master, workdir = cluster
    inputs = [str(p) for p in corpus_files()[:10]]
    result = subprocess.run(
        [sys.executable, "-m", "xor_ack_dynamodb", "wordcount", *inputs, "--master", master, "--api", api]
        + ["--output", str(tmp_path / "out"), "--quiet", "--fail-rate", "0.004", "--seed", "3"],
        env=aws_test_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Spark {master}, {api} api" in result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["api"] == api
    assert report["totals"]["acked"] == len(inputs)
    assert report["totals"]["replays"] > 0  # a few files met an injected failure and were replayed
    assert read_counts(tmp_path / "out" / "counts.csv") == plain_count(Path(p) for p in inputs)
    # The work ran on the cluster's executors, not in a local-mode driver.
    assert list((workdir / "work").glob("app-*/*/stderr"))


def test_wordcount_under_spark_submit(tmp_path: Path) -> None:
    """spark-submit starts the JVM first and the Python driver second; the command must
    take the master from it (here local[2]) instead of choosing its own. (The RDD
    pipeline: its cold start is the shorter; the cluster test runs both.)"""
    import pyspark

    spark_submit = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"
    inputs = [str(p) for p in corpus_files()[:6]]
    result = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            str(REPO / "examples" / "spark_submit.py"),
            "wordcount",
            *inputs,
            "--api",
            "rdd",
            "--output",
            str(tmp_path / "out"),
            "--quiet",
        ],
        env={**aws_test_env(), "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # spark-submit pipes the Python driver's stderr into its stdout
    assert "Spark local[2]" in result.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["totals"]["acked"] == 6
    assert read_counts(tmp_path / "out" / "counts.csv") == plain_count(Path(p) for p in inputs)


def test_streaming_restart_on_a_standalone_cluster(cluster: tuple[str, Path], tmp_path: Path) -> None:
    """A tracked file-source query whose first run fails in the sink, restarted from its
    checkpoint, with its tasks on the cluster's executors (tests/streaming_driver.py)."""
    master, _ = cluster
    result = subprocess.run(
        [sys.executable, str(REPO / "tests" / "streaming_driver.py"), master, str(tmp_path)],
        env=aws_test_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["master"] == master
    assert outcome["first_failed"]
    assert outcome["acked"] == outcome["files"]  # each file acked in exactly one batch
    assert outcome["chains"] == [["acked", 2]]  # one create and one stamp per file
    assert outcome["exact"] and outcome["rows"] == 10


def test_heartbeat_and_handed_chains_on_a_standalone_cluster(
    cluster: tuple[str, Path], tmp_path: Path
) -> None:
    """A job that outlives its chains' TTL ends acked (the driver's heartbeat), and chains
    a Lambda-style caller created are completed by a DataFrame job, with the executors on
    the cluster (tests/cluster_jobs.py)."""
    master, _ = cluster
    result = subprocess.run(
        [sys.executable, str(REPO / "tests" / "cluster_jobs.py"), master, str(tmp_path)],
        env=aws_test_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["master"] == master
    beat = outcome["heartbeat"]
    print("cluster heartbeat:", beat)
    assert beat["seconds"] > 3 + 1 and beat["states"] == ["acked", "acked"]
    assert beat["touches"] >= 2 and beat["beat_requests"] > 0
    handed = outcome["handed"]
    assert handed["states"] == {"up/a": "acked", "up/other": "refused"}
    assert handed["chains"] == {"up/a": "acked", "up/other": "pending"}
    assert handed["other_untouched"]
    assert handed["written"] == [["up/a", "apple", 2], ["up/a", "banana", 1]]
