"""What the local servers share: a free port, and for DynamoDB's, dummy credentials, a
context manager, and a config or a client pointing at the started server."""

from __future__ import annotations

import socket
from typing import Any, Self

from ..config import AckConfig
from ..stores.dynamodb.clients import client_for

__all__ = ["LOCAL_KEY_ID", "LOCAL_REGION", "LOCAL_SECRET", "LocalEndpoint", "free_port"]

#: Local servers accept any credentials; these keep botocore from looking for real ones.
LOCAL_KEY_ID = "testing"
LOCAL_SECRET = "testing"
LOCAL_REGION = "us-east-1"


def free_port(host: str = "127.0.0.1", port: int = 0) -> int:
    """``port`` (0: any) if it is free on ``host`` now (another process may take it before
    it is used); raises :class:`OSError` if it is taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, port))
        return int(probe.getsockname()[1])


class LocalEndpoint:
    """A server reached at ``endpoint_url`` once :meth:`start` returned. Use as a context
    manager, or call :meth:`start` and :meth:`stop`."""

    endpoint_url: str | None = None

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def config(self, table: str, **options: Any) -> AckConfig:
        """An :class:`AckConfig` pointing at this server, with dummy credentials. Raises
        :class:`RuntimeError` when the server is not started."""
        if self.endpoint_url is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return AckConfig(
            table=table,
            endpoint_url=self.endpoint_url,
            region=LOCAL_REGION,
            aws_access_key_id=LOCAL_KEY_ID,
            aws_secret_access_key=LOCAL_SECRET,
            **options,
        )

    def client(self) -> Any:
        """A low-level DynamoDB client for this server."""
        return client_for(self.config("unused"))
