"""Tracked DataFrames (also under Spark Connect): :mod:`.attempt` runs attempts whose rows
come from :mod:`.sources` through the operators of :mod:`.tracked` to :mod:`.commit`.
"""

from ..context import is_connect
from ..output import RestagedApart
from .attempt import FrameAttempt, FrameTracking
from .keys import UnknownRootKey, match_key
from .tracked import TrackedFrame, WriteResult

__all__ = [
    "FrameAttempt",
    "FrameTracking",
    "RestagedApart",
    "TrackedFrame",
    "UnknownRootKey",
    "WriteResult",
    "is_connect",
    "match_key",
]
