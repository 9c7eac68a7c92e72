"""When this process started, for timings that cover the whole command.

On Linux the kernel records a process's start (``/proc/self/stat``, field 22, in clock
ticks since boot, 10 ms on most systems); with the time since boot (``/proc/uptime``) it
gives the process's age, so a figure measured from it includes the interpreter's start
and every import, as a stopwatch around the command would. Elsewhere (or when ``/proc``
cannot be read) the start is when this module was imported: after the interpreter
started and the package was imported, before the command's own work.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["process_start", "IMPORTED"]

#: ``time.time()`` when this module was first imported: the fallback for the start.
IMPORTED = time.time()


def _age_from_proc() -> float | None:
    """Seconds since this process started, from ``/proc``; None where it cannot be read."""
    try:
        stat = Path("/proc/self/stat").read_text()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        # Field 2 (the command name, in parentheses) may hold spaces: count from its end.
        fields = stat[stat.rindex(")") + 2 :].split()
        started_ticks = int(fields[19])  # field 22 overall; fields[0] is field 3
        ticks_per_second = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    age = uptime - started_ticks / ticks_per_second
    return age if age >= 0 else None


def process_start() -> float:
    """The ``time.time()`` at which this process started (to 10 ms on Linux), or, where
    the system does not say, when this module was imported."""
    age = _age_from_proc()
    start = None if age is None else time.time() - age
    # A start after this module's import is no reading of this process: ignore it.
    return IMPORTED if start is None or start > IMPORTED else start
