"""Peak memory of Spark's Python workers, sampled from ``/proc`` (Linux).

Spark starts Python workers from ``python -m pyspark.daemon`` (forked children carry
the same command line); data source planning and commits run in ``pyspark.sql.worker``
processes. The sampler resets each such process's peak (``clear_refs`` 5) when a run
starts, then polls every process's ``VmHWM`` (peak resident set) and keeps the largest:
the memory one Python worker needed at most, which is what a task's input size drives.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import TracebackType

__all__ = ["WorkerMemory", "peak_kib"]

_MARKERS = (b"pyspark.daemon", b"pyspark/daemon.py", b"pyspark.worker", b"pyspark.sql.worker")


def _workers() -> list[int]:
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if any(marker in cmdline for marker in _MARKERS):
            found.append(int(entry.name))
    return found


def peak_kib(pid: int) -> int:
    """A process's peak resident set (``VmHWM``) in KiB; 0 if it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _reset(pid: int) -> None:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


class WorkerMemory:
    """``with WorkerMemory() as m: ...`` then ``m.peak_mib``: the largest peak resident
    set of any Python worker while the block ran (0 if none was seen)."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak_kib = 0
        self.workers_seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="worker-memory", daemon=True)

    @property
    def peak_mib(self) -> float:
        return self.peak_kib / 1024

    def _sample(self) -> None:
        for pid in _workers():
            if pid not in self.workers_seen:
                self.workers_seen.add(pid)
            self.peak_kib = max(self.peak_kib, peak_kib(pid))

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> WorkerMemory:
        for pid in _workers():
            _reset(pid)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
