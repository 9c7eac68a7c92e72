"""The clients the library builds: region and endpoint from the environment (AWS_REGION
honoured, a missing region a typed error), and timeouts sized to the retry budget so that
one call against a dead endpoint ends near ``max_seconds``.

Measured on the code before this module (botocore 1.44 defaults: 60 s connect, 60 s read,
4 attempts a DynamoDB request): a ``status()`` under ``RetryPolicy(max_seconds=3)`` took
240.3 s against an endpoint that accepts and never answers, 3.1 s against one that refuses.
"""

from __future__ import annotations

import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tenacity
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

from xor_ack_dynamodb import AckConfig, LocalDynamoDB, RetryPolicy, XorAckDynamoDB, errors, new_stamp
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.stores.dynamodb.clients import (
    NO_REGION_MESSAGE,
    client_config,
    client_for,
    dynamodb_client,
)


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No region, endpoint or profile anywhere: not in the environment, not in a config
    file (botocore is pointed at files that do not exist)."""
    for name in (
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_DYNAMODB",
        "AWS_MAX_ATTEMPTS",
        "AWS_RETRY_MODE",
        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    return monkeypatch


def shows_alone(error: BaseException) -> bool:
    """True if no other exception (botocore's) is shown behind ``error`` in a traceback."""
    return error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


# -- region ---------------------------------------------------------------------------


def test_aws_region_alone_sets_the_region(bare_env: pytest.MonkeyPatch) -> None:
    """botocore 1.44 ignores AWS_REGION (measured: NoRegionError with only it set); the
    library's clients honour it."""
    bare_env.setenv("AWS_REGION", "eu-west-3")
    assert dynamodb_client().meta.region_name == "eu-west-3"
    assert client_for(AckConfig("acks")).meta.region_name == "eu-west-3"
    assert XorAckDynamoDB.from_config(AckConfig("acks")).client.meta.region_name == "eu-west-3"


def test_region_order(bare_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Explicit region, then AWS_REGION, then AWS_DEFAULT_REGION, then the profile."""
    config = tmp_path / "config"
    config.write_text("[default]\nregion = sa-east-1\n")
    bare_env.setenv("AWS_CONFIG_FILE", str(config))
    assert dynamodb_client().meta.region_name == "sa-east-1"
    bare_env.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert dynamodb_client().meta.region_name == "us-west-2"
    bare_env.setenv("AWS_REGION", "eu-west-3")
    assert dynamodb_client().meta.region_name == "eu-west-3"
    assert dynamodb_client(region="ap-south-1").meta.region_name == "ap-south-1"
    assert client_for(AckConfig("acks", region="ap-south-1")).meta.region_name == "ap-south-1"
    bare_env.setenv("AWS_REGION", "")  # set but empty: as if unset
    assert dynamodb_client().meta.region_name == "us-west-2"


def test_tracker_without_a_client_honours_aws_region(bare_env: pytest.MonkeyPatch) -> None:
    bare_env.setenv("AWS_REGION", "eu-west-3")
    ack = XorAckDynamoDB("acks")
    assert ack.client.meta.region_name == "eu-west-3"
    assert ack.client.meta.config.read_timeout == RetryPolicy().timeouts()[1]


def test_no_region_anywhere_is_invalid_config(bare_env: pytest.MonkeyPatch) -> None:
    config = AckConfig("acks")
    for build in (dynamodb_client, lambda: client_for(config), lambda: XorAckDynamoDB.from_config(config)):
        with pytest.raises(InvalidConfig) as info:
            build()
        assert str(info.value) == NO_REGION_MESSAGE
        assert "AWS_REGION" in str(info.value) and "region=" in str(info.value)
        # No botocore NoRegionError chained behind it.
        assert shows_alone(info.value)


def test_no_region_reads_as_one_error_in_a_traceback(tmp_path: Path) -> None:
    """What a user sees: the typed error and how to fix it, no botocore traceback."""
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
    }
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            "from xor_ack_dynamodb import AckConfig, XorAckDynamoDB; "
            "XorAckDynamoDB.from_config(AckConfig('acks'))",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert f"xor_ack_dynamodb.errors.InvalidConfig: {NO_REGION_MESSAGE}" in run.stderr
    assert "NoRegionError" not in run.stderr and "During handling" not in run.stderr
    assert run.stderr.count("Traceback") == 1


# -- endpoint -------------------------------------------------------------------------


def test_endpoint_from_the_environment(bare_env: pytest.MonkeyPatch, moto_server: LocalDynamoDB) -> None:
    """As botocore does: endpoint_url=, then AWS_ENDPOINT_URL_DYNAMODB, then
    AWS_ENDPOINT_URL; and requests really go there."""
    assert moto_server.endpoint_url is not None
    bare_env.setenv("AWS_REGION", "us-east-1")
    assert dynamodb_client().meta.endpoint_url == "https://dynamodb.us-east-1.amazonaws.com"
    bare_env.setenv("AWS_ENDPOINT_URL", moto_server.endpoint_url)
    client = dynamodb_client(aws_access_key_id="testing", aws_secret_access_key="testing")
    assert client.meta.endpoint_url == moto_server.endpoint_url
    assert isinstance(client.list_tables()["TableNames"], list)  # answered by the moto server
    bare_env.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:9")
    assert dynamodb_client().meta.endpoint_url == "http://127.0.0.1:9"
    assert client_for(AckConfig("acks")).meta.endpoint_url == "http://127.0.0.1:9"
    explicit = client_for(AckConfig("acks", endpoint_url="http://127.0.0.1:8"))
    assert explicit.meta.endpoint_url == "http://127.0.0.1:8"


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (dict(region="eu west 1"), "eu west 1"),
        (dict(region="us-east-1", endpoint_url="localhost:8000"), "Invalid endpoint: localhost:8000"),
        (dict(region="us-east-1", aws_access_key_id="AKIA"), "both aws_access_key_id"),
        (dict(region="us-east-1", aws_secret_access_key="s"), "both aws_access_key_id"),
    ],
)
def test_bad_client_settings_are_invalid_config(
    bare_env: pytest.MonkeyPatch, options: dict[str, Any], says: str
) -> None:
    with pytest.raises(InvalidConfig, match=says) as info:
        dynamodb_client(**options)
    assert shows_alone(info.value)


def test_missing_profile_is_invalid_config(bare_env: pytest.MonkeyPatch) -> None:
    bare_env.setenv("AWS_PROFILE", "nowhere")
    with pytest.raises(InvalidConfig, match="nowhere"):
        dynamodb_client(region="us-east-1")


# -- timeouts and retries -------------------------------------------------------------


def test_client_config_follows_the_retry_policy(bare_env: pytest.MonkeyPatch) -> None:
    from botocore.validate import ParamValidationDecorator

    bare_env.setenv("AWS_REGION", "us-east-1")
    # The environment cannot stretch a call: these are overridden.
    bare_env.setenv("AWS_MAX_ATTEMPTS", "10")
    bare_env.setenv("AWS_RETRY_MODE", "legacy")
    client = dynamodb_client()
    default = client.meta.config
    # botocore's parameter check is off (the library checks its input itself).
    assert not isinstance(client._serializer, ParamValidationDecorator)
    assert (default.connect_timeout, default.read_timeout) == (5.0, 5.0)
    assert default.retries == {"mode": "standard", "total_max_attempts": 3}
    short = dynamodb_client(retry=RetryPolicy(max_seconds=3)).meta.config
    assert (short.connect_timeout, short.read_timeout) == (0.5, 0.5)
    mid = client_config(RetryPolicy(max_seconds=12, http_attempts=2))
    assert (mid.connect_timeout, mid.read_timeout) == (1.5, 1.5)
    given = RetryPolicy(connect_timeout=1.0, read_timeout=2.5, http_attempts=1)
    chosen = client_for(AckConfig("acks", retry=given)).meta.config
    assert (chosen.connect_timeout, chosen.read_timeout) == (1.0, 2.5)
    assert chosen.retries == {"mode": "standard", "total_max_attempts": 1}
    merged = dynamodb_client(config=Config(max_pool_connections=64)).meta.config
    assert (merged.max_pool_connections, merged.read_timeout) == (64, 5.0)


def test_retry_policy_http_fields() -> None:
    policy = RetryPolicy(max_seconds=2.0, connect_timeout=0.2, read_timeout=1.5, http_attempts=2)
    assert pickle.loads(pickle.dumps(policy)) == policy
    assert policy.timeouts() == (0.2, 1.5)
    assert RetryPolicy(max_seconds=1000).timeouts() == (5.0, 5.0)
    for bad in (
        dict(connect_timeout=0),
        dict(read_timeout=-1.0),
        dict(read_timeout=float("inf")),
        dict(read_timeout="5"),
        dict(http_attempts=0),
        dict(http_attempts=2.0),
        dict(max_seconds=float("nan")),
        dict(max_attempts=1.5),
        dict(http_attempts=True),
    ):
        with pytest.raises(InvalidConfig):
            RetryPolicy(**bad)  # type: ignore[arg-type]


def test_no_attempt_starts_that_would_end_past_the_deadline() -> None:
    """Attempts of 0.3 s under a 1 s budget: the old stop (budget checked after each
    attempt) started a fourth at 0.9 s and ended at 1.2 s; now none starts later than one
    attempt's length before the deadline."""
    starts: list[float] = []
    policy = RetryPolicy(max_seconds=1.0, initial_wait=0.0, max_wait=0.0)

    def slow() -> None:
        starts.append(time.monotonic())
        time.sleep(0.3)
        raise KeyError("transient")

    with pytest.raises(tenacity.RetryError):
        policy.retrying(tenacity.retry_if_exception_type(KeyError))(slow)
    offsets = [start - starts[0] for start in starts]
    assert 2 <= len(offsets) <= 3, offsets
    assert all(offset + 0.3 <= 1.0 + 0.05 for offset in offsets), offsets


def test_quick_attempts_keep_the_whole_budget() -> None:
    """Lost races cost milliseconds: the deadline estimate leaves them (almost) all of
    max_seconds."""
    calls: list[float] = []
    #: Where each retry was planned to start, in seconds since the first attempt: the
    #: stop's own inputs, so the bound is checked without the OS's sleep overshoot (a
    #: 2 ms sleep on a busy machine may take several).
    planned: list[float] = []
    policy = RetryPolicy(max_attempts=10**6, max_seconds=0.5, initial_wait=0.001, max_wait=0.002)

    def race() -> None:
        calls.append(time.monotonic())
        raise KeyError("lost")

    def before_sleep(state: tenacity.RetryCallState) -> None:
        assert state.seconds_since_start is not None and state.upcoming_sleep is not None
        planned.append(state.seconds_since_start + state.upcoming_sleep)

    retrying = policy.retrying(tenacity.retry_if_exception_type(KeyError)).copy(before_sleep=before_sleep)
    with pytest.raises(tenacity.RetryError):
        retrying(race)
    assert len(planned) == len(calls) - 1 > 100
    assert max(planned) < 0.5
    assert calls[-1] - calls[0] >= 0.4


# -- the deadline against dead endpoints ----------------------------------------------


class HangingServer:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._socket.getsockname()[1]
        self.accepted = 0
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:  # closed
                return
            self.accepted += 1
            self._held.append(connection)

    def close(self) -> None:
        self._socket.close()
        for connection in self._held:
            connection.close()


@pytest.fixture
def hanging() -> Iterator[HangingServer]:
    server = HangingServer()
    yield server
    server.close()


def refused_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (connections are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


BUDGET = RetryPolicy(max_seconds=3)
#: max_seconds plus one short (derived, 0.5 s) timeout, plus 1.5 s for a busy machine.
#: botocore's defaults (60 s per read) cannot end a single request under it.
BOUND = BUDGET.max_seconds + BUDGET.timeouts()[1] + 1.5


def dead_end_tracker(port: int) -> XorAckDynamoDB:
    return XorAckDynamoDB.from_config(
        AckConfig(
            "acks",
            endpoint_url=f"http://127.0.0.1:{port}",
            region="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            retry=BUDGET,
        )
    )


def test_a_call_to_a_hanging_endpoint_ends_near_its_budget(hanging: HangingServer) -> None:
    ack = dead_end_tracker(hanging.port)
    for call in (lambda: ack.status("file-1"), lambda: ack.stamp("file-1", new_stamp())):
        before = hanging.accepted
        started = time.monotonic()
        with pytest.raises(errors.ReadTimeout, match=f"127.0.0.1:{hanging.port}") as caught:
            call()
        assert isinstance(caught.value.__cause__, ReadTimeoutError)
        elapsed = time.monotonic() - started
        print(f"\nhanging endpoint: {elapsed:.2f} s, {hanging.accepted - before} connections")
        assert elapsed <= BOUND
        # botocore resent each request on a new connection, within the budget.
        assert hanging.accepted - before >= BUDGET.http_attempts


def test_a_call_to_a_refusing_endpoint_ends_near_its_budget() -> None:
    ack = dead_end_tracker(refused_port())
    started = time.monotonic()
    with pytest.raises(errors.EndpointUnreachable) as caught:
        ack.stamp("file-1", new_stamp())
    assert isinstance(caught.value.__cause__, EndpointConnectionError)
    elapsed = time.monotonic() - started
    print(f"\nrefusing endpoint: {elapsed:.2f} s, {ack.stats.events.get('retries', 0)} library retries")
    assert elapsed <= BOUND


def test_clients_share_one_model_loader_per_data_path(bare_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The library's clients share botocore's loader of service models (what a new
    session would parse again), one per data path, and boto3's data folder is on it once
    however many sessions were made on it."""
    import os

    from xor_ack_dynamodb.stores.dynamodb.clients import _models

    bare_env.setenv("AWS_REGION", "us-east-1")
    bare_env.delenv("AWS_DATA_PATH", raising=False)
    clients = [dynamodb_client() for _ in range(5)]
    assert len({id(c.meta.service_model) for c in clients}) == 5  # clients of their own
    paths = _models(None).search_paths
    boto3_data = [p for p in paths if p.endswith(os.path.join("boto3", "data"))]
    assert len(boto3_data) == 1 and len(paths) == len(set(paths))
    custom = tmp_path / "models"
    bare_env.setenv("AWS_DATA_PATH", str(custom))
    assert dynamodb_client().meta.service_model.service_name == "dynamodb"
    assert str(custom) in _models(str(custom)).search_paths and str(custom) not in paths
