"""Chains started upstream: roots that arrive with a chain, continued and completed in
Spark.

A :class:`Handed` (tag, the edge ``e`` this job finishes, the owner every request
names, the root read) comes from an
:class:`~xor_ack_dynamodb.serverless.envelope.Envelope` or from rows
(:func:`handed_from_rows`). Guarantees: a chain is never adopted (missing, not pending
or of another owner: refused, nothing sent to it, its rows not processed; the job never
creates a chain); continuing is one stamp ``e ^ r`` under op id ``edge:<hex>``, so a
copy of the hand-over is a duplicate and a second job handed the same edge is refused
(``OpIdReused``); a part that is not complete fails the chain, for its upstream to
replay. Handed roots get one attempt in Spark. Both APIs share the run: the driver
sends the continuing stamps before the job (``r`` derives from the run's key and the
tag), runs the job over the continued roots only, and stamps each chain once with what
the job's sink committed (:func:`run_handed_frames`, :func:`run_handed_rdd`).

See docs/spark.md, "Chains started upstream" (both paths, outcomes, requests).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.factory import MAX_OWNER
from ..errors import InvalidConfig, NotOwner, OpIdReused
from ..serverless.edges import op_id as edge_op_id
from ..stamps import check_tag
from .attempts import Plan
from .chains import CHAIN_ENDED, Started, pool_map, split_refusals
from .frame import Commit, FrameAttempt, FrameJob, FrameTracking
from .group import Group
from .outcomes import CONFLICT, Attempt, RootOutcome, RunReport
from .rdd import RDDTracking, TrackedRDD

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ..interfaces import AckTracker
    from ..serverless.envelope import Envelope

__all__ = [
    "Handed",
    "handed_from_rows",
    "check_handed",
    "refuse_unhanded",
    "run_handed_frames",
    "run_handed_rdd",
    "stamp_handed",
    "REFUSED",
]

#: The state reported for a handed chain the job did not continue.
REFUSED = "refused"


@dataclass(frozen=True)
class Handed:
    """A root that arrives with an existing chain; see the module doc. Picklable.

    :param tag: the chain's tag.
    :param edge: the edge this job finishes (xor mode: 8 to 64 bytes, not all zero).
    :param owner: the chain's owner, as its creator stored it.
    :param root: what the job reads for this root (default: the tag).
    """

    tag: str
    edge: bytes
    owner: str
    root: Any = None

    @property
    def key(self) -> Any:
        return self.tag if self.root is None else self.root

    @classmethod
    def from_envelope(cls, envelope: Envelope, root: Any = None) -> Handed:
        """The chain and edge a serverless envelope carries (xor mode only)."""
        if envelope.mode != "xor" or not isinstance(envelope.edge, bytes):
            raise InvalidConfig("Spark continues xor-mode chains; the envelope carries a sum-mode edge")
        return cls(envelope.tag, envelope.edge, envelope.owner, root)


def check_handed(handed: Sequence[Handed], *, edge_size: int | None = None) -> None:
    """Raise :class:`InvalidConfig` (or :class:`~xor_ack_dynamodb.errors.InvalidTag`) for
    a handed root that cannot be continued, before any request: a tag twice, an edge
    that is not 8..64 bytes (exactly ``edge_size`` if given) or all zeros, an owner that
    is not a str of 1 to 256 characters."""
    seen: set[str] = set()
    for item in handed:
        if not isinstance(item, Handed):
            raise InvalidConfig(f"expected Handed roots, got {type(item).__name__}")
        check_tag(item.tag)
        if item.tag in seen:
            raise InvalidConfig(f"chain {item.tag!r} is handed twice (merge its edges into one Handed)")
        seen.add(item.tag)
        edge = item.edge
        if not isinstance(edge, bytes) or not 8 <= len(edge) <= 64 or not any(edge):
            raise InvalidConfig(f"the edge handed for {item.tag!r} must be 8 to 64 bytes, not all zero")
        if edge_size is not None and len(edge) != edge_size:
            raise InvalidConfig(
                f"the edge handed for {item.tag!r} is {len(edge)} bytes; this tracking uses "
                f"{edge_size}-byte edges (Tracking(edge_size=...))"
            )
        if not isinstance(item.owner, str) or not 1 <= len(item.owner) <= MAX_OWNER:
            raise InvalidConfig(
                f"the owner handed for {item.tag!r} must be a str of 1 to {MAX_OWNER} characters"
            )


def handed_from_rows(
    df: DataFrame,
    *,
    tag: str = "xor_ack_tag",
    edge: str = "xor_ack_edge",
    owner: str = "xor_ack_owner",
) -> list[Handed]:
    """The handed chains of rows that carry a chain's tag, an edge (hex) and the owner as
    columns (one small Spark job: the distinct triples). Rows handing several edges of
    one chain hand their XOR; rows of one chain that name two owners, or an edge that is
    not hex, raise :class:`InvalidConfig` before any DynamoDB request."""
    edges: dict[str, int] = {}
    widths: dict[str, int] = {}
    owners: dict[str, str] = {}
    for row in df.select(tag, edge, owner).distinct().collect():
        name, text, who = row[0], row[1], row[2]
        if name is None or text is None or who is None:
            raise InvalidConfig("a row hands a chain without its tag, edge or owner")
        try:
            value = bytes.fromhex(text)
        except ValueError:
            raise InvalidConfig(f"the edge handed for {name!r} is not hex: {text!r}") from None
        if owners.setdefault(name, who) != who:
            raise InvalidConfig(f"rows of chain {name!r} name two owners")
        if widths.setdefault(name, len(value)) != len(value):
            raise InvalidConfig(f"rows of chain {name!r} hand edges of two widths")
        edges[name] = edges.get(name, 0) ^ int.from_bytes(value, "big")
    out = [Handed(n, edges[n].to_bytes(widths[n], "big"), owners[n]) for n in sorted(edges)]
    check_handed(out)
    return out


def refuse_unhanded(tracker: AckTracker, handed: Sequence[Handed]) -> dict[str, Attempt]:
    """Read every handed chain (``status_many``) and return the ones that must not be
    continued, tag -> a ``refused`` :class:`Attempt` saying why: missing, not pending
    (its state in the reason), or of another owner. Sends nothing else."""
    found = tracker.status_many([h.tag for h in handed]) if handed else {}
    refused: dict[str, Attempt] = {}
    for item in handed:
        status = found.get(item.tag)
        if status is None:
            why = "not adopted: no such chain"
        elif status.owner != item.owner:
            why = f"not adopted: {CONFLICT} (another owner)"
        elif status.state != "pending":
            why = f"not adopted: the chain is already {status.state}"
        else:
            continue
        refused[item.tag] = Attempt(item.tag, REFUSED, why)
    return refused


def stamp_handed(tracker: AckTracker, item: Handed, started: int) -> str | None:
    """The stamp that continues a handed chain: finish ``item.edge``, start ``started``
    (an int as wide as the edge), naming the chain's owner. Its op id is the one the
    serverless side uses for the stamp that finishes an edge (``edge:<hex>``), so a
    copy of the same hand-over (a redelivered message, a retried task) is a duplicate,
    and the same edge handed to a second job (which would start other edges) is refused
    by the chain (``OpIdReused``) instead of being finished twice. Returns None when
    applied, else why not (nothing was written)."""
    value = (int.from_bytes(item.edge, "big") ^ started).to_bytes(len(item.edge), "big")
    try:
        tracker.stamp(item.tag, value, op_id=edge_op_id(item.edge), owner=item.owner)
    except NotOwner:
        return f"not adopted: {CONFLICT} (another owner)"
    except OpIdReused:
        return "not adopted: this edge was already finished by another job"
    except CHAIN_ENDED as exc:
        return f"not adopted: the chain is already {exc.code}"
    return None


@dataclass
class _Part:
    """What the job did of each handed chain's part: done (the chain may still wait on
    other holders' edges) or, for the others, why not."""

    internal: dict[str, int]
    done: set[str] = field(default_factory=set)
    reasons: dict[str, str] = field(default_factory=dict)

    def committed(self, tags: list[str], stamps: Mapping[str, int], errors: Mapping[str, str]) -> None:
        """What the job's committed write stamps each chain with (``stamps``; ``errors``:
        chains that failed): the part is done when it stamps the edge the hand-over
        started."""
        for tag in tags:
            if tag in errors:
                self.reasons[tag] = errors[tag]
            elif stamps.get(tag) == self.internal[tag]:
                self.done.add(tag)
            else:
                self.reasons[tag] = "this root's rows did not reach the committed write"

    def pending(self, tag: str) -> str | None:
        """Why a chain still pending after the job fails, or None: it waits."""
        return None if tag in self.done else self.reasons.get(tag, "this job did not complete its part")


#: ``job(part, continued)``: the Spark job over the continued handed roots: builds the
#: pipeline of either API, runs it, tells ``part`` what its sink committed.
_Job = Callable[[_Part, list[Handed]], object]


def _run(
    tracking: FrameTracking | RDDTracking, handed: Sequence[Handed], job: _Job, **hooks: Any
) -> RunReport:
    """The one attempt of handed roots: refuse the chains that are not to be continued
    (nothing is sent to them), continue the others from the driver before the job
    (:func:`stamp_handed`: a chain that refuses the hand-over is left out of the job, so
    none of its rows is processed or written), run ``job`` over the continued ones
    through the attempt loop, report one outcome per handed root."""
    if tracking.group.is_sum:
        raise InvalidConfig("handed chains are xor chains: continue them with an xor-mode tracker")
    part = _Part({h.tag: tracking.edges.root(f"handed/{h.tag}") for h in handed})
    results = refuse_unhanded(tracking.tracker, handed)
    accepted = [h for h in handed if h.tag not in results]

    def start() -> Started:
        def one(item: Handed) -> tuple[str, str | None]:
            return item.tag, stamp_handed(tracking.tracker, item, part.internal[item.tag])

        return split_refusals(pool_map(tracking.threads, one, accepted))

    def run(starting: Future[Started]) -> object:
        return job(part, [h for h in accepted if h.tag in starting.result()[0]])

    errors: list[str] = []
    if accepted:
        plan = Plan(
            [h.tag for h in accepted],
            run,
            "handed chains",
            {h.tag: h.owner for h in accepted},
            start=start,
            start_first=True,
            refused_state=REFUSED,
            pending=part.pending,
            missing="the chain is gone",
            **hooks,
        )
        settled, error = tracking.attempt(plan)
        results.update(settled)
        errors += [error] if error else []
    outcomes = [RootOutcome(h.key, h.tag, [results[h.tag]]) for h in handed]
    return RunReport(outcomes, tracking.requests(), errors)


def run_handed_frames(tracking: FrameTracking, handed: Sequence[Handed], job: FrameJob) -> RunReport:
    """Continue and complete the ``handed`` chains with ``job(attempt)`` (a
    :class:`~xor_ack_dynamodb.spark.frame.FrameAttempt` whose roots are the accepted
    handed roots, keyed by their tags: read them with ``attempt.read_text(path=...)``
    over ``Handed.root``, or ``attempt.start(df, tag_column)`` over rows that carry the
    tag); see the module doc. Returns one outcome per handed root: ``acked``,
    ``pending``, ``failed``, ``refused`` (not adopted: nothing sent) or ``missing``,
    with the notes of its rows. Raises before any request for bad input
    (:func:`check_handed`)."""
    check_handed(handed)
    notes: dict[str, str] = {}

    def run(part: _Part, going: list[Handed]) -> object:
        tags = [h.tag for h in going]
        commit = Commit(
            op_prefix=f"{tracking.tags.owner}.1/sink",
            owner={h.tag: h.owner for h in going},
            group={h.tag: Group("xor", len(h.edge)) for h in going},
            before=lambda seen, stamps: part.committed(tags, stamps, seen.errors),
            known=None,
            keep_unacked=True,
            notes=notes,
        )
        starting: Future[Started] = Future()
        starting.set_result((set(tags), {}))
        edges = {t: part.internal[t] for t in tags}
        return job(FrameAttempt(tracking, 1, [h.key for h in going], tags, tags, edges, starting, commit))

    return _run(tracking, handed, run, notes=lambda: notes)


def run_handed_rdd(
    tracking: RDDTracking,
    handed: Sequence[Handed],
    job: Callable[[TrackedRDD[Any], int], Any],
    *,
    num_slices: int | None = None,
) -> RunReport:
    """Continue and complete the ``handed`` chains with ``job(started, 1)`` on the RDD
    path: ``started`` is a :class:`TrackedRDD` of the accepted roots (values
    ``Handed.root``, or the tag); the job ends in a sink as usual. Every stamp names the
    handed owner. See the module doc for what is reported."""
    check_handed(handed, edge_size=tracking.edge_size)
    notes: dict[str, str] = {}

    def run(part: _Part, going: list[Handed]) -> object:
        owners = {h.tag: h.owner for h in going}
        spec = tracking.spec(1)
        records = [(h.key, h.tag, part.internal[h.tag]) for h in going]
        slices = max(1, min(len(records), num_slices or tracking.sc.defaultParallelism))
        ack = tracking.acker(spec, owner=owners, notes=notes)

        def acker(step: str, stamps: dict[str, int], failures: dict[str, str], noted: dict[str, str]) -> Any:
            part.committed(list(owners), stamps, failures)
            return ack(step, stamps, failures, noted)

        described = tracking.sc.getLocalProperty("spark.job.description")
        tracking.sc.setJobDescription(f"xor-ack run {tracking.run_id}: handed chains")
        try:
            rdd = tracking.sc.parallelize(records, slices)
            return job(TrackedRDD(rdd, spec, tracking._steps, acker), 1)
        finally:
            tracking.sc.setLocalProperty("spark.job.description", described)  # type: ignore[arg-type]

    return _run(tracking, handed, run, notes=lambda: notes, raises=())
