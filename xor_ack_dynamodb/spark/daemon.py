"""A PySpark worker daemon that has this library imported before it forks workers.

A worker whose task raised exits, and its replacement imports the library again: with
many failing tasks that dominates. With
``spark.python.daemon.module=xor_ack_dynamodb.spark.daemon`` PySpark's own daemon runs
with the executor-side modules (and boto3) imported once, before it forks.
"""

from __future__ import annotations

import boto3  # noqa: F401  (the executor's tracker builds a client on first use)
from pyspark.daemon import manager

from .rdd import executor  # noqa: F401

__all__ = ["manager"]

if __name__ == "__main__":
    manager()
