"""Tracking records through PySpark jobs with ack chains.

Start one chain per root record (:meth:`Tracking.start`, or :meth:`Tracking.run` which
also replays), transform with :class:`TrackedRDD` (``fan_out``, ``map``, ``filter``,
``reduce_by_key``) and end with ``sink``, which writes durably and then acks. See
``docs/spark.md`` for how the bookkeeping stays exact under task retries.

Needs the ``spark`` extra (``pip install 'xor-ack-dynamodb[spark]'``).
"""

from .driver import Attempt, RootOutcome, RunObserver, RunReport, Tracking, new_run_id, tag_for
from .executor import Anchors, RunSpec, executor_tracker
from .faults import DieOnFirstAttempt
from .sink import CsvPartitionWriter, S3PartitionWriter, read_csv_parts, read_s3_parts
from .tracked import PartitionWriter, Stream, TrackedRDD, UntrackedRDD

__all__ = [
    "Anchors",
    "Attempt",
    "CsvPartitionWriter",
    "DieOnFirstAttempt",
    "PartitionWriter",
    "RootOutcome",
    "RunObserver",
    "RunReport",
    "RunSpec",
    "S3PartitionWriter",
    "Stream",
    "TrackedRDD",
    "Tracking",
    "UntrackedRDD",
    "executor_tracker",
    "new_run_id",
    "read_csv_parts",
    "read_s3_parts",
    "tag_for",
]
