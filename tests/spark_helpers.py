"""Helpers for the Spark tests: an independent plain-Python word count, reading outputs,
a SparkContext per test module, and a standalone cluster started from the pyspark
package."""

from __future__ import annotations

import csv
import os
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from xor_ack_dynamodb.testing.spark_servers import free_port, standalone_cluster

__all__ = ["free_port", "standalone_cluster"]

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "examples" / "data"


def plain_count(paths: Iterable[Path]) -> Counter[str]:
    """Word counts by the documented rule, written without regexes or Spark: NFC, then
    maximal runs of ``str.isalpha()`` characters, lower-cased."""
    counts: Counter[str] = Counter()
    for path in paths:
        text = unicodedata.normalize("NFC", Path(path).read_text(encoding="utf-8"))
        word: list[str] = []
        for char in text + " ":
            if char.isalpha():
                word.append(char)
            elif word:
                counts["".join(word).lower()] += 1
                word = []
    return counts


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.is_file())


def read_counts(path: Path) -> Counter[str]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        assert next(reader) == ["word", "count"]
        counts: Counter[str] = Counter()
        for word, count in reader:
            assert word not in counts, f"duplicate row for {word!r}"
            counts[word] = int(count)
        return counts


@contextmanager
def spark_context(master: str, **conf: str) -> Iterator[Any]:
    """A SparkContext for one test module, stopped afterwards (one per process at a
    time). Its Python workers inherit the environment it starts with: the same fake AWS
    credentials and region the tests' autouse fixture sets (a module-scoped context is
    built before that fixture runs)."""
    import pytest

    from xor_ack_dynamodb.spark.context import get_context

    with pytest.MonkeyPatch.context() as env:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            env.setenv(name, "testing")
        for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
            env.setenv(name, "us-east-1")
        for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_PROFILE"):
            env.delenv(name, raising=False)
        sc, created = get_context(master, app_name="xor-ack tests", conf=conf)
    assert created, "another SparkContext is still running in this process"
    try:
        yield sc
    finally:
        sc.stop()


def plain_count_replacing(paths: Iterable[Path]) -> Counter[str]:
    """:func:`plain_count` of files decoded with U+FFFD for invalid UTF-8."""
    counts: Counter[str] = Counter()
    for path in paths:
        text = unicodedata.normalize("NFC", Path(path).read_bytes().decode("utf-8", "replace"))
        word: list[str] = []
        for char in text + " ":
            if char.isalpha():
                word.append(char)
            elif word:
                counts["".join(word).lower()] += 1
                word = []
    return counts


@contextmanager
def spark_session(master: str, **conf: str) -> Iterator[Any]:
    """A classic SparkSession (and its SparkContext) for the test session, stopped
    afterwards; environment as :func:`spark_context` sets it."""
    with spark_context(master, **conf) as sc:
        from pyspark.sql import SparkSession

        yield SparkSession.builder.getOrCreate()
        del sc


def aws_test_env() -> dict[str, str]:
    """The environment a Spark server started for tests needs: fake AWS credentials and
    region, no endpoint or profile from the machine, this repository importable."""
    dropped = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_PROFILE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_REGION="us-east-1",
        PYSPARK_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
    )
    return env


#: What a Connect session sets in os.environ for the whole process: while it is set,
#: PySpark takes every session for a Connect one and a classic SparkContext cannot start.
CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


@contextmanager
def remote_session(url: str) -> Iterator[Any]:
    """A Spark Connect session to ``url``, stopped afterwards, with the process's
    environment restored (so classic Spark test modules still work after it)."""
    from pyspark.sql import SparkSession

    before = {name: os.environ.get(name) for name in CONNECT_ENV}
    session = SparkSession.builder.remote(url).create()
    try:
        yield session
    finally:
        session.stop()
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def order_tracking(config: Any, tmp_path: Path, *, stream_id: str, tracker: Any, hook: Any) -> Any:
    """A ``StreamTracking`` keyed by ``order`` and closed by ``last`` (its job keeps
    ``order``), writing under ``tmp_path / "out"``, with ``tracker`` and ``hook``."""
    from xor_ack_dynamodb.spark import StreamTracking

    return StreamTracking(
        config,
        lambda frame, batch_id: frame.select("order"),
        stream_id=stream_id,
        location=tmp_path / "out",
        key="order",
        closes="last",
        tracker=tracker,
        hook=hook,
    )


def land(folder: Path, name: str, lines: list[str], mtime: float) -> Path:
    """A file landing in the watched ``folder`` with modification time ``mtime`` (written
    aside, renamed in: a file source must never see a half-written file)."""
    temp = folder.parent / f".{name}"
    temp.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    os.utime(temp, (mtime, mtime))
    path = folder / name
    temp.replace(path)
    return path


def run_order_stream(
    spark: Any,
    tmp_path: Path,
    files: list[list[str]],
    tracking: Any,
    schema: str = "order string, last boolean",
) -> None:
    """Land ``files`` (each a list of JSON lines with ``order`` and ``last``) in
    ``tmp_path / "inbox"``, in order, and run ``tracking`` (a ``StreamTracking`` such as
    :func:`order_tracking`) over them until the query ends: one file a batch,
    ``availableNow``."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    landed = time.time() - 100
    for i, lines in enumerate(files):
        land(inbox, f"b{i}.json", lines, landed + i)
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(inbox))
    query = (
        stream.writeStream.foreachBatch(tracking)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def sql_executions(spark: Any) -> int:
    """How many SQL executions (queries) this classic session has started so far, once
    Spark's listeners have seen every event posted."""
    jsc = spark.sparkContext._jsc.sc()
    jsc.listenerBus().waitUntilEmpty()
    store = spark._jsparkSession.sharedState().statusStore()
    return int(store.executionsList().last().executionId()) + 1 if store.executionsCount() else 0


@contextmanager
def spark_reads_back(spark: Any) -> Iterator[None]:
    """Within: the driver leaves every read-back to Spark (``spark.xorack.driverReadBytes``
    0), as for output on ``s3://``, under Spark Connect, or too large to read in the
    driver."""
    from xor_ack_dynamodb.spark.frame.driver_read import DRIVER_READ_CONF

    spark.conf.set(DRIVER_READ_CONF, "0")
    try:
        yield
    finally:
        spark.conf.unset(DRIVER_READ_CONF)
