"""A tracked run's figures where a Spark user looks: the Spark UI's Jobs page.

:class:`RunMetrics` wraps the attempt loop of :meth:`~.attempts.Driver.run_attempts`
(RDD and DataFrame runs). On classic Spark every job of the run carries the job tag
``xor-ack-run-<run id>``, every job of an attempt the description ``xor-ack run <run
id> attempt <n>: <k> roots``, and a job with no partitions carries the run's final
figures (:data:`METRICS`; :func:`parse_summary` reads them back). Under Spark Connect
the operations carry tags only (``SparkSession.addTag``). The thread's own description
and tags are restored when the run ends, however it ends.

See docs/spark.md, "Metrics in the Spark UI" (why no named accumulators).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .context import is_connect

if TYPE_CHECKING:
    from .outcomes import RunReport

__all__ = ["METRICS", "RunMetrics", "figures", "parse_summary", "summary", "run_tag"]

#: The figures of a run, by name, and what each counts.
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


def figures(report: RunReport) -> dict[str, int]:
    """The :data:`METRICS` of a finished run, from its report (:meth:`RunReport.figures`)."""
    return report.figures()


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
    around the run's attempts, which restores the thread's description and tags."""

    def __init__(self, run_id: str, spark: Any = None) -> None:
        """``spark``: the run's SparkContext (RDD runs) or SparkSession (DataFrame runs,
        classic or Connect); None publishes nothing."""
        self.run_id = run_id
        self.tag = run_tag(run_id)
        self.values: dict[str, int] | None = None
        self._session = spark if spark is not None and is_connect(spark) else None
        #: The run's SparkContext (None under Spark Connect, or without ``spark``): the
        #: context whose jobs are labelled here and whose stages the progress shows.
        self.context = None if spark is None or self._session else getattr(spark, "sparkContext", spark)
        self._saved: str | None = None
        self._attempt_tag: str | None = None

    @classmethod
    def of(cls, driver: Any) -> RunMetrics:
        """For a driver of :mod:`.attempts`: its ``spark`` (a DataFrame run's session) or
        ``sc`` (an RDD run's context)."""
        return cls(driver.run_id, getattr(driver, "spark", None) or getattr(driver, "sc", None))

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
        """Publish the run's final figures (:attr:`values`): on classic Spark as the
        description of a job with no partitions."""
        self.values = figures(report)
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
