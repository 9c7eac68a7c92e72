"""Tracking records through PySpark jobs with ack chains.

Two APIs over the same chains:

- **RDDs** (:mod:`.rdd`): one chain per root record (:meth:`RDDTracking.run`, which
  also replays), transform with :class:`TrackedRDD` (``fan_out``, ``map``, ``filter``,
  ``reduce_by_key``) and end with ``sink``, which writes durably; the committed job acks
  its roots.
- **DataFrames** (:mod:`.frame`, also under Spark Connect): :class:`FrameTracking` runs
  a job over roots given as files (:meth:`FrameAttempt.read_text`) or rows with a key
  column (:meth:`FrameAttempt.start`); :class:`TrackedFrame` runs the plain operators
  in the JVM (``select``, ``with_column``, ``explode``, ``where``, ``group_by().agg()``,
  ``join``) and ``write``'s commit acks its roots.
- **Structured Streaming**: :class:`StreamTracking` is a ``foreachBatch`` function:
  chains per stable key across micro-batches, a re-run batch applied once
  (:mod:`.streaming`).
- **Chains started upstream**: :class:`Handed` roots (a chain's tag, the edge to
  finish, its owner) continued and completed by :func:`run_handed_frames` and
  :func:`run_handed_rdd`, never adopted (:mod:`.upstream`).

Every path runs the same attempt loop on the driver (:mod:`.attempts`: start, run,
settle, replay, heartbeat) and writes through one :class:`~.output.Location`. See
``docs/spark.md`` for how the bookkeeping stays exact under task retries. Needs the
``spark`` extra (``pip install 'xor-ack-dynamodb[spark]'``).
"""

from .attempts import check_roots, new_run_id
from .faults import DieOnFirstAttempt
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
from .rdd.executor import Noted, RunSpec, executor_tracker
from .streaming import BatchReport, StreamTracking, stream_tag
from .tags import TagScheme, escape_key, unescape_key
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
    "RunSpec",
    "S3PartitionWriter",
    "Stream",
    "StreamTracking",
    "TagScheme",
    "TrackedFrame",
    "TrackedRDD",
    "UnknownRootKey",
    "Tracking",
    "WriteResult",
    "check_handed",
    "check_roots",
    "escape_key",
    "executor_tracker",
    "handed_from_rows",
    "new_run_id",
    "read_csv_parts",
    "read_s3_parts",
    "run_handed_frames",
    "run_handed_rdd",
    "stream_tag",
    "unescape_key",
]
