"""Fault injection for testing tracked pipelines under Spark task retries."""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["DieOnFirstAttempt", "TaskKilled"]


class TaskKilled(RuntimeError):
    """Raised by :class:`DieOnFirstAttempt` to make Spark retry the task."""


@dataclass(frozen=True)
class DieOnFirstAttempt:
    """An ``after_flush`` hook (see :class:`~xor_ack_dynamodb.spark.RDDTracking`) that kills
    the first attempt of a task right after a step's stamps landed, so Spark runs the
    task again: the retry must recompute the same stamps and have them recognised as
    already applied. Needs ``spark.task.maxFailures`` > 1 (``local[N,4]`` in local mode).

    :param steps: step-name suffixes to kill after (e.g. ``("fan_out", "sink")``).
    :param partitions: kill only in partitions whose index modulo ``every`` is 0.
    :param exit_process: end the Python worker with ``os._exit`` (a crash) instead of
        raising (a failing task).
    """

    steps: tuple[str, ...]
    every: int = 1
    exit_process: bool = False

    def __call__(self, step: str, partition: int) -> None:
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None or context.attemptNumber() != 0 or partition % self.every:
            return
        if not any(step.endswith(s) for s in self.steps):
            return
        if self.exit_process:
            os._exit(17)
        raise TaskKilled(f"killed after flushing {step} in partition {partition} (first attempt)")
