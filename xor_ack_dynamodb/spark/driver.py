"""The driver's side of a tracked RDD run: starting chains, reading them, replaying.

:meth:`Tracking.run` runs a job over a list of roots (files, messages): one chain per
root, created on the executors; after the job it reads every chain (BatchGetItem) and
replays the roots whose chains failed (unless permanently), expired, never started, or
were still pending when the job ended, as new chains, up to ``max_attempts``.

Chains belong to the :class:`Tracking` object that made them: their tags embed its run
id and a random nonce (see :mod:`.tags`), so a second run over the same keys, a reused
run id, or a key that looks like another key's replay never meets a chain of another
run.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ..errors import InvalidConfig
from ..stamps import check_tag
from .edges import EdgeKey
from .executor import CONFLICT_NOTE, AfterFlush, CounterParam, RunSpec, snapshot
from .group import Group, group_for
from .heartbeat import Heartbeat, HeartbeatPolicy, heartbeat_tracker
from .outcomes import (
    CONFLICT,
    Attempt,
    PermanentFailure,
    RootOutcome,
    RunObserver,
    RunReport,
    apply_acks,
    record_attempt,
    refuse_delete_on_ack,
    settle,
)
from .steps import start_partition
from .tags import TagScheme, escape_key
from .tracked import TrackedRDD

if TYPE_CHECKING:
    from pyspark import RDD, SparkContext

    from ..config import AckConfig
    from ..stores.dynamodb.tracker import XorAckDynamoDB

__all__ = [
    "Tracking",
    "Attempt",
    "RootOutcome",
    "RunReport",
    "RunObserver",
    "PermanentFailure",
    "new_run_id",
    "check_roots",
]

log = logging.getLogger("xor_ack_dynamodb.spark")

#: Chains the driver creates, stamps or fails at the same time (botocore keeps 10
#: connections per client).
DRIVER_THREADS = 10


def new_run_id() -> str:
    """A fresh run id: UTC time and 32 random bits (a readable name for a run; tags also
    carry a random nonce per tracking object, so run ids need not be unique)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(4)


def check_roots(scheme: TagScheme, keys: Sequence[Any], max_attempts: int) -> list[str]:
    """The escaped keys of the roots, after checking, before anything is written, that
    no two roots share a key and that every tag up to ``max_attempts`` is valid.
    Raises :class:`InvalidConfig` or :class:`~xor_ack_dynamodb.errors.InvalidTag`."""
    if max_attempts < 1:
        raise InvalidConfig(f"max_attempts must be at least 1, got {max_attempts}")
    escaped = [escape_key(k) for k in keys]
    if len(set(escaped)) != len(escaped):
        raise InvalidConfig("the key function gives two roots the same key")
    for key in escaped:
        check_tag(scheme.escaped(key, max_attempts))
    return escaped


class Tracking:
    """Tracked RDD pipelines on one SparkContext, with chains in the table ``config``
    names.

    :param config: how executors (and the driver) reach the table; picklable.
    :param run_id: a readable name for this run in tags and op ids (default:
        :func:`new_run_id`); tags also carry a random nonce drawn here, so chains are
        never shared with another ``Tracking``, whatever its run id.
    :param edge_size: bytes per edge: 8 (default, Storm's 64-bit ids: a false ack is a
        2**-64 event) or, for xor chains, a multiple of 8 up to 64.
    :param after_flush: a test hook called on the executors after each step's flush.
    :param heartbeat: keep the attempt's pending chains from expiring while its job runs
        (``True``, default: every ``ttl / 3``), ``False``, or a
        :class:`~xor_ack_dynamodb.spark.heartbeat.HeartbeatPolicy`; see
        :mod:`.heartbeat`.
    :param tracker: the driver's tracker (default: ``XorAckDynamoDB.from_config(config)``); its mode must
        be ``config.mode`` (the executors build theirs from ``config``).

    Chains of either mode work (``config.mode``): xor chains (the default) combine
    anchors by XOR and stamp bytes; sum chains add started edges, subtract finished
    anchors and stamp ints (one ``UpdateItem`` per stamp, never a lost race). Executors
    never stamp: each step's per-partition amounts reach the driver as carrier records
    (see :mod:`.executor`), which stamps each chain once per attempt. See
    ``docs/spark.md``.

    Requests are counted per task and summed on the driver (:attr:`counters`), with the
    driver's own (sink stamps, reads, fails of stuck chains) added by :meth:`requests`.
    """

    def __init__(
        self,
        sc: SparkContext,
        config: AckConfig,
        *,
        run_id: str | None = None,
        edge_size: int = 8,
        after_flush: AfterFlush | None = None,
        tracker: XorAckDynamoDB | None = None,
        nonce: str | None = None,
        heartbeat: bool | HeartbeatPolicy = True,
    ) -> None:
        self.heartbeat = HeartbeatPolicy.of(heartbeat)
        self.sc = sc
        self.config = config
        self.tags = TagScheme(run_id or new_run_id(), *([nonce] if nonce else []))
        self.run_id = self.tags.run_id
        self.group: Group = group_for(config.mode, edge_size)
        from ..stores.dynamodb.tracker import XorAckDynamoDB

        self.tracker = tracker if tracker is not None else XorAckDynamoDB.from_config(config)
        refuse_delete_on_ack(self.tracker, config)
        if self.tracker.mode != config.mode:
            raise InvalidConfig(
                f"the driver's tracker is in {self.tracker.mode} mode and the config in {config.mode} mode"
            )
        self.edges = EdgeKey(secrets.token_bytes(32), edge_size)
        self.after_flush = after_flush
        self.counters = sc.accumulator(Counter(), CounterParam())
        self.notes = sc.accumulator(Counter(), CounterParam())
        self._driver_counts: Counter[str] = Counter()
        self._steps = itertools.count()
        # Outcomes the sink's stamps and fails returned (read again by nobody).
        self._known: dict[str, Attempt] = {}

    @property
    def edge_size(self) -> int:
        return self.edges.size

    def spec(self, attempt: int) -> RunSpec:
        """The picklable description of ``attempt`` that every step carries."""
        return RunSpec(
            config=self.config,
            op_run=f"{self.tags.owner}.{attempt}",
            edges=self.edges,
            tags=self.tags,
            attempt=attempt,
            counters=self.counters,
            notes=self.notes,
            after_flush=self.after_flush,
            group=self.group,
        )

    def tag(self, key: Any, attempt: int = 1) -> str:
        """The tag of root ``key``'s chain on ``attempt``."""
        return self.tags.tag(key, attempt)

    def _acker(self, spec: RunSpec) -> Callable[[str, dict[str, int], dict[str, str]], Counter[str]]:
        def ack(step: str, stamps: dict[str, int], failures: dict[str, str]) -> Counter[str]:
            conflicts = self._conflicts()
            clock = time.perf_counter()
            counts = apply_acks(
                self.tracker,
                {t: v for t, v in stamps.items() if t not in conflicts},
                {t: r for t, r in failures.items() if t not in conflicts},
                spec.group,
                f"{spec.op_run}/{step}/driver",
                owner=self.tags.owner,
                threads=DRIVER_THREADS,
                known=self._known,
            )
            self._driver_counts["time_ms.stamps"] += round(1000 * (time.perf_counter() - clock))
            self._driver_counts.update(counts)
            return counts

        return ack

    def start(self, rdd: RDD[Any], key: Callable[[Any], Any], *, attempt: int = 1) -> TrackedRDD[Any]:
        """One chain per record of ``rdd``, tagged ``self.tag(key(record), attempt)``,
        created on the executors when the job runs. ``key`` must give distinct keys
        (:meth:`run` checks this on the driver before anything is written): ``str``,
        ``bytes`` or a path; anything that is not valid UTF-8 is escaped (see
        :func:`~xor_ack_dynamodb.spark.tags.escape_key`)."""
        spec = self.spec(attempt)
        step = f"{next(self._steps)}-start"
        started = rdd.mapPartitionsWithIndex(partial(start_partition, spec, step, key))
        return TrackedRDD(started, spec, self._steps, self._acker(spec), roots=(rdd, key))

    def _notes(self) -> dict[str, str]:
        notes: dict[str, str] = {}
        for item in sorted(self.notes.value):
            tag, _, text = item.partition("\x00")
            if text != CONFLICT_NOTE:
                notes.setdefault(tag, text)
        return notes

    def _conflicts(self) -> set[str]:
        """Tags whose create met a chain that was already there."""
        suffix = "\x00" + CONFLICT_NOTE
        return {item[: -len(suffix)] for item in self.notes.value if item.endswith(suffix)}

    def requests(self) -> Counter[str]:
        """Every counter the executors reported, the driver's sink counts, and the driver
        tracker's requests."""
        total = Counter(self.counters.value)
        total.update(self._driver_counts)
        total.update(snapshot(self.tracker))
        return total

    def _add_heartbeat(self, beat: Heartbeat) -> None:
        beat.add_to(self._driver_counts, self.tracker)

    def _heartbeat(self, tags: Sequence[str], *, name_owner: bool = True) -> Heartbeat:
        """The heartbeat of one attempt's chains (its requests are added to the run's),
        naming the run as their owner unless ``name_owner`` is False (chains checked
        against their own owners when they were accepted: handed, streamed)."""
        from ..stores.dynamodb.tracker import XorAckDynamoDB

        return Heartbeat(
            heartbeat_tracker(self.tracker, partial(XorAckDynamoDB.from_config, self.config))
            if self.heartbeat.enabled
            else self.tracker,
            tags,
            owner=self.tags.owner if name_owner else None,
            policy=self.heartbeat,
        )

    def run(
        self,
        roots: Sequence[Any],
        key: Callable[[Any], Any],
        job: Callable[[TrackedRDD[Any], int], Any],
        *,
        max_attempts: int = 3,
        num_slices: int | None = None,
        observer: RunObserver | None = None,
    ) -> RunReport:
        """Run ``job(started, attempt)`` over ``roots`` until every root's chain is
        acked, failed permanently (:class:`PermanentFailure`), or ``max_attempts``
        attempts were made.

        ``job`` builds the pipeline on the started records and must end in a sink. A job
        that raises (Spark gave up on a task) ends its attempt: its chains are read like
        any others. A chain still pending once its attempt's job has returned can no
        longer complete (every task is done); it is failed here, so that no late write
        can ack it, and replayed.

        Raises :class:`InvalidConfig` before anything is written if ``key`` gives two
        roots the same key, and :class:`~xor_ack_dynamodb.errors.InvalidTag` if a tag
        would be too long.
        """
        keys = check_roots(self.tags, [key(root) for root in roots], max_attempts)
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
            tags = [self.tags.escaped(keys[i], attempt) for i in todo]
            beat = self._heartbeat(tags)
            try:
                with beat:
                    job(self.start(rdd, key, attempt=attempt), attempt)
            except Exception as exc:  # Py4JJavaError and friends: the job was aborted
                first = str(exc).splitlines()[0] if str(exc) else repr(exc)
                log.warning("attempt %d: the job failed: %s", attempt, first)
                errors.append(f"attempt {attempt}: {type(exc).__name__}: {first}")
            self._add_heartbeat(beat)
            conflicts = self._conflicts()
            refused = {tag: CONFLICT for tag in tags if tag in conflicts}
            clock = time.perf_counter()
            settled = settle(
                self.tracker,
                tags,
                owner=self.tags.owner,
                refused=refused,
                notes=self._notes(),
                known=self._known,
            )
            self._driver_counts["time_ms.settle"] += round(1000 * (time.perf_counter() - clock))
            retry = record_attempt(outcomes, todo, tags, settled)
            if observer is not None:
                observer.attempt_finished(attempt, [outcomes[i] for i in todo])
            todo = retry
        return RunReport(outcomes, self.requests(), errors)
