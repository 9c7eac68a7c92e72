"""Tracked RDDs: each record keeps its root (no edge, no per-record hash); the driver
creates each chain, and once the sink's job committed stamps it once per attempt.

- :mod:`.tracked`: :class:`TrackedRDD` and the driver's side of a sink (:class:`Pass`);
- :mod:`.steps` and :mod:`.executor`: what runs in the tasks (failures and notes per
  partition, in carriers);
- :mod:`.tracking`: :class:`RDDTracking`, the run (attempts, reruns, replays);
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
