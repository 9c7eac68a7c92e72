"""A small picklable description of a tracker, for code that runs somewhere else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .retry import RetryPolicy

if TYPE_CHECKING:
    from .stores.dynamodb.tracker import XorAckDynamoDB

__all__ = ["AckConfig"]


@dataclass(frozen=True)
class AckConfig:
    """Everything an executor, a worker process or a Lambda function needs to build its
    own :class:`~xor_ack_dynamodb.XorAckDynamoDB`: boto3 clients cannot be pickled and
    must never travel in a Spark closure, this can.

    ``region`` and ``endpoint_url`` default to the environment (``AWS_REGION``, then
    ``AWS_DEFAULT_REGION``; ``AWS_ENDPOINT_URL_DYNAMODB``, then ``AWS_ENDPOINT_URL``).
    The explicit keys exist for local endpoints (moto, dynalite) that accept any key; on
    AWS leave them unset and let the executor's role provide credentials. They are never
    shown by ``repr``. The other fields are the tracker's options of the same names
    (``mode``: ``"xor"`` or ``"sum"``).
    """

    table: str
    partition_key: str = "tagID"
    region: str | None = None
    endpoint_url: str | None = None
    ttl_seconds: float = 3600.0
    retention_seconds: float = 86400.0
    delete_on_ack: bool = False
    max_ops: int = 32
    mode: Literal["xor", "sum"] = "xor"
    skew_seconds: float = 5.0
    edge_size: int = 16
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)

    def client(self) -> Any:
        """A new low-level DynamoDB client in a new boto3 session (sessions are not
        thread-safe; clients are), built by
        :func:`~xor_ack_dynamodb.stores.dynamodb.clients.dynamodb_client`: region from ``region``, then
        ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile; endpoint from
        ``endpoint_url``, then ``AWS_ENDPOINT_URL_DYNAMODB``, ``AWS_ENDPOINT_URL``; the
        timeouts and botocore retries that keep one call near ``retry.max_seconds``.
        Raises :class:`~xor_ack_dynamodb.errors.InvalidConfig` when no region is set."""
        from .stores.dynamodb.clients import dynamodb_client

        return dynamodb_client(
            region=self.region,
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.aws_access_key_id,
            aws_secret_access_key=self.aws_secret_access_key,
            retry=self.retry,
        )

    def connect(self, client: Any = None) -> XorAckDynamoDB:
        """A tracker for this configuration, on ``client`` or a new one."""
        from .stores.dynamodb.tracker import XorAckDynamoDB

        return XorAckDynamoDB(
            table=self.table,
            partition_key=self.partition_key,
            client=client if client is not None else self.client(),
            ttl=self.ttl_seconds,
            retention=self.retention_seconds,
            delete_on_ack=self.delete_on_ack,
            max_ops=self.max_ops,
            mode=self.mode,
            skew=self.skew_seconds,
            edge_size=self.edge_size,
            retry=self.retry,
        )
