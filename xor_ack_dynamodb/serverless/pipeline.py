"""The pipeline: one tracker, the AWS clients, and the settings every handler shares.
Build it once per Lambda container (importing needs no credentials): from the
environment, a picklable :class:`PipelineConfig`, or parts (docs/lambda.md, "The pieces").
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..config import AckConfig
from ..core.algebra import Mode
from ..errors import InvalidConfig
from ..interfaces import AckTracker
from ..retry import RetryPolicy
from ..stats import RequestStats
from ..stores.memory import MemoryAck
from .completion import (
    Completion,
    CompletionGuard,
    EventBridgeTarget,
    FireOutcome,
    Lineage,
    SqsTarget,
    Target,
    fire_once,
    guard_for,
)
from .errors import RetryRecord
from .metrics import MetricsPublisher
from .parts import ItemReader
from .poller import StreamPoller
from .records import Handler, process_record, process_sqs_batch
from .starts import Started, process_s3_event, start
from .stream import ChainFilter, owned_by_pipelines, process_chain_stream

if TYPE_CHECKING:
    from ..stores.dynamodb.tracker import XorAckDynamoDB


log = logging.getLogger("xor_ack_dynamodb.serverless")

#: The default mode of a serverless pipeline: ``sum`` (each stamp one atomic ``ADD``
#: that never loses a race, whatever the number of concurrent functions).
DEFAULT_MODE: Mode = "sum"

#: The fields :meth:`PipelineConfig.from_env` reads, and from which variables.
_ENV_VARIABLES = {
    name: f"XOR_ACK_{name.upper()}"
    for name in (
        "queue_url mode partition_key ttl_seconds max_receives max_ops retention_seconds skew_seconds "
        "edge_size completion_queue_url completion_bus completion_lease_seconds"
    ).split()
} | {"metrics_namespace": "POWERTOOLS_METRICS_NAMESPACE"}


@dataclass(frozen=True)
class PipelineConfig:
    """A pipeline's settings (``Pipeline(tracker, config)``) and, with its ``table``,
    everything a worker (a Lambda function, a process) needs to build its
    :class:`Pipeline` (:meth:`build`). Picklable; keys never shown by ``repr``.

    :param table: the chains table (needed to build the tracker: :meth:`tracker`,
        :meth:`ack_config`).
    :param queue_url: where :meth:`Context.emit` sends children by default.
    :param mode: ``"sum"`` (default: contention-free fan-outs) or ``"xor"``.
    :param ttl_seconds: how long a chain may stay pending: above the longest path
        through the pipeline, redeliveries included.
    :param max_receives: deliveries after which a record whose handler still raises
        fails its chain; set the queue's redrive ``maxReceiveCount`` above it.
    :param completion_queue_url, completion_bus: send each completion to this SQS queue,
        put it on this EventBridge bus.
    :param completion_lease_seconds: the completion claim's lease: above the completion
        function's timeout.
    :param max_ops, retention_seconds, skew_seconds, edge_size: the tracker's options
        (:class:`~xor_ack_dynamodb.AckConfig`); keep the retention above the stream's 24
        hours. ``edge_size`` also sizes the edges a start derives.
    :param metrics_namespace: the CloudWatch namespace of the EMF metrics (None: none).
    :param region, endpoint_url, retry, aws_access_key_id, aws_secret_access_key: the
        AWS clients' settings.

    Raises :class:`InvalidConfig` for a value out of range, before anything is built.
    """

    table: str | None = None
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
    max_ops: int = 8  # the trackers' own default (AckConfig.max_ops)
    retention_seconds: float = 86400.0
    skew_seconds: float = 5.0
    edge_size: int = 16
    metrics_namespace: str | None = "xor-ack"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        receives, lease = self.max_receives, self.completion_lease_seconds
        if isinstance(receives, bool) or not isinstance(receives, int) or receives < 1:
            raise InvalidConfig(f"max_receives must be an int of at least 1, got {receives!r}")
        if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not lease > 0:
            raise InvalidConfig(f"completion_lease_seconds must be a positive number, got {lease!r}")
        # every tracker and client setting checked now, and the table's name if it has one
        self._ack_config("unnamed" if self.table is None else self.table)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PipelineConfig:
        """From ``env`` (default: the process environment): ``table`` from
        ``XOR_ACK_TABLE`` (required), each field of :data:`_ENV_VARIABLES` from
        ``XOR_ACK_<FIELD>`` (``XOR_ACK_MAX_OPS`` for ``max_ops``), ``metrics_namespace``
        from ``POWERTOOLS_METRICS_NAMESPACE``. A variable unset or empty leaves the
        field's default.

        Raises :class:`InvalidConfig` naming the variable that is missing, unreadable or
        out of range."""
        env = os.environ if env is None else env
        if not env.get("XOR_ACK_TABLE"):
            raise InvalidConfig("set XOR_ACK_TABLE to the chains table's name")
        values: dict[str, Any] = {"table": env["XOR_ACK_TABLE"]}
        defaults = {f.name: f.default for f in fields(cls)}
        for key, name in _ENV_VARIABLES.items():
            text = env.get(name)
            if not text:
                continue
            kind = type(defaults[key])
            try:
                value: Any = kind(text) if kind in (int, float) else text
            except ValueError:
                what = "a whole number" if kind is int else "a number"
                raise InvalidConfig(f"{name} must be {what}, got {text!r}") from None
            try:  # each alone, so that the error names its variable
                cls(values["table"], **{key: value})
            except InvalidConfig as exc:
                raise InvalidConfig(f"{name}: {exc}") from None
            values[key] = value
        return cls(**values)

    def ack_config(self) -> AckConfig:
        """The tracker's half of this config, as an :class:`~xor_ack_dynamodb.AckConfig`
        (for a Spark job or any other process that continues the pipeline's chains).
        Raises :class:`InvalidConfig` when the config names no table."""
        if self.table is None:
            raise InvalidConfig("this PipelineConfig names no table (set table=, or XOR_ACK_TABLE)")
        return self._ack_config(self.table)

    def _ack_config(self, table: str) -> AckConfig:
        shared = {f.name for f in fields(self)} & {f.name for f in fields(AckConfig)} - {"table"}
        return AckConfig(table, **{name: getattr(self, name) for name in shared})

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
        """The chains tracker (an :class:`~xor_ack_dynamodb.XorAckDynamoDB` with this
        config's options). Raises :class:`InvalidConfig` when the config names no table."""
        from ..stores.dynamodb.tracker import XorAckDynamoDB

        config = self.ack_config()  # no table: raise before building a client
        client = client if client is not None else self.client("dynamodb")
        return XorAckDynamoDB.from_config(config, client=client)

    def build(
        self,
        *,
        tracker: AckTracker | None = None,
        sqs: Any = None,
        s3: Any = None,
        events: Any = None,
        on_complete: Sequence[Target] = (),
        chains: ChainFilter = owned_by_pipelines,
        clock: Callable[[], float] = time.time,
    ) -> Pipeline:
        """The pipeline for this config (:class:`Pipeline`'s parts as keywords, the
        tracker built from this config when not given; the clients are built lazily)."""
        tracker = tracker if tracker is not None else self.tracker()
        return Pipeline(
            tracker, self, sqs=sqs, s3=s3, events=events, on_complete=on_complete, chains=chains, clock=clock
        )


class Pipeline:
    """A tracked serverless pipeline (see :mod:`xor_ack_dynamodb.serverless`).

    :param tracker: any tracker (``XorAckDynamoDB`` in production, ``MemoryAck`` in unit
        tests); its ``mode`` is the pipeline's, and its ``skew`` the completion lease's
        margin. ``delete_on_ack`` is refused: completion and redelivered starts need the
        tombstone.
    :param config: the settings and the clients' (:class:`PipelineConfig`); default
        ``PipelineConfig()``.
    :param sqs, s3, events: boto3 clients; built from ``config`` on first use when omitted.
    :param on_complete: targets called with each :class:`Completion`, once per chain
        (callbacks, :class:`SqsTarget`, :class:`EventBridgeTarget`), in order, before the
        config's completion queue and bus.
    :param guard: the completion claim (default: an ``XorAckDynamoDB`` tracker's own, on
        the chain's item; in memory for a ``MemoryAck``; required for another tracker).
    :param chains: which chains of the table are this pipeline's to complete, called
        with a tag and its owner (default: chains started by a serverless pipeline).
    :param clock: epoch seconds (tests move it).

    Completions fire from the table's stream (:meth:`process_chain_stream`); with a
    :class:`~xor_ack_dynamodb.MemoryAck`, from its ``on_acked`` hook, a target that
    raises being left for :meth:`retry_completions`. Raises :class:`InvalidConfig` for a
    tracker that is not one, or with no guard.

    ``stats`` counts the requests made to SQS, S3 and EventBridge, and events: of records
    (``records.done``, ``.retried``, ``.dropped``, ``.failed_chain``, ``.poison``,
    ``.malformed``), stamps (``stamps.applied``, ``.duplicate``), the stream
    (``stream.records``, ``chains.failed``, ``.expired``) and completions
    (``completions.fired``, ``.repeated``, ``.retried``, ``.missed``); DynamoDB requests
    are in ``tracker.stats``. They are published as CloudWatch metrics (:mod:`.metrics`).
    """

    def __init__(
        self,
        tracker: AckTracker,
        config: PipelineConfig | None = None,
        *,
        sqs: Any = None,
        s3: Any = None,
        events: Any = None,
        on_complete: Sequence[Target] = (),
        guard: CompletionGuard | None = None,
        chains: ChainFilter = owned_by_pipelines,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(tracker, AckTracker):
            raise InvalidConfig(f"tracker must be an AckTracker, not {type(tracker).__name__}")
        if config is not None and not isinstance(config, PipelineConfig):
            raise InvalidConfig(f"config must be a PipelineConfig, not {type(config).__name__}")
        self.tracker, self.config = tracker, config if config is not None else PipelineConfig()
        self.mode: Mode = tracker.mode
        self.queue_url, self.max_receives = self.config.queue_url, self.config.max_receives
        self.edge_size = self.config.edge_size
        self.guard = guard if guard is not None else guard_for(tracker)
        self.chains = chains
        self.clock = clock
        self.stats = RequestStats()
        self.metrics = MetricsPublisher(self.config.metrics_namespace)
        self.unfired: list[str] = []
        self._clients: dict[str, Any] = {"sqs": sqs, "s3": s3, "events": events}
        self.targets: list[Target] = list(on_complete)
        if self.config.completion_queue_url:
            self.targets.append(SqsTarget(_Lazy(self, "sqs"), self.config.completion_queue_url, self.stats))
        if self.config.completion_bus:
            self.targets.append(
                EventBridgeTarget(_Lazy(self, "events"), self.config.completion_bus, stats=self.stats)
            )
        if isinstance(tracker, MemoryAck):  # completions fire from its on_acked hook
            previous = tracker.on_acked

            def acked(tag: str) -> None:
                if previous is not None:
                    previous(tag)
                self._fire_in_memory(tag)

            tracker.on_acked = acked

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **parts: Any) -> Pipeline:
        """:meth:`PipelineConfig.from_env` then :meth:`PipelineConfig.build` (``parts``
        are ``build``'s keywords)."""
        return PipelineConfig.from_env(env).build(**parts)

    def client(self, service: str) -> Any:
        """The pipeline's client for ``service`` (built from the config on first use)."""
        if self._clients.get(service) is None:
            self._clients[service] = self.config.client(service)
        return self._clients[service]

    @property
    def sqs(self) -> Any:
        return self.client("sqs")

    @property
    def s3(self) -> Any:
        return self.client("s3")

    def __repr__(self) -> str:
        return f"Pipeline(tracker={self.tracker!r}, mode={self.mode!r}, queue_url={self.queue_url!r})"

    # -- entry points (the work is in .records, .starts and .stream), each batch's metrics published

    def process_sqs_batch(
        self, event: Mapping[str, Any], handler: Handler, lambda_context: Any = None
    ) -> dict[str, Any]:
        """See :func:`xor_ack_dynamodb.serverless.process_sqs_batch`."""
        return self._batch(process_sqs_batch, event, handler, pipeline=self, lambda_context=lambda_context)

    def process_chain_stream(self, event: Mapping[str, Any], lambda_context: Any = None) -> dict[str, Any]:
        """Fire the completions of this pipeline's chains that a batch of the table's
        stream records shows completing; returns the partial batch response (see
        :mod:`xor_ack_dynamodb.serverless.stream`)."""
        return self._batch(process_chain_stream, event, pipeline=self)

    def process_s3_event(
        self, event: Mapping[str, Any], handler: Handler, lambda_context: Any = None
    ) -> dict[str, Any]:
        """See :func:`xor_ack_dynamodb.serverless.process_s3_event`."""
        return self._batch(process_s3_event, event, handler, pipeline=self, lambda_context=lambda_context)

    def _batch(self, entry: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return entry(*args, **kwargs)
        finally:
            self.publish_metrics()

    def fire_completion(self, completion: Completion, lineage: Lineage | None = None) -> FireOutcome:
        """:func:`~.completion.fire_once` with this pipeline's guard, targets and lease
        (raising as it does), then its outcome counted (``completions.fired``...)."""
        now, lease = self.clock(), self.config.completion_lease_seconds
        outcome = fire_once(self.guard, self.targets, completion, now=now, lease=lease, lineage=lineage)
        self.stats.add(f"completions.{outcome}")
        return outcome

    def _on_table(self, missing: str) -> XorAckDynamoDB:
        """The tracker, if on a DynamoDB table; else :class:`InvalidConfig`: it ``missing``."""
        from ..stores.dynamodb.tracker import XorAckDynamoDB

        if not isinstance(self.tracker, XorAckDynamoDB):
            raise InvalidConfig(f"a {type(self.tracker).__name__} has {missing}")
        return self.tracker

    def item_reader(self) -> ItemReader:
        """How the tracker's items read (for stream images). Raises :class:`InvalidConfig`
        for a tracker not on DynamoDB (it has no stream)."""
        return self._on_table("no stream to read completions from").read_item

    def create_table(self) -> bool:
        """Create the tracker's table with the stream completions need (see
        :meth:`XorAckDynamoDB.create_table`); True if it created it."""
        return self._on_table("no table to create").create_table(stream=True)

    def stream_poller(self, streams: Any = None, **options: Any) -> StreamPoller:
        """A :class:`StreamPoller` of the tracker's table feeding
        :meth:`process_chain_stream` (``streams``: a ``dynamodbstreams`` client, default
        :func:`~.poller.streams_client`'s; ``options``: the poller's)."""
        tracker = self._on_table("no stream to poll")
        streams = streams if streams is not None else self._clients.get("dynamodbstreams")
        return StreamPoller.for_table(
            tracker.client, streams, tracker.table, self.process_chain_stream, **options
        )

    def publish_metrics(self) -> dict[str, int]:
        """Publish the counters gained since the last publication (:mod:`.metrics`);
        returns them by metric name."""
        return self.metrics.publish(self.stats)

    def _fire_in_memory(self, tag: str) -> None:
        status = self.tracker.status(tag)
        if not self.chains(tag, status.owner):
            return
        completion = Completion(tag, status.owner or "", self.mode, self.clock())
        try:
            self.fire_completion(completion)
        except Exception as exc:  # noqa: BLE001 - not the completing stamp's error: keep it for a retry
            log.warning("%s: completion not fired (%r); retry_completions() fires it", tag, exc)
            self.unfired.append(tag)

    def retry_completions(self) -> int:
        """MemoryAck pipelines: fire the completions whose targets raised before; returns
        how many are still left."""
        tags, self.unfired = self.unfired, []
        for tag in tags:
            self._fire_in_memory(tag)
        return len(self.unfired)

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
        takes a Powertools ``SQSRecord`` or a raw record dict, returns for a record
        finished with (done, dropped, failed its chain), and raises :class:`RetryRecord`
        for one to deliver again."""

        def run(record: Any) -> None:
            raw = getattr(record, "raw_event", record)
            if process_record(raw, handler, pipeline=self) == "retry":
                raise RetryRecord(f"message {raw.get('messageId')} is to be delivered again")

        return run

    def start(self, tag: str, children: Iterable[Any] = (), *, start_id: str | None = None) -> Started:
        """See :func:`xor_ack_dynamodb.serverless.start`."""
        return start(tag, children, pipeline=self, start_id=start_id)


class _Lazy:
    """A client of the pipeline, resolved at first call (building a pipeline builds no client)."""

    def __init__(self, pipeline: Pipeline, service: str) -> None:
        self.pipeline, self.service = pipeline, service

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pipeline.client(self.service), name)
