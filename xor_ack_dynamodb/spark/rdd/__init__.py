"""Tracked RDDs: per-record bookkeeping in Python on the executors (no requests there);
the driver creates each chain, and stamps it once per attempt.

- :mod:`.tracked`: :class:`TrackedRDD` and its steps' driver side;
- :mod:`.steps` and :mod:`.executor`: what runs in the tasks (ledgers, carriers);
- :mod:`.tracking`: :class:`RDDTracking`, the run (attempts, replays);
- :mod:`.writers`: durable partition writers.
"""

from .tracked import PartitionWriter, Stream, TrackedRDD
from .tracking import RDDTracking, Tracking
from .writers import CsvPartitionWriter, S3PartitionWriter, read_csv_parts, read_s3_parts

__all__ = [
    "CsvPartitionWriter",
    "PartitionWriter",
    "RDDTracking",
    "S3PartitionWriter",
    "Stream",
    "TrackedRDD",
    "Tracking",
    "read_csv_parts",
    "read_s3_parts",
]
