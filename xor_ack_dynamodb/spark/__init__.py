"""Tracking records through PySpark jobs with ack chains (docs/spark.md; the ``spark``
extra). One chain per root; the committed job that holds a root's output acks it. RDDs
(:mod:`.rdd`), DataFrames (:mod:`.frame`, also under Spark Connect), Structured Streaming
(:mod:`.streaming`) and chains started upstream (:mod:`.upstream`) all run the driver's
attempt loop of :mod:`.attempts`.
"""

from .frame import FrameAttempt, FrameTracking, TrackedFrame, UnknownRootKey, WriteResult
from .heartbeat import HeartbeatPolicy
from .outcomes import Attempt, PermanentFailure, RootOutcome, RunObserver, RunReport
from .output import Location, OutputRefused
from .progress import RunProgress
from .rdd import (
    CsvPartitionWriter,
    PartitionWriter,
    RDDTracking,
    S3PartitionWriter,
    Stream,
    TrackedRDD,
    Tracking,
    read_csv_parts,
    read_s3_parts,
)
from .rdd.executor import DieOnFirstAttempt, Noted, executor_tracker
from .streaming import BatchReport, StreamTracking
from .tags import escape_key
from .upstream import Handed, check_handed, handed_from_rows, run_handed_frames, run_handed_rdd

__all__ = [
    "Attempt",
    "BatchReport",
    "Noted",
    "CsvPartitionWriter",
    "DieOnFirstAttempt",
    "FrameAttempt",
    "FrameTracking",
    "HeartbeatPolicy",
    "Handed",
    "Location",
    "OutputRefused",
    "PartitionWriter",
    "PermanentFailure",
    "RDDTracking",
    "RootOutcome",
    "RunObserver",
    "RunProgress",
    "RunReport",
    "S3PartitionWriter",
    "Stream",
    "StreamTracking",
    "TrackedFrame",
    "TrackedRDD",
    "UnknownRootKey",
    "Tracking",
    "WriteResult",
    "check_handed",
    "escape_key",
    "executor_tracker",
    "handed_from_rows",
    "read_csv_parts",
    "read_s3_parts",
    "run_handed_frames",
    "run_handed_rdd",
]
