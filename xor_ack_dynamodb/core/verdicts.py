"""What the chain rules answer: verdicts on one call, and plans of several stamps."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import XorAckError
from ..stamps import Position, Stamp, Sum
from .algebra import Value
from .chain import Chain, Op
from .history import Block, Lookup


@dataclass(frozen=True, slots=True)
class Apply:
    """The call may be written."""


@dataclass(frozen=True, slots=True)
class Duplicate:
    """The op was already applied: nothing to write; ``result`` is what the call returns."""

    result: Stamp | Sum


@dataclass(frozen=True, slots=True)
class Unchanged:
    """Nothing to write, and no error: the chain is already as the call would leave it
    (failing a failed chain)."""


@dataclass(frozen=True, slots=True)
class Reject:
    """The call is refused with ``error``; nothing is written."""

    error: XorAckError


APPLY = Apply()
#: A :class:`~.history.Lookup`: the stamp cannot be judged before those blocks are read.
Verdict = Apply | Duplicate | Unchanged | Reject | Lookup

#: The reason a sum chain is failed with when its sum goes below zero: edges are
#: positive and every finished edge was started, so only a stamp applied twice (or an
#: edge finished that was never started) can take it there.
NEGATIVE = "its sum went negative: a stamp was applied twice, or finished an edge never started"

#: One stamp of a write: its delta, op, owner and ``after``, the position after which
#: its earlier copies can have landed (None: the library drew its op id, none exists).
StampItem = tuple[Value, Op, str | None, Position | None]


class _Deferred:
    """A combined stamp left for the next write (the window would not hold it)."""

    def __repr__(self) -> str:
        return "DEFERRED"


DEFERRED = _Deferred()
StampOutcome = Stamp | Sum | XorAckError | _Deferred


@dataclass(slots=True)
class StampPlan:
    """Stamps replayed in order on one value of a chain (``ChainRules.plan``): ``new``
    is the chain to write (None: nothing applies), ``outcomes`` what each stamp returns
    or raises, ``moved`` the history blocks to write first, ``lookups`` those to read
    before the plan can be made."""

    new: Chain | None
    outcomes: list[StampOutcome] = field(default_factory=list)
    duplicates: int = 0
    moved: list[Block] = field(default_factory=list)
    lookups: list[Lookup] = field(default_factory=list)
