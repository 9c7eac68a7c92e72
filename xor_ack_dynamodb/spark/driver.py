"""The driver's side of a tracked run: starting chains, reading them, replaying.

:meth:`Tracking.run` runs a job over a list of roots (files, messages): one chain per
root, created on the executors; after the job it reads every chain (BatchGetItem) and
replays the roots whose chains failed, expired, never started, or were still pending
when the job ended, as new chains (tag ``<key>#<attempt>``), up to ``max_attempts``.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import InvalidConfig, TagAcked
from ..model import ChainStatus
from ..stamps import check_tag
from .executor import AfterFlush, CounterParam, RunSpec, snapshot
from .steps import start_partition
from .tracked import TrackedRDD

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext

    from ..config import AckConfig
    from ..dynamodb import XorAckDynamoDB

__all__ = ["Tracking", "Attempt", "RootOutcome", "RunReport", "RunObserver", "new_run_id"]

log = logging.getLogger("xor_ack_dynamodb.spark")


def new_run_id() -> str:
    """A fresh run id: UTC time and 32 random bits (tags and op ids embed it, so no two
    runs share a chain)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(4)


@dataclass(frozen=True)
class Attempt:
    """One attempt at one root: its chain's tag and how the chain ended."""

    tag: str
    state: str  # acked | failed | expired | missing
    reason: str | None = None


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
    def tag(self) -> str:
        return self.attempts[-1].tag if self.attempts else self.key


@dataclass
class RunReport:
    """What :meth:`Tracking.run` found: one outcome per root, in the roots' order."""

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

    def attempt_started(self, attempt: int, roots: int, tracking: Tracking) -> None:
        """``tracking.counters.value`` grows as tasks finish (``chains_acked``...)."""

    def attempt_finished(self, attempt: int, outcomes: Sequence[RootOutcome]) -> None: ...


def tag_for(key: str, attempt: int) -> str:
    """The chain tag of a root's ``attempt``: its key, then ``#<attempt>`` from the
    second attempt on."""
    return key if attempt == 1 else f"{key}#{attempt}"


class Tracking:
    """Tracked pipelines on one SparkContext, with chains in the table ``config`` names.

    :param config: how executors (and the driver) reach the table; picklable.
    :param run_id: names this run in tags and op ids (default: :func:`new_run_id`).
    :param edge_size: bytes per edge (16: a false ack is a 2**-128 event).
    :param after_flush: a test hook called on the executors after each step's flush.
    :param tracker: the driver's tracker (default: ``config.connect()``).

    Requests are counted per task and summed on the driver (:attr:`counters`), with the
    driver's own (reads, fails of stuck chains) added by :meth:`requests`.
    """

    def __init__(
        self,
        sc: SparkContext,
        config: AckConfig,
        *,
        run_id: str | None = None,
        edge_size: int = 16,
        after_flush: AfterFlush | None = None,
        tracker: XorAckDynamoDB | None = None,
    ) -> None:
        if not 8 <= edge_size <= 64:
            raise InvalidConfig(f"edge_size must be 8 to 64 bytes, got {edge_size}")
        self.sc = sc
        self.config = config
        self.run_id = run_id or new_run_id()
        self.tracker = tracker if tracker is not None else config.connect()
        self.edge_size = edge_size
        self.after_flush = after_flush
        self.counters = sc.accumulator(Counter(), CounterParam())
        self._key = secrets.token_bytes(32)
        self._steps = itertools.count()

    def spec(self, attempt: int) -> RunSpec:
        """The picklable description of ``attempt`` that every step carries."""
        return RunSpec(
            config=self.config,
            run_id=f"{self.run_id}.{attempt}",
            key=self._key,
            edge_size=self.edge_size,
            counters=self.counters,
            after_flush=self.after_flush,
        )

    def start(self, rdd: RDD[Any], key: Callable[[Any], str], *, attempt: int = 1) -> TrackedRDD[Any]:
        """One chain per record of ``rdd``, tagged ``tag_for(key(record), attempt)``,
        created on the executors when the job runs. ``key`` must give distinct, valid
        tags (:meth:`run` checks this on the driver before anything is written)."""
        spec = self.spec(attempt)
        suffix = tag_for("", attempt)
        started = rdd.mapPartitionsWithIndex(
            partial(start_partition, spec, f"{next(self._steps)}-start", key, suffix)
        )
        return TrackedRDD(started, spec, self._steps, roots=(rdd, key, suffix))

    def requests(self) -> Counter[str]:
        """Every counter the executors reported, plus the driver tracker's requests."""
        total = Counter(self.counters.value)
        total.update(snapshot(self.tracker))
        return total

    def run(
        self,
        roots: Sequence[Any],
        key: Callable[[Any], str],
        job: Callable[[TrackedRDD[Any], int], Any],
        *,
        max_attempts: int = 3,
        num_slices: int | None = None,
        observer: RunObserver | None = None,
    ) -> RunReport:
        """Run ``job(started, attempt)`` over ``roots`` until every root's chain is
        acked or ``max_attempts`` attempts were made.

        ``job`` builds the pipeline on the started records and must end in a sink. A job
        that raises (Spark gave up on a task) ends its attempt: its chains are read like
        any others. A chain still pending once its attempt's job has returned can no
        longer complete (every task is done); it is failed here, so that no late write
        can ack it, and replayed.

        Raises :class:`InvalidConfig` before anything is written if ``key`` gives two
        roots the same tag or an invalid one.
        """
        if max_attempts < 1:
            raise InvalidConfig(f"max_attempts must be at least 1, got {max_attempts}")
        keys = [key(root) for root in roots]
        if len(set(keys)) != len(keys):
            raise InvalidConfig("the key function gives two roots the same tag")
        for k in keys:
            check_tag(tag_for(k, max_attempts))
        outcomes = [RootOutcome(root, k) for root, k in zip(roots, keys, strict=True)]
        errors: list[str] = []
        todo = list(range(len(roots)))
        for attempt in range(1, max_attempts + 1):
            if not todo:
                break
            if observer is not None:
                observer.attempt_started(attempt, len(todo), self)
            slices = max(1, min(len(todo), num_slices or self.sc.defaultParallelism))
            rdd = self.sc.parallelize([roots[i] for i in todo], slices)
            self.sc.setJobDescription(f"xor-ack run {self.run_id} attempt {attempt}")
            try:
                job(self.start(rdd, key, attempt=attempt), attempt)
            except Exception as exc:  # Py4JJavaError and friends: the job was aborted
                log.warning(
                    "attempt %d: the job failed: %s",
                    attempt,
                    str(exc).splitlines()[0] if str(exc) else repr(exc),
                )
                errors.append(
                    f"attempt {attempt}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                )
            tags = [tag_for(keys[i], attempt) for i in todo]
            found = self.tracker.status_many(tags)
            retry = []
            for i, tag in zip(todo, tags, strict=True):
                result = self._settle(tag, found.get(tag))
                outcomes[i].attempts.append(result)
                if result.state != "acked":
                    retry.append(i)
            if observer is not None:
                observer.attempt_finished(attempt, [outcomes[i] for i in todo])
            todo = retry
        return RunReport(outcomes, self.requests(), errors)

    def _settle(self, tag: str, status: ChainStatus | None) -> Attempt:
        if status is None:
            return Attempt(tag, "missing", "the chain was never created")
        if status.state != "pending":
            return Attempt(tag, status.state, status.reason)
        reason = "still pending when its job ended"
        try:
            failed = self.tracker.fail(tag, reason=reason)
        except TagAcked:  # a straggler task completed it just now
            return Attempt(tag, "acked")
        return Attempt(tag, failed.state, failed.reason)
