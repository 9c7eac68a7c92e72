"""Pytest fixtures for code that uses xor-ack-dynamodb (a pytest plugin).

Registered through the ``pytest11`` entry point: with ``xor-ack-dynamodb`` and
``moto[server]`` installed, ``xor_ack``, ``xor_ack_factory``, ``memory_ack``,
``xor_ack_server``, ``xor_ack_config``, ``async_xor_ack``, ``async_xor_ack_factory`` and
``async_memory_ack`` need no import and no conftest (override ``xor_ack_table_name`` or
``xor_ack_partition_key`` to change the table). Requests are atomic, as on DynamoDB:
for a test's duration moto's in-process request handling is serialized for every
client made in the test, in any thread, and ``xor_ack_server`` serializes its requests.
The async fixtures need the ``async`` extra and pytest-asyncio (or another plugin that
runs async fixtures). moto is imported only when a fixture needs it. See docs/testing.md
(the fixtures' table; "Threads: the fixtures are atomic, as DynamoDB is").
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pytest

from ..stores.memory import MemoryAck
from .endpoint import LOCAL_REGION

if TYPE_CHECKING:
    from ..aio import AsyncMemoryAck, AsyncXorAckDynamoDB
    from ..config import AckConfig
    from ..stores.dynamodb.tracker import XorAckDynamoDB
    from .moto_server import MotoServer

__all__ = [
    "xor_ack",
    "xor_ack_factory",
    "memory_ack",
    "xor_ack_server",
    "xor_ack_config",
    "xor_ack_table_name",
    "xor_ack_partition_key",
    "async_xor_ack",
    "async_xor_ack_factory",
    "async_memory_ack",
]


_F = TypeVar("_F", bound=Callable[..., Any])


def _async_fixture(function: _F) -> _F:
    """Declare an async fixture with pytest-asyncio's ``fixture`` (its strict mode runs
    only the async fixtures declared with it), or pytest's own where another plugin runs
    async fixtures."""
    try:
        import pytest_asyncio
    except ImportError:
        return cast(_F, pytest.fixture(function))
    return cast(_F, pytest_asyncio.fixture(function))


_tables = itertools.count()


def _more(tracker: Any) -> Callable[..., Any]:
    """A builder of more trackers of ``tracker``'s class on its table and client (pass
    ``client=`` for another), with other options."""

    def make(**options: Any) -> Any:
        options.setdefault("client", tracker.client)
        return type(tracker)(tracker.table, tracker.partition_key, **options)

    return make


def _fake_aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and a region for one test; no endpoint or profile from the
    developer's shell can send a request to a real account."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.setenv(name, LOCAL_REGION)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def xor_ack_table_name() -> str:
    """The name of the table ``xor_ack`` creates (unique per test)."""
    return f"xor-ack-test-{os.getpid()}-{next(_tables)}"


@pytest.fixture
def xor_ack_partition_key() -> str:
    """The partition key of the tables the fixtures create."""
    return "tagID"


@contextlib.contextmanager
def _atomic_moto_requests() -> Iterator[None]:
    """Serialize moto's in-process request handling while the block runs.

    Every in-process request, from any boto3 client (moto adds one ``before-send``
    handler, ``moto.core.models.botocore_stubber``, to botocore's built-in handlers, so
    each client made while moto is imported has it) and from ``requests`` (moto's
    ``responses`` callback), is answered by that one object's ``process_request``. moto
    checks a ConditionExpression and then applies the update with no lock: two threads
    can both pass one condition and one write is lost (measured: 8 threads stamping one
    chain ended it pending; 54 "successful" conditional increments left a counter at
    38). DynamoDB makes each request atomic; one lock around ``process_request`` does
    the same. It is reentrant, for a moto backend that calls another service in the same
    thread.
    """
    from moto.core.models import botocore_stubber

    lock = threading.RLock()
    attributes = vars(botocore_stubber)  # an instance attribute shadows the method
    before = attributes.get("process_request")
    handle = botocore_stubber.process_request

    def serialized(request: Any) -> Any:
        with lock:
            return handle(request)

    attributes["process_request"] = serialized
    try:
        yield
    finally:
        if before is None:
            del attributes["process_request"]
        else:
            attributes["process_request"] = before


@pytest.fixture
def xor_ack(
    monkeypatch: pytest.MonkeyPatch, xor_ack_table_name: str, xor_ack_partition_key: str
) -> Iterator[XorAckDynamoDB]:
    """A tracker on a fresh table in moto's in-process DynamoDB (``mock_aws``), whose
    requests (from every client made in the test, in any thread) are atomic as on
    DynamoDB."""
    from moto import mock_aws

    from ..stores.dynamodb.clients import dynamodb_client
    from ..stores.dynamodb.tracker import XorAckDynamoDB

    _fake_aws_env(monkeypatch)
    with mock_aws(), _atomic_moto_requests():
        client = dynamodb_client(region=LOCAL_REGION)
        tracker = XorAckDynamoDB(xor_ack_table_name, xor_ack_partition_key, client=client)
        tracker.create_table()
        yield tracker


@pytest.fixture
def xor_ack_factory(xor_ack: XorAckDynamoDB) -> Callable[..., XorAckDynamoDB]:
    """Build more trackers on ``xor_ack``'s table and client, with other options (each
    with its own cache; pass ``client=`` for another client). Atomic under threads, as
    ``xor_ack`` is."""
    return _more(xor_ack)


@pytest.fixture
def memory_ack() -> MemoryAck:
    """An in-memory tracker with the same rules as ``XorAckDynamoDB``."""
    return MemoryAck()


@pytest.fixture(scope="session")
def xor_ack_server() -> Iterator[MotoServer]:
    """A moto server on 127.0.0.1 for the session (DynamoDB over real HTTP)."""
    from .moto_server import MotoServer

    with MotoServer() as server:
        yield server


@pytest.fixture
def xor_ack_config(
    monkeypatch: pytest.MonkeyPatch,
    xor_ack_server: MotoServer,
    xor_ack_table_name: str,
    xor_ack_partition_key: str,
) -> AckConfig:
    """A picklable config for a fresh, created table on ``xor_ack_server``. For the
    test's duration the environment holds fake credentials and no ``AWS_PROFILE`` (nor
    endpoint variable), as for ``xor_ack``: a profile of the developer's shell would
    otherwise be read, and fail, by every client built from the config."""
    _fake_aws_env(monkeypatch)
    config = xor_ack_server.config(xor_ack_table_name, partition_key=xor_ack_partition_key)
    from ..stores.dynamodb.tracker import XorAckDynamoDB

    XorAckDynamoDB.from_config(config).create_table()
    return config


@_async_fixture
async def async_xor_ack(
    monkeypatch: pytest.MonkeyPatch,
    xor_ack_server: MotoServer,
    xor_ack_table_name: str,
    xor_ack_partition_key: str,
) -> AsyncIterator[AsyncXorAckDynamoDB]:
    """An asyncio tracker on a fresh table of ``xor_ack_server``, with its own
    aiobotocore client (made in the test's loop, closed after the test); the
    environment as for ``xor_ack_config``."""
    _fake_aws_env(monkeypatch)
    from ..aio import AsyncXorAckDynamoDB

    config = xor_ack_server.config(xor_ack_table_name, partition_key=xor_ack_partition_key)
    async with AsyncXorAckDynamoDB.from_config(config) as tracker:
        await tracker.create_table()
        yield tracker


@pytest.fixture
def async_xor_ack_factory(async_xor_ack: AsyncXorAckDynamoDB) -> Callable[..., AsyncXorAckDynamoDB]:
    """Build more asyncio trackers on ``async_xor_ack``'s table and client, with other
    options (``clock=``, ``ttl=``, ``mode=``, ...)."""
    return _more(async_xor_ack)


@pytest.fixture
def async_memory_ack() -> AsyncMemoryAck:
    """An in-memory asyncio tracker with the same rules as ``XorAckDynamoDB``."""
    from ..aio import AsyncMemoryAck

    return AsyncMemoryAck()
