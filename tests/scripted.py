"""Scripted faults on a real boto3 client: exactly which request fails, and how.

:class:`Script` hooks ``before-send`` of one client (botocore's own resends included) and,
for the requests of one operation that a test arms, does one of:

* ``lose``: send the request to the server for real (a separate HTTP session; the server
  applies it), optionally run a side effect (another writer acting right after), then drop
  the response and raise ``ConnectionClosedError``, as when a connection dies after the
  request went out. botocore resends it.
* ``fail``: answer with a real HTTP 500 ``InternalServerError``; nothing is applied.
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
from botocore.exceptions import ConnectionClosedError
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

    def before(self, operation: str, effect: Callable[[], Any]) -> Script:
        """Run ``effect`` just before the next ``operation`` is sent."""
        self._steps.append(_Step(operation, "before", effect))
        return self

    @property
    def pending(self) -> int:
        return len(self._steps)

    def _before_send(self, request: Any, **_: Any) -> Any:
        operation = request.headers.get("X-Amz-Target", b"")
        operation = (operation.decode() if isinstance(operation, bytes) else operation).rsplit(".", 1)[-1]
        self.sent.append(operation)
        if not self._steps or operation not in self._steps[0].operation.split("|"):
            return None
        step = self._steps.popleft()
        if step.action == "before":
            assert step.effect is not None
            step.effect()
            return None
        if step.action == "fail":
            if step.effect is not None:
                step.effect()
            body = json.dumps(
                {"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError", "message": "injected"}
            ).encode()
            headers = HTTPHeaders()
            headers["Content-Type"] = "application/x-amz-json-1.0"
            return AWSResponse(request.url, 500, headers, _Raw(body))
        self._http.send(request)
        if step.effect is not None:
            step.effect()
        raise ConnectionClosedError(endpoint_url=request.url)
