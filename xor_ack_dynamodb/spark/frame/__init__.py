"""Tracked DataFrames (also under Spark Connect): the plain operators in the JVM with
each row's root beside them, one stamp per root once the write committed.

- :mod:`.tracked`: :class:`TrackedFrame` and its operations, and the side channel that
  says which roots failed (:class:`~.tracked.Probes`);
- :mod:`.attempt`: :class:`FrameAttempt`, one attempt's sources and its tracked write;
- :mod:`.tracking`: :class:`FrameTracking`, the run (attempts, replays);
- :mod:`.sources`: files through Spark's text reader and keyed rows, with their roots
  (:mod:`.keys`: how a row's key meets a root's);
  :mod:`.commit`: Spark's writer, the ledger and the publish of acked rows;
  :mod:`.columns`: the hidden root column and what a write saw.
"""

from .attempt import Commit, FrameAttempt, FrameJob, RestagedApart
from .keys import UnknownRootKey, match_key
from .tracked import TrackedFrame, TrackedGroups, WriteResult
from .tracking import FrameTracking, default_parallelism, is_connect

__all__ = [
    "Commit",
    "FrameAttempt",
    "FrameJob",
    "FrameTracking",
    "RestagedApart",
    "TrackedFrame",
    "TrackedGroups",
    "UnknownRootKey",
    "WriteResult",
    "default_parallelism",
    "is_connect",
    "match_key",
]
