"""What a tracked run reports, and the driver-side steps both APIs share: settling the
chains of an attempt, and applying a job's merged stamps.

A root is reported ``acked`` only when its chain was made by this run and reads acked:
its tag belongs to the run's :class:`~xor_ack_dynamodb.spark.tags.TagScheme` (which
carries a random nonce), and the chain's ``owner`` is the run's (every create, stamp and
fail of the run names it, so the tracker refuses to touch a chain of another owner). A
chain that another writer created under one of our tags (``TagExists`` on create,
``NotOwner`` on a stamp or fail, another owner on read) is never stamped, failed or
reported acked: its root is reported ``failed`` with the reason ``conflict``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..core.factory import StampSpec
from ..errors import InvalidConfig, NotOwner, TagAcked, TagExists, TagExpired, TagFailed, TagNotFound
from ..interfaces import AckTracker
from .group import Group

if TYPE_CHECKING:
    from ..config import AckConfig
    from ..stamps import Stamp, Sum
    from ..status import ChainStatus

#: Any tracker (``XorAckDynamoDB``, ``MemoryAck``, ``CombiningTracker``).
Chains = AckTracker

__all__ = [
    "Attempt",
    "RootOutcome",
    "RunReport",
    "RunObserver",
    "PermanentFailure",
    "PERMANENT",
    "is_permanent",
    "settle",
    "create_chains",
    "apply_acks",
    "CONFLICT",
    "Chains",
]

log = logging.getLogger("xor_ack_dynamodb.spark")

#: Reasons starting with this mark failures that a replay cannot cure (bad bytes in a
#: file, a record no attempt can process): such roots are not replayed.
PERMANENT = "permanent: "
#: The reason given for a root whose tag another writer had already created.
CONFLICT = "conflict: a chain with this tag exists and was not created by this run"


class PermanentFailure(Exception):
    """Raise it from a user function (or :meth:`TrackedFrame.fail_when` with
    ``permanent=True``) for a failure that a replay would only repeat: the root fails and
    is not replayed."""


def is_conflict(reason: str | None) -> bool:
    return reason == CONFLICT


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
        """``tracking`` is the :class:`Tracking` or :class:`FrameTracking` running."""

    def attempt_finished(self, attempt: int, outcomes: Sequence[RootOutcome]) -> None: ...


def refuse_delete_on_ack(tracker: object, config: AckConfig) -> None:
    """Raise :class:`InvalidConfig` for a run whose chains would be deleted when they
    complete: the driver reads how each chain ended after its job, and a deleted chain
    reads as missing (its root would be replayed although its output was written)."""
    if config.delete_on_ack or getattr(tracker, "delete_on_ack", False):
        raise InvalidConfig(
            "tracked Spark runs read each chain's outcome after the job: use a tracker "
            "without delete_on_ack (acked tombstones expire after the retention)"
        )


def _pool_map(threads: int, fn: Any, items: Sequence[Any]) -> list[Any]:
    if len(items) <= 1 or threads <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(min(threads, len(items)), thread_name_prefix="xor-ack-driver") as pool:
        return list(pool.map(fn, items))


def create_chains(
    tracker: Chains,
    chains: Mapping[str, int],
    group: Group,
    op_prefix: str,
    *,
    owner: str,
    threads: int = 16,
    transactions: bool = False,
) -> tuple[set[str], dict[str, str]]:
    """Create each chain ``tag -> root edge`` (sent as ``group.value(edge)``: bytes for
    xor chains, the int for sum chains; op id ``<op_prefix>/<tag>``, owned by
    ``owner``), up to ``threads`` at a time. Returns the tags created here (a re-sent
    create of our own is recognised by its op id and counts as created) and, for the
    others, why not: ``TagExists`` means another writer's chain (the tracker remembers a
    create's op id for the chain's whole life), to be left alone. Other errors
    propagate (the attempt's job should not start without its chains).

    With ``transactions``, the creates go out as ``create_many`` (TransactWriteItems of
    up to 100 conditional puts: one request per 100 chains, but twice the write units
    of single puts on DynamoDB), from one thread."""
    if transactions:
        many = _many(tracker, "create_many")
        results = many(
            {tag: group.value(edge) for tag, edge in chains.items()},
            op_ids={tag: f"{op_prefix}/{tag}" for tag in chains},
            owner=owner,
        )
        done: set[str] = set()
        refusals: dict[str, str] = {}
        for tag, result in results.items():
            if isinstance(result, TagExists):
                refusals[tag] = CONFLICT
            elif isinstance(result, Exception):
                raise result
            else:
                done.add(tag)
        return done, refusals

    def one(tag: str) -> tuple[str, str | None]:
        try:
            tracker.create(tag, group.value(chains[tag]), op_id=f"{op_prefix}/{tag}", owner=owner)
        except TagExists:
            return tag, CONFLICT
        return tag, None

    return split_refusals(_pool_map(threads, one, list(chains)))


def split_refusals(pairs: Iterable[tuple[str, str | None]]) -> tuple[set[str], dict[str, str]]:
    """``(tag, why)`` pairs as the tags that went through (``why`` None) and, for the
    others, why not."""
    done: set[str] = set()
    refused: dict[str, str] = {}
    for tag, why in pairs:
        if why is None:
            done.add(tag)
        else:
            refused[tag] = why
    return done, refused


def apply_acks(
    tracker: Chains,
    stamps: Mapping[str, int],
    failures: Mapping[str, str],
    group: Group,
    op_prefix: str,
    *,
    owner: str,
    threads: int = 16,
    known: dict[str, Attempt] | None = None,
    transactions: bool = False,
) -> Counter[str]:
    """Apply a job's outcome to its chains, up to ``threads`` at a time: ``fail`` each
    chain in ``failures`` (with its reason), ``stamp`` each other chain of ``stamps`` with
    its merged pending stamp (sent as ``group.value(stamp)``; op id
    ``<op_prefix>/<tag>``: applying the same outcome twice changes nothing), each naming
    ``owner``. A chain already failed, expired, acked or gone is skipped (its outcome no
    longer depends on this job), and so is a chain of another owner (``conflicts``).
    Returns counts: ``stamps``, ``chains_acked``, ``chains_failed``, ``skipped``,
    ``conflicts``.

    ``known``, if given, receives the outcome of every chain whose request here decided
    it (a stamp that completed the chain, a fail that was applied): final states that
    :func:`settle` then need not read again. Both requests named ``owner`` and the
    tracker refuses them on a chain of another owner, so these are the run's own.

    With ``transactions``, the stamps go out as ``stamp_many`` (their reads as
    BatchGetItem, their writes as TransactWriteItems of up to 100: twice the write units
    of single writes on DynamoDB); fails stay single requests."""

    def stamped(tag: str, result: Stamp | Sum | Exception) -> Counter[str]:
        counts: Counter[str] = Counter()
        if isinstance(result, NotOwner):
            counts["conflicts"] += 1
        elif isinstance(result, (TagFailed, TagExpired, TagAcked, TagNotFound)):
            log.debug("no stamp for %s: %s", tag, result.code)
            counts["skipped"] += 1
        elif isinstance(result, Exception):
            raise result
        else:
            counts["stamps"] += 1
            counts["chains_acked"] += result.acked
            if known is not None and result.acked:
                known[tag] = Attempt(tag, "acked")
        return counts

    def one(tag: str) -> Counter[str]:
        counts: Counter[str] = Counter()
        if tag in failures:
            try:
                status = tracker.fail(tag, reason=failures[tag], owner=owner)
                counts["chains_failed"] += 1
                if known is not None and status.state == "failed":
                    known[tag] = Attempt(tag, "failed", status.reason)
            except NotOwner:
                counts["conflicts"] += 1
            except (TagAcked, TagNotFound) as exc:
                log.warning("could not fail chain %s: %s", tag, exc.code)
                counts["skipped"] += 1
            return counts
        value = stamps[tag]
        if value == 0:
            return counts
        try:
            result: Stamp | Sum | Exception = tracker.stamp(
                tag, group.value(value), op_id=f"{op_prefix}/{tag}", owner=owner
            )
        except (NotOwner, TagFailed, TagExpired, TagAcked, TagNotFound) as exc:
            result = exc
        return stamped(tag, result)

    total: Counter[str] = Counter()
    batched = sorted(t for t, v in stamps.items() if v and t not in failures) if transactions else []
    if batched:
        specs = [StampSpec(t, group.value(stamps[t]), op_id=f"{op_prefix}/{t}", owner=owner) for t in batched]
        for tag, result in _many(tracker, "stamp_many")(specs).items():
            total.update(stamped(tag, result))
    rest = sorted((set(stamps) | set(failures)) - set(batched))
    for counts in _pool_map(threads, one, rest):
        total.update(counts)
    return total


def _many(tracker: Chains, name: str) -> Any:
    """The tracker's ``create_many``/``stamp_many`` (``XorAckDynamoDB``, ``MemoryAck``);
    :class:`InvalidConfig` for a tracker without it."""
    method = getattr(tracker, name, None)
    if method is None:
        raise InvalidConfig(f"transactions=True needs a tracker with {name} (XorAckDynamoDB, MemoryAck)")
    return method


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
        if result.state != "acked" and not result.permanent and not is_conflict(result.reason):
            retry.append(i)
    return retry


def settle(
    tracker: Chains,
    tags: Sequence[str],
    *,
    owner: str,
    refused: Mapping[str, str] | None = None,
    notes: Mapping[str, str] | None = None,
    known: Mapping[str, Attempt] | None = None,
) -> dict[str, Attempt]:
    """How each chain of a finished attempt ended. ``refused`` tags (not created by this
    run) are reported failed with their reason and never read, failed or reported acked;
    so is a chain whose ``owner`` is not ``owner``. ``known`` outcomes (final states the
    run's own stamps and fails returned, see :func:`apply_acks`) are taken as they are,
    without a read; every other chain is read (``status_many``). A chain still pending
    can no longer complete (its job has returned): it is failed here, so that no late
    write can ack it."""
    refused = dict(refused or {})
    notes = notes or {}
    known = {t: a for t, a in (known or {}).items() if t not in refused}
    mine = [t for t in tags if t not in refused and t not in known]
    found = tracker.status_many(mine) if mine else {}
    for tag, status in found.items():
        if status.owner != owner:
            refused[tag] = CONFLICT
    out: dict[str, Attempt] = {}
    for tag in tags:
        if tag in refused:
            out[tag] = Attempt(tag, "failed", refused[tag], notes.get(tag))
        elif tag in known:
            out[tag] = Attempt(tag, known[tag].state, known[tag].reason, notes.get(tag))
        else:
            out[tag] = _settle_one(tracker, tag, found.get(tag), notes.get(tag), owner)
    return out


def _settle_one(
    tracker: Chains, tag: str, status: ChainStatus | None, note: str | None, owner: str
) -> Attempt:
    if status is None:
        return Attempt(tag, "missing", "the chain was never created", note)
    if status.state != "pending":
        return Attempt(tag, status.state, status.reason, note)
    reason = "still pending when its job ended"
    try:
        failed = tracker.fail(tag, reason=reason, owner=owner)
    except TagAcked:  # a straggler completed it just now
        return Attempt(tag, "acked", None, note)
    except NotOwner:
        return Attempt(tag, "failed", CONFLICT, note)
    return Attempt(tag, failed.state, failed.reason, note)
