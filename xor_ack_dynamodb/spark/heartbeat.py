"""The driver's heartbeat (docs/spark.md, "Long jobs: the heartbeat"): it touches an
attempt's chains while, and only while, its job runs.
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

_ENDED = (TagAcked, TagFailed, TagExpired, NotOwner)


@dataclass(frozen=True)
class HeartbeatPolicy:
    """How a run's heartbeat beats: ``interval`` seconds apart (default: a third of the
    TTL), by ``touch`` per chain (``"single"``, ``threads`` at a time) or ``touch_many``
    (``"batch"``); ``enabled=False``: chains expire ``ttl`` after their last write."""

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
        if isinstance(value, HeartbeatPolicy):
            return value
        if isinstance(value, bool):
            return cls(enabled=value)
        raise InvalidConfig(f"heartbeat must be a bool or a HeartbeatPolicy, got {value!r}")


def heartbeat_tracker(tracker: Any, config: AckConfig, policy: HeartbeatPolicy) -> Any:
    """The heartbeat's tracker: a DynamoDB tracker's twin on the same client (its requests
    counted apart), any other tracker as it is."""
    from ..stores.dynamodb.tracker import XorAckDynamoDB

    if policy.enabled and isinstance(tracker, XorAckDynamoDB):
        return XorAckDynamoDB.from_config(config, tracker.client)
    return tracker


class Heartbeat:
    """Touches ``tags`` (naming ``owner``) with ``tracker``'s TTL from a daemon thread
    while its ``with`` block runs (module doc); a tracker without a TTL gets none."""

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

    def __enter__(self) -> Heartbeat:
        if self.enabled and self.live:
            self._thread = threading.Thread(target=self._loop, name="xor-ack-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
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
        (by operation and in total), ``chain_minutes_x1000`` and
        ``requests_per_chain_minute_x1000``."""
        out: Counter[str] = Counter({f"heartbeat.{k}": v for k, v in self.counts.items()})
        spent = self._requests() - self._before
        out.update({f"heartbeat.requests.{operation}": count for operation, count in spent.items()})
        out["heartbeat.requests"] = total = spent.total()
        minutes = self.chain_seconds / 60
        out["heartbeat.chain_minutes_x1000"] = round(1000 * minutes)
        if minutes > 0:
            out["heartbeat.requests_per_chain_minute_x1000"] = math.ceil(1000 * total / minutes)
        return out

    def add_to(self, counts: Counter[str], run_tracker: object) -> None:
        """Add :meth:`figures` to a run's ``counts`` (with its own tracker's requests, if
        not ``run_tracker``'s); of the ratio, the last attempt's is kept."""
        figures = self.figures()
        ratio = figures.pop("heartbeat.requests_per_chain_minute_x1000", None)
        counts.update(figures)
        if ratio is not None:
            counts["heartbeat.requests_per_chain_minute_x1000"] = ratio
        if self.tracker is not run_tracker:
            counts.update(snapshot(self.tracker))
