"""A PySpark worker daemon that has this library's executor-side modules (and boto3)
imported before it forks workers (docs/spark.md, "Executors and clients").
"""

from __future__ import annotations

import boto3  # noqa: F401  (the executor's tracker builds a client on first use)
from pyspark.daemon import manager

from .rdd import executor  # noqa: F401

__all__ = ["manager"]

if __name__ == "__main__":
    manager()
