"""Tracked RDDs: :mod:`.tracked` runs jobs whose tasks (:mod:`.executor`) carry failures
and notes to the sink.
"""

from .tracked import PartitionWriter, RDDTracking, Stream, TrackedRDD, Tracking
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
