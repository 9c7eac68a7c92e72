"""A spark-submit application for tests/test_packaging.py: one task asks its executor's
Python where ``xor_ack_dynamodb`` comes from, and the driver prints the answer as one
JSON line (``PROBE {...}``).

``packaged_probe.py`` alone imports nothing of this repository on the driver: only
PySpark, which spark-submit puts on the driver's path (the probe of a cluster whose
workers have no copy of the package).

``packaged_probe.py SCRIPT ARGS...`` first runs ``SCRIPT`` as ``__main__`` with ``ARGS``
(its ``sys.argv[1:]``), unchanged, in this application, then probes an executor of that
same application: the README's recipe and the probe share one driver and its executors.
The session is made as ``xor-ack wordcount`` makes its own (the library's
``get_session``: the same settings), before the script runs, so the script's job uses
it (the CLI takes an active session and leaves it running); the driver imports the
library, as the recipe's driver does anyway.
"""

from __future__ import annotations

import json
import runpy
import sys
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


def run_script(script: str, args: list[str]) -> int:
    """``script`` run as ``__main__`` with ``args``; its exit code."""
    sys.argv = [script, *args]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    code = 0
    if len(sys.argv) > 1:
        from xor_ack_dynamodb.spark.context import get_session

        spark, _ = get_session(app_name="xor-ack wordcount")
    else:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName("xor-ack packaging probe").getOrCreate()
    try:
        if len(sys.argv) > 1:
            code = run_script(sys.argv[1], sys.argv[2:])
        (answer,) = spark.sparkContext.parallelize([0], 1).mapPartitions(where_from).collect()
    finally:
        spark.stop()
    print("PROBE " + json.dumps(answer), flush=True)
    sys.exit(code)
