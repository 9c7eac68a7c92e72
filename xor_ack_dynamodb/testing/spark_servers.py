"""Spark servers started from the installed pyspark package, on 127.0.0.1: a standalone
cluster (a master and one worker) and a Spark Connect server (its own master,
``local[N]`` by default). For tests, benchmarks and trying things locally; nothing is
downloaded. The Connect server's Python workers run ``PYSPARK_PYTHON`` (default: this
interpreter), so the data sources of :mod:`xor_ack_dynamodb.spark` import there. A
client connects with ``SparkSession.builder.remote("sc://127.0.0.1:<port>")``; what it
needs installed: docs/spark.md, the paragraph on the Connect server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from .endpoint import free_port

__all__ = ["standalone_cluster", "connect_server", "free_port", "spark_home"]


def spark_home() -> Path:
    """The installed pyspark package's directory (it is a ``SPARK_HOME``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _wait_for(
    predicate: Callable[[], bool], timeout: float, what: str, process: subprocess.Popen[bytes]
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if process.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with status {process.returncode}")
        time.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


def _environment(workdir: Path, extra: Mapping[str, str] | None) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        "SPARK_LOG_DIR": str(workdir / "logs"),
        **(extra or {}),
    }


def _logged(path: Path, text: bytes) -> bool:
    return path.exists() and text in path.read_bytes()


def _spawn(
    command: list[str], env: Mapping[str, str], log: Path, processes: list[subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own, its output to ``log``; it joins ``processes``."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    processes.append(process)
    return process


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in reversed(processes):
        process.terminate()
    for process in reversed(processes):
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def standalone_cluster(
    workdir: Path,
    cores: int = 2,
    memory: str = "1g",
    env: Mapping[str, str] | None = None,
    workers: Sequence[str] = ("127.0.0.1",),
) -> Iterator[str]:
    """A Spark standalone master on 127.0.0.1 and one worker per name in ``workers``
    (each ``cores``, ``memory``; default one worker on 127.0.0.1), started with
    ``bin/spark-class``; yields the master URL. Workers named ``localhost`` and
    ``127.0.0.1`` are the same machine but two hosts to Spark (which never runs a
    speculative copy of a task on a host already running it). The workers run Python
    tasks with ``PYSPARK_PYTHON`` (default this interpreter); their executors' logs
    land in ``workdir/work``."""
    workdir.mkdir(parents=True, exist_ok=True)
    environment = {**_environment(workdir, env), "SPARK_WORKER_DIR": str(workdir / "work")}
    spark_class = str(spark_home() / "bin" / "spark-class")
    port = free_port()
    master_url = f"spark://127.0.0.1:{port}"
    master_log = workdir / "master.log"
    logs = [workdir / (f"worker-{number}.log" if number else "worker.log") for number in range(len(workers))]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        master = _spawn(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
            + ["--port", str(port), "--webui-port", str(free_port())],
            environment,
            master_log,
            processes,
        )
        _wait_for(partial(_logged, master_log, b"I have been elected leader"), 90, "the master", master)
        for host, log in zip(workers, logs, strict=True):
            _spawn(
                [spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--host", host]
                + ["--cores", str(cores), "--memory", memory, "--webui-port", str(free_port())]
                + ["--work-dir", str(workdir / "work")],
                environment,
                log,
                processes,
            )
        for log, worker in zip(logs, processes[1:], strict=True):
            registered = partial(_logged, log, b"Successfully registered with master")
            _wait_for(registered, 90, "the worker to register", worker)
        yield master_url
    finally:
        _stop(processes)


@contextmanager
def connect_server(
    workdir: Path,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """A Spark Connect server on 127.0.0.1 and a free port, its driver on ``master``;
    yields the ``sc://`` URL to connect to. ``conf`` adds ``--conf`` settings; its log
    is ``workdir/connect.log``."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        **(conf or {}),
    }
    command = [str(spark_home() / "bin" / "spark-submit"), "--master", master]
    command += ["--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
    command += ["--name", "xor-ack Spark Connect"]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    command.append("spark-internal")
    log = workdir / "connect.log"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        server = _spawn(command, _environment(workdir, env), log, processes)
        started = partial(_logged, log, b"Spark Connect server started at")
        _wait_for(started, 120, "the Connect server", server)
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop(processes)
