"""CloudWatch metrics of a pipeline, in Embedded Metric Format (EMF), through AWS Lambda
Powertools' Metrics when it is installed; nothing at all when it is not.

A pipeline counts what happens to records, stamps, chains and completions in its
``stats`` (:class:`~xor_ack_dynamodb.stats.RequestStats` events). At the end of each
batch (``process_sqs_batch``, ``process_chain_stream``, ``process_s3_event``) the
counts added since the last publication are printed to stdout as one EMF document,
which Lambda ships to CloudWatch Logs and CloudWatch turns into metrics: no API call, no
extra latency. Namespace: the pipeline's ``metrics_namespace`` (``xor-ack``, or
``POWERTOOLS_METRICS_NAMESPACE`` for ``Pipeline.from_env``); dimension ``service``
(``POWERTOOLS_SERVICE_NAME``); ``POWERTOOLS_METRICS_DISABLED=true`` turns them off, as for
any Powertools metric. Each metric, unit Count:

=========================  ==============================================================
``Stamps``                 records whose stamp was applied (first delivery of their work)
``DuplicatesRecognised``   records whose stamp was already applied (a redelivery, a
                           re-sent child): recognised by the op id, applied once
``Retries``                records reported for redelivery (``batchItemFailures``)
``PoisonMessages``         records whose handler kept failing: their chain was failed
``MalformedMessages``      records without a usable envelope, dropped at the receive limit
``DroppedMessages``        records of chains already over (acked, failed, expired, gone)
``Completions``            completions fired (once per chain)
``CompletionsRepeated``    stream records of a completion already fired (not fired again)
``CompletionRetries``      stream batches retried because a completion could not fire yet
``CompletionsMissed``      completions that could not fire: the chain was purged or created
                           again before its stream record was handled (alarm on it)
``ChainsFailed``           chains of the pipeline that became ``failed`` (whoever failed
                           them), from the stream
``ChainsExpired``          pending chains removed by the table's TTL: they expired without
                           completing (counted when DynamoDB purges them), from the stream
=========================  ==============================================================

Stream-counted metrics count stream records, which a retried batch can deliver again.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

from ..stats import RequestStats

__all__ = ["METRICS", "MetricsPublisher"]

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
