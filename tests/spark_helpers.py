"""Helpers for the Spark tests: an independent plain-Python word count, reading outputs,
a SparkContext per test module, and a standalone cluster started from the pyspark
package."""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
import time
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


@contextmanager
def standalone_cluster(workdir: Path, cores: int = 2) -> Iterator[str]:
    """A Spark standalone master and one worker, both on 127.0.0.1, started with
    ``bin/spark-class`` of the installed pyspark package; yields the master URL. The
    worker runs Python tasks with this interpreter (the .venv's)."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    port = free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(workdir / "work"),
        "SPARK_LOG_DIR": str(workdir / "logs"),
    }
    workdir.mkdir(parents=True, exist_ok=True)
    spark_class = str(home / "bin" / "spark-class")
    master_url = f"spark://127.0.0.1:{port}"
    master_log = (workdir / "master.log").open("wb")
    worker_log = (workdir / "worker.log").open("wb")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(free_port()),
                ],
                env=env,
                stdout=master_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        _wait_for(
            lambda: b"I have been elected leader" in (workdir / "master.log").read_bytes(), 90, "the master"
        )
        processes.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(cores),
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(workdir / "work"),
                ],
                env=env,
                stdout=worker_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        _wait_for(
            lambda: b"Successfully registered with master" in (workdir / "worker.log").read_bytes(),
            90,
            "the worker to register",
        )
        yield master_url
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in reversed(processes):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        master_log.close()
        worker_log.close()
