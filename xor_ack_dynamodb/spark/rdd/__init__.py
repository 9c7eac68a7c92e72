"""Tracked RDDs: each record keeps its root; the driver creates each chain and, once the
sink's job committed, stamps it once. :mod:`.tracking` runs jobs of :mod:`.tracked`,
whose tasks (:mod:`.steps`, :mod:`.executor`) carry failures and notes to the sink.
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
