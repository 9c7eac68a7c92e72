"""CloudWatch metrics of a pipeline, in Embedded Metric Format (EMF), through AWS Lambda
Powertools' Metrics when it is installed; nothing at all when it is not. At the end of
each batch the counts the pipeline's ``stats`` added since the last publication are
printed to stdout as one EMF document: no API call (docs/lambda.md, "Metrics").
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

from ..stats import RequestStats

log = logging.getLogger("xor_ack_dynamodb.serverless")

#: Pipeline stats event -> CloudWatch metric name.
METRICS = {
    "stamps.applied": "Stamps",
    "stamps.duplicate": "DuplicatesRecognised",
    "records.retried": "Retries",
    "records.poison": "PoisonMessages",
    "records.malformed": "MalformedMessages",
    "records.dropped": "DroppedMessages",
    "completions.fired": "Completions",
    "completions.repeated": "CompletionsRepeated",
    "completions.retried": "CompletionRetries",
    "completions.missed": "CompletionsMissed",
    "chains.failed": "ChainsFailed",
    "chains.expired": "ChainsExpired",
}


class MetricsPublisher:
    """Publishes the counts a :class:`RequestStats` gained since the last call, as one
    EMF document through Powertools' ``EphemeralMetrics`` (no state shared with other
    ``Metrics`` instances of the function), or does nothing without Powertools."""

    def __init__(self, namespace: str | None = "xor-ack") -> None:
        self.namespace = namespace
        self._published: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._factory: Any = None
        if namespace is not None:
            try:
                from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
            except ImportError:
                log.debug("aws-lambda-powertools is not installed: no CloudWatch metrics")
            else:
                self._factory, self._unit = EphemeralMetrics, MetricUnit.Count

    @property
    def enabled(self) -> bool:
        """True when Powertools is installed and a namespace is set."""
        return self._factory is not None

    def publish(self, stats: RequestStats) -> dict[str, int]:
        """Print the counts gained since the last call as EMF on stdout; returns them by
        metric name (also without Powertools, for tests and logs)."""
        with self._lock:
            events = stats.events
            gained = {
                METRICS[name]: count - self._published[name]
                for name, count in events.items()
                if name in METRICS and count > self._published[name]
            }
            for name, count in events.items():
                self._published[name] = count
        if gained and self._factory is not None:
            metrics = self._factory(namespace=self.namespace)
            for name, value in sorted(gained.items()):
                metrics.add_metric(name=name, unit=self._unit, value=value)
            metrics.flush_metrics()
        return gained
