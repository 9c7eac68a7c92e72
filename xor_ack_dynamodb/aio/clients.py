"""The aiobotocore clients the asyncio tracker builds: the same region, endpoint,
timeouts and botocore retries as :func:`xor_ack_dynamodb.stores.dynamodb.clients.dynamodb_client`.

An aiobotocore client can only be made inside a running event loop (``await``), while a
tracker is constructed synchronously; so the settings are resolved and checked when the
tracker is built (a missing region is an :class:`~xor_ack_dynamodb.errors.InvalidConfig`
then, before anything else happens) and the client is made on first use.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidConfig
from ..retry import RetryPolicy
from ..stores.dynamodb.clients import NO_REGION_MESSAGE, client_config

__all__ = ["ClientSettings", "client_settings", "open_client", "async_dynamodb_client"]


@dataclass(frozen=True)
class ClientSettings:
    """What to build a client with, already checked. ``config`` is an aiobotocore
    ``AioConfig``."""

    region: str
    endpoint_url: str | None
    config: Any
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)


def client_settings(
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
    retry: RetryPolicy | None = None,
    config: Any = None,
) -> ClientSettings:
    """Resolve and check a client's settings, in the order of
    :func:`~xor_ack_dynamodb.stores.dynamodb.clients.dynamodb_client`: region from ``region``,
    ``AWS_REGION``, then botocore's own order (``AWS_DEFAULT_REGION``, the profile);
    endpoint from ``endpoint_url``, else botocore's own order when the client is made
    (``AWS_ENDPOINT_URL_DYNAMODB``, ``AWS_ENDPOINT_URL``, the profile); timeouts and
    botocore retries from ``retry`` (see :func:`~xor_ack_dynamodb.stores.dynamodb.clients.client_config`),
    with ``config`` (a botocore or aiobotocore ``Config``) merged over them.

    Raises :class:`~xor_ack_dynamodb.errors.InvalidConfig` when no region is set anywhere,
    when the region or ``endpoint_url`` is not valid, when the profile named by
    ``AWS_PROFILE`` does not exist, or when only one of the two keys is given.
    """
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session
    from botocore.exceptions import InvalidRegionError, ProfileNotFound
    from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url, validate_region_name

    if (aws_access_key_id is None) != (aws_secret_access_key is None):
        raise InvalidConfig("give both aws_access_key_id and aws_secret_access_key, or neither")
    resolved = region or os.environ.get("AWS_REGION") or None
    if resolved is None:
        try:
            resolved = get_session().get_config_variable("region")
        except ProfileNotFound as exc:
            raise InvalidConfig(
                f"{exc} (set AWS_PROFILE to a profile in your AWS config, or unset it)"
            ) from None
    if not resolved:
        raise InvalidConfig(NO_REGION_MESSAGE)
    try:
        validate_region_name(resolved)
    except InvalidRegionError as exc:
        raise InvalidConfig(f"{exc} (check region=, AWS_REGION, AWS_DEFAULT_REGION)") from None
    if endpoint_url is not None and not (
        is_valid_endpoint_url(endpoint_url) or is_valid_ipv6_endpoint_url(endpoint_url)
    ):
        raise InvalidConfig(_bad_endpoint(f"Invalid endpoint: {endpoint_url}"))
    settings = AioConfig().merge(client_config(retry))
    if config is not None:
        settings = settings.merge(config)
    return ClientSettings(resolved, endpoint_url, settings, aws_access_key_id, aws_secret_access_key)


def _bad_endpoint(message: str) -> str:
    return (
        f"{message} (an endpoint is a URL such as http://127.0.0.1:8000; check endpoint_url=, "
        "AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL)"
    )


@asynccontextmanager
async def open_client(settings: ClientSettings) -> AsyncIterator[Any]:
    """An aiobotocore DynamoDB client for ``settings``, in a new session, closed on exit.
    Raises :class:`~xor_ack_dynamodb.errors.InvalidConfig` for an endpoint from the
    environment that is not valid."""
    from aiobotocore.session import get_session
    from botocore.exceptions import InvalidRegionError, NoRegionError

    try:
        context = get_session().create_client(
            "dynamodb",
            region_name=settings.region,
            endpoint_url=settings.endpoint_url,
            aws_access_key_id=settings.aws_access_key_id,
            aws_secret_access_key=settings.aws_secret_access_key,
            config=settings.config,
        )
        client = await context.__aenter__()
    except NoRegionError:
        raise InvalidConfig(NO_REGION_MESSAGE) from None
    except InvalidRegionError as exc:
        raise InvalidConfig(f"{exc} (check region=, AWS_REGION, AWS_DEFAULT_REGION)") from None
    except ValueError as exc:  # botocore's "Invalid endpoint: ..."
        raise InvalidConfig(_bad_endpoint(str(exc))) from None
    try:
        yield client
    finally:
        await context.__aexit__(None, None, None)


def async_dynamodb_client(
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
    retry: RetryPolicy | None = None,
    config: Any = None,
) -> Any:
    """An aiobotocore DynamoDB client as an async context manager
    (``async with async_dynamodb_client() as client:``), with the settings of
    :func:`client_settings` (checked now: raises
    :class:`~xor_ack_dynamodb.errors.InvalidConfig` as it does)."""
    return open_client(
        client_settings(
            region=region,
            endpoint_url=endpoint_url,
            aws_access_key_id=aws_access_key_id,
            aws_secret_access_key=aws_secret_access_key,
            retry=retry,
            config=config,
        )
    )
