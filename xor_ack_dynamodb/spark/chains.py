"""The driver's requests on a run's chains, shared by every tracked path: create them,
stamp or fail them with what a job committed, and settle how each one ended.

Every request names the chain's owner, so the tracker refuses (``NotOwner``) another
writer's chain: it is never stamped, failed or reported acked (:mod:`.outcomes`).
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
from .outcomes import CONFLICT, Attempt
from .tags import Group

if TYPE_CHECKING:
    from ..config import AckConfig
    from ..stamps import Stamp, Sum

__all__ = ["create_chains", "apply_acks", "settle", "Started", "Owners", "STILL_PENDING", "CHAIN_ENDED"]

log = logging.getLogger("xor_ack_dynamodb.spark")

#: The chains an attempt started, and why each of the others was not started.
Started = tuple[set[str], dict[str, str]]
Owners = str | Mapping[str, str]
#: Why a run fails a chain still pending once its job has returned.
STILL_PENDING = "still pending when its job ended"
#: Why a chain is left pending (its other edges are held elsewhere).
WAITING = "this job's part is done; the chain waits on other edges"
#: How a chain that ended (or is gone) refuses a request.
CHAIN_ENDED = (TagAcked, TagFailed, TagExpired, TagNotFound)


def snapshot(tracker: AckTracker) -> Counter[str]:
    return Counter(tracker.stats.snapshot())


def owner_of(owners: Owners, tag: str) -> str:
    return owners if isinstance(owners, str) else owners[tag]


def refuse_delete_on_ack(tracker: object, config: AckConfig) -> None:
    """Raise :class:`InvalidConfig` for ``delete_on_ack``: the driver reads how each chain
    ended, and a deleted one reads missing (its root would be replayed)."""
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
    """Create each chain ``tag -> value`` (op id ``<op_prefix>/<tag>``, owned by
    ``owner``). Returns the tags created (a re-sent create of ours counts) and why the
    others were not: ``TagExists`` is another writer's chain (``CONFLICT``), unless
    ``exists(tag, error)`` decides (on ``TagExists``, ``OpIdReused``; None: started).
    Other errors propagate."""

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
    """Let ``tracker``'s cache keep ``count`` chains at least, so that an attempt's stamps
    find their chains where the creates left them (past it, each stamp reads again)."""
    cache = getattr(getattr(tracker, "driver", None), "cache", None)
    if isinstance(cache, LastKnown):
        cache.reserve(count)


def split_refusals(pairs: Iterable[tuple[str, str | None]]) -> Started:
    """``(tag, why)`` pairs as the tags that went through (``why`` None) and the others."""
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
    """Apply a job's outcome: ``fail`` each chain of ``failures``, ``stamp`` each other
    chain of ``stamps`` (op id ``<op_prefix>/<tag>``: applied twice, it changes nothing),
    naming its owner. A chain that ended or is gone is skipped, another owner's is a
    conflict. Returns counts; ``known`` receives the outcomes these requests decided."""

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
    """How each chain of a finished attempt ended. ``refused`` tags (not started) are
    reported ``refused_state`` and never read, failed or reported acked; nor is a chain
    of another owner (``CONFLICT``). ``known`` outcomes are taken as they are; the other
    chains are read. A chain still pending is failed with ``pending(tag)`` (so that no
    late write can ack it), or left pending if that is None. One not found is reported
    ``missing``, reason ``missing``."""
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
        note, read = notes.get(tag), found.get(tag)
        if tag in refused:
            out[tag] = Attempt(tag, refused_state, refused[tag], note)
        elif tag in known:
            out[tag] = Attempt(tag, known[tag].state, known[tag].reason, note)
        elif read is None:
            out[tag] = Attempt(tag, "missing", missing, note)
        elif read.state != "pending":
            out[tag] = Attempt(tag, read.state, read.reason, note)
        elif (reason := pending(tag)) is None:
            out[tag] = Attempt(tag, "pending", WAITING, note)
        else:
            try:
                failed = tracker.fail(tag, reason=reason, owner=owner_of(owner, tag))
                out[tag] = Attempt(tag, failed.state, failed.reason, note)
            except TagAcked:  # a straggler completed it just now
                out[tag] = Attempt(tag, "acked", None, note)
            except NotOwner:
                out[tag] = Attempt(tag, "failed", CONFLICT, note)
    return out
