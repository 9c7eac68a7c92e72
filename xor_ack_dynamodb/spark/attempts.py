"""The driver's attempt loop, one for every tracked run: :meth:`Driver.attempt` starts
the attempt's chains, runs its job inside a heartbeat and settles how each chain ended
(:func:`~.chains.settle`: one that can no longer complete is failed);
:meth:`Driver.run_attempts` replays the roots whose chains did not end acked. A
:class:`Plan` holds what differs between a run, handed chains and a streaming batch.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
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
from .heartbeat import Heartbeat, HeartbeatPolicy, heartbeat_tracker
from .metrics import RunMetrics
from .outcomes import Attempt, RootOutcome, RunObserver, RunReport, record_attempt
from .progress import RunProgress
from .tags import EdgeKey, Group, TagScheme, escape_key, group_for

if TYPE_CHECKING:
    from ..config import AckConfig
    from ..interfaces import AckTracker

__all__ = ["Driver", "Plan", "DRIVER_THREADS", "new_run_id", "job_error"]

log = logging.getLogger("xor_ack_dynamodb.spark")

#: Chains the driver creates, stamps or fails at the same time (botocore keeps 10
#: connections per client).
DRIVER_THREADS = 10


def new_run_id() -> str:
    """A readable run id: UTC time and 32 random bits (tags carry a nonce besides)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(4)


#: The line of a Python traceback that names the exception: ``ValueError: bad value``.
_RAISED = re.compile(r"^[A-Za-z_][\w.]*: \S")


def job_error(exc: BaseException) -> str:
    """A job's error as reported (reasons, ``RunReport.job_errors``, the log): its class
    and first line; a ``Py4JJavaError`` by its Java class and message, a
    ``PythonException`` by the Python exception its traceback ends with."""
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


@dataclass
class Plan:
    """One attempt: its chains, its job, the hooks of its path (module doc)."""

    tags: list[str]
    #: ``job(starting)``; ``starting`` resolves to what :attr:`start` returned.
    job: Callable[[Future[Started]], object]
    label: str
    #: Who the chains belong to, one for all or per tag.
    owner: Owners
    start: Callable[[], Started]
    #: The owner the heartbeat names (None: each chain's own).
    beat_owner: str | None = None
    #: Start before the job, which then runs over the started chains only.
    start_first: bool = False
    notes: Callable[[], Mapping[str, str]] = dict
    #: Outcomes the job's own stamps and fails decided (not read again).
    known: Mapping[str, Attempt] | None = None
    #: How :func:`~.chains.settle` reports refused, still pending and missing chains.
    refused_state: str = "failed"
    pending: Callable[[str], str | None] = lambda tag: STILL_PENDING
    missing: str = "the chain was never created"
    #: Errors of the job that propagate (after a settle, with ``settle_raised``); any
    #: other ends the attempt and is reported.
    raises: tuple[type[BaseException], ...] = (XorAckError,)
    settle_raised: bool = True


class Driver:
    """The driver's side of a tracked run (the base of ``RDDTracking`` and
    ``FrameTracking``).

    :param run_id: a readable name in tags and op ids; tags also carry a random nonce
        (or ``nonce``): no two runs share a chain.
    :param tracker: the driver's tracker (default: the one ``config`` describes).
    :param heartbeat: keep the attempt's chains alive while its job runs: ``True``,
        ``False`` or a :class:`~.heartbeat.HeartbeatPolicy`.
    :param transactions: send creates and stamps as ``create_many``/``stamp_many``.

    Raises :class:`InvalidConfig` before any request for ``delete_on_ack``, a bad mode
    or edge size, or a bad heartbeat.
    """

    def __init__(
        self,
        config: AckConfig,
        *,
        run_id: str | None,
        nonce: str | None,
        tracker: AckTracker | None,
        heartbeat: bool | HeartbeatPolicy,
        transactions: bool,
        edge_key: bytes | None = None,
        edge_size: int = 8,
    ) -> None:
        self.heartbeat = HeartbeatPolicy.of(heartbeat)
        self.config = config
        self.tags = TagScheme(run_id or new_run_id(), *([nonce] if nonce else []))
        self.run_id = self.tags.run_id
        self.tracker: AckTracker = tracker if tracker is not None else XorAckDynamoDB.from_config(config)
        refuse_delete_on_ack(self.tracker, config)
        self.group: Group = group_for(self.tracker.mode, edge_size)
        self.edges = EdgeKey(edge_key if edge_key is not None else secrets.token_bytes(32), edge_size)
        self.threads = DRIVER_THREADS
        self.transactions = transactions
        self.counts: Counter[str] = Counter()

    @contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        """Add the block's time to the count ``time_ms.<name>``."""
        clock = time.perf_counter()
        try:
            yield
        finally:
            self.counts[f"time_ms.{name}"] += round(1000 * (time.perf_counter() - clock))

    def own_plan(
        self, number: int, edges: Mapping[str, int], job: Callable[..., object], **hooks: Any
    ) -> Plan:
        """Attempt ``number`` of the run's own chains ``tag -> root edge``, created while
        ``job`` runs (op ids ``<owner>.<attempt>/create/<tag>``, owned by the run)."""
        owner = self.tags.owner

        def start() -> Started:
            with self._timed("creates"):
                created, refused = create_chains(
                    self.tracker,
                    edges,
                    self.group,
                    f"{owner}.{number}/create",
                    owner=owner,
                    threads=self.threads,
                    transactions=self.transactions,
                )
            self.counts["chains_created"] += len(created)
            self.counts["chains_refused"] += len(refused)
            return created, refused

        return Plan(list(edges), job, f"attempt {number}", owner, start, beat_owner=owner, **hooks)

    def requests(self) -> Counter[str]:
        """The run's counts and its trackers' requests."""
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
        """Ack what a committed sink owes the chains it started (``starting``; None: all):
        stamp each once, fail the failed ones (:func:`~.chains.apply_acks`), keep their
        notes in ``noted``. Returns the counts."""
        if starting is not None:
            with self._timed("create_wait"):
                started = starting.result()[0]
            stamps = {t: v for t, v in stamps.items() if t in started}
            failures = {t: r for t, r in failures.items() if t in started}
            notes = {t: n for t, n in notes.items() if t in started}
        for tag, text in notes.items():
            noted.setdefault(tag, text)
        with self._timed("stamps"):
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
        """Attempt after attempt (``plan(number, roots, keys, tags)`` of the roots left)
        until every root's chain is acked, failed permanently or refused, or
        ``max_attempts`` were made; progress shown if ``progress``, or if None without an
        ``observer``. Before any request, raises :class:`InvalidConfig` for two roots of one
        key or ``max_attempts`` below 1, ``InvalidTag`` for a key whose tag is invalid."""
        raw_keys = [key(root) for root in roots]
        if max_attempts < 1:
            raise InvalidConfig(f"max_attempts must be at least 1, got {max_attempts}")
        keys = [escape_key(k) for k in raw_keys]
        if len(set(keys)) != len(keys):
            raise InvalidConfig("the key function gives two roots the same key")
        for escaped in keys:
            check_tag(self.tags.escaped(escaped, max_attempts))
        outcomes = [RootOutcome(root, k) for root, k in zip(roots, keys, strict=True)]
        errors: list[str] = []
        todo = list(range(len(roots)))
        shown = observer is None if progress is None else progress
        metrics = RunMetrics(self.run_id, getattr(self, "spark", None) or getattr(self, "sc", None))
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
        """One attempt (module doc): how each chain ended, and the job's error or None."""
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
                    stack = getattr(exc, "_stackTrace", None)  # the Java stack PySpark keeps apart
                    more = f"\n\nJVM stacktrace:\n{stack}" if stack and str(stack) not in str(exc) else ""
                    log.debug("%s: the job's error in full: %s%s", plan.label, exc, more)
                finally:
                    beat.add_to(self.counts, self.tracker)
            return self._settle(plan, starting, error), error

    def _settle(self, plan: Plan, starting: Future[Started], error: str | None = None) -> dict[str, Attempt]:
        """How the attempt's chains ended; a chain a failed job left pending is failed
        with the job's error as its reason."""
        pending = plan.pending

        def failed(tag: str) -> str | None:
            reason = pending(tag)
            return f"the job failed: {error}" if reason == STILL_PENDING else reason

        with self._timed("settle"):
            return settle(
                self.tracker,
                plan.tags,
                owner=plan.owner,
                refused=starting.result()[1],
                notes=plan.notes(),
                known=plan.known,
                refused_state=plan.refused_state,
                pending=pending if error is None else failed,
                missing=plan.missing,
            )
