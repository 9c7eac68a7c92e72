"""The aiobotocore clients the asyncio tracker builds: the region, endpoint, timeouts and
botocore retries of the sync clients (``test_clients.py``), checked when the tracker is
built, the client made on first use."""

from __future__ import annotations

import asyncio
import time

import pytest
from botocore.exceptions import ReadTimeoutError
from test_clients import BOUND, BUDGET, HangingServer, bare_env, hanging, shows_alone

from xor_ack_dynamodb import RetryPolicy, errors
from xor_ack_dynamodb.aio import AsyncXorAckDynamoDB
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.stores.dynamodb.clients import NO_REGION_MESSAGE, client_settings

FIXTURES = (bare_env, hanging)  # the sync client tests' fixtures, used here too


def test_aws_region_alone_sets_the_region(bare_env: pytest.MonkeyPatch) -> None:
    bare_env.setenv("AWS_REGION", "eu-west-3")
    assert client_settings().region == "eu-west-3"
    bare_env.setenv("AWS_DEFAULT_REGION", "us-west-2")
    assert client_settings().region == "eu-west-3"  # AWS_REGION first, as AWS documents
    bare_env.delenv("AWS_REGION")
    assert client_settings().region == "us-west-2"
    assert client_settings(region="ap-south-1").region == "ap-south-1"


def test_no_region_anywhere_is_invalid_config_when_the_tracker_is_built(bare_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidConfig) as info:
        AsyncXorAckDynamoDB("acks")
    assert str(info.value) == NO_REGION_MESSAGE
    assert shows_alone(info.value)


@pytest.mark.parametrize(
    "options",
    [
        {"region": "not a region!"},
        {"endpoint_url": "not a url"},
        {"aws_access_key_id": "only-one"},
    ],
    ids=["bad-region", "bad-endpoint", "one-key"],
)
def test_bad_client_settings_are_invalid_config(
    bare_env: pytest.MonkeyPatch, options: dict[str, str]
) -> None:
    options.setdefault("region", "us-east-1")
    with pytest.raises(InvalidConfig):
        client_settings(**options)


def test_missing_profile_is_invalid_config(bare_env: pytest.MonkeyPatch) -> None:
    bare_env.setenv("AWS_PROFILE", "no-such-profile")
    with pytest.raises(InvalidConfig, match="no-such-profile"):
        client_settings()


def test_the_config_follows_the_retry_policy(bare_env: pytest.MonkeyPatch) -> None:
    bare_env.setenv("AWS_REGION", "us-east-1")
    bare_env.setenv("AWS_MAX_ATTEMPTS", "20")  # cannot stretch a call past its budget
    policy = RetryPolicy(max_seconds=6, http_attempts=2)
    config = client_settings(retry=policy).config
    assert (config.connect_timeout, config.read_timeout) == policy.timeouts() == (0.75, 0.75)
    assert config.retries == {"mode": "standard", "total_max_attempts": 2}
    assert type(config).__name__ == "AioConfig"

    async def made() -> None:
        async with AsyncXorAckDynamoDB("acks", retry=policy) as ack:
            built = (await ack.get_client()).meta.config
            assert (built.connect_timeout, built.read_timeout) == (0.75, 0.75)
            assert built.retries["total_max_attempts"] == 2

    asyncio.run(made())


def test_a_call_to_a_hanging_endpoint_ends_near_its_budget(hanging: HangingServer) -> None:
    settings = client_settings(
        region="us-east-1",
        endpoint_url=f"http://127.0.0.1:{hanging.port}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        retry=BUDGET,
    )

    async def call() -> float:
        async with AsyncXorAckDynamoDB("acks", client=settings, retry=BUDGET) as ack:
            started = time.monotonic()
            with pytest.raises(errors.ReadTimeout) as caught:
                await ack.status("file-1")
            assert isinstance(caught.value.__cause__, ReadTimeoutError)
            return time.monotonic() - started

    elapsed = asyncio.run(call())
    print(f"\nhanging endpoint, async: {elapsed:.2f} s, {hanging.accepted} connections")
    assert elapsed <= BOUND
    assert hanging.accepted >= BUDGET.http_attempts
