"""Getting a SparkContext or SparkSession for a job: reuse the active one, start a quiet
one, or connect to a Spark Connect server."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

__all__ = ["get_context", "get_session", "is_connect", "under_spark_submit"]


def is_connect(spark: object) -> bool:
    """True for a Spark Connect session (no SparkContext, no RDDs)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


#: A quiet context: our progress replaces Spark's console bar; no UI; Python workers
#: reused between tasks.
QUIET = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.worker.reuse": "true",
}


#: A log4j profile that starts at WARN, silences the native-Hadoop notice and prints an
#: exception's first line only, without the Java stack a message carries (which hid a
#: failed job's cause); a tracked run logs the whole error at DEBUG (docs/spark.md,
#: "Failures").
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %replace{%m}{(?s)\\n\\s+at .*}{}%n%ex{1}
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
"""


def _log4j2_file() -> str:
    path = Path(tempfile.gettempdir()) / "xor-ack-log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        path.write_text(_LOG4J2)
    return str(path)


def under_spark_submit() -> bool:
    """True when ``spark-submit`` started this process (the master comes from there)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_context(
    master: str | None = None, app_name: str = "xor-ack", conf: Mapping[str, str] | None = None
) -> tuple[SparkContext, bool]:
    """The active SparkContext, else a new one, and whether it was created here (then
    the caller stops it). A new one gets ``master`` (default ``local[*]``, or
    spark-submit's), :data:`QUIET` and ``conf``, and its workers run this interpreter
    unless ``PYSPARK_PYTHON`` says otherwise."""
    from pyspark import SparkConf, SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        return active, False
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark_conf = SparkConf().setAppName(app_name)
    if not under_spark_submit():
        master = master or "local[*]"
        spark_conf.setMaster(master)
        spark_conf.setIfMissing(
            "spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{_log4j2_file()}"
        )
        if master.startswith("local"):
            # Local mode talks to itself only: bind to loopback.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    elif master is not None:
        spark_conf.setMaster(master)
    for key, value in {**QUIET, **(conf or {})}.items():
        spark_conf.setIfMissing(key, value)
    sc = SparkContext.getOrCreate(spark_conf)
    sc.setLogLevel("WARN")
    return sc, True


def get_session(
    master: str | None = None,
    *,
    remote: str | None = None,
    app_name: str = "xor-ack",
    conf: Mapping[str, str] | None = None,
) -> tuple[SparkSession, bool]:
    """A SparkSession and whether it was created here: with ``remote``
    (``sc://host:port``) a Spark Connect session, ``conf`` set on it; else the classic
    session on :func:`get_context`'s SparkContext."""
    from pyspark.sql import SparkSession

    if remote is not None:
        session = SparkSession.builder.remote(remote).appName(app_name).create()
        for key, value in (conf or {}).items():
            session.conf.set(key, value)
        return session, True
    _sc, created = get_context(master, app_name=app_name, conf=conf)
    return SparkSession.builder.getOrCreate(), created
