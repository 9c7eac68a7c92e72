"""Starting, watching and killing stamping worker processes (see ``worker.py``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["Worker"]

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """One ``python -m tests.reliability.worker`` process and the lines it printed."""

    def __init__(self, endpoint: str, table: str, jobs: list[tuple[str, str, str]], **options: Any) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.jobs = jobs
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.worker"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(
            json.dumps({"endpoint": endpoint, "table": table, "jobs": jobs, **options}) + "\n"
        )
        self.process.stdin.flush()
        self.lines: list[dict[str, Any]] = []
        self._ready = threading.Event()
        self._printed = threading.Condition()
        self._ended = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.killed = False

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = json.loads(raw)
            if line.get("ready"):
                self._ready.set()
            else:
                with self._printed:
                    self.lines.append(line)
                    self._printed.notify_all()
        self._ready.set()
        with self._printed:
            self._ended = True
            self._printed.notify_all()

    def wait_ready(self, timeout: float = 60) -> None:
        if not self._ready.wait(timeout):
            raise TimeoutError("worker did not start")

    def wait_for_lines(self, count: int, timeout: float = 60) -> bool:
        """Block until the worker has printed ``count`` job lines (True), or has ended
        with fewer (False)."""
        with self._printed:
            if not self._printed.wait_for(lambda: len(self.lines) >= count or self._ended, timeout):
                raise TimeoutError(f"worker printed {len(self.lines)} of {count} lines")
            return len(self.lines) >= count

    def go(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def kill(self) -> None:
        """SIGKILL, wherever it is (between requests or in the middle of one)."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.killed = True

    def killed_mid_work(self) -> bool:
        """Whether it was killed with jobs left (call after :meth:`wait`)."""
        return self.killed and len(self.lines) < len(self.jobs)

    def wait(self, timeout: float = 300) -> int:
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        assert self.process.stdin is not None
        self.process.stdin.close()
        return code

    def in_flight(self) -> str | None:
        """The op id of the job it was on when killed (it may or may not have landed)."""
        if not self.killed or len(self.lines) >= len(self.jobs):
            return None
        return self.jobs[len(self.lines)][2]
