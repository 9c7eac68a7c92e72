"""How the suite runs its Spark tests (docs/testing.md, "The library's own suite: how it
runs"): the JVMs get the quick compiler only, and the Spark modules are split in two
groups that keep every Connect user together; the modules that mostly wait on botocore's
backoff wait in one group."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from conftest import TEST_JVM_OPTIONS, xdist_group

TESTS = Path(__file__).parent


def test_the_suites_spark_jvm_runs_with_the_quick_compiler_only(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert set(TEST_JVM_OPTIONS.split()) <= set(arguments), arguments


def test_spark_modules_are_in_two_groups_and_connect_users_share_one() -> None:
    modules = sorted(p.name for p in TESTS.glob("test_spark_*.py"))
    groups = {m: xdist_group(m, f"tests/{m}::test_x") for m in modules}
    cluster_groups = {"test_spark_cluster.py": "spark-cluster"}
    assert {g for m, g in groups.items() if m not in cluster_groups} == {"spark", "spark-classic"}
    connect_users = [m for m in modules if re.search(r"\bconnect_url\b", (TESTS / m).read_text())]
    assert "test_spark_connect.py" in connect_users
    assert {groups[m] for m in connect_users} == {"spark"}, connect_users
    # The docs page's Spark blocks share the Connect group's session; the 200-partition
    # run on its own cluster goes with the other standalone-cluster tests.
    spark_block = "tests/test_docs_examples.py::test_doc_block[docs/spark.md:35]"
    assert xdist_group("test_docs_examples.py", spark_block) == "spark"
    cluster_run = "tests/test_spark_partitions.py::test_200_partitions_killed_and_speculated_on_a_cluster"
    assert xdist_group("test_spark_partitions.py", cluster_run) == "spark-cluster"


def test_the_fault_injection_modules_wait_on_one_worker() -> None:
    for nodeid in (
        "tests/reliability/test_faults.py::test_faults_never_lose_nor_fake_an_ack[moto_server]",
        "tests/test_combiner.py::test_threads_on_one_chain_under_fault_injection[ddblocal]",
    ):
        module = nodeid.split("::")[0].rsplit("/", 1)[-1]
        assert xdist_group(module, nodeid) == "faults", nodeid


def test_only_the_suite_sets_the_jvm_flag_and_each_jvm_says_so() -> None:
    """docs/testing.md: the flag comes from the suite's conftest alone (not the package,
    the examples, the benchmarks, the Makefile or the CLI), and a JVM started under it
    says so once on its stderr."""
    import os
    import shutil
    import subprocess

    repo = TESTS.parent
    folders = ("xor_ack_dynamodb", "examples", "benchmarks", "scripts")
    places = [repo / "Makefile", *(repo / d for d in folders)]
    files = [p for place in places for p in ([place] if place.is_file() else place.rglob("*.py"))]
    flags = [flag.split(":")[1].split("=")[0].lstrip("+-") for flag in TEST_JVM_OPTIONS.split()]
    assert flags == ["TieredStopAtLevel", "UseSerialGC"]
    assert files and not [p for p in files if any(flag in p.read_text() for flag in flags)]
    assert TEST_JVM_OPTIONS in os.environ["JAVA_TOOL_OPTIONS"]
    java = shutil.which("java")
    assert java is not None  # Spark's tests need it too
    done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    assert done.stderr.count(f"Picked up JAVA_TOOL_OPTIONS: {os.environ['JAVA_TOOL_OPTIONS']}") == 1
