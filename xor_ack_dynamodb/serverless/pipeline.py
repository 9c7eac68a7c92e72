"""The pipeline: one tracker, the AWS clients, and the settings every handler shares.

Build it once per Lambda container (not at import time: importing must need no
credentials, and tests inject their own clients), from the environment
(:meth:`Pipeline.from_env`), from a picklable :class:`PipelineConfig` (worker processes),
or from parts (tests). Clients not given are built on first use by
:func:`~xor_ack_dynamodb.stores.dynamodb.clients.aws_client` (``AWS_REGION`` honoured, timeouts within
the retry budget).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.algebra import Mode
from ..errors import InvalidConfig
from ..interfaces import AckTracker
from ..retry import RetryPolicy
from ..stats import RequestStats
from .completion import CompletionGuard, EventBridgeTarget, SqsTarget, Target, guard_for
from .records import Handler
from .sqs import process_sqs_batch, record_function
from .starts import Started, process_s3_event, start

__all__ = ["Pipeline", "PipelineConfig"]

#: The default mode of a serverless pipeline: ``sum`` (each stamp one atomic ``ADD``
#: that never loses a race, whatever the number of concurrent functions).
DEFAULT_MODE: Mode = "sum"


def _positive(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidConfig(f"{name} must be a positive number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class PipelineConfig:
    """Everything a worker (a Lambda function, a process) needs to build its
    :class:`Pipeline`. Picklable; keys never shown by ``repr``.

    :param table: the chains table.
    :param queue_url: where :meth:`Context.emit` sends children by default.
    :param mode: ``"sum"`` (default: contention-free fan-outs) or ``"xor"`` (the Node
        package's layout).
    :param ttl_seconds: how long a chain may stay pending. Above the longest path
        through the pipeline, redeliveries included (``max_receives`` x the visibility
        timeout, per level).
    :param max_receives: deliveries after which a record whose handler still raises
        fails its chain (``ApproximateReceiveCount``); set the queue's redrive
        ``maxReceiveCount`` above it, so that the chain is failed before the DLQ.
    :param completion_queue_url: send each completion to this SQS queue.
    :param completion_bus: put each completion on this EventBridge bus.
    :param completion_lease_seconds: the completion claim's lease: above the function
        timeout.
    """

    table: str
    queue_url: str | None = None
    mode: Mode = DEFAULT_MODE
    partition_key: str = "tagID"
    region: str | None = None
    endpoint_url: str | None = None
    ttl_seconds: float = 3600.0
    max_receives: int = 5
    completion_queue_url: str | None = None
    completion_bus: str | None = None
    completion_lease_seconds: float = 300.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PipelineConfig:
        """From ``XOR_ACK_TABLE`` (required), ``XOR_ACK_QUEUE_URL``, ``XOR_ACK_MODE``,
        ``XOR_ACK_PARTITION_KEY``, ``XOR_ACK_TTL_SECONDS``, ``XOR_ACK_MAX_RECEIVES``,
        ``XOR_ACK_COMPLETION_QUEUE_URL``, ``XOR_ACK_COMPLETION_BUS``,
        ``XOR_ACK_COMPLETION_LEASE_SECONDS``, read from ``env`` (default: the process
        environment). Raises :class:`InvalidConfig` naming the variable that is missing
        or unreadable."""
        env = os.environ if env is None else env
        if not env.get("XOR_ACK_TABLE"):
            raise InvalidConfig("set XOR_ACK_TABLE to the chains table's name")

        def number(name: str, default: float) -> float:
            text = env.get(name)
            try:
                return float(text) if text else default
            except ValueError:
                raise InvalidConfig(f"{name} must be a number, got {text!r}") from None

        mode = env.get("XOR_ACK_MODE") or DEFAULT_MODE
        if mode not in ("sum", "xor"):
            raise InvalidConfig(f"XOR_ACK_MODE must be 'sum' or 'xor', got {mode!r}")
        return cls(
            table=env["XOR_ACK_TABLE"],
            queue_url=env.get("XOR_ACK_QUEUE_URL") or None,
            mode=mode,  # type: ignore[arg-type]
            partition_key=env.get("XOR_ACK_PARTITION_KEY") or "tagID",
            ttl_seconds=number("XOR_ACK_TTL_SECONDS", 3600.0),
            max_receives=int(number("XOR_ACK_MAX_RECEIVES", 5)),
            completion_queue_url=env.get("XOR_ACK_COMPLETION_QUEUE_URL") or None,
            completion_bus=env.get("XOR_ACK_COMPLETION_BUS") or None,
            completion_lease_seconds=number("XOR_ACK_COMPLETION_LEASE_SECONDS", 300.0),
        )

    def client(self, service: str) -> Any:
        """A new client for ``service`` with this config's region, endpoint and keys."""
        from ..stores.dynamodb.clients import aws_client

        return aws_client(
            service,
            region=self.region,
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.aws_access_key_id,
            aws_secret_access_key=self.aws_secret_access_key,
            retry=self.retry,
        )

    def tracker(self, client: Any = None) -> AckTracker:
        """The chains tracker (an :class:`~xor_ack_dynamodb.XorAckDynamoDB`)."""
        from ..stores.dynamodb.tracker import XorAckDynamoDB

        return XorAckDynamoDB(
            self.table,
            self.partition_key,
            client=client if client is not None else self.client("dynamodb"),
            mode=self.mode,
            ttl=self.ttl_seconds,
            retry=self.retry,
        )

    def build(
        self,
        *,
        tracker: AckTracker | None = None,
        sqs: Any = None,
        s3: Any = None,
        events: Any = None,
        on_complete: Sequence[Target] = (),
        clock: Callable[[], float] = time.time,
    ) -> Pipeline:
        """The pipeline for this config; given parts are used, the rest built lazily."""
        return Pipeline(
            tracker if tracker is not None else self.tracker(),
            queue_url=self.queue_url,
            sqs=sqs,
            s3=s3,
            events=events,
            max_receives=self.max_receives,
            on_complete=on_complete,
            completion_queue_url=self.completion_queue_url,
            completion_bus=self.completion_bus,
            completion_lease=self.completion_lease_seconds,
            config=self,
            clock=clock,
        )


class Pipeline:
    """A tracked serverless pipeline (see :mod:`xor_ack_dynamodb.serverless`).

    :param tracker: any tracker (``XorAckDynamoDB`` in production, ``MemoryAck`` in unit
        tests); its ``mode`` is the pipeline's. ``delete_on_ack`` is refused: completion
        and redelivered starts need the tombstone.
    :param queue_url: the default queue of :meth:`Context.emit`.
    :param sqs, s3, events: boto3 clients; built on first use when omitted.
    :param max_receives: see :class:`PipelineConfig`.
    :param on_complete: targets called with each :class:`Completion`, once per chain
        (callbacks, :class:`SqsTarget`, :class:`EventBridgeTarget`), in order.
    :param completion_queue_url, completion_bus: add an :class:`SqsTarget` /
        :class:`EventBridgeTarget` for these.
    :param completion_lease: seconds a completion claim is held (above the function
        timeout).
    :param guard: the completion guard (default: on the tracker's table).
    :param edge_size: bytes of a start's edges in xor mode.
    :param clock: epoch seconds (tests move it).

    ``stats`` counts the requests made to SQS, S3 and EventBridge (``sqs.SendMessageBatch``
    ...) and what happened to records (``records.done``, ``records.retried``,
    ``records.dropped``, ``records.failed_chain``, ``records.malformed``,
    ``completions.fired``, ``completions.repeated``); DynamoDB requests are in
    ``tracker.stats`` (the completion claim's included).
    """

    def __init__(
        self,
        tracker: AckTracker,
        *,
        queue_url: str | None = None,
        sqs: Any = None,
        s3: Any = None,
        events: Any = None,
        max_receives: int = 5,
        on_complete: Sequence[Target] = (),
        completion_queue_url: str | None = None,
        completion_bus: str | None = None,
        completion_lease: float = 300.0,
        guard: CompletionGuard | None = None,
        edge_size: int = 16,
        config: PipelineConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if isinstance(max_receives, bool) or not isinstance(max_receives, int) or max_receives < 1:
            raise InvalidConfig(f"max_receives must be an int of at least 1, got {max_receives!r}")
        if not isinstance(tracker, AckTracker):
            raise InvalidConfig(f"tracker must be an AckTracker, not {type(tracker).__name__}")
        self.tracker = tracker
        self.mode: Mode = tracker.mode
        self.queue_url = queue_url
        self.max_receives = max_receives
        self.completion_lease = _positive(completion_lease, "completion_lease")
        self.guard = guard if guard is not None else guard_for(tracker)
        self.edge_size = edge_size
        self.config = config
        self.clock = clock
        self.stats = RequestStats()
        self._clients: dict[str, Any] = {"sqs": sqs, "s3": s3, "events": events}
        self.targets: list[Target] = list(on_complete)
        if completion_queue_url:
            self.targets.append(SqsTarget(_Lazy(self, "sqs"), completion_queue_url, self.stats))
        if completion_bus:
            self.targets.append(EventBridgeTarget(_Lazy(self, "events"), completion_bus, stats=self.stats))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **parts: Any) -> Pipeline:
        """:meth:`PipelineConfig.from_env` then :meth:`PipelineConfig.build` (``parts``
        are ``build``'s keywords)."""
        return PipelineConfig.from_env(env).build(**parts)

    def client(self, service: str) -> Any:
        """The pipeline's ``sqs``, ``s3`` or ``events`` client (built on first use)."""
        found = self._clients.get(service)
        if found is None:
            if self.config is not None:
                found = self.config.client(service)
            else:
                from ..stores.dynamodb.clients import aws_client

                found = aws_client(service)
            self._clients[service] = found
        return found

    @property
    def sqs(self) -> Any:
        return self.client("sqs")

    @property
    def s3(self) -> Any:
        return self.client("s3")

    def now(self) -> float:
        return self.clock()

    def __repr__(self) -> str:
        return f"Pipeline(tracker={self.tracker!r}, mode={self.mode!r}, queue_url={self.queue_url!r})"

    # -- entry points: the work is in .sqs, .records and .starts ---------------------------

    def process_sqs_batch(
        self, event: Mapping[str, Any], handler: Handler, lambda_context: Any = None
    ) -> dict[str, Any]:
        """See :func:`xor_ack_dynamodb.serverless.process_sqs_batch`."""
        return process_sqs_batch(event, handler, pipeline=self, lambda_context=lambda_context)

    def sqs_handler(self, handler: Handler) -> Callable[[Mapping[str, Any], Any], dict[str, Any]]:
        """Decorator: ``handler(ctx)`` as a Lambda handler for an SQS event source with
        ``ReportBatchItemFailures``."""

        def lambda_handler(event: Mapping[str, Any], context: Any) -> dict[str, Any]:
            return self.process_sqs_batch(event, handler, context)

        lambda_handler.__wrapped__ = handler  # type: ignore[attr-defined]
        return lambda_handler

    def record_handler(self, handler: Handler) -> Callable[[Any], None]:
        """``handler(ctx)`` as a one-record function for Powertools' ``BatchProcessor``
        (``process_partial_response(event, record_handler=..., processor=...)``): it
        takes a Powertools ``SQSRecord`` or a raw record dict, and raises
        :class:`RetryRecord` for a record to deliver again."""
        return record_function(self, handler)

    def start(self, tag: str, children: Iterable[Any] = (), *, start_id: str | None = None) -> Started:
        """See :func:`xor_ack_dynamodb.serverless.start`."""
        return start(tag, children, pipeline=self, start_id=start_id)

    def process_s3_event(
        self, event: Mapping[str, Any], handler: Handler, lambda_context: Any = None
    ) -> dict[str, Any]:
        """See :func:`xor_ack_dynamodb.serverless.process_s3_event`."""
        return process_s3_event(event, handler, pipeline=self, lambda_context=lambda_context)


class _Lazy:
    """A client of the pipeline, resolved at first call (so that building a pipeline
    builds no client)."""

    def __init__(self, pipeline: Pipeline, service: str) -> None:
        self.pipeline, self.service = pipeline, service

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pipeline.client(self.service), name)
