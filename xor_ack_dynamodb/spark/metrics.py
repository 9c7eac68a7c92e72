"""A run's figures in the Spark UI (docs/spark.md, "Metrics in the Spark UI"): its jobs
carry the tag ``xor-ack-run-<run id>`` and each attempt's a description; a job with no
partitions carries the final figures (:data:`METRICS`, read by :func:`parse_summary`).
Under Spark Connect, tags only. The thread's description and tags are restored after.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .context import is_connect

if TYPE_CHECKING:
    from .outcomes import RunReport

__all__ = ["METRICS", "RunMetrics", "parse_summary", "summary", "run_tag"]

METRICS: dict[str, str] = {
    "roots": "roots the run was given",
    "roots_acked": "roots whose chain ended acked",
    "roots_failed": "roots whose last attempt's chain ended failed (a record or the job "
    "failed, a permanent failure, another run's chain under the tag)",
    "roots_expired": "roots whose last attempt's chain expired",
    "roots_missing": "roots whose last attempt's chain was never created",
    "replays": "attempts beyond each root's first",
    "requests": "DynamoDB requests of the run: the driver's and the heartbeat's (botocore's "
    "resends included)",
    "stamps": "stamps the driver sent",
    "heartbeats": "beats of the heartbeat (each touches the attempt's pending chains)",
    "retries": "requests the library sent again (a lost race, throttling, a lost response)",
}

_DESCRIPTION = "spark.job.description"
_SUMMARY = re.compile(r"^xor-ack run (?P<run>\S+): (?P<pairs>(?:\w+=\d+ ?)+)$")


def summary(run_id: str, values: dict[str, int]) -> str:
    """The description of the run's summary job: ``xor-ack run <run id>: name=value ...``."""
    return f"xor-ack run {run_id}: " + " ".join(f"{name}={value}" for name, value in values.items())


def parse_summary(description: str) -> tuple[str, dict[str, int]] | None:
    """The run id and figures of a summary job's description (None for any other)."""
    match = _SUMMARY.match(description)
    if match is None:
        return None
    pairs = (pair.split("=") for pair in match["pairs"].split())
    return match["run"], {name: int(value) for name, value in pairs}


def run_tag(run_id: str) -> str:
    """The job tag of a run's jobs (Spark refuses a tag with a comma)."""
    return "xor-ack-run-" + run_id.replace(",", "_")


class RunMetrics:
    """Publishes one run's progress and figures to Spark (module doc); a context manager
    around the run's attempts."""

    def __init__(self, run_id: str, spark: Any = None) -> None:
        """``spark``: the run's SparkContext or SparkSession; None publishes nothing."""
        self.run_id = run_id
        self.tag = run_tag(run_id)
        self.values: dict[str, int] | None = None
        self._session = spark if spark is not None and is_connect(spark) else None
        #: The run's SparkContext (None under Spark Connect): its jobs are labelled here.
        self.context = None if spark is None or self._session else getattr(spark, "sparkContext", spark)
        self._saved: str | None = None
        self._attempt_tag: str | None = None

    def __enter__(self) -> RunMetrics:
        if self.context is not None:
            self._saved = self.context.getLocalProperty(_DESCRIPTION)
            self.context.addJobTag(self.tag)
        elif self._session is not None:
            self._session.addTag(self.tag)
        return self

    def attempt_started(self, attempt: int, roots: int) -> None:
        """Label the attempt's jobs (before it starts)."""
        if self.context is not None:
            self.context.setJobDescription(f"xor-ack run {self.run_id} attempt {attempt}: {roots} roots")
        elif self._session is not None:
            if self._attempt_tag is not None:
                self._session.removeTag(self._attempt_tag)
            self._attempt_tag = f"{self.tag}-attempt-{attempt}"
            self._session.addTag(self._attempt_tag)

    def finished(self, report: RunReport) -> None:
        """Publish the run's final figures (on classic Spark, a job with no partitions)."""
        self.values = report.figures()
        if self.context is not None:
            self.context.setJobDescription(summary(self.run_id, self.values))
            self.context._jsc.emptyRDD().count()

    def __exit__(self, *exc: object) -> None:
        if self.context is not None:
            self.context.setLocalProperty(_DESCRIPTION, self._saved)
            self.context.removeJobTag(self.tag)
        elif self._session is not None:
            for tag in (self._attempt_tag, self.tag):
                if tag is not None:
                    self._session.removeTag(tag)
