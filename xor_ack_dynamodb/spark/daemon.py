"""A PySpark worker daemon that has this library imported before it forks workers.

PySpark forks every Python worker from one daemon process per executor. A worker whose
task raised exits, and its replacement imports the library again on its first task
(about 0.2 s of CPU each, much more on a loaded machine): with many failing tasks (a
test that kills every task of a 200-partition stage once) that dominates. With::

    spark.python.daemon.module=xor_ack_dynamodb.spark.daemon

the daemon imports the executor-side modules (and boto3) once, and every forked worker
starts with them loaded. Nothing else changes: this runs PySpark's own daemon.
Needs the package importable by the executors' Python (as tracked jobs do anyway).
"""

from __future__ import annotations

import boto3  # noqa: F401  (the executor's tracker builds a client on first use)
from pyspark.daemon import manager

from .rdd import executor, steps  # noqa: F401

__all__ = ["manager"]

if __name__ == "__main__":
    manager()
