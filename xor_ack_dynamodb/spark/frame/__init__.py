"""Tracked DataFrames (also under Spark Connect): per-record bookkeeping in the JVM, one
stamp per chain per job.

- :mod:`.tracked`: :class:`TrackedFrame` and its operations (how each keeps the XOR
  invariant);
- :mod:`.attempt`: :class:`FrameAttempt`, one attempt's sources and its tracked write;
- :mod:`.tracking`: :class:`FrameTracking`, the run (attempts, replays);
- :mod:`.text_source` and :mod:`.sink`: the ``xor_ack_text`` and ``xor_ack_sink`` data
  sources; :mod:`.columns`: the hidden tracking columns and their per-chain XORs.
"""

from .attempt import Commit, FrameAttempt, FrameJob
from .tracked import TrackedFrame, TrackedGroups, WriteResult
from .tracking import FrameTracking, default_parallelism, is_connect, register_sources

__all__ = [
    "Commit",
    "FrameAttempt",
    "FrameJob",
    "FrameTracking",
    "TrackedFrame",
    "TrackedGroups",
    "WriteResult",
    "default_parallelism",
    "is_connect",
    "register_sources",
]
