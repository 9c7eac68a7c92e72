"""Running many calls on distinct chains together: bulk reads and transactions.

A Spark driver stamping a thousand chains once each, or a heartbeat touching every
pending chain of a run, would spend one request per chain. :func:`run_many` runs the
very same sans-IO calls (:mod:`.calls`) side by side instead, in lockstep: the reads
they ask for in a round go out as BatchGetItem (100 keys a request), their conditional
writes as TransactWriteItems (100 entries a request, applied all or none), and each
call gets its own reply, so every rule (duplicates, owners, states, lost responses)
applies exactly as when the call runs alone.

Transactions cost what DynamoDB bills them (two write units per KB of each item), but
one request instead of a hundred. A transaction cancelled because some entries' own
conditions failed applied nothing: those calls get their rejection (with the chain as it
stands, as a single write would), the others are sent again at once. A store without
transactions (dynalite) gets the writes one by one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.calls import Again, Call, Transient
from ..core.chain import Chain
from ..core.messages import (
    TRANSACTABLE,
    Add,
    Cancelled,
    Extend,
    MarkFailed,
    Put,
    Read,
    Remove,
    Request,
    TransactionsUnsupported,
    Written,
)
from ..errors import CorruptItem
from ..retry import RetryPolicy

if TYPE_CHECKING:
    from .engine import Engine, Step

__all__ = ["run_many", "TRANSACTION_SIZE"]

T = TypeVar("T")

#: Entries per TransactWriteItems request (DynamoDB's limit).
TRANSACTION_SIZE = 100


def run_many(engine: Engine, calls: Sequence[Call[T]]) -> list[T | Exception]:
    """Run ``calls`` (on distinct chains) to their results, together. Returns each
    call's result or the error it ended with, in order: a typed error of the rules, the
    store's exception when transient failures outlast the retry budget, or
    ``StaleLocalData`` when the budget is spent on lost races. The budget (attempts and
    seconds) is the engine's, shared by the whole batch."""
    tags = [c.tag for c in calls]
    if len(set(tags)) != len(tags):
        raise ValueError("run_many() takes calls on distinct chains")
    batch = _Batch(engine)
    results: dict[int, T | Exception] = {}
    last_error: dict[int, BaseException] = {}
    todo = list(range(len(calls)))
    policy = engine.retry
    started = time.monotonic()
    attempt = 0
    while todo:
        attempt += 1
        steps = {i: engine.step(calls[i], engine.store.is_transient) for i in todo}
        again: list[int] = []
        idle = 0
        while steps:
            for i in [i for i, s in steps.items() if s.done]:
                results[i] = steps.pop(i).result
            if not steps:
                break
            outcome = batch.pass_(steps)
            if not outcome:  # nothing answered: unprocessed keys, conflicting transactions
                idle += 1
                if idle >= policy.max_attempts or time.monotonic() - started > policy.max_seconds:
                    for i in list(steps):
                        results[i] = calls[i].exhausted(attempt)
                    steps.clear()
                    break
                time.sleep(_backoff(policy, idle))
                continue
            idle = 0
            for i, (reply, error) in outcome.items():
                try:
                    if error is not None:
                        steps[i].failed(error)
                    else:
                        steps[i].reply(reply)
                except (Again, Transient) as exc:
                    steps.pop(i)
                    again.append(i)
                    last_error[i] = exc
                except Exception as exc:
                    steps.pop(i)
                    results[i] = exc
        todo = sorted(again)
        if todo:
            engine.stats.add("retries", len(todo))
            wait = _backoff(policy, attempt)
            if attempt >= policy.max_attempts or time.monotonic() - started + wait > policy.max_seconds:
                for i in todo:
                    failure = last_error[i]
                    spent = failure.error if isinstance(failure, Transient) else None
                    results[i] = spent if isinstance(spent, Exception) else calls[i].exhausted(attempt)
                todo = []
            else:
                time.sleep(wait)
    for call in calls:
        engine.remember(call)
    return [results[i] for i in range(len(calls))]


def _backoff(policy: RetryPolicy, attempt: int) -> float:
    return policy.wait(attempt)


class _Batch:
    """One pass over the requests the steps are waiting on: reads in bulk, writes in
    transactions (one by one where the store has none), the rest singly."""

    def __init__(self, engine: Engine) -> None:
        self.store = engine.store
        self.transactions = True

    def pass_(self, steps: dict[int, Step[Any]]) -> dict[int, tuple[Any, Exception | None]]:
        """The replies (or store errors) of the requests answered in this pass; a read
        the store did not get to, or a write held back by a conflicting transaction, is
        not answered (asked again in the next pass)."""
        outcome: dict[int, tuple[Any, Exception | None]] = {}
        reads = [i for i, s in steps.items() if isinstance(s.request, Read)]
        writes = [i for i, s in steps.items() if self.transactions and isinstance(s.request, TRANSACTABLE)]
        singles = [i for i in steps if i not in set(reads) | set(writes)]
        self._read(steps, reads, outcome)
        if writes:
            try:
                self._transact(steps, writes, outcome)
            except TransactionsUnsupported:
                self.transactions = False
                singles += [i for i in writes if i not in outcome]
        for i in singles:
            try:
                outcome[i] = (self.store.execute(steps[i].request), None)
            except Exception as exc:
                outcome[i] = (None, exc)
        return outcome

    def _read(self, steps: dict[int, Step[Any]], reads: list[int], outcome: dict[int, Any]) -> None:
        for start in range(0, len(reads), BATCH_READ):
            chunk = reads[start : start + BATCH_READ]
            by_tag = {_tag(steps[i].request): i for i in chunk}
            try:
                batch = self.store.read_many(list(by_tag))
            except Exception as exc:
                for i in chunk:
                    outcome[i] = (None, exc)
                continue
            found = {c.tag: c for c in batch.chains}
            unprocessed = set(batch.unprocessed)
            for tag, i in by_tag.items():
                if tag in batch.corrupt:
                    outcome[i] = (None, CorruptItem(batch.corrupt[tag], tag=tag))
                elif tag not in unprocessed:
                    outcome[i] = (found.get(tag), None)

    def _transact(self, steps: dict[int, Step[Any]], writes: list[int], outcome: dict[int, Any]) -> None:
        """Transactions of up to 100 entries. The entries of a cancelled one that were
        not themselves refused go again at once (they were only held back by those);
        a transaction cancelled for no entry's own condition (a conflict with another
        transaction, a throttle) leaves its entries unanswered. A committed
        transaction's updates come back without their chains: a batch read supplies them."""
        pending = list(writes)
        while pending:
            chunk, pending = pending[:TRANSACTION_SIZE], pending[TRANSACTION_SIZE:]
            requests: list[Request] = [steps[i].request for i in chunk]
            try:
                answer = self.store.transact(requests)
            except TransactionsUnsupported:
                raise
            except Exception as exc:
                for i in chunk:
                    outcome[i] = (None, exc)
                continue
            if isinstance(answer, Cancelled):
                for position, rejection in answer.rejected.items():
                    outcome[chunk[position]] = (rejection, None)
                if answer.rejected:
                    pending = [i for n, i in enumerate(chunk) if n not in answer.rejected] + pending
                continue
            updated = [
                i
                for i, w in zip(chunk, answer.replies, strict=True)
                if w.chain is None and _updates(steps[i].request)
            ]
            chains: dict[str, Chain | None] = {}
            failure: Exception | None = None
            if updated:
                try:
                    chains = self._read_back([_tag(steps[i].request) for i in updated])
                except Exception as exc:  # committed, but not read: the calls read again
                    failure = exc
            for i, written in zip(chunk, answer.replies, strict=True):
                if i in updated:
                    tag = _tag(steps[i].request)
                    if failure is not None:
                        outcome[i] = (None, failure)
                        continue
                    written = Written(chains.get(tag), written.resent, later=True)
                outcome[i] = (written, None)

    def _read_back(self, tags: list[str]) -> dict[str, Chain | None]:
        """The chains of a committed transaction's updates, every one of them: keys
        BatchGetItem leaves unprocessed are read singly."""
        batch = self.store.read_many(tags)
        chains: dict[str, Chain | None] = {c.tag: c for c in batch.chains}
        for tag in batch.unprocessed:
            chain = self.store.execute(Read(tag))
            assert chain is None or isinstance(chain, Chain)  # a read's answer
            chains[tag] = chain
        return chains


#: Keys per BatchGetItem request (DynamoDB's limit).
BATCH_READ = 100


def _tag(request: Request) -> str:
    if isinstance(request, Put):
        return request.new.tag
    if isinstance(request, Remove):
        return request.expect.tag
    return request.tag


def _updates(request: Request) -> bool:
    """An update whose chain DynamoDB does not return from a transaction."""
    return isinstance(request, (Add, Extend, MarkFailed))
