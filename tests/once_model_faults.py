"""Scripted faults for the model-based tests (test_once_model.py: the serverless layer;
test_tracker_model.py: the tracker's own calls), and what else their machines share (the
retry policy, the clients, :class:`Violation`). Faults come one at a time, armed by the
state machine for a chosen request, through botocore's own event hooks on the real
clients the pipeline uses.

A fault waits for the ``skip + 1``-th request of its operations from the moment it is
armed, then acts on it. One fault per call: botocore's later attempts of a call a fault
hit meet no other armed fault (an ``_every_attempt`` fault follows them itself; a call is
named by its ``amz-sdk-invocation-id`` header, the same on every attempt, as botocore
builds a new request for each).

``lost``
    the request is sent to the server for real (the server applies it), then the
    response is lost: ``ReadTimeoutError``. botocore's retry handler decides, as in
    production, to send it again (a lost ``SendMessageBatch`` response: SQS holds two
    copies of every message in it, each with a receive count of 1).
``lost_every_attempt``
    the same for every attempt botocore makes of that request: the caller gets
    botocore's last error after the first attempt was applied.
``throttle``
    an HTTP 400 ``ProvisionedThroughputExceededException``; nothing applied; botocore
    retries.
``throttle_every_attempt``
    the same for every attempt: the throttle outlasts botocore's attempts.
``crash``
    :class:`Crash` is raised before the request goes out: the function dies there (a
    Lambda timeout, an out-of-memory kill). It derives from ``BaseException``, so no
    ``except Exception`` in the library catches it: nothing after that point runs.
``interleave``
    another container's work (the fault's ``action``: a delivery through a second
    pipeline) runs to its end just before the request goes out, then the request goes:
    two Lambdas racing, the other one's writes landing between two of this one's.

Only HTTP endpoints (a moto server, DynamoDB Local) are served: a fault sends its
request itself with a urllib3 session, as :mod:`reliability.faults` does, so it can
never reach AWS. ``fired`` lists what each fault hit, for the machine's statistics.
aiobotocore clients are served too (``attach(client, aio=True)``): aiobotocore emits the
same ``before-send`` event (a lost response is the same ``ReadTimeoutError``), and a
throttle is answered as an aiobotocore response.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ReadTimeoutError
from botocore.httpsession import URLLib3Session
from reliability.faults import _error_response

from xor_ack_dynamodb.retry import RetryPolicy
from xor_ack_dynamodb.stores.dynamodb.clients import aws_client
from xor_ack_dynamodb.testing.endpoint import LOCAL_KEY_ID, LOCAL_REGION, LOCAL_SECRET

__all__ = [
    "FAULTS",
    "POLICY",
    "READS",
    "SENDS",
    "WRITES",
    "Crash",
    "Fault",
    "Network",
    "Violation",
    "model_client",
    "what_it_hit",
]

#: No wait between the library's own attempts (the faults are single events, and the
#: machine's clock is its own); botocore's waits are skipped too (conftest's
#: ``instant_retries``). Long timeouts: on a loaded machine a local server can take
#: seconds to answer, and an unscripted timeout would be a fault the model does not know of.
POLICY = RetryPolicy(
    max_attempts=20,
    max_seconds=600,
    initial_wait=0.0,
    max_wait=0.0,
    http_attempts=3,
    connect_timeout=30,
    read_timeout=120,
)


class Violation(AssertionError):
    """A documented promise the run broke."""


def model_client(service: str, endpoint: str) -> Any:
    """A client of ``service`` at the local ``endpoint``, with :data:`POLICY`."""
    return aws_client(
        service,
        region=LOCAL_REGION,
        endpoint_url=endpoint,
        aws_access_key_id=LOCAL_KEY_ID,
        aws_secret_access_key=LOCAL_SECRET,
        retry=POLICY,
    )

FAULTS = ("lost", "lost_every_attempt", "throttle", "throttle_every_attempt", "crash", "interleave")

#: DynamoDB's write operations: a stamp, a create, a history block, a trim, a chain's
#: completion (the ``acked`` item its last stamp writes), the completion's claim and
#: mark, a fail.
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
SENDS = frozenset({"SendMessage", "SendMessageBatch"})
#: DynamoDB's reads: a stamp's read of the chain, a batch's, a history lookup.
READS = frozenset({"GetItem", "BatchGetItem", "Query"})


class Crash(BaseException):
    """The function died at this point: nothing after it runs (not an ``Exception``,
    so no handler of the library's catches it)."""


@dataclass
class Fault:
    kind: str
    operations: frozenset[str]
    skip: int = 0
    hits: str = ""  # only requests whose :func:`what_it_hit` name contains this
    action: Callable[[], object] | None = None  # ``interleave``: what runs first


@dataclass
class Network:
    """The faults armed on the clients it is attached to (see the module doc)."""

    armed: list[Fault] = field(default_factory=list)
    fired: list[str] = field(default_factory=list)
    #: ``*_every_attempt`` faults: the call they hit (botocore builds a new request for
    #: each attempt of a call; its ``amz-sdk-invocation-id`` header names the call).
    _sticky: list[tuple[object, str]] = field(default_factory=list)
    #: Calls a fault hit: one fault per call (its sticky one on its later attempts).
    _hit: list[object] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._session = URLLib3Session(timeout=30)

    def attach(self, client: Any, aio: bool = False) -> Any:
        endpoint = client.meta.endpoint_url or ""
        if not endpoint.startswith("http://127.0.0.1"):
            raise ValueError(f"faults are injected on local HTTP endpoints only, not {endpoint!r}")
        client.meta.events.register(
            f"before-send.{client.meta.service_model.service_id.hyphenize()}",
            self._send_aio if aio else self._send,
        )
        return client

    def arm(
        self,
        kind: str,
        operations: frozenset[str],
        skip: int = 0,
        hits: str = "",
        action: Callable[[], object] | None = None,
    ) -> None:
        if kind not in FAULTS or (kind == "interleave") != (action is not None):
            raise ValueError(f"unknown fault {kind!r}, or an action without an interleave")
        self.armed.append(Fault(kind, operations, skip, hits, action))

    def disarm(self) -> None:
        self.armed.clear()
        self._sticky.clear()
        self._hit.clear()

    def fired_count(self) -> int:
        return len(self.fired)

    def _choose(self, request: AWSPreparedRequest, operation: str) -> Fault | None:
        call = _call(request)
        for held, kind in self._sticky:
            if held == call:
                return Fault(kind, frozenset())
        if call in self._hit:
            return None  # botocore's resend of a call a fault hit: one fault per call
        for fault in self.armed:
            name = what_it_hit(operation, request)
            if operation not in fault.operations or fault.hits not in name:
                continue
            if fault.skip > 0:
                fault.skip -= 1
                continue
            self.armed.remove(fault)
            self._hit.append(call)
            if fault.kind.endswith("_every_attempt"):
                self._sticky.append((call, fault.kind))
            self.fired.append(f"{fault.kind} {what_it_hit(operation, request)}")
            return fault
        return None

    def _send_aio(self, request: AWSPreparedRequest, event_name: str, **_: Any) -> Any:
        """:meth:`_send` for an aiobotocore client: its throttle an aiobotocore response."""
        response = self._send(request, event_name)
        if response is None:
            return None
        from aiobotocore.awsrequest import AioAWSResponse  # the async leg's venv alone has it

        return AioAWSResponse(response.url, response.status_code, response.headers, _AioRaw(response.content))

    def _send(self, request: AWSPreparedRequest, event_name: str, **_: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        fault = self._choose(request, operation)
        if fault is None:
            return None
        kind = fault.kind
        if kind == "interleave":
            assert fault.action is not None
            fault.action()
            return None
        if kind == "crash":
            raise Crash(f"the function died before {operation}")
        if kind.startswith("lost"):
            response = self._session.send(request)
            response.content  # noqa: B018 - read it all: the server has answered
            raise ReadTimeoutError(endpoint_url=request.url)
        return _error_response(
            request.url,
            400,
            "ProvisionedThroughputExceededException",
            "Rate of requests exceeds the allowed throughput.",
        )

    def close(self) -> None:
        self._session.close()


class _AioRaw:
    """An aiobotocore response's body."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    async def read(self) -> bytes:
        return self._body


def _call(request: AWSPreparedRequest) -> object:
    """What every attempt botocore makes of one call shares: its invocation id (the
    request itself when there is none)."""
    value = request.headers.get("amz-sdk-invocation-id")
    if value is None:
        return request
    return value.decode() if isinstance(value, bytes) else str(value)


def what_it_hit(operation: str, request: AWSPreparedRequest) -> str:
    """A name for the request a fault hit (statistics only): which of the library's
    writes it was, read from the request as DynamoDB would."""
    if operation in SENDS:
        return operation
    try:
        body = json.loads(request.body or b"{}")
    except (TypeError, ValueError):
        return operation
    key = body.get("Key") or body.get("Item") or {}
    tag = next((v.get("S", "") for v in key.values() if isinstance(v, dict)), "")
    names = " ".join(str(v) for v in (body.get("ExpressionAttributeNames") or {}).values())
    expression = f"{body.get('UpdateExpression', '')} {names}"
    if tag.startswith("\x00xa/"):
        return f"{operation} history"
    if operation == "PutItem" and (body.get("Item") or {}).get("state") == {"S": "acked"}:
        return f"{operation} complete"  # a stamp's completion write: its ADD took the sum to zero
    if "cmpl" in expression:
        return f"{operation} {'claim' if ':claimed' in expression else 'mark/release'}"
    values = json.dumps(body.get("ExpressionAttributeValues", {}))
    if '"failed"' in values:
        return f"{operation} fail"
    if "REMOVE" in expression and "#ops[" in expression:
        return f"{operation} trim"
    return f"{operation} stamp/create"
