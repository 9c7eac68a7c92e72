"""Tracked DataFrames (also under Spark Connect): the plain operators in the JVM with each
row's root beside them, one stamp per root once the write committed. :mod:`.tracking`
runs attempts of :mod:`.attempt`, whose rows come from :mod:`.sources` through the
operators of :mod:`.tracked` to the commit of :mod:`.commit`.
"""

from ..output import RestagedApart
from .attempt import FrameAttempt
from .keys import UnknownRootKey, match_key
from .tracked import TrackedFrame, WriteResult
from .tracking import FrameTracking, is_connect

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
