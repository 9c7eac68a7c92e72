"""Fault injection on a real boto3 DynamoDB client, through botocore's event hooks.

A :class:`FaultInjector` registers on ``before-send.dynamodb`` of each client it is
attached to, so it sees every HTTP request the client sends (botocore's own resends
included) and, at the configured rates, makes one fail the way a network or DynamoDB
does:

``lost_response``
    the request is sent to the server for real (a separate urllib3 session) and the
    server applies it; then the response is dropped and ``ConnectionClosedError`` raised,
    as when a connection dies after the request went out. botocore resends it, unless
    the library sent it once (a write that tests a chain's deadline: resend.py).
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

:class:`UnprocessedKeys` works one step later, on ``after-call.dynamodb.BatchGetItem``:
the request was served for real, and it moves some keys of the answer into
``UnprocessedKeys``, as DynamoDB does when a call exceeds 16 MB or its throughput.

Seeds come from :func:`stable_seed` (CRC-32, not ``hash()``, which changes with
``PYTHONHASHSEED``), so a failing run is replayed with ``XOR_ACK_SEED=<seed>``.
"""

from __future__ import annotations

import copy
import io
import json
import math
import os
import random
import threading
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import urllib3
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.config import Config
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError
from botocore.httpsession import URLLib3Session

__all__ = ["FAULT_KINDS", "FaultRates", "FaultInjector", "UnprocessedKeys", "client_config", "stable_seed"]

FAULT_KINDS = ("lost_response", "throttle", "server_error", "connect_error")

#: Every request type the library sends (see docs/iam-policy.json): PutItem for create and
#: for an xor stamp's conditional write of the whole item, UpdateItem for fail, touch and
#: a sum-mode stamp.
OPERATIONS = ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem")


def stable_seed(name: str) -> int:
    """The seed of a scenario: ``$XOR_ACK_SEED`` if set (to replay a failed run), else
    a CRC-32 of ``name``, the same in every process and every run."""
    override = os.environ.get("XOR_ACK_SEED")
    return int(override) if override else zlib.crc32(name.encode()) & 0xFFFF


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
    to those request types, ``limit`` to that many faults in all. ``script`` names the
    first faults, in order (one per request of those types), before the rates apply.
    Disable with ``enabled = False`` (requests are still metered).
    """

    rates: FaultRates
    seed: int = 0
    operations: frozenset[str] = frozenset(OPERATIONS)
    enabled: bool = True
    limit: int | None = None
    script: tuple[str, ...] = ()
    injected: Counter[str] = field(default_factory=Counter)
    by_operation: Counter[tuple[str, str]] = field(default_factory=Counter)
    sent: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._random = random.Random(self.seed)
        self._local = threading.local()
        self._session = URLLib3Session(timeout=30, max_pool_connections=64)
        self._throttle_codes = ("ProvisionedThroughputExceededException", "ThrottlingException")
        self._script = list(self.script)
        if unknown := set(self._script) - set(FAULT_KINDS):
            raise ValueError(f"unknown fault kinds {unknown}")

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
            if self._script:
                kind = self._script.pop(0)
                self.injected[kind] += 1
                self.by_operation[(kind, operation)] += 1
                return kind
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


@dataclass
class UnprocessedKeys:
    """Leaves keys of real BatchGetItem answers unprocessed, as DynamoDB does.

    For each of the first ``times`` answers (all if None) of the clients it is attached
    to, a seeded random ``fraction`` of the keys asked for (at least one) is moved to
    ``UnprocessedKeys``: their items, if any, are taken out of ``Responses``. What each
    request asked for and what was left is kept in ``asked`` and ``left`` (keys as
    JSON), so a test can check that exactly the leftovers were asked for again.
    """

    fraction: float = 0.5
    times: int | None = None
    seed: int = 0
    asked: list[set[str]] = field(default_factory=list)
    left: list[set[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._random = random.Random(self.seed)

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-parameter-build.dynamodb.BatchGetItem", self._remember)
        client.meta.events.register("after-call.dynamodb.BatchGetItem", self._leave_some)
        return client

    @staticmethod
    def _remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["xor_ack_asked"] = copy.deepcopy(params["RequestItems"])

    def _leave_some(
        self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        if http_response.status_code >= 300:
            return
        asked = context["xor_ack_asked"]
        with self._lock:
            self.asked.append({_as_json(k) for request in asked.values() for k in request["Keys"]})
            if self.times is not None and len(self.left) >= self.times:
                return
            left: set[str] = set()
            unprocessed: dict[str, Any] = {}
            for table, request in asked.items():
                keys = request["Keys"]
                chosen = self._random.sample(keys, max(1, math.ceil(self.fraction * len(keys))))
                names = list(keys[0])
                chosen_json = {_as_json(k) for k in chosen}
                items = parsed.get("Responses", {}).get(table, [])
                parsed.setdefault("Responses", {})[table] = [
                    item for item in items if _as_json({n: item[n] for n in names}) not in chosen_json
                ]
                already = parsed.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
                chosen += [k for k in already if _as_json(k) not in chosen_json]
                unprocessed[table] = {**request, "Keys": chosen}
                left |= {_as_json(k) for k in chosen}
            parsed["UnprocessedKeys"] = unprocessed
            self.left.append(left)


def _as_json(key: dict[str, Any]) -> str:
    """A key as a comparable string (String and Number keys, as the library uses)."""
    return json.dumps(key, sort_keys=True)
