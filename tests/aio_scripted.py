""":class:`scripted.Script` for aiobotocore clients, plus holds for cancelling a task at
an exact point of a request.

aiobotocore emits the same ``before-send`` event as botocore (and awaits handlers that
are coroutines), so the faults are injected on the same real request path: ``lose``
sends the request to the server for real and raises ``ConnectionClosedError`` (aiobotocore
resends it, unless the library sent it once: stores/dynamodb/resend.py), ``fail``
answers a real HTTP 500 (an aiobotocore response), ``before`` runs a side effect.
``hold`` parks the request's task until it is cancelled, either before the request is
sent (``sent=False``: nothing applied) or after the server applied it (``sent=True``:
as a response lost to a cancellation).
"""

from __future__ import annotations

import asyncio
from typing import Any

from botocore.compat import HTTPHeaders
from scripted import Script, _Step

__all__ = ["AsyncScript"]


class _AsyncRaw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    async def read(self) -> bytes:
        return self._body


class AsyncScript(Script):
    """Faults for the next requests of an aiobotocore ``client``, in the order armed."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.holding = asyncio.Event()  # set once a request is parked

    def hold(self, operation: str, *, sent: bool) -> AsyncScript:
        """Park the next ``operation`` until its task is cancelled; with ``sent`` the
        server applies it first."""
        self._steps.append(_Step(operation, "hold-sent" if sent else "hold", None))
        return self

    async def _before_send(self, request: Any, **_: Any) -> Any:  # type: ignore[override]
        step = self._next(request)
        if step is None:
            return None
        if step.action.startswith("hold"):
            if step.action == "hold-sent":
                self._http.send(request)
            self.holding.set()
            await asyncio.Event().wait()  # until cancelled
        return self._act(step, request)

    def _response(self, url: str, status: int, headers: HTTPHeaders, body: bytes) -> Any:
        from aiobotocore.awsrequest import AioAWSResponse  # the async leg's venv alone has it

        return AioAWSResponse(url, status, headers, _AsyncRaw(body))
