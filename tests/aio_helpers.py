"""Driving asyncio trackers from synchronous test code.

:class:`LoopThread` is an event loop running in a thread of its own; :class:`Blocking`
shows an asyncio object to synchronous code, running each coroutine its methods return
to completion on that loop. The contract suite drives the async tracker through it with
the very test bodies it runs on the sync trackers; threads that call at once become
concurrent tasks of the one loop, as in an asyncio service.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from xor_ack_dynamodb.stores.dynamodb.clients import client_settings, open_client

__all__ = ["LoopThread", "Blocking"]

T = TypeVar("T")

#: No call in a test should take longer; a hang fails the test instead of the session.
TIMEOUT = 120


class LoopThread:
    """An event loop in a daemon thread, with aiobotocore clients kept per endpoint."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="aio-loop", daemon=True)
        self._thread.start()
        self._clients: dict[str, tuple[Any, Any]] = {}

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on the loop and wait for its result (or exception)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(TIMEOUT)

    def client(self, endpoint_url: str) -> Any:
        """An aiobotocore DynamoDB client for ``endpoint_url``, made in this loop once."""
        if endpoint_url not in self._clients:
            settings = client_settings(
                region="us-east-1",
                endpoint_url=endpoint_url,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )
            context = open_client(settings)
            self._clients[endpoint_url] = (context, self.run(context.__aenter__()))
        return self._clients[endpoint_url][1]

    def close(self) -> None:
        for context, _ in self._clients.values():
            self.run(context.__aexit__(None, None, None))
        self._clients.clear()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class Blocking:
    """``target`` seen from synchronous code: a method whose result is awaitable returns
    what it awaits to (run on ``loop``); anything else passes through. Its ``store`` is
    shown the same way, for tests that reach into it."""

    _wrapped = ("store",)

    def __init__(self, target: Any, loop: LoopThread) -> None:
        self._target = target
        self._loop = loop

    @property
    def target(self) -> Any:
        return self._target

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name in self._wrapped:
            return Blocking(value, self._loop)
        if not callable(value) or isinstance(value, type):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            return self._loop.run(result) if inspect.isawaitable(result) else result

        return call

    def __repr__(self) -> str:
        return f"Blocking({self._target!r})"
