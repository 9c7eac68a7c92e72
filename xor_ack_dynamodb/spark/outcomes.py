"""What a tracked run reports: a :class:`RootOutcome` per root, an :class:`Attempt` per
try. A root is reported ``acked`` only when its chain is the run's (its tag carries the
run's nonce, its owner is the run) and reads acked; another writer's chain under one of
its tags is never stamped, failed or reported acked (:data:`CONFLICT`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.factory import fit_reason

__all__ = ["Attempt", "RootOutcome", "RunReport", "RunObserver", "PermanentFailure", "PERMANENT", "CONFLICT"]

#: Marks a reason a replay cannot cure (bad bytes in a file): such roots are not replayed.
PERMANENT = "permanent: "
CONFLICT = "conflict: a chain with this tag exists and was not created by this run"


class PermanentFailure(Exception):
    """Raise it from a user function (or :meth:`TrackedFrame.fail_when` with
    ``permanent=True``) for a failure that a replay would only repeat: the root fails and
    is not replayed."""


def failure_reason(error: BaseException | str) -> str:
    """The reason a chain is failed with: the error's ``repr`` (marked permanent for a
    :class:`PermanentFailure`), shortened visibly to what ``fail()`` takes."""
    if isinstance(error, str):
        return fit_reason(error)
    reason = repr(error)
    return fit_reason(PERMANENT + reason if isinstance(error, PermanentFailure) else reason)


@dataclass(frozen=True)
class Attempt:
    """One attempt at one root: its chain's tag and how the chain ended."""

    tag: str
    state: str  # acked | failed | expired | missing
    reason: str | None = None
    note: str | None = None

    @property
    def permanent(self) -> bool:
        return self.state == "failed" and (self.reason or "").startswith(PERMANENT)


@dataclass
class RootOutcome:
    """Every attempt at one root; ``state`` is the last one's."""

    root: Any
    key: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def state(self) -> str:
        return self.attempts[-1].state if self.attempts else "missing"

    @property
    def acked(self) -> bool:
        return self.state == "acked"

    @property
    def tag(self) -> str | None:
        return self.attempts[-1].tag if self.attempts else None

    @property
    def notes(self) -> list[str]:
        return [a.note for a in self.attempts if a.note]


@dataclass
class RunReport:
    """What a tracked run found: one outcome per root, in the roots' order."""

    outcomes: list[RootOutcome]
    counters: Counter[str]
    job_errors: list[str]

    @property
    def replays(self) -> int:
        return sum(len(o.attempts) - 1 for o in self.outcomes)

    def acked_tags(self) -> set[str]:
        """The tags of every chain that ended acked (at most one per root)."""
        return {a.tag for o in self.outcomes for a in o.attempts if a.state == "acked"}

    def rows(self) -> list[tuple[str, int]]:
        """The summary table's rows, ``(figure, value)`` (:meth:`figures`)."""
        return list(self.figures().items())

    def figures(self) -> dict[str, int]:
        """The run's figures, as published to the Spark UI
        (:data:`~xor_ack_dynamodb.spark.metrics.METRICS` says what each counts)."""
        states = Counter(outcome.state for outcome in self.outcomes)
        counters = self.counters
        return {
            "roots": len(self.outcomes),
            "roots_acked": states["acked"],
            "roots_failed": states["failed"],
            "roots_expired": states["expired"],
            "roots_missing": states["missing"],
            "replays": self.replays,
            "requests": counters["requests"],
            "stamps": counters["stamps"],
            "heartbeats": counters["heartbeat.beats"],
            "retries": counters["retries"],
        }

    def root_rows(self) -> list[tuple[str, str, int, str]]:
        """``(key, state, attempts, last reason or note)`` per root not acked, replayed
        or noted."""
        return [
            (
                o.key,
                o.state,
                len(o.attempts),
                (o.attempts[-1].reason or o.attempts[-1].note or "") if o.attempts else "",
            )
            for o in self.outcomes
            if o.state != "acked" or len(o.attempts) > 1 or o.notes
        ]

    def __str__(self) -> str:
        """``print(report)``: :meth:`rows`, :meth:`root_rows`, the job errors, as tables."""
        from io import StringIO

        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        summary = Table(title="tracked run", title_justify="left")
        summary.add_column("figure")
        summary.add_column("value", justify="right")
        for name, value in self.rows():
            summary.add_row(name, str(value))
        out = StringIO()
        console = Console(file=out, width=120, color_system=None, force_terminal=False, soft_wrap=False)
        console.print(summary)
        roots = self.root_rows()
        if roots:
            table = Table(title="roots not acked, replayed or noted", title_justify="left")
            for column in ("key", "state", "attempts", "reason or note"):
                table.add_column(column, overflow="fold")
            for row in roots:  # as text, not markup: a reason may hold [brackets]
                table.add_row(*(Text(str(cell)) for cell in row))
            console.print(table)
        for error in self.job_errors:
            console.print(f"job error: {error}", markup=False, highlight=False)
        return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").splitlines())


class RunObserver(Protocol):
    """Told about attempts as they start and end (progress displays)."""

    def attempt_started(self, attempt: int, roots: int, tracking: Any) -> None:
        """``tracking`` is the :class:`RDDTracking` or :class:`FrameTracking` running."""

    def attempt_finished(self, attempt: int, outcomes: Sequence[RootOutcome]) -> None: ...


def record_attempt(
    outcomes: Sequence[RootOutcome], todo: Sequence[int], tags: Sequence[str], settled: Mapping[str, Attempt]
) -> list[int]:
    """Append each tried root's attempt (``todo[i]`` as ``tags[i]``); return the roots to
    try again: not acked, not failed for good, not another owner's chain."""
    retry = []
    for i, tag in zip(todo, tags, strict=True):
        result = settled[tag]
        outcomes[i].attempts.append(result)
        if result.state != "acked" and not result.permanent and result.reason != CONFLICT:
            retry.append(i)
    return retry
