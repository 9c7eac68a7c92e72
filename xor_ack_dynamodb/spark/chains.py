"""The driver's requests on a run's chains, shared by every tracked path: create them,
stamp or fail them with what a job committed, and settle how each one ended.

Every request here names the chain's owner, so the tracker refuses (``NotOwner``) a
chain of another writer; such a chain is never stamped, failed or reported acked (see
:mod:`.outcomes`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..core.factory import StampSpec
from ..drivers.cache import LastKnown
from ..errors import (
    InvalidConfig,
    NotOwner,
    OpIdReused,
    TagAcked,
    TagExists,
    TagExpired,
    TagFailed,
    TagNotFound,
    XorAckError,
)
from ..interfaces import AckTracker
from .group import Group
from .outcomes import CONFLICT, Attempt

if TYPE_CHECKING:
    from ..config import AckConfig
    from ..stamps import Stamp, Sum
    from ..status import ChainStatus

__all__ = [
    "snapshot",
    "pool_map",
    "refuse_delete_on_ack",
    "create_chains",
    "split_refusals",
    "apply_acks",
    "settle",
    "Started",
    "Owners",
    "STILL_PENDING",
    "WAITING",
    "CHAIN_ENDED",
]

log = logging.getLogger("xor_ack_dynamodb.spark")

#: The chains an attempt started, and why each of the others was not started.
Started = tuple[set[str], dict[str, str]]
#: The owner every request to a chain names: one for all chains, or per tag.
Owners = str | Mapping[str, str]
#: Why a run fails a chain still pending once its job has returned.
STILL_PENDING = "still pending when its job ended"
#: What is reported for a chain left pending (its other edges are held elsewhere).
WAITING = "this job's part is done; the chain waits on other edges"
#: How a chain that ended (or is gone) refuses a request: nothing sent to it matters now.
CHAIN_ENDED = (TagAcked, TagFailed, TagExpired, TagNotFound)


def snapshot(tracker: AckTracker) -> Counter[str]:
    """The tracker's counters so far (:meth:`RequestStats.snapshot`: ``requests``,
    ``requests.<Operation>``, ``conflicts``, ``retries``, ``duplicates``)."""
    return Counter(tracker.stats.snapshot())


def owner_of(owners: Owners, tag: str) -> str:
    return owners if isinstance(owners, str) else owners[tag]


def refuse_delete_on_ack(tracker: object, config: AckConfig) -> None:
    """Raise :class:`InvalidConfig` for a run whose chains would be deleted when they
    complete: the driver reads how each chain ended after its job, and a deleted chain
    reads as missing (its root would be replayed although its output was written)."""
    if config.delete_on_ack or getattr(tracker, "delete_on_ack", False):
        raise InvalidConfig(
            "tracked Spark runs read each chain's outcome after the job: use a tracker "
            "without delete_on_ack (acked tombstones expire after the retention)"
        )


def pool_map(threads: int, fn: Any, items: Sequence[Any], name: str = "xor-ack-driver") -> list[Any]:
    """``[fn(item) for item in items]``, up to ``threads`` at a time."""
    if len(items) <= 1 or threads <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(min(threads, len(items)), thread_name_prefix=name) as pool:
        return list(pool.map(fn, items))


def create_chains(
    tracker: AckTracker,
    chains: Mapping[str, int],
    group: Group,
    op_prefix: str,
    *,
    owner: str,
    threads: int = 16,
    transactions: bool = False,
    exists: Callable[[str, XorAckError], str | None] | None = None,
    replace_expired: bool = True,
) -> Started:
    """Create each chain ``tag -> value`` (sent as ``group.value(value)``: bytes for
    xor chains, the int for sum chains; op id ``<op_prefix>/<tag>``, owned by
    ``owner``), up to ``threads`` at a time. Returns the tags created here (a re-sent
    create of our own is recognised by its op id and counts as created) and, for the
    others, why not: ``TagExists`` means another writer's chain (the tracker remembers a
    create's op id for the chain's whole life), to be left alone (``CONFLICT``). Other
    errors propagate (the attempt's job should not start without its chains).

    ``exists(tag, error)``, if given, decides instead for a create refused with
    ``TagExists`` or ``OpIdReused``: it returns None (the chain counts as started, e.g.
    it continued the chain) or why not. ``replace_expired`` is ``create()``'s: False
    keeps a chain that timed out (refused as ``TagExists``, in the create's condition).

    With ``transactions``, the creates go out as ``create_many`` (TransactWriteItems of
    up to 100 conditional puts: one request per 100 chains, but twice the write units
    of single puts on DynamoDB), from one thread."""

    keep_known(tracker, len(chains))

    def refusal(tag: str, error: Exception) -> str | None:
        if exists is not None and isinstance(error, (TagExists, OpIdReused)):
            return exists(tag, error)
        if isinstance(error, TagExists):
            return CONFLICT
        raise error

    if transactions:
        results = _many(tracker, "create_many")(
            {tag: group.value(edge) for tag, edge in chains.items()},
            op_ids={tag: f"{op_prefix}/{tag}" for tag in chains},
            owner=owner,
            replace_expired=replace_expired,
        )
        return split_refusals(
            (tag, refusal(tag, r) if isinstance(r, Exception) else None) for tag, r in results.items()
        )

    def one(tag: str) -> tuple[str, str | None]:
        try:
            value, op_id = group.value(chains[tag]), f"{op_prefix}/{tag}"
            tracker.create(tag, value, op_id=op_id, owner=owner, replace_expired=replace_expired)
        except (TagExists, OpIdReused) as exc:
            return tag, refusal(tag, exc)
        return tag, None

    return split_refusals(pool_map(threads, one, list(chains)))


def keep_known(tracker: AckTracker, count: int) -> None:
    """Let ``tracker`` keep the last known values of ``count`` chains at least, so that
    the stamps of an attempt's chains find them where their creates left them: past its
    cache (the tracker's ``cache_size``, default 10,000), each stamp would read its chain
    again (one ``BatchGetItem`` per 100 chains more, and a run's cost per root growing
    with its roots). A few hundred bytes a chain. A tracker without a cache, or with
    it disabled, is left as it is."""
    cache = getattr(getattr(tracker, "driver", None), "cache", None)
    if isinstance(cache, LastKnown):
        cache.reserve(count)


def split_refusals(pairs: Iterable[tuple[str, str | None]]) -> Started:
    """``(tag, why)`` pairs as the tags that went through (``why`` None) and, for the
    others, why not."""
    whys = dict(pairs)
    refused = {t: why for t, why in whys.items() if why is not None}
    return set(whys) - set(refused), refused


def apply_acks(
    tracker: AckTracker,
    stamps: Mapping[str, int],
    failures: Mapping[str, str],
    group: Group | Mapping[str, Group],
    op_prefix: str,
    *,
    owner: Owners,
    threads: int = 16,
    known: dict[str, Attempt] | None = None,
    transactions: bool = False,
) -> Counter[str]:
    """Apply a job's outcome to its chains, up to ``threads`` at a time: ``fail`` each
    chain in ``failures`` (with its reason), ``stamp`` each other chain of ``stamps`` with
    its merged pending stamp (sent as ``group.value(stamp)``; op id
    ``<op_prefix>/<tag>``: applying the same outcome twice changes nothing), each naming
    its owner (``group`` and ``owner`` are one for all chains, or per tag). A chain
    already failed, expired, acked or gone is skipped (its outcome no longer depends on
    this job), and so is a chain of another owner (``conflicts``).
    Returns counts: ``stamps``, ``chains_acked``, ``chains_failed``, ``skipped``,
    ``conflicts``.

    ``known``, if given, receives the outcome of every chain whose request here decided
    it (a stamp that completed the chain, a fail that was applied): final states that
    :func:`settle` then need not read again. Both requests named ``owner`` and the
    tracker refuses them on a chain of another owner, so these are the run's own.

    With ``transactions``, the stamps go out as ``stamp_many`` (their reads as
    BatchGetItem, their writes as TransactWriteItems of up to 100: twice the write units
    of single writes on DynamoDB); fails stay single requests."""

    def group_of(tag: str) -> Group:
        return group if isinstance(group, Group) else group[tag]

    def stamped(tag: str, result: Stamp | Sum | Exception) -> Counter[str]:
        if isinstance(result, NotOwner):
            return Counter(conflicts=1)
        if isinstance(result, CHAIN_ENDED):
            log.debug("no stamp for %s: %s", tag, result.code)
            return Counter(skipped=1)
        if isinstance(result, Exception):
            raise result
        if known is not None and result.acked:
            known[tag] = Attempt(tag, "acked")
        return Counter(stamps=1, chains_acked=int(result.acked))

    def one(tag: str) -> Counter[str]:
        if tag in failures:
            try:
                status = tracker.fail(tag, reason=failures[tag], owner=owner_of(owner, tag))
            except NotOwner:
                return Counter(conflicts=1)
            except (TagAcked, TagNotFound) as exc:
                log.warning("could not fail chain %s: %s", tag, exc.code)
                return Counter(skipped=1)
            if known is not None and status.state == "failed":
                known[tag] = Attempt(tag, "failed", status.reason)
            return Counter(chains_failed=1)
        if stamps[tag] == 0:
            return Counter()
        try:
            result: Stamp | Sum | Exception = tracker.stamp(
                tag, group_of(tag).value(stamps[tag]), op_id=f"{op_prefix}/{tag}", owner=owner_of(owner, tag)
            )
        except (NotOwner, *CHAIN_ENDED) as exc:
            result = exc
        return stamped(tag, result)

    total: Counter[str] = Counter()
    batched = sorted(t for t, v in stamps.items() if v and t not in failures) if transactions else []
    if batched:
        specs = [
            StampSpec(t, group_of(t).value(stamps[t]), op_id=f"{op_prefix}/{t}", owner=owner_of(owner, t))
            for t in batched
        ]
        for tag, result in _many(tracker, "stamp_many")(specs).items():
            total.update(stamped(tag, result))
    rest = sorted((set(stamps) | set(failures)) - set(batched))
    for counts in pool_map(threads, one, rest):
        total.update(counts)
    return total


def _many(tracker: AckTracker, name: str) -> Any:
    """The tracker's ``create_many``/``stamp_many`` (``XorAckDynamoDB``, ``MemoryAck``);
    :class:`InvalidConfig` for a tracker without it."""
    method = getattr(tracker, name, None)
    if method is None:
        raise InvalidConfig(f"transactions=True needs a tracker with {name} (XorAckDynamoDB, MemoryAck)")
    return method


def settle(
    tracker: AckTracker,
    tags: Sequence[str],
    *,
    owner: Owners,
    refused: Mapping[str, str] | None = None,
    notes: Mapping[str, str] | None = None,
    known: Mapping[str, Attempt] | None = None,
    refused_state: str = "failed",
    pending: Callable[[str], str | None] = lambda tag: STILL_PENDING,
    missing: str = "the chain was never created",
) -> dict[str, Attempt]:
    """How each chain of a finished attempt ended. ``refused`` tags (not started by this
    run) are reported ``refused_state`` with their reason and never read, failed or
    reported acked; so is a chain whose ``owner`` is not its owner (``CONFLICT``).
    ``known`` outcomes (final states the run's own stamps and fails returned, see
    :func:`apply_acks`) are taken as they are, without a read; every other chain is read
    (``status_many``). For a chain still pending, ``pending(tag)`` says why it can no
    longer complete (it is failed here, so that no late write can ack it), or None: it
    is left pending (reported ``pending``, :data:`WAITING`). A chain not found is
    reported ``missing``, with the reason ``missing``."""
    refused = dict(refused or {})
    notes = notes or {}
    known = {t: a for t, a in (known or {}).items() if t not in refused}
    mine = [t for t in tags if t not in refused and t not in known]
    found = tracker.status_many(mine) if mine else {}
    for tag, status in found.items():
        if status.owner != owner_of(owner, tag):
            refused[tag] = CONFLICT
    out: dict[str, Attempt] = {}
    for tag in tags:
        note = notes.get(tag)
        if tag in refused:
            out[tag] = Attempt(tag, refused_state, refused[tag], note)
        elif tag in known:
            out[tag] = Attempt(tag, known[tag].state, known[tag].reason, note)
        else:
            out[tag] = _settle_one(tracker, tag, found.get(tag), note, owner_of(owner, tag), pending, missing)
    return out


def _settle_one(
    tracker: AckTracker,
    tag: str,
    status: ChainStatus | None,
    note: str | None,
    owner: str,
    pending: Callable[[str], str | None],
    missing: str,
) -> Attempt:
    if status is None:
        return Attempt(tag, "missing", missing, note)
    if status.state != "pending":
        return Attempt(tag, status.state, status.reason, note)
    reason = pending(tag)
    if reason is None:
        return Attempt(tag, "pending", WAITING, note)
    try:
        failed = tracker.fail(tag, reason=reason, owner=owner)
    except TagAcked:  # a straggler completed it just now
        return Attempt(tag, "acked", None, note)
    except NotOwner:
        return Attempt(tag, "failed", CONFLICT, note)
    return Attempt(tag, failed.state, failed.reason, note)
