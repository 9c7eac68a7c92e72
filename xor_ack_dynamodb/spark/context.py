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


#: Settings for a small, quiet context: our own progress display replaces Spark's
#: console bar, the UI is not needed, and Python workers are reused between tasks (so
#: each keeps its tracker and boto3 client).
QUIET = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.worker.reuse": "true",
}


#: Spark's default log4j profile logs at INFO until ``setLogLevel`` runs and announces
#: itself; this one starts at WARN and silences the native-Hadoop notice. It prints an
#: exception as its first line only, and cuts the Java stack a message carries (a lost
#: task's): one failed job printed about 190 lines of stack per attempt, which hid its
#: cause. A tracked run reports the cause itself and logs the whole error on the logger
#: ``xor_ack_dynamodb.spark`` at DEBUG (docs/spark.md, "Failures").
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
    """True when this Python process was started by ``spark-submit`` (which starts the
    JVM first and hands its gateway to Python): the master then comes from there."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_context(
    master: str | None = None, app_name: str = "xor-ack", conf: Mapping[str, str] | None = None
) -> tuple[SparkContext, bool]:
    """The active SparkContext if there is one, else a new one; returns it and whether
    it was created here (then the caller stops it).

    A new context gets ``master`` (default ``local[*]``, or spark-submit's), the
    :data:`QUIET` settings and ``conf``, and its Python workers run this interpreter
    unless ``PYSPARK_PYTHON`` says otherwise (so an editable install imports on them).
    Log level is set to WARN.
    """
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
            # Local mode talks to itself only: bind to loopback (and skip Spark's
            # warning about a hostname that resolves to it).
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
    """A SparkSession and whether it was created here (then the caller stops it).

    With ``remote`` (``sc://host:port``), a Spark Connect session (no SparkContext);
    ``conf`` is applied to it with ``spark.conf.set``. Otherwise the classic session on
    :func:`get_context`'s SparkContext (the active one if any).
    """
    from pyspark.sql import SparkSession

    if remote is not None:
        session = SparkSession.builder.remote(remote).appName(app_name).create()
        for key, value in (conf or {}).items():
            session.conf.set(key, value)
        return session, True
    _sc, created = get_context(master, app_name=app_name, conf=conf)
    return SparkSession.builder.getOrCreate(), created
