"""What a tracked run reports: one :class:`RootOutcome` per root, one :class:`Attempt`
per try at it, and the reasons that decide whether a root is replayed.

A root is reported ``acked`` only when its chain was made by this run and reads acked:
its tag belongs to the run's :class:`~xor_ack_dynamodb.spark.tags.TagScheme` (which
carries a random nonce), and the chain's ``owner`` is the run's (every create, stamp and
fail of the run names it, so the tracker refuses to touch a chain of another owner). A
chain that another writer created under one of our tags (``TagExists`` on create,
``NotOwner`` on a stamp or fail, another owner on read) is never stamped, failed or
reported acked: its root is reported ``failed`` with the reason ``conflict``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.factory import fit_reason

__all__ = [
    "Attempt",
    "RootOutcome",
    "RunReport",
    "RunObserver",
    "PermanentFailure",
    "PERMANENT",
    "CONFLICT",
    "is_permanent",
    "failure_reason",
    "record_attempt",
]

#: Reasons starting with this mark failures that a replay cannot cure (bad bytes in a
#: file, a record no attempt can process): such roots are not replayed.
PERMANENT = "permanent: "
#: The reason given for a root whose tag another writer had already created.
CONFLICT = "conflict: a chain with this tag exists and was not created by this run"


class PermanentFailure(Exception):
    """Raise it from a user function (or :meth:`TrackedFrame.fail_when` with
    ``permanent=True``) for a failure that a replay would only repeat: the root fails and
    is not replayed."""


def is_permanent(reason: str | None) -> bool:
    return bool(reason) and str(reason).startswith(PERMANENT)


def failure_reason(error: BaseException | str) -> str:
    """The reason a chain is failed with: ``repr`` of the error, marked permanent for a
    :class:`PermanentFailure`, shortened visibly to what ``fail()`` takes."""
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
        return self.state == "failed" and is_permanent(self.reason)


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
        """The summary table's rows, ``(figure, value)``: the run's figures, those it
        publishes to the Spark UI (:data:`~xor_ack_dynamodb.spark.metrics.METRICS`:
        roots, roots_acked, roots_failed, ..., requests, stamps)."""
        return list(self.figures().items())

    def figures(self) -> dict[str, int]:
        """The run's figures by name (:data:`~xor_ack_dynamodb.spark.metrics.METRICS`
        says what each counts)."""
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
        """One row per root that did not end acked, took more than one attempt or has a
        note: ``(key, state, attempts, reason or note)`` (the last attempt's reason,
        else its note)."""
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
        """The summary as text tables (what ``print(report)`` shows): :meth:`rows`, then
        :meth:`root_rows` if any, then the job errors."""
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
    """Told about attempts as they start and end (for progress displays)."""

    def attempt_started(self, attempt: int, roots: int, tracking: Any) -> None:
        """``tracking`` is the :class:`RDDTracking` or :class:`FrameTracking` running."""

    def attempt_finished(self, attempt: int, outcomes: Sequence[RootOutcome]) -> None: ...


def record_attempt(
    outcomes: Sequence[RootOutcome], todo: Sequence[int], tags: Sequence[str], settled: Mapping[str, Attempt]
) -> list[int]:
    """Append each tried root's attempt (``todo[i]`` was tried as ``tags[i]``) to its
    outcome; returns the roots to try again: not acked, not failed for good, and not
    refused for another owner's chain."""
    retry = []
    for i, tag in zip(todo, tags, strict=True):
        result = settled[tag]
        outcomes[i].attempts.append(result)
        if result.state != "acked" and not result.permanent and result.reason != CONFLICT:
            retry.append(i)
    return retry
