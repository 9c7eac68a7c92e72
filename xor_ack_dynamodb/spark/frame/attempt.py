"""One attempt of a tracked DataFrame run, as its job sees it: the attempt's roots, the
sources that start their chains' rows (:meth:`FrameAttempt.read_text`,
:meth:`FrameAttempt.start`, :mod:`.sources`), and the one tracked write whose committed
output stamps them (:meth:`FrameAttempt.write`, the commit protocol of :mod:`.commit`).

The attempt loop around it (creating the chains, the heartbeat, settling, replaying) is
the one every path shares (:mod:`~xor_ack_dynamodb.spark.attempts`); a :class:`Commit`
says how the committed chains are stamped.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import InvalidConfig, XorAckError
from ..chains import Owners, Started
from ..edges import EdgeKey
from ..group import Group
from ..outcomes import Attempt
from ..output import Location
from ..tags import TagScheme
from . import commit as protocol
from .columns import CHAIN, ChainXors
from .sources import TextRoot, read_text, start
from .tracked import TrackedFrame, WriteResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ...interfaces import AckTracker

__all__ = ["FrameAttempt", "FrameRun", "Commit", "FrameJob", "RestagedApart"]


class FrameRun(Protocol):
    """What an attempt needs of its run (:class:`~.tracking.FrameTracking`)."""

    spark: SparkSession
    edges: EdgeKey
    run_key: int
    parallelism: int
    transactions: bool
    tracker: AckTracker
    tags: TagScheme
    group: Group
    counts: Counter[str]

    def commit(self, *args: Any, **kwargs: Any) -> Counter[str]:
        """:meth:`~xor_ack_dynamodb.spark.attempts.Driver.commit`."""


@dataclass
class Commit:
    """How an attempt stamps its chains once its write committed. The defaults are a
    run's own chains; a stream's batch and chains handed over from upstream name, own
    and stamp theirs under op ids of their own."""

    #: Op ids ``<op_prefix>/<tag>`` (default: ``<run owner>.<attempt>/<write id>``).
    op_prefix: str | None = None
    #: Who each chain belongs to, and its group (default: the run's).
    owner: Owners | None = None
    group: Group | Mapping[str, Group] | None = None
    #: The write's id (default: a fresh one, :func:`.commit.new_write_id`).
    write_id: str | None = None
    #: Chains not acked by this attempt's stamps may be acked later by others (handed
    #: chains waiting on other holders, a stream's open roots): their staged rows are
    #: kept, for a later publish round (:func:`.commit.recover`).
    keep_unacked: bool = False
    #: Told the committed XORs before the stamps go out.
    before: Callable[[ChainXors], None] | None = None
    #: Receives the outcomes the stamps decided (None: not kept), for the settle.
    known: dict[str, Attempt] | None = field(default_factory=dict)
    #: Receives the notes of the committed rows, per chain.
    notes: dict[str, str] = field(default_factory=dict)


class FrameAttempt:
    """One attempt of a tracked DataFrame run, handed to the job: its roots, and the
    sources that start their chains' records.

    :param starting: resolves to the chains started for this attempt (only those are
        stamped after the write) and why the others were not.
    :param commit: how they are stamped (default: a run's own chains).
    """

    def __init__(
        self,
        tracking: FrameRun,
        number: int,
        roots: Sequence[Any],
        keys: Sequence[Any],
        tags: Sequence[str],
        edges: dict[str, int],
        starting: Future[Started],
        commit: Commit | None = None,
        run_keys: Sequence[Any] | None = None,
    ) -> None:
        self.tracking = tracking
        self.spark = tracking.spark
        self.number = number
        self.roots = list(roots)
        self.keys = list(keys)
        self.tags = list(tags)
        self.root_edges = edges
        self._starting = starting
        self.commit = commit or Commit()
        self.run_keys = list(run_keys) if run_keys is not None else None
        self.run_key = tracking.run_key
        self.write_result: WriteResult | None = None
        self._lock = threading.Lock()

    def read_text(
        self,
        path: Callable[[Any], str | bytes | os.PathLike[str]] | None = None,
        *,
        bad_bytes: str = "replace",
        normalize: str = "NFC",
    ) -> TrackedFrame:
        """The lines of each root's file (``path(root)``, default the root itself: a
        local path or a URI Spark reads, ``s3://`` included), or of the files under it
        for a directory (:func:`~xor_ack_dynamodb.spark.files.files_under`, the rule of
        ``xor-ack wordcount DIR``); columns ``path`` (the line's file) and ``line``. See
        :mod:`.sources`."""
        locate = path or (lambda root: root)
        roots = [
            TextRoot(chain, os.fspath(locate(root)), self.root_edges[tag])
            for chain, (root, tag) in enumerate(zip(self.roots, self.tags, strict=True))
        ]
        df = read_text(
            self.spark,
            roots,
            self.run_key,
            bad_bytes=bad_bytes,
            normalize=normalize,
            partitions=2 * self.tracking.parallelism,
        )
        return TrackedFrame(df, self)

    def start(self, df: DataFrame, key: str, *, others: str | None = None) -> TrackedFrame:
        """Track the rows of ``df`` whose column ``key`` (as a string) is the key of one
        of this attempt's roots (the roots' keys must be ``str``). Rows of the run's
        other roots (acked in an earlier attempt) are left out; a row whose key is no
        root of the run raises :class:`InvalidConfig` before the job (``others="error"``,
        the default in :meth:`~.tracking.FrameTracking.run`) or is left out too
        (``"skip"``, the default for handed chains, whose rows may hand chains to other
        jobs). Keys are compared by :func:`.keys.match_key` (a path and Spark's URI of
        the same file are one key); the error is :class:`.keys.UnknownRootKey`. See
        :mod:`.sources`."""
        others = others or ("error" if self.run_keys is not None else "skip")
        if others not in ("error", "skip"):
            raise InvalidConfig(f"others must be 'error' or 'skip', got {others!r}")
        if any(not isinstance(k, str) for k in self.keys):
            raise InvalidConfig("start() matches str keys; read files with read_text()")
        chains = [
            (k, i, self.root_edges[t]) for i, (k, t) in enumerate(zip(self.keys, self.tags, strict=True))
        ]
        known = [str(k) for k in self.run_keys or self.keys] if others == "error" else None
        return TrackedFrame(start(df, key, chains, self.run_key, known=known), self)

    def write(
        self,
        frame: TrackedFrame,
        location: str | os.PathLike[str] | Location,
        *,
        format: str,
        tag_column: str,
        publish: bool = True,
        combine: bool = False,
    ) -> WriteResult:
        """The attempt's one tracked write (:meth:`TrackedFrame.write`): stage, read back,
        ledger, stamps, publish (:mod:`.commit`). Raises
        :class:`~xor_ack_dynamodb.spark.output.OutputRefused` before any task for a write
        that cannot be done, :class:`InvalidConfig` for ``combine`` without
        ``publish=False`` or on a frame not made by ``group_by().agg()``.

        ``combine``: the groups are staged across the roots (:func:`.commit.combined`),
        kept if every root acks. Otherwise (a root failing in the rows is failed by its
        stamp, a stamp may not ack) the acked roots' rows are staged again per root, in
        place, each checked against the XOR it was acked with (else
        :class:`RestagedApart`)."""
        with self._lock:
            if self.write_result is not None:
                raise InvalidConfig("one tracked write per attempt: its commit acks the chains")
            if combine and (publish or frame.grouped is None):
                raise InvalidConfig("combine=True takes publish=False and a frame made by group_by().agg()")
            store = Location.of(location)
            protocol.check_write(self.spark, frame.columns, store, format, tag_column)
            if publish:
                protocol.recover(self.spark, store, self.tracking.tracker)
            owner = self.tracking.tags.owner
            write_id = self.commit.write_id or protocol.new_write_id(owner, self.number)
            staged = protocol.Staged(store, write_id, tag_column, tuple(frame.columns), format)
            if combine and frame.grouped is not None:
                source, keys, exprs = frame.grouped
                rows = protocol.combined(source.df, keys, exprs, frame.columns)
                xors = protocol.stage(rows, staged, self.tags, publish=False)
            else:
                xors = protocol.stage(frame.df, staged, self.tags, publish=publish)
            known: dict[str, Attempt] = {}
            counts = self._stamp(xors, write_id, known)
            acked = {t for t, a in known.items() if a.state == "acked"}
            if combine and acked != set(self.tags):
                xors = self._apart(frame, staged, acked, xors)
            mine = set(self.tags) & self._starting.result()[0]
            if publish:
                keep = self.commit.keep_unacked and acked != mine
                protocol.publish(self.spark, staged, acked, keep_staging=keep)
            self.write_result = WriteResult(xors.rows, write_id, counts, staged.staging.url)
            return self.write_result

    def _apart(
        self, frame: TrackedFrame, staged: protocol.Staged, acked: set[str], owed: ChainXors
    ) -> ChainXors:
        """The rows of the ``acked`` roots staged per root in place of a combined write's
        (:meth:`write`), checked against what each was acked with (``owed``)."""
        from pyspark.sql import functions as F

        staged.staging.remove()
        chains = [i for i, tag in enumerate(self.tags) if tag in acked]
        again = protocol.stage(frame.df.where(F.col(CHAIN).isin(chains)), staged, self.tags, publish=False)
        wrong = sorted(t for t in acked if again.xors.get(t) != owed.xors.get(t) or t in again.errors)
        if wrong:
            staged.staging.remove()
            raise RestagedApart(
                f"{len(wrong)} acked root(s) gave other rows when staged again per root "
                f"(their input changed during the run?), e.g. {wrong[0]!r}: nothing of the write is staged"
            )
        return again

    def _stamp(self, xors: ChainXors, write_id: str, acked: dict[str, Attempt]) -> Counter[str]:
        """Stamp or fail each chain this attempt started, once, with what the write
        committed (``acked`` receives the chains the stamps completed). Chains it did
        not start are left alone."""
        commit = self.commit
        if commit.before is not None:
            commit.before(xors)
        # A sum chain holds the root edge r: -x brings it to zero exactly when x == r.
        finished = self.tracking.group.finished
        counts = self.tracking.commit(
            {tag: finished(value) for tag, value in xors.xors.items()},
            xors.errors,
            xors.notes,
            commit.op_prefix or f"{self.tracking.tags.owner}.{self.number}/{write_id}",
            starting=self._starting,
            noted=commit.notes,
            owner=commit.owner,
            group=commit.group,
            known=acked,
        )
        if commit.known is not None:
            commit.known.update(acked)
        return counts


class RestagedApart(XorAckError):
    """A ``combine`` write whose roots did not all ack was staged again per root, and an
    acked root's rows there do not XOR to what it was acked with: its input changed
    between the two reads. The write's staged rows are removed (the job's total cannot
    be made); the acks stand."""


FrameJob = Callable[[FrameAttempt], Any]
