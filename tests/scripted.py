"""Scripted faults on a real boto3 client: exactly which request fails, and how.

:class:`Script` hooks ``before-send`` of one client (botocore's own resends included) and,
for the requests of one operation that a test arms, does one of:

* ``lose``: send the request to the server for real (a separate HTTP session; the server
  applies it), optionally run a side effect (another writer acting right after), then drop
  the response and raise ``ConnectionClosedError``, as when a connection dies after the
  request went out. botocore resends it, unless the library sent it once (a write that
  tests a chain's deadline: stores/dynamodb/resend.py); then the library's retry decides.
* ``fail``: answer with a real HTTP 500 ``InternalServerError``; nothing is applied.
* ``throttle``: a real HTTP 400 ``ProvisionedThroughputExceededException``; nothing applied.
* ``refuse``: ``EndpointConnectionError`` before anything is sent.
* ``before``: run a side effect, then send the request as usual.

The library sees exactly what botocore gives it; nothing inside it is mocked.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError
from botocore.httpsession import URLLib3Session

__all__ = ["Script"]


@dataclass
class _Step:
    operation: str
    action: str  # lose | fail | before
    effect: Callable[[], Any] | None


class _Raw:
    """A minimal urllib3-like raw body for an AWSResponse."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_: Any, **__: Any) -> Any:
        yield self._body


class Script:
    """Faults for the next requests of ``client``, in the order armed."""

    def __init__(self, client: Any) -> None:
        self._http = URLLib3Session()
        self._steps: deque[_Step] = deque()
        self.sent: list[str] = []
        client.meta.events.register("before-send.dynamodb", self._before_send)

    # ``operation`` may name several, as "PutItem|UpdateItem".

    def lose(self, operation: str, after: Callable[[], Any] | None = None) -> Script:
        """The next ``operation`` is applied by the server and its response lost;
        ``after`` runs between the two."""
        self._steps.append(_Step(operation, "lose", after))
        return self

    def fail(self, operation: str, times: int = 1, after: Callable[[], Any] | None = None) -> Script:
        """The next ``times`` ``operation`` requests get an HTTP 500 (not applied);
        ``after`` runs once, after the first of them."""
        for i in range(times):
            self._steps.append(_Step(operation, "fail", after if i == 0 else None))
        return self

    def throttle(self, operation: str, times: int = 1) -> Script:
        """The next ``times`` ``operation`` requests get an HTTP 400
        ``ProvisionedThroughputExceededException`` (not applied)."""
        self._steps.extend(_Step(operation, "throttle", None) for _ in range(times))
        return self

    def refuse(self, operation: str, times: int = 1) -> Script:
        """The next ``times`` ``operation`` requests fail to connect (nothing sent)."""
        self._steps.extend(_Step(operation, "refuse", None) for _ in range(times))
        return self

    def before(self, operation: str, effect: Callable[[], Any]) -> Script:
        """Run ``effect`` just before the next ``operation`` is sent."""
        self._steps.append(_Step(operation, "before", effect))
        return self

    @property
    def pending(self) -> int:
        return len(self._steps)

    def _before_send(self, request: Any, **_: Any) -> Any:
        step = self._next(request)
        return None if step is None else self._act(step, request)

    def _next(self, request: Any) -> _Step | None:
        """The armed step for ``request`` (taken off the script), or None."""
        operation = request.headers.get("X-Amz-Target", b"")
        operation = (operation.decode() if isinstance(operation, bytes) else operation).rsplit(".", 1)[-1]
        self.sent.append(operation)
        if not self._steps or operation not in self._steps[0].operation.split("|"):
            return None
        return self._steps.popleft()

    def _act(self, step: _Step, request: Any) -> Any:
        if step.action == "before":
            assert step.effect is not None
            step.effect()
            return None
        if step.action == "refuse":
            raise EndpointConnectionError(endpoint_url=request.url)
        if step.action in ("fail", "throttle"):
            if step.effect is not None:
                step.effect()
            status, code = (500, "InternalServerError")
            if step.action == "throttle":
                status, code = (400, "ProvisionedThroughputExceededException")
            body = json.dumps(
                {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": "injected"}
            ).encode()
            headers = HTTPHeaders()
            headers["Content-Type"] = "application/x-amz-json-1.0"
            return self._response(request.url, status, headers, body)
        self._http.send(request)
        if step.effect is not None:
            step.effect()
        raise ConnectionClosedError(endpoint_url=request.url)

    def _response(self, url: str, status: int, headers: HTTPHeaders, body: bytes) -> Any:
        return AWSResponse(url, status, headers, _Raw(body))
