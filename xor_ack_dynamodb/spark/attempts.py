"""The driver's attempt loop: one for every tracked run, whatever its path.

Every tracked Spark run goes through the same steps on the driver (or the Connect
client), in :meth:`Driver.attempt`: **start** the attempt's chains, **run** its job
inside a **heartbeat** (:mod:`.heartbeat`), **settle** how each chain ended
(:func:`~.chains.settle`: read it, fail it if it can no longer complete), and count
what it cost in :attr:`Driver.counts`, once. :meth:`Driver.run_attempts` adds the
**replay**: attempt after attempt over the roots whose chains did not end acked. The
paths differ only in the hooks of a :class:`Plan`:

==================  ===============================  ===========  ============================
path                start                            attempts     a chain still pending after
                                                                  its job
==================  ===============================  ===========  ============================
run (RDD or         the driver creates the chains    replayed     failed (and replayed)
DataFrame)          (:meth:`Driver._create`), in the
                    background while the job runs
handed (RDD or      one stamp continues each, before one          pending if the job's part is
DataFrame)          the job (refused: left out)                   done, else failed
streaming batch     create or continue, background   one a batch  pending while its root is
                                                                  open, else failed
==================  ===============================  ===========  ============================

Both APIs ack what their sink committed through :meth:`Driver.commit`, and count
requests one way: the driver's (executors send none).
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ..errors import InvalidConfig, XorAckError
from ..stamps import check_tag
from ..stores.dynamodb.tracker import XorAckDynamoDB
from .chains import (
    STILL_PENDING,
    Owners,
    Started,
    apply_acks,
    create_chains,
    refuse_delete_on_ack,
    settle,
    snapshot,
)
from .edges import EdgeKey
from .group import Group, group_for
from .heartbeat import Heartbeat, HeartbeatPolicy, heartbeat_tracker
from .metrics import RunMetrics
from .outcomes import Attempt, RootOutcome, RunObserver, RunReport, record_attempt
from .progress import RunProgress
from .tags import TagScheme, escape_key

if TYPE_CHECKING:
    from ..config import AckConfig
    from ..interfaces import AckTracker

__all__ = ["Driver", "Plan", "DRIVER_THREADS", "new_run_id", "check_roots", "job_error", "job_error_detail"]

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


#: The line of a Python traceback that names the exception: ``ValueError: bad value``.
_RAISED = re.compile(r"^[A-Za-z_][\w.]*: \S")


def job_error(exc: BaseException) -> str:
    """How a job's error is reported (an outcome's reason, ``RunReport.job_errors``, the
    log's warning): the exception's class and the first line of its message. A Java
    exception PySpark did not convert (``Py4JJavaError``) is named by its Java class and
    message; an error raised in a Python worker (``PythonException``) by the Python
    exception its traceback ends with. The rest (Java stack, traceback) is for the log at
    debug level (:func:`job_error_detail`)."""
    name = type(exc).__name__
    java = getattr(exc, "java_exception", None)
    if name == "Py4JJavaError" and java is not None:
        try:
            name, text = str(java.getClass().getSimpleName()), str(java.getMessage() or "")
        except Exception:  # the JVM is gone: what Python has
            text = str(exc)
    else:
        text = str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if name == "PythonException":
        raised = [line for line in lines if _RAISED.match(line) and not line.startswith("SQLSTATE")]
        if raised:
            return f"{name}: {raised[-1]}"
    return f"{name}: {lines[0] if lines else repr(exc)}"


def job_error_detail(exc: BaseException) -> str:
    """All a job's error says: its message with the Java stack (PySpark's converted
    exceptions keep it apart from their message) or the worker's traceback."""
    stack = getattr(exc, "_stackTrace", None)
    text = str(exc)
    return f"{text}\n\nJVM stacktrace:\n{stack}" if stack and str(stack) not in text else text


@dataclass
class Plan:
    """One attempt: its chains, its job, and the hooks of its path (defaults: a run's own
    chains, see the module doc)."""

    tags: list[str]
    #: ``job(starting)`` runs the attempt's Spark job; ``starting`` resolves to what
    #: :attr:`start` returned.
    job: Callable[[Future[Started]], object]
    #: How the log and the report name the attempt (``attempt 2``).
    label: str
    #: Who the chains belong to (named by every fail), one for all or per tag.
    owner: Owners
    #: Starts the chains on the driver (creates them, or continues handed ones).
    start: Callable[[], Started]
    #: The owner the heartbeat names (None: chains checked against their own owners).
    beat_owner: str | None = None
    #: Start before the job, which then runs over the started chains only (default: in
    #: the background, while the job runs).
    start_first: bool = False
    #: Read after the job: the notes of the chains' records.
    notes: Callable[[], Mapping[str, str]] = dict
    #: Outcomes the job's own stamps and fails decided (not read again).
    known: Mapping[str, Attempt] | None = None
    #: How :func:`~.chains.settle` reports refused, still pending and missing chains.
    refused_state: str = "failed"
    pending: Callable[[str], str | None] = lambda tag: STILL_PENDING
    missing: str = "the chain was never created"
    #: Errors of the job that propagate (after the chains are settled, with
    #: ``settle_raised``); any other error ends the attempt and is reported.
    raises: tuple[type[BaseException], ...] = (XorAckError,)
    settle_raised: bool = True


def _job_failed(pending: Callable[[str], str | None], error: str, tag: str) -> str | None:
    reason = pending(tag)
    return f"the job failed: {error}" if reason == STILL_PENDING else reason


class Driver:
    """The driver's side of a tracked run (the base of
    :class:`~xor_ack_dynamodb.spark.RDDTracking` and
    :class:`~xor_ack_dynamodb.spark.FrameTracking`): its chains' tags, the driver's
    tracker, the heartbeat, the counters, and the attempt loop (module doc).

    :param config: the chains' table (picklable).
    :param run_id: a readable name for the run in tags and op ids (default:
        :func:`new_run_id`); tags also carry a random nonce drawn here (or ``nonce``),
        so chains are never shared with another run, whatever its run id.
    :param tracker: the driver's tracker (default: the one ``config`` describes).
    :param heartbeat: keep the attempt's pending chains from expiring while its job runs
        (``True``, default: every ``ttl / 3``), ``False``, or a
        :class:`~xor_ack_dynamodb.spark.heartbeat.HeartbeatPolicy`.

    Raises :class:`InvalidConfig` (before any request) for a tracker or config with
    ``delete_on_ack``, a bad mode or edge size, or a bad heartbeat setting.
    """

    def __init__(
        self,
        config: AckConfig,
        *,
        run_id: str | None,
        nonce: str | None,
        tracker: AckTracker | None,
        heartbeat: bool | HeartbeatPolicy,
        threads: int,
        edge_key: bytes | None = None,
        edge_size: int = 8,
        mode: str | None = None,
    ) -> None:
        self.heartbeat = HeartbeatPolicy.of(heartbeat)
        self.config = config
        self.tags = TagScheme(run_id or new_run_id(), *([nonce] if nonce else []))
        self.run_id = self.tags.run_id
        self.tracker: AckTracker = tracker if tracker is not None else XorAckDynamoDB.from_config(config)
        refuse_delete_on_ack(self.tracker, config)
        self.group: Group = group_for(mode or self.tracker.mode, edge_size)
        self.edges = EdgeKey(edge_key if edge_key is not None else secrets.token_bytes(32), edge_size)
        self.edge_size = self.edges.size
        self.threads = threads
        self.counts: Counter[str] = Counter()

    #: Send creates and stamps as ``create_many`` / ``stamp_many`` (TransactWriteItems
    #: of up to 100 chains); set by the subclasses' ``transactions=``.
    transactions: bool = False

    def _create(self, edges: Mapping[str, int], attempt: int) -> Started:
        """Create the attempt's chains ``tag -> root edge`` (:func:`~.chains.create_chains`,
        op ids ``<owner>.<attempt>/create/<tag>``, owned by the run); counted."""
        clock = time.perf_counter()
        try:
            created, refused = create_chains(
                self.tracker,
                edges,
                self.group,
                f"{self.tags.owner}.{attempt}/create",
                owner=self.tags.owner,
                threads=self.threads,
                transactions=self.transactions,
            )
        finally:
            self.counts["time_ms.creates"] += round(1000 * (time.perf_counter() - clock))
        self.counts["chains_created"] += len(created)
        self.counts["chains_refused"] += len(refused)
        return created, refused

    def requests(self) -> Counter[str]:
        """What the driver did: creates, stamps, fails, reads (by operation), events, the
        heartbeat's (a tracker without request statistics, such as ``MemoryAck``, adds
        none)."""
        total = Counter(self.counts)
        total.update(snapshot(self.tracker))
        return total

    def commit(
        self,
        stamps: Mapping[str, int],
        failures: Mapping[str, str],
        notes: Mapping[str, str],
        op_prefix: str,
        *,
        starting: Future[Started] | None,
        noted: dict[str, str],
        owner: Owners | None = None,
        group: Group | Mapping[str, Group] | None = None,
        known: dict[str, Attempt] | None = None,
    ) -> Counter[str]:
        """Ack what a job's committed output owes its chains (the sink of either API):
        once the attempt's creates are done (``starting``; None: every chain is the
        job's), stamp each chain it started once with its amount and fail the failed
        ones (:func:`~.chains.apply_acks`: op ids ``<op_prefix>/<tag>``, by default owned
        by the run and in its group); keep their notes in ``noted``. A chain not started
        (another writer's) is left alone. Returns the counts, also added to
        :attr:`counts`."""
        if starting is not None:
            clock = time.perf_counter()
            started = starting.result()[0]
            self.counts["time_ms.create_wait"] += round(1000 * (time.perf_counter() - clock))
            stamps = {t: v for t, v in stamps.items() if t in started}
            failures = {t: r for t, r in failures.items() if t in started}
            notes = {t: n for t, n in notes.items() if t in started}
        for tag, text in notes.items():
            noted.setdefault(tag, text)
        clock = time.perf_counter()
        counts = apply_acks(
            self.tracker,
            stamps,
            failures,
            group or self.group,
            op_prefix,
            owner=owner or self.tags.owner,
            threads=self.threads,
            known=known,
            transactions=self.transactions,
        )
        self.counts["time_ms.stamps"] += round(1000 * (time.perf_counter() - clock))
        self.counts.update(counts)
        return counts

    def run_attempts(
        self,
        roots: Sequence[Any],
        key: Callable[[Any], Any],
        plan: Callable[[int, list[Any], list[Any], list[str]], Plan],
        *,
        max_attempts: int,
        observer: RunObserver | None,
        progress: bool | None = None,
    ) -> RunReport:
        """Attempt after attempt (``plan(number, roots, keys, tags)`` of the roots still
        to do), until every root's chain is acked, failed permanently or refused, or
        ``max_attempts`` attempts were made. Raises :class:`InvalidConfig` before
        anything is written if ``key`` gives two roots the same key, and
        :class:`~xor_ack_dynamodb.errors.InvalidTag` if a tag would be too long. The
        run's progress and figures are published to Spark (:mod:`.metrics`); its
        progress is shown (:class:`~.progress.RunProgress`: a bar on a terminal, log
        lines otherwise) when ``progress`` is true, or is None and no ``observer`` is
        given (an observer of the caller's shows it)."""
        raw_keys = [key(root) for root in roots]
        keys = check_roots(self.tags, raw_keys, max_attempts)
        outcomes = [RootOutcome(root, k) for root, k in zip(roots, keys, strict=True)]
        errors: list[str] = []
        todo = list(range(len(roots)))
        shown = observer is None if progress is None else progress
        metrics = RunMetrics.of(self)
        display = RunProgress(metrics.context, total=len(roots)) if shown else None
        observers = [o for o in (display, observer) if o is not None]
        with metrics, display or nullcontext():
            for number in range(1, max_attempts + 1):
                if not todo:
                    break
                for each in observers:
                    each.attempt_started(number, len(todo), self)
                metrics.attempt_started(number, len(todo))
                tags = [self.tags.escaped(keys[i], number) for i in todo]
                settled, error = self.attempt(
                    plan(number, [roots[i] for i in todo], [raw_keys[i] for i in todo], tags)
                )
                if error is not None:
                    errors.append(f"attempt {number}: {error}")
                retry = record_attempt(outcomes, todo, tags, settled)
                for each in observers:
                    each.attempt_finished(number, [outcomes[i] for i in todo])
                todo = retry
            report = RunReport(outcomes, self.requests(), errors)
            metrics.finished(report)
            return report

    def attempt(self, plan: Plan) -> tuple[dict[str, Attempt], str | None]:
        """One attempt (module doc). Returns how each chain ended and the error of a
        job that failed (None if it succeeded)."""
        error: str | None = None
        with ThreadPoolExecutor(1, thread_name_prefix="xor-ack-start") as background:
            starting: Future[Started] = Future()
            if plan.start_first:
                starting.set_result(plan.start())
            else:
                starting = background.submit(plan.start)
            running = [t for t in plan.tags if not plan.start_first or t in starting.result()[0]]
            if running:
                tracker = heartbeat_tracker(self.tracker, self.config, self.heartbeat)
                beat = Heartbeat(tracker, running, owner=plan.beat_owner, policy=self.heartbeat)
                try:
                    with beat:
                        plan.job(starting)
                except plan.raises:
                    if plan.settle_raised:
                        self._settle(plan, starting)
                    raise
                except Exception as exc:  # Py4JJavaError and friends: Spark aborted the job
                    error = job_error(exc)
                    log.warning("%s: the job failed: %s", plan.label, error)
                    log.debug("%s: the job's error in full: %s", plan.label, job_error_detail(exc))
                finally:
                    beat.add_to(self.counts, self.tracker)
            return self._settle(plan, starting, error), error

    def _settle(self, plan: Plan, starting: Future[Started], error: str | None = None) -> dict[str, Attempt]:
        """How the attempt's chains ended. A chain left still pending by a job that
        failed is failed with the job's error as its reason (what a user looks for)."""
        refused = dict(starting.result()[1])
        clock = time.perf_counter()
        try:
            return settle(
                self.tracker,
                plan.tags,
                owner=plan.owner,
                refused=refused,
                notes=plan.notes(),
                known=plan.known,
                refused_state=plan.refused_state,
                pending=plan.pending if error is None else partial(_job_failed, plan.pending, error),
                missing=plan.missing,
            )
        finally:
            self.counts["time_ms.settle"] += round(1000 * (time.perf_counter() - clock))
