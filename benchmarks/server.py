"""The embedded backend in a child process, so the client threads being measured do not
share a GIL with the server answering them (with both in one process, every client
thread slows the server down)."""

from __future__ import annotations

import subprocess
import sys
from types import TracebackType

__all__ = ["ServerProcess"]

# Starts LocalDynamoDB, prints its endpoint, and serves until its stdin (a pipe from the
# parent) closes: it stops with the parent, however the parent ends.
_CHILD = """
import sys
from xor_ack_dynamodb import LocalDynamoDB
with LocalDynamoDB() as server:
    print(server.endpoint_url, flush=True)
    sys.stdin.read()
"""


class ServerProcess:
    """A ``LocalDynamoDB`` (moto server on 127.0.0.1) in a child process; context manager."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self.endpoint_url = ""

    def __enter__(self) -> ServerProcess:
        process = subprocess.Popen(
            [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._process = process
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line.startswith("http://"):
            self.__exit__(None, None, None)
            raise RuntimeError(f"the moto server did not start (printed {line!r})")
        self.endpoint_url = line
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
