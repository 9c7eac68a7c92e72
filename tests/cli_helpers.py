"""What the command line's tests share beside ``test_cli.run``: a real endpoint on
127.0.0.1 that accepts connections and never answers, a run whose stdout's reader has
already gone, an environment without AWS files."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType


class SilentEndpoint:
    """A listener on 127.0.0.1 that accepts every connection and never answers (a hung
    proxy, a process stopped in a debugger). ``accepted`` holds when each connection
    came, in ``time.monotonic()`` seconds; ``url`` is its address."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self.accepted: list[float] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> SilentEndpoint:
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(5)
        for conn in self._held:
            conn.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.accepted.append(time.monotonic())
            self._held.append(conn)

    def wait_for_request(self, timeout: float) -> None:
        """Return once a connection came; AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.accepted:
            assert time.monotonic() < deadline, "no request reached the endpoint"
            time.sleep(0.05)


def run_reader_gone(
    *args: str, env: dict[str, str], stdin: str = "", timeout: float = 120
) -> tuple[int, str]:
    """``xor-ack ARGS`` with stdout a pipe whose reading end is closed before it starts
    (a ``| head -1`` that has already exited, every time): its status and stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "xor_ack_dynamodb", *args],
            input=stdin,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=timeout,
        )
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr


def no_aws_files(env: dict[str, str], folder: Path) -> dict[str, str]:
    """``env`` with the AWS config and credentials files an empty file in ``folder``: no
    profile, region or keys from them (``os.devnull`` would do, where it is the device)."""
    empty = folder / "aws-empty"
    empty.write_text("")
    return {**env, "AWS_CONFIG_FILE": str(empty), "AWS_SHARED_CREDENTIALS_FILE": str(empty)}
