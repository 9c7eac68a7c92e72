"""Many calls on distinct chains, stepped together: the planning half of a driver's
``run_many`` (docs/concepts.md, "Many chains at once"). Each call gets its own reply,
so every rule applies exactly as when it runs alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

from ..errors import BatchIncomplete, CorruptItem, EndpointUnreachable
from ..status import ChainStatus
from .calls import Again, Call, Step, Transient
from .chain import Chain
from .messages import (
    TRANSACTABLE,
    Add,
    BatchRead,
    Cancelled,
    Committed,
    Extend,
    MarkFailed,
    Read,
    Written,
    tag_of,
)
from .rules import ChainRules

T = TypeVar("T")
V = TypeVar("V")

#: Keys per BatchGetItem request (DynamoDB's limit).
BATCH_SIZE = 100
#: Entries per TransactWriteItems request (DynamoDB's limit).
TRANSACTION_SIZE = 100
#: Groups in a row, each of whose chains ended unreachable after the group's retry budget,
#: after which a batch sends no more (:class:`EndpointWatch`).
UNREACHABLE_GROUPS = 2

#: A request's answer in a pass: the store's reply, or the exception it raised.
Answer = tuple[Any, Exception | None]


def chunks(items: Sequence[T], size: int) -> list[list[T]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def failure_type(error: BaseException) -> str:
    """How :meth:`BatchResult.failures_by_type` names ``error``: its class, and for a
    botocore ``ClientError`` the error code DynamoDB sent (``ClientError:ThrottlingException``)."""
    name = type(error).__name__
    response = getattr(error, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return f"{name}:{code}" if code else name


def _grouped(named: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """(tag, name) pairs as name -> its tags, the most common name first."""
    groups: dict[str, list[str]] = {}
    for tag, name in named:
        groups.setdefault(name, []).append(tag)
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def _counts(groups: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in groups.items())


class BatchResult(dict[str, V | Exception]):
    """Each chain's outcome of a batch call, by tag, in the order given: its value, or
    the typed error or the store's exception (transient failures past a group's retry
    budget) it ended with."""

    @property
    def ok(self) -> dict[str, V]:
        return {tag: v for tag, v in self.items() if not isinstance(v, Exception)}

    @property
    def failed(self) -> dict[str, Exception]:
        return {tag: v for tag, v in self.items() if isinstance(v, Exception)}

    def failures_by_type(self) -> dict[str, list[str]]:
        """Error type (:func:`failure_type`) -> the tags that failed with it, the most
        common type first."""
        return _grouped((tag, failure_type(error)) for tag, error in self.failed.items())

    def summary(self) -> str:
        failed = {name: len(tags) for name, tags in self.failures_by_type().items()}
        line = f"{len(self)} chains: {len(self) - sum(failed.values())} ok, {sum(failed.values())} failed"
        return f"{line} ({_counts(failed)})" if failed else line


class StatusResult(dict[str, ChainStatus]):
    """The statuses ``status_many`` read, by tag, in the order asked (an undecodable
    item as ``corrupt``), plus :attr:`missing`, the tags that have no chain (a failed
    read is never a missing tag: ``status_many`` raises)."""

    def __init__(self, found: Iterable[tuple[str, ChainStatus]] = (), missing: Iterable[str] = ()) -> None:
        super().__init__(found)
        self.missing: list[str] = list(missing)

    def by_state(self) -> dict[str, list[str]]:
        """State -> the tags in it, the most common state first (``missing`` excluded)."""
        return _grouped((tag, status.state) for tag, status in self.items())

    def summary(self) -> str:
        """One line, e.g. ``10000 tags: 9990 found (pending 9000, acked 990), 10 missing``."""
        states = {state: len(tags) for state, tags in self.by_state().items()}
        found = f"{len(self)} found ({_counts(states)})" if states else f"{len(self)} found"
        return f"{len(self) + len(self.missing)} tags: {found}, {len(self.missing)} missing"


class EndpointWatch:
    """Whether a batch's endpoint is dead (docs/performance.md, "A dead endpoint"): after
    ``limit`` groups in a row whose every call ended :class:`EndpointUnreachable`
    through the group's retry budget, a driver starts no more groups, and :meth:`unsent`
    gives their calls (which sent nothing) an error of that type. Any other ending breaks
    the run. :meth:`record` only appends to a list, so threads may share it.
    """

    def __init__(self, limit: int = UNREACHABLE_GROUPS) -> None:
        self.limit = limit
        self._finished: list[EndpointUnreachable | None] = []  # per group: its last error if unreachable

    def record(self, outcomes: Sequence[object]) -> None:
        """Note a finished group's outcomes (each call's result or error)."""
        unreachable = bool(outcomes) and all(isinstance(o, EndpointUnreachable) for o in outcomes)
        last = outcomes[-1] if unreachable else None
        self._finished.append(last if isinstance(last, EndpointUnreachable) else None)

    def dead(self) -> EndpointUnreachable | None:
        """The last group's error when the last ``limit`` groups to finish were all
        unreachable (the endpoint is dead), else None."""
        last = self._finished[-self.limit :]
        if len(last) < self.limit or any(e is None for e in last):
            return None
        return last[-1]

    def unsent(self, tags: Sequence[str], cause: EndpointUnreachable) -> list[Exception]:
        """The error of each of ``tags``, not sent since the endpoint is dead: of
        ``cause``'s type and names, ``cause`` as its ``__cause__``."""
        errors: list[Exception] = []
        for tag in tags:
            error = type(cause)(
                f"chain {tag!r} not sent: the last {self.limit} groups of this batch found the "
                f"endpoint unreachable through their retry budget, so the rest of the batch is "
                f"not sent (nothing of it was applied); last: {cause}",
                tag=tag,
                service=cause.service,
                operation=cause.operation,
                region=cause.region,
                endpoint=cause.endpoint,
            )
            error.__cause__ = cause
            errors.append(error)
        return errors


def statuses(batch: BatchRead, rules: ChainRules, now: int) -> dict[str, ChainStatus]:
    """The status of each chain a batch read found, and ``corrupt`` for each item it
    could not decode."""
    found = {chain.tag: rules.status(chain, now) for chain in batch.chains}
    for tag, why in batch.corrupt.items():
        found[tag] = ChainStatus(tag=tag, state="corrupt", value=None, expires_at=None, reason=why)
    return found


class Lockstep(Generic[T]):
    """The calls of one ``run_many`` (on distinct chains) and where each stands: a step
    waiting on a request, a round to run again after a backoff, or a result. A driver's
    attempt: :meth:`start`, then passes (send what :meth:`sort` groups, :meth:`feed` the
    answers); back off while :attr:`unfinished`; :meth:`give_up` when the budget is
    spent; then :meth:`outcomes`."""

    def __init__(
        self,
        calls: Sequence[Call[T]],
        is_transient: Callable[[BaseException], bool],
        transactions: bool = True,
    ) -> None:
        self.calls = calls
        self.is_transient = is_transient
        self.steps: dict[int, Step[T]] = {}
        self.again: dict[int, BaseException] = {}  # rounds that ended in Again / Transient
        self.results: dict[int, T | Exception] = {}
        self.transactions = transactions  # until the store says it has none

    @property
    def unfinished(self) -> bool:
        return bool(self.steps or self.again)

    def start(self, now: int) -> None:
        """A new round, at ``now``, for each call that has neither a result nor a step."""
        self.again.clear()
        for i, call in enumerate(self.calls):
            if i not in self.results and i not in self.steps:
                self.steps[i] = Step(call.round(now), self.is_transient)
        self._collect()

    def tag(self, i: int) -> str:
        return tag_of(self.steps[i].request)

    def sort(self) -> tuple[list[int], list[int], list[int]]:
        """The waiting steps as reads (to send in bulk), writes (in transactions, while
        the store has them) and the rest (one by one)."""
        reads = [i for i, s in self.steps.items() if isinstance(s.request, Read)]
        grouping = TRANSACTABLE if self.transactions else ()
        writes = [i for i, s in self.steps.items() if isinstance(s.request, grouping)]
        grouped = set(reads) | set(writes)
        return reads, writes, [i for i in self.steps if i not in grouped]

    def read(self, chunk: list[int], batch: BatchRead) -> dict[int, Answer]:
        """The answers a batch read gives the reads of ``chunk``; a key the store did not
        get to is not answered (asked again in the next pass)."""
        found = {c.tag: c for c in batch.chains}
        unprocessed = set(batch.unprocessed)
        answers: dict[int, Answer] = {}
        for i in chunk:
            tag = self.tag(i)
            if tag in batch.corrupt:
                answers[i] = (None, CorruptItem(batch.corrupt[tag], tag=tag))
            elif tag not in unprocessed:
                answers[i] = (found.get(tag), None)
        return answers

    def cancelled(self, chunk: list[int], answer: Cancelled, answers: dict[int, Answer]) -> list[int]:
        """Record the rejections of a cancelled transaction; return the entries to send
        again at once (none when no entry's own condition failed)."""
        for position, rejection in answer.rejected.items():
            answers[chunk[position]] = (rejection, None)
        if not answer.rejected:
            return []
        return [i for n, i in enumerate(chunk) if n not in answer.rejected]

    def unread(self, chunk: list[int], answer: Committed) -> list[str]:
        """The tags of a committed transaction's updates, whose chains DynamoDB does not
        return from a transaction: a batch read supplies them."""
        return [self.tag(i) for i, w in zip(chunk, answer.replies, strict=True) if self._unread(i, w)]

    def committed(
        self, chunk: list[int], answer: Committed, read: BatchRead | Exception, answers: dict[int, Answer]
    ) -> None:
        """Record a committed transaction's replies, with the chains of its updates as
        ``read`` after it (``later``), or that read's error."""
        chains: dict[str, Chain] = {} if isinstance(read, Exception) else {c.tag: c for c in read.chains}
        for i, written in zip(chunk, answer.replies, strict=True):
            if not self._unread(i, written):
                answers[i] = (written, None)
            elif isinstance(read, Exception):
                answers[i] = (None, Transient(read) if isinstance(read, BatchIncomplete) else read)
            else:
                answers[i] = (Written(chains.get(self.tag(i)), written.resent, later=True), None)

    def _unread(self, i: int, written: Written) -> bool:
        return written.chain is None and isinstance(self.steps[i].request, (Add, Extend, MarkFailed))

    def feed(self, answers: dict[int, Answer]) -> None:
        """Hand each answered step its reply or error: a round that loses a race or
        meets a transient error ends (to run again), one that raises ends its call."""
        for i, (reply, error) in answers.items():
            step = self.steps[i]
            try:
                if error is not None:
                    step.failed(error)
                else:
                    step.reply(reply)
            except (Again, Transient) as exc:
                del self.steps[i]
                self.again[i] = exc
            except Exception as exc:
                del self.steps[i]
                self.results[i] = exc
        self._collect()

    def give_up(self, attempts: int) -> None:
        """The budget is spent: a call still waiting, or that lost its last race, gets
        ``StaleLocalData``; one whose last round met a transient error gets that error."""
        for i, failure in self.again.items():
            error = failure.error if isinstance(failure, Transient) else None
            self.results[i] = error if isinstance(error, Exception) else self.calls[i].exhausted(attempts)
        for i in self.steps:
            self.results[i] = self.calls[i].exhausted(attempts)
        self.steps.clear()
        self.again.clear()

    def outcomes(self) -> list[T | Exception]:
        return [self.results[i] for i in range(len(self.calls))]

    def _collect(self) -> None:
        for i in [i for i, s in self.steps.items() if s.done]:
            self.results[i] = self.steps.pop(i).result
