"""Tracked RDDs: each record keeps its root; the driver creates each chain and, once the
sink's job committed, stamps it once. :mod:`.tracked` runs jobs whose tasks
(:mod:`.executor`) carry failures and notes to the sink.
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
