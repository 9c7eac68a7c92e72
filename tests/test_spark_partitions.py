"""Any number of partitions on the RDD path: 200 reduce partitions, each owing XORs to
chains that span ~120 of them, with reduce tasks killed once after their flush (one pair
in two in local mode, one in eight on a standalone cluster) and with speculation copying
a straggler (standalone cluster of two workers: Spark runs no speculative copy in local
mode, nor on a host already running the task). Every chain must end acked with one create and one stamp,
and the output exact (see tests/partitions_job.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import partitions_job
import pytest
from conftest import unique_table
from pyspark import cloudpickle
from spark_helpers import REPO, aws_test_env, standalone_cluster

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, XorAckDynamoDB

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(partitions_job)


@pytest.fixture
def config(moto_server: LocalDynamoDB) -> AckConfig:
    config = moto_server.config(unique_table("parts"))
    XorAckDynamoDB.from_config(config).create_table()
    return config


def test_each_root_spans_more_partitions_than_a_chain_remembers_ops() -> None:
    """The premise: with one executor stamp per chain per reduce partition, a retried
    task's stamp would arrive after more than 32 others."""
    for root in partitions_job.ROOTS:
        spread = {k % partitions_job.PARTITIONS for k in partitions_job.words(root)}
        assert len(spread) > 100


def test_200_partitions_100_tasks_killed_once_local(spark: Any, config: AckConfig, tmp_path: Path) -> None:
    """One task pair in two killed: 100 retried reduce tasks, three times a chain's op
    window. (All 200 took twice as long, on the suite's busiest worker.)"""
    result = partitions_job.run(spark.sparkContext, config, tmp_path, "kill", every=2)
    partitions_job.check(result)


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone cluster of two one-core workers on two host names of this machine."""
    workdir = tmp_path_factory.mktemp("two-hosts")
    hosts = ("127.0.0.1", "localhost")
    with standalone_cluster(workdir, cores=1, env=aws_test_env(), workers=hosts) as master:
        yield master


def test_200_partitions_killed_and_speculated_on_a_cluster(
    two_hosts: str, config: AckConfig, tmp_path: Path
) -> None:
    args = {
        "master": two_hosts,
        "endpoint": config.endpoint_url,
        "region": config.region,
        "key_id": config.aws_access_key_id,
        "secret": config.aws_secret_access_key,
        "table": config.table,
        "out": str(tmp_path),
        "scenarios": ["kill", "speculate", "frame-speculate"],
        # One reduce task in eight killed (each failure costs a Python worker and a
        # retry: 200 of them take minutes on two shared cores; the local test kills half).
        "every": 8,
    }
    env = {**aws_test_env(), "SPARK_LOCAL_IP": "127.0.0.1"}
    env["PYTHONPATH"] = str(REPO / "tests") + ":" + env["PYTHONPATH"]
    done = subprocess.run(
        [sys.executable, str(REPO / "tests" / "partitions_job.py"), json.dumps(args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["scenario"] for r in results] == ["kill", "speculate", "frame-speculate"], done.stdout
    for result in results:
        print(result["scenario"], result["seconds"], "s", result["requests"], "requests")
        partitions_job.check(result, speculation=True)
