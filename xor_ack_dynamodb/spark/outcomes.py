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
    :class:`PermanentFailure`."""
    if isinstance(error, str):
        return error
    reason = repr(error)
    return PERMANENT + reason if isinstance(error, PermanentFailure) else reason


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
