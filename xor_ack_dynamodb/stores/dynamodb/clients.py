"""The clients the library builds itself (boto3, and aiobotocore for the asyncio
tracker; docs/concepts.md, "Clients"). An aiobotocore client can only be made inside a
running event loop: :func:`client_settings` checks its settings when the tracker is
built, and :func:`open_client` makes it on first use.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from ...config import AckConfig
from ...errors import InvalidConfig
from ...retry import RetryPolicy
from .failures import check_region, install

#: What :class:`~xor_ack_dynamodb.errors.InvalidConfig` says when no region is set anywhere.
NO_REGION_MESSAGE = (
    "no AWS region for the DynamoDB client: set AWS_REGION (for example "
    "`export AWS_REGION=us-east-1`) or AWS_DEFAULT_REGION, or `region = ...` in your AWS "
    "config profile, or pass it: AckConfig(region=...) or dynamodb_client(region=...)"
)


_ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL_DYNAMODB"


def _bad_endpoint(message: str, variable: str = _ENDPOINT_VARIABLE) -> str:
    return (
        f"{message} (an endpoint is a URL such as http://127.0.0.1:8000; check endpoint_url=, "
        f"{variable}, AWS_ENDPOINT_URL)"
    )


def _check_keys(aws_access_key_id: str | None, aws_secret_access_key: str | None) -> None:
    if (aws_access_key_id is None) != (aws_secret_access_key is None):
        raise InvalidConfig("give both aws_access_key_id and aws_secret_access_key, or neither")


@contextmanager
def _translated(message: str = NO_REGION_MESSAGE, variable: str = _ENDPOINT_VARIABLE) -> Iterator[None]:
    """botocore's configuration errors as :class:`InvalidConfig` saying what to fix,
    shown alone in a traceback (``message``: what a missing region says)."""
    from botocore.exceptions import InvalidRegionError, NoRegionError, ProfileNotFound

    try:
        yield
    except InvalidConfig:
        raise
    except ProfileNotFound as exc:
        raise InvalidConfig(f"{exc} (set AWS_PROFILE to a profile in your AWS config, or unset it)") from None
    except NoRegionError:  # a profile's region that is empty, say
        raise InvalidConfig(message) from None
    except InvalidRegionError as exc:
        raise InvalidConfig(f"{exc} (check region=, AWS_REGION, AWS_DEFAULT_REGION)") from None
    except ValueError as exc:  # botocore's "Invalid endpoint: ..."
        raise InvalidConfig(_bad_endpoint(str(exc), variable)) from None


def client_config(retry: RetryPolicy | None = None) -> Any:
    """The botocore ``Config`` the library's clients use for ``retry`` (default
    ``RetryPolicy()``): its timeouts and ``http_attempts``, set explicitly so that no
    environment variable or profile stretches a call past its budget (docs/concepts.md,
    "Clients"). botocore's own parameter check is off (its cost: docs/performance.md)."""
    from botocore.config import Config

    policy = retry if retry is not None else RetryPolicy()
    connect, read = policy.timeouts()
    return Config(
        connect_timeout=connect,
        read_timeout=read,
        retries={"mode": "standard", "total_max_attempts": policy.http_attempts},
        parameter_validation=False,
    )


class ClientOptions(TypedDict, total=False):
    """The keywords of every client builder here; see :func:`dynamodb_client`."""

    region: str | None
    endpoint_url: str | None
    aws_access_key_id: str | None
    aws_secret_access_key: str | None
    retry: RetryPolicy | None
    config: Any


def _options(config: AckConfig) -> ClientOptions:
    return ClientOptions(
        region=config.region,
        endpoint_url=config.endpoint_url,
        aws_access_key_id=config.aws_access_key_id,
        aws_secret_access_key=config.aws_secret_access_key,
        retry=config.retry,
    )


def dynamodb_client(**options: Unpack[ClientOptions]) -> Any:
    """A new low-level DynamoDB client, in a new boto3 session (sessions are not
    thread-safe; the client is): region, endpoint, credentials, timeouts and retries as
    docs/concepts.md, "Clients" says, ``config`` merged over them.

    Raises :class:`~xor_ack_dynamodb.errors.InvalidConfig`, before any request is sent,
    when no region is set anywhere, the region or endpoint is not valid, the profile
    named by ``AWS_PROFILE`` does not exist, or only one of the two keys is given; its
    subclass :class:`~xor_ack_dynamodb.errors.UnknownRegion` for an unknown region whose
    endpoint does not resolve. The client raises the library's typed errors
    (:mod:`.failures`) instead of botocore's transport errors, for every operation.
    """
    return aws_client("dynamodb", **options)


def aws_client(
    service: str,
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
    retry: RetryPolicy | None = None,
    config: Any = None,
) -> Any:
    """A new low-level boto3 client for ``service`` (``"dynamodb"``, ``"sqs"``, ``"s3"``,
    ``"events"``...), built and checked as :func:`dynamodb_client` describes, the endpoint
    variable being ``AWS_ENDPOINT_URL_<SERVICE>`` (e.g. ``AWS_ENDPOINT_URL_SQS``)."""
    import boto3
    import botocore.session
    from botocore.exceptions import UnknownServiceError

    _check_keys(aws_access_key_id, aws_secret_access_key)
    message = NO_REGION_MESSAGE if service == "dynamodb" else NO_REGION_MESSAGE.replace("DynamoDB", service)
    settings = client_config(retry)
    if config is not None:
        settings = settings.merge(config)
    with _translated(message, "AWS_ENDPOINT_URL_" + service.upper().replace("-", "_")):
        core = botocore.session.Session()
        core.register_component("data_loader", _models(core.get_config_variable("data_path")))
        session = boto3.session.Session(
            botocore_session=core,
            aws_access_key_id=aws_access_key_id,
            aws_secret_access_key=aws_secret_access_key,
            region_name=region or os.environ.get("AWS_REGION") or None,
        )
        if not session.region_name:
            raise InvalidConfig(message)
        try:
            client = session.client(service, endpoint_url=endpoint_url, config=settings)  # type: ignore[call-overload]
        except UnknownServiceError as exc:
            raise InvalidConfig(f"unknown AWS service {service!r}: {exc}") from None
    return typed_client(client)


def typed_client(client: Any) -> Any:
    """``client`` (boto3 or aiobotocore, any service), made to raise the library's typed
    errors instead of botocore's transport errors (:mod:`.failures`); returned. Raises
    :class:`~xor_ack_dynamodb.errors.UnknownRegion` first, nothing sent, for a region
    botocore does not know whose endpoint does not resolve. Every client this module
    builds goes through it; use it on a client you build yourself."""
    unknown = check_region(client.meta.region_name, client.meta.endpoint_url)
    if unknown is not None:
        raise unknown
    return install(client)


class _Paths(list[str]):
    """A loader's search paths: boto3 appends its own data folder once per session made
    on the loader; a path already there is not added again."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


@functools.cache
def _models(data_path: str | None) -> Any:
    """botocore's loader for ``data_path``, shared by the clients this module builds so
    that the service models are parsed once, not once per client."""
    from botocore.loaders import Loader

    paths = [os.path.expanduser(os.path.expandvars(p)) for p in (data_path or "").split(os.pathsep) if p]
    return Loader(extra_search_paths=_Paths(paths))


def client_for(config: AckConfig) -> Any:
    """A new boto3 DynamoDB client for ``config`` (a new session: sessions are not
    thread-safe, clients are), built by :func:`dynamodb_client` from its region,
    endpoint, keys and retry budget. Raises :class:`InvalidConfig` as that does."""
    return dynamodb_client(**_options(config))


# -- aiobotocore ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientSettings:
    """What to build an aiobotocore client with, already checked. ``config`` is an
    aiobotocore ``AioConfig``."""

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
    """Resolve and check an aiobotocore client's settings as :func:`dynamodb_client`
    describes (``config`` may also be an aiobotocore ``Config``); an endpoint from the
    environment is resolved when the client is made. Raises
    :class:`~xor_ack_dynamodb.errors.InvalidConfig` as :func:`dynamodb_client` does."""
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session
    from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url, validate_region_name

    _check_keys(aws_access_key_id, aws_secret_access_key)
    with _translated():
        resolved = region or os.environ.get("AWS_REGION") or get_session().get_config_variable("region")
        if not resolved:
            raise InvalidConfig(NO_REGION_MESSAGE)
        validate_region_name(resolved)
    if endpoint_url is not None and not (
        is_valid_endpoint_url(endpoint_url) or is_valid_ipv6_endpoint_url(endpoint_url)
    ):
        raise InvalidConfig(_bad_endpoint(f"Invalid endpoint: {endpoint_url}"))
    settings = AioConfig().merge(client_config(retry))
    if config is not None:
        settings = settings.merge(config)
    return ClientSettings(resolved, endpoint_url, settings, aws_access_key_id, aws_secret_access_key)


def settings_for(config: AckConfig) -> ClientSettings:
    """:func:`client_settings` for ``config``'s region, endpoint, keys and retry budget."""
    return client_settings(**_options(config))


@asynccontextmanager
async def open_client(settings: ClientSettings) -> AsyncIterator[Any]:
    """An aiobotocore DynamoDB client for ``settings``, in a new session, closed on exit.
    Raises :class:`~xor_ack_dynamodb.errors.InvalidConfig` for an endpoint from the
    environment that is not valid."""
    from aiobotocore.session import get_session

    with _translated():
        context = get_session().create_client(
            "dynamodb",
            region_name=settings.region,
            endpoint_url=settings.endpoint_url,
            aws_access_key_id=settings.aws_access_key_id,
            aws_secret_access_key=settings.aws_secret_access_key,
            config=settings.config,
        )
        client = await context.__aenter__()
    try:
        yield typed_client(client)
    finally:
        await context.__aexit__(None, None, None)


def async_dynamodb_client(**options: Unpack[ClientOptions]) -> Any:
    """An aiobotocore DynamoDB client as an async context manager
    (``async with async_dynamodb_client() as client:``), with the settings of
    :func:`client_settings` (checked now: raises
    :class:`~xor_ack_dynamodb.errors.InvalidConfig` as it does)."""
    return open_client(client_settings(**options))
