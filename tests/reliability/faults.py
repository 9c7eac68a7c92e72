"""Fault injection on a real boto3 DynamoDB client, through botocore's event hooks.

A :class:`FaultInjector` registers on ``before-send.dynamodb`` of each client it is
attached to, so it sees every HTTP request the client sends (botocore's own resends
included) and, at the configured rates, makes one fail the way a network or DynamoDB
does:

``lost_response``
    the request is sent to the server for real (a separate urllib3 session) and the
    server applies it; then the response is dropped and ``ConnectionClosedError`` raised,
    as when a connection dies after the request went out. botocore resends it.
``throttle``
    a real HTTP 400 carrying ``ProvisionedThroughputExceededException`` or
    ``ThrottlingException`` (alternately); nothing is applied.
``server_error``
    a real HTTP 500 carrying ``InternalServerError``; nothing is applied.
``connect_error``
    ``EndpointConnectionError`` before anything is sent.

Nothing inside the library is mocked: the library sees exactly what botocore gives it.
The injector also meters requests per thread (:meth:`FaultInjector.requests_on_this_thread`),
which is how a test counts the attempts one call made.
"""

from __future__ import annotations

import io
import json
import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import urllib3
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.config import Config
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError
from botocore.httpsession import URLLib3Session

__all__ = ["FAULT_KINDS", "FaultRates", "FaultInjector", "client_config"]

FAULT_KINDS = ("lost_response", "throttle", "server_error", "connect_error")

#: Every request type the library sends (see docs/iam-policy.json): PutItem for create and
#: for an xor stamp's conditional write of the whole item, UpdateItem for fail, touch and
#: a sum-mode stamp.
OPERATIONS = ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem")


def client_config(max_attempts: int = 4) -> Config:
    """The botocore configuration the reliability clients use, stated rather than
    inherited: standard retry mode, ``max_attempts`` attempts per request (botocore's
    resends included), short timeouts so a dead server fails fast."""
    return Config(
        retries={"mode": "standard", "max_attempts": max_attempts},
        connect_timeout=5,
        read_timeout=30,
        max_pool_connections=64,
    )


@dataclass(frozen=True)
class FaultRates:
    """The probability of each fault kind for one request (their sum is at most 1)."""

    lost_response: float = 0.0
    throttle: float = 0.0
    server_error: float = 0.0
    connect_error: float = 0.0

    def __post_init__(self) -> None:
        if sum(self.as_dict().values()) > 1:
            raise ValueError("fault rates add up to more than 1")

    def as_dict(self) -> dict[str, float]:
        return {kind: float(getattr(self, kind)) for kind in FAULT_KINDS}

    @classmethod
    def only(cls, kind: str, rate: float) -> FaultRates:
        return cls(**{kind: rate})


@dataclass
class FaultInjector:
    """Injects faults into the clients it is attached to and counts them.

    Thread-safe; one injector may serve many clients. ``operations`` limits injection
    to those request types, ``limit`` to that many faults in all. Disable with
    ``enabled = False`` (requests are still metered).
    """

    rates: FaultRates
    seed: int = 0
    operations: frozenset[str] = frozenset(OPERATIONS)
    enabled: bool = True
    limit: int | None = None
    injected: Counter[str] = field(default_factory=Counter)
    by_operation: Counter[tuple[str, str]] = field(default_factory=Counter)
    sent: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._random = random.Random(self.seed)
        self._local = threading.local()
        self._session = URLLib3Session(timeout=30, max_pool_connections=64)
        self._throttle_codes = ("ProvisionedThroughputExceededException", "ThrottlingException")

    def attach(self, client: Any) -> Any:
        """Inject into ``client``'s requests from now on; returns the client."""
        client.meta.events.register("before-send.dynamodb", self._before_send)
        return client

    def requests_on_this_thread(self) -> int:
        """How many requests clients of this injector have sent from the calling thread."""
        return int(getattr(self._local, "count", 0))

    def _draw(self, operation: str) -> str | None:
        with self._lock:
            self.sent[operation] += 1
            if not self.enabled or operation not in self.operations:
                return None
            if self.limit is not None and sum(self.injected.values()) >= self.limit:
                return None
            roll = self._random.random()
            for kind, rate in self.rates.as_dict().items():
                if roll < rate:
                    self.injected[kind] += 1
                    self.by_operation[(kind, operation)] += 1
                    return kind
                roll -= rate
            return None

    def _before_send(self, request: AWSPreparedRequest, event_name: str, **_: Any) -> AWSResponse | None:
        self._local.count = self.requests_on_this_thread() + 1
        operation = event_name.rsplit(".", 1)[-1]
        kind = self._draw(operation)
        if kind is None:
            return None
        if kind == "lost_response":
            response = self._session.send(request)
            response.content  # noqa: B018 - read it all: the server has answered
            raise ConnectionClosedError(endpoint_url=request.url)
        if kind == "connect_error":
            raise EndpointConnectionError(endpoint_url=request.url)
        if kind == "throttle":
            with self._lock:
                code = self._throttle_codes[self.injected["throttle"] % 2]
            return _error_response(request.url, 400, code, "Rate of requests exceeds the allowed throughput.")
        return _error_response(request.url, 500, "InternalServerError", "Internal server error")

    def total(self) -> int:
        with self._lock:
            return sum(self.injected.values())

    def close(self) -> None:
        self._session.close()


def _error_response(url: str, status: int, code: str, message: str) -> AWSResponse:
    """An HTTP error response as DynamoDB's JSON protocol writes it."""
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message}).encode()
    headers = HTTPHeaders()
    headers["Content-Type"] = "application/x-amz-json-1.0"
    headers["Content-Length"] = str(len(body))
    raw = urllib3.HTTPResponse(
        body=io.BytesIO(body), headers=dict(headers), status=status, preload_content=False
    )
    return AWSResponse(url, status, headers, raw)
