"""Chains started upstream (docs/spark.md, "Chains started upstream"): a :class:`Handed`
root arrives with its chain, which is continued (one stamp ``e ^ r`` before the job, ``r``
once its write committed) and never adopted: one missing, not pending or another owner's
is refused, nothing sent to it.
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
from .frame import FrameAttempt, FrameTracking
from .frame.attempt import Commit, FrameJob
from .outcomes import CONFLICT, Attempt, RootOutcome, RunReport
from .rdd import RDDTracking, TrackedRDD
from .rdd.tracked import Pass
from .tags import Group

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ..serverless.envelope import Envelope

__all__ = ["Handed", "handed_from_rows", "check_handed", "run_handed_frames", "run_handed_rdd"]

REFUSED = "refused"


@dataclass(frozen=True)
class Handed:
    """A root that arrives with a chain (module doc): its ``tag``, the ``edge`` this job
    finishes (8 to 64 bytes, not all zero), the chain's ``owner``, and the ``root`` the
    job reads (default: the tag)."""

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
    """Raise :class:`InvalidConfig` (or ``InvalidTag``) for a handed root that cannot be
    continued: a tag twice, an edge not 8..64 bytes (``edge_size`` if given) or all
    zeros, an owner not a str of 1 to 256 characters."""
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
    """The handed chains of rows with a chain's tag, an edge (hex) and the owner as
    columns (one small Spark job). Several edges of one chain hand their XOR; two owners
    of one chain, or an edge not hex, raise :class:`InvalidConfig`."""
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


@dataclass
class _Part:
    """Each handed chain's part: done (the chain may wait on other edges) or why not."""

    internal: dict[str, int]
    done: set[str] = field(default_factory=set)
    reasons: dict[str, str] = field(default_factory=dict)

    def committed(self, tags: list[str], stamps: Mapping[str, int], errors: Mapping[str, str]) -> None:
        """The part is done where the committed write stamps the edge the hand-over
        started."""
        for tag in tags:
            if tag in errors:
                self.reasons[tag] = errors[tag]
            elif stamps.get(tag) == self.internal[tag]:
                self.done.add(tag)
            else:
                self.reasons[tag] = "this root's rows did not reach the committed write"

    def pending(self, tag: str) -> str | None:
        return None if tag in self.done else self.reasons.get(tag, "this job did not complete its part")


def _run(
    tracking: FrameTracking | RDDTracking,
    handed: Sequence[Handed],
    job: Callable[[_Part, list[Handed]], object],
    **hooks: Any,
) -> RunReport:
    """The one attempt of handed roots (module doc): one outcome per handed root;
    ``job(part, continued)`` runs either API's job over the continued roots and tells
    ``part`` what its sink committed."""
    if tracking.group.is_sum:
        raise InvalidConfig("handed chains are xor chains: continue them with an xor-mode tracker")
    part = _Part({h.tag: tracking.edges.root(f"handed/{h.tag}") for h in handed})
    tracker = tracking.tracker
    found = tracker.status_many([h.tag for h in handed]) if handed else {}
    results: dict[str, Attempt] = {}
    for item in handed:  # one read: a chain missing, of another owner or not pending is refused
        status = found.get(item.tag)
        if status is None:
            why = "not adopted: no such chain"
        elif status.owner != item.owner:
            why = f"not adopted: {CONFLICT} (another owner)"
        elif status.state != "pending":
            why = f"not adopted: the chain is already {status.state}"
        else:
            continue
        results[item.tag] = Attempt(item.tag, REFUSED, why)
    accepted = [h for h in handed if h.tag not in results]

    def start() -> Started:
        def one(item: Handed) -> tuple[str, str | None]:
            """Continue the chain: finish the handed edge, start this job's, under the op id
            the serverless side uses to finish an edge; None when applied, else why not."""
            width = len(item.edge)
            value = (int.from_bytes(item.edge, "big") ^ part.internal[item.tag]).to_bytes(width, "big")
            try:
                tracker.stamp(item.tag, value, op_id=edge_op_id(item.edge), owner=item.owner)
            except NotOwner:
                return item.tag, f"not adopted: {CONFLICT} (another owner)"
            except OpIdReused:
                return item.tag, "not adopted: this edge was already finished by another job"
            except CHAIN_ENDED as exc:
                return item.tag, f"not adopted: the chain is already {exc.code}"
            return item.tag, None

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
    """Continue and complete the ``handed`` chains with ``job(attempt)``, a
    :class:`~xor_ack_dynamodb.spark.frame.FrameAttempt` of the continued roots keyed by
    their tags (``attempt.read_text(path=...)`` over ``Handed.root``, or
    ``attempt.start(df, tag_column)``). One outcome per handed root: ``acked``,
    ``pending``, ``failed``, ``refused`` (nothing sent) or ``missing``, with its notes."""
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
    """As :func:`run_handed_frames` on the RDD path: ``job(started, 1)``, ``started`` a
    :class:`TrackedRDD` of the continued roots (values ``Handed.root``, or the tag)."""
    check_handed(handed, edge_size=tracking.edges.size)
    notes: dict[str, str] = {}

    def run(part: _Part, going: list[Handed]) -> object:
        owners = {h.tag: h.owner for h in going}
        spec = tracking.spec(1)
        slices = max(1, min(len(going), num_slices or tracking.sc.defaultParallelism))
        ack = tracking.acker(spec, owner=owners, notes=notes)

        def acker(step: str, stamps: dict[str, int], failures: dict[str, str], noted: dict[str, str]) -> Any:
            part.committed(list(owners), stamps, failures)
            return ack(step, stamps, failures, noted)

        described = tracking.sc.getLocalProperty("spark.job.description")
        tracking.sc.setJobDescription(f"xor-ack run {tracking.run_id}: handed chains")
        try:
            rdd = tracking.sc.parallelize([(h.key, h.tag) for h in going], slices)
            sink = Pass({h.tag: part.internal[h.tag] for h in going}, acker, rerun=False)
            return job(TrackedRDD(rdd, spec, tracking._steps, sink), 1)
        finally:
            tracking.sc.setLocalProperty("spark.job.description", described)  # type: ignore[arg-type]

    return _run(tracking, handed, run, notes=lambda: notes, raises=())
