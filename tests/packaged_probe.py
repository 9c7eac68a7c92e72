"""A spark-submit application for tests/test_packaging.py: one task asks its executor's
Python where ``xor_ack_dynamodb`` comes from, and the driver prints the answer as one
JSON line (``PROBE {...}``).

It imports nothing of this repository on the driver: only PySpark, which spark-submit
puts on the driver's path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any


def where_from(_: Iterator[Any]) -> Iterator[dict[str, Any]]:
    import os
    import sys

    answer: dict[str, Any] = {
        "executable": sys.executable,
        "path": list(sys.path),
        "cwd": os.getcwd(),
        "module": None,
        "version": None,
        "error": None,
    }
    try:
        import xor_ack_dynamodb
    except ImportError as exc:
        answer["error"] = f"{type(exc).__name__}: {exc}"
    else:
        answer["module"] = xor_ack_dynamodb.__file__
        answer["version"] = xor_ack_dynamodb.__version__
    yield answer


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("xor-ack packaging probe").getOrCreate()
    try:
        (answer,) = spark.sparkContext.parallelize([0], 1).mapPartitions(where_from).collect()
    finally:
        spark.stop()
    print("PROBE " + json.dumps(answer), flush=True)
