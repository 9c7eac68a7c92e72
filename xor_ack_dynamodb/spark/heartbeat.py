"""The driver's heartbeat: a run's pending chains do not expire while its job runs.

While an attempt's job runs (:meth:`~xor_ack_dynamodb.spark.attempts.Driver.attempt`,
on every tracked path), a :class:`Heartbeat` thread in the driver touches the attempt's
chains every ``ttl / 3`` (two beats may be lost before a chain expires), pushing their
deadlines ``ttl`` from now; the first beat comes one interval after the job starts. A
chain that ended or belongs to another owner drops out; one not created yet
(``TagNotFound``) stays. The thread lives in a ``with`` block and in the driver only: it
never outlives the job, and a chain whose driver died expires as before.

See docs/spark.md, "Long jobs: the heartbeat" (``single`` vs ``batch`` beats, what each
costs, the measured figures).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InvalidConfig, NotOwner, TagAcked, TagExpired, TagFailed, TagNotFound
from .chains import pool_map, snapshot

if TYPE_CHECKING:
    from ..config import AckConfig
    from ..interfaces import AckTracker

__all__ = ["HeartbeatPolicy", "Heartbeat", "heartbeat_tracker"]

log = logging.getLogger("xor_ack_dynamodb.spark")

#: Outcomes after which a chain is touched no more.
_ENDED = (TagAcked, TagFailed, TagExpired, NotOwner)


@dataclass(frozen=True)
class HeartbeatPolicy:
    """How a run's heartbeat beats. Picklable, immutable.

    :param enabled: ``False`` turns the heartbeat off (the chains then expire ``ttl``
        after their last write, whatever the job is doing).
    :param interval: seconds between beats; default a third of the tracker's TTL (two
        beats may be lost before a chain expires).
    :param method: ``"single"`` (default: ``touch`` per chain, ``threads`` at a time) or
        ``"batch"`` (``touch_many``); see docs/spark.md, "Long jobs: the heartbeat",
        for which costs what.
    :param threads: concurrent touches with ``method="single"``.
    """

    enabled: bool = True
    interval: float | None = None
    method: Literal["batch", "single"] = "single"
    threads: int = 8

    def __post_init__(self) -> None:
        interval = self.interval
        if interval is not None and (
            isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval > 0
        ):
            raise InvalidConfig(f"heartbeat interval must be a positive number of seconds, got {interval!r}")
        if self.method not in ("batch", "single"):
            raise InvalidConfig(f"heartbeat method must be 'batch' or 'single', got {self.method!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise InvalidConfig(f"heartbeat threads must be a positive int, got {self.threads!r}")

    @classmethod
    def of(cls, value: bool | HeartbeatPolicy) -> HeartbeatPolicy:
        """A policy from ``True``/``False`` or a policy; :class:`InvalidConfig` else."""
        if isinstance(value, HeartbeatPolicy):
            return value
        if isinstance(value, bool):
            return cls(enabled=value)
        raise InvalidConfig(f"heartbeat must be a bool or a HeartbeatPolicy, got {value!r}")


def heartbeat_tracker(tracker: Any, config: AckConfig, policy: HeartbeatPolicy) -> Any:
    """The tracker a heartbeat should use: for a DynamoDB tracker, a new one for
    ``config`` on the same client, so that its requests are counted apart; any other
    tracker (``MemoryAck``), or any tracker when ``policy`` is off, as it is."""
    from ..stores.dynamodb.tracker import XorAckDynamoDB

    if policy.enabled and isinstance(tracker, XorAckDynamoDB):
        return XorAckDynamoDB.from_config(config, tracker.client)
    return tracker


class Heartbeat:
    """Touches ``tags`` every ``interval`` seconds from a daemon thread while its ``with``
    block runs; see the module doc.

    :param tracker: the tracker to touch with (its TTL is the one pushed).
    :param tags: the chains to keep alive.
    :param owner: the owner the chains were created with (a touch names it).
    :param policy: interval, method, threads.

    Each touch grants the tracker's TTL; a tracker without a TTL (chains that never time
    out) gets no heartbeat.
    """

    def __init__(
        self,
        tracker: AckTracker,
        tags: Iterable[str],
        *,
        owner: str | None,
        policy: HeartbeatPolicy | None = None,
    ) -> None:
        self.tracker = tracker
        self.policy = policy or HeartbeatPolicy()
        self.owner = owner
        self.ttl = getattr(getattr(tracker, "rules", None), "ttl", None)
        # Without a TTL (a MemoryAck's default) nothing expires: nothing to beat for.
        self.enabled = self.policy.enabled and bool(self.ttl)
        self.interval = float(self.policy.interval or (self.ttl or 0) / 3)
        self.live: set[str] = set(tags)
        self.counts: Counter[str] = Counter()
        self.chain_seconds = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._before = self._requests()

    def _requests(self) -> Counter[str]:
        stats = getattr(self.tracker, "stats", None) if self.enabled else None
        return Counter(stats.requests) if stats is not None else Counter()

    def _spent(self) -> Counter[str]:
        """The requests made since the heartbeat was built, by operation (none of 0)."""
        return self._requests() - self._before

    def __enter__(self) -> Heartbeat:
        if self.enabled and self.live:
            self._thread = threading.Thread(target=self._loop, name="xor-ack-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop beating and wait for the thread (a beat in flight finishes first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            self.chain_seconds += len(self.live) * (now - last)
            last = now
            try:
                self.beat()
            except Exception as exc:  # the next beat tries again; the job goes on
                self.counts["errors"] += 1
                log.warning("heartbeat: %r", exc)
            if not self.live:
                break
        self.chain_seconds += len(self.live) * (time.monotonic() - last)

    def beat(self) -> None:
        """One round: touch every live chain once; drop the ones that ended."""
        tags = sorted(self.live)
        if not tags:
            return
        self.counts["beats"] += 1
        outcomes: dict[str, Any]
        if self.policy.method == "batch":
            outcomes = dict(self.tracker.touch_many(tags, self.ttl, owner=self.owner))  # type: ignore[attr-defined]
        else:
            touched = pool_map(self.policy.threads, self._touch_one, tags, "xor-ack-heartbeat")
            outcomes = dict(zip(tags, touched, strict=True))
        for tag, outcome in outcomes.items():
            if isinstance(outcome, _ENDED):
                self.live.discard(tag)
                self.counts["dropped"] += 1
            elif isinstance(outcome, TagNotFound):
                self.counts["not_yet"] += 1
            elif isinstance(outcome, Exception):
                self.counts["errors"] += 1
                log.debug("heartbeat: %s: %r", tag, outcome)
            elif getattr(outcome, "state", "pending") != "pending":
                self.live.discard(tag)
                self.counts["dropped"] += 1
            else:
                self.counts["touches"] += 1

    def _touch_one(self, tag: str) -> Any:
        try:
            return self.tracker.touch(tag, self.ttl, owner=self.owner)
        except Exception as exc:
            return exc

    def figures(self) -> Counter[str]:
        """``heartbeat.*`` counters: beats, touches, dropped, not_yet, errors, requests
        (by operation and in total), ``chain_minutes`` (chains alive x minutes, x1000)
        and ``requests_per_chain_minute_x1000`` (requests / chain-minutes, x1000)."""
        out: Counter[str] = Counter({f"heartbeat.{k}": v for k, v in self.counts.items()})
        spent = self._spent()
        out.update({f"heartbeat.requests.{operation}": count for operation, count in spent.items()})
        out["heartbeat.requests"] = total = spent.total()
        minutes = self.chain_seconds / 60
        out["heartbeat.chain_minutes_x1000"] = round(1000 * minutes)
        if minutes > 0:
            out["heartbeat.requests_per_chain_minute_x1000"] = math.ceil(1000 * total / minutes)
        return out

    def add_to(self, counts: Counter[str], run_tracker: object) -> None:
        """Add the beat's :meth:`figures` to a run's ``counts`` (the requests of its own
        tracker too, unless it is the run's ``run_tracker``). Requests per chain-minute
        are a ratio: the run keeps the last attempt's."""
        figures = self.figures()
        ratio = figures.pop("heartbeat.requests_per_chain_minute_x1000", None)
        counts.update(figures)
        if ratio is not None:
            counts["heartbeat.requests_per_chain_minute_x1000"] = ratio
        if self.tracker is not run_tracker:
            counts.update(snapshot(self.tracker))

    @property
    def requests_per_chain_minute(self) -> float | None:
        """Requests the heartbeat made per live chain per minute (None before a beat)."""
        minutes = self.chain_seconds / 60
        return self._spent().total() / minutes if minutes > 0 else None
