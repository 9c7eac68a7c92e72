"""A tracked run's progress: :class:`RunProgress`, a bar on a terminal, else log lines at
INFO on ``xor_ack_dynamodb.spark.progress``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..stats import progress_bar

if TYPE_CHECKING:
    from rich.console import Console

    from .outcomes import RootOutcome

__all__ = ["RunProgress", "progress_bar"]

log = logging.getLogger("xor_ack_dynamodb.spark.progress")


class RunProgress:
    """Progress of one tracked run: a context manager around the run, and its observer.
    ``sc``: the SparkContext whose running stage is shown; ``console``: where the bar
    goes (default: stderr); ``total``: the roots (None: the first attempt's)."""

    def __init__(
        self,
        sc: Any = None,
        console: Console | None = None,
        total: int | None = None,
        *,
        enabled: bool = True,
        unit: str = "roots acked",
    ) -> None:
        from rich.console import Console

        self.sc = sc
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.enabled = enabled
        self.bar = enabled and self.console.is_terminal
        self.unit = unit
        self.log_every = 30.0
        self.progress = progress_bar(unit, self.console, enabled=self.bar)
        self.task = self.progress.add_task("starting", total=total)
        self.total = total
        self.attempt = 0
        self.done = 0
        self.stage = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="xor-ack-progress", daemon=True)

    def __enter__(self) -> RunProgress:
        if self.bar:
            self.progress.start()
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        if self.bar:
            self.progress.stop()

    def attempt_started(self, attempt: int, roots: int, tracking: Any) -> None:
        self.attempt, self.stage = attempt, ""
        if self.total is None:
            self.total = roots
            self.progress.update(self.task, total=roots)
        self._describe("starting")
        if self.enabled and not self.bar:
            log.info("attempt %d: %d roots; %d of %d %s", attempt, roots, self.done, self.total, self.unit)

    def attempt_finished(self, attempt: int, outcomes: Sequence[RootOutcome]) -> None:
        acked = sum(o.acked for o in outcomes)
        self.done += acked
        self._describe("done")
        self.progress.update(self.task, completed=self.done)
        line = f"attempt {attempt}: {acked} of {len(outcomes)} {self.unit}"
        if acked < len(outcomes):
            line += f"; {len(outcomes) - acked} failed or timed out"
        if self.bar and acked < len(outcomes):
            self.progress.console.print(line)
        elif self.enabled and not self.bar:
            log.info("%s", line)

    def _describe(self, stage: str) -> None:
        self.progress.update(self.task, description=f"attempt {self.attempt} · {stage}")

    def _poll(self) -> None:
        tracker = self.sc.statusTracker() if self.sc is not None else None
        while not self._stop.wait(0.25 if self.bar else self.log_every):
            if tracker is not None:
                try:
                    stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
                except Exception:  # the context is stopping
                    return
                live = [s for s in stages if s is not None]
                if live:
                    stage = live[0]
                    self.stage = f"stage {stage.stageId}: {stage.numCompletedTasks}/{stage.numTasks} tasks"
                    self._describe(self.stage)
            if not self.bar and self.attempt:
                log.info("attempt %d: running%s", self.attempt, f", {self.stage}" if self.stage else "")
