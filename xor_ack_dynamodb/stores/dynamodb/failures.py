"""botocore's failures below the service's answers (no connection, a lost response, an
answer that is not an AWS error), as :class:`~xor_ack_dynamodb.errors.RequestFailed`
subclasses that say whether the request may have been applied (docs/guarantees.md,
"Errors"). :func:`install` makes a client the library builds raise them once botocore's
resends are spent; on a client passed in, the store calls :func:`typed_failure`.
"""

from __future__ import annotations

import functools
import re
import socket
from difflib import get_close_matches
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import (
    BotoCoreError,
    ChecksumError,
    ClientError,
    ConnectionError,
    ConnectTimeoutError,
    HTTPClientError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
)

from ...errors import (
    AccessDenied,
    BadResponse,
    ConnectTimeout,
    EndpointUnreachable,
    InvalidConfig,
    ReadTimeout,
    RequestFailed,
    ResponseLost,
    UnknownRegion,
    XorAckError,
)

#: The handlers' unique id: installing twice is a no-op.
HANDLER_ID = "xor_ack_dynamodb.typed-failures"


def install(client: Any) -> Any:
    """Make ``client`` (boto3 or aiobotocore) raise the typed errors of this module
    instead of botocore's, for every operation; returns ``client``. Idempotent."""
    events = client.meta.events
    events.register("after-call-error", _after_call_error(client), unique_id=HANDLER_ID + ".error")
    events.register("after-call", _after_call(client), unique_id=HANDLER_ID + ".answer")
    return client


def _after_call_error(client: Any) -> Any:
    def handler(exception: BaseException | None = None, event_name: str = "", **_: Any) -> None:
        typed = typed_failure(exception, client, _operation(event_name))
        if typed is not None:
            raise typed from exception

    return handler


def _after_call(client: Any) -> Any:
    def handler(http_response: Any = None, parsed: Any = None, event_name: str = "", **_: Any) -> None:
        status = int(getattr(http_response, "status_code", 0) or 0)
        if status >= 300 and isinstance(parsed, dict):
            original = ClientError(parsed, _operation(event_name))  # type: ignore[arg-type]  # what botocore raises next
            typed = typed_failure(original, client, original.operation_name)
            if typed is not None:
                raise typed from original

    return handler


def _operation(event_name: str) -> str:
    return event_name.rsplit(".", 1)[-1] if event_name else "?"


def typed_failure(exc: BaseException | None, client: Any, operation: str) -> XorAckError | None:
    """The typed error for ``exc``, raised by ``client`` sending ``operation``, or None
    when ``exc`` is not a failure below the service's answers (a service error, or an
    error already typed)."""
    if exc is None or isinstance(exc, XorAckError):
        return None
    where, names = request_names(client, operation, getattr(exc, "kwargs", {}).get("endpoint_url"))
    if isinstance(exc, ClientError):
        return _bad_response(exc, where, names, client.meta.service_model.signing_name)
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return InvalidConfig(
            f"{exc} for {operation} on {where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "or AWS_PROFILE, or pass aws_access_key_id= and aws_secret_access_key= (for a local "
            "endpoint any two values do)"
        )
    if not isinstance(exc, BotoCoreError):
        return None
    if isinstance(exc, ConnectTimeoutError):
        return ConnectTimeout(
            f"connecting to {where} for {operation} timed out; the request was not sent: {exc}", **names
        )
    if isinstance(exc, ConnectionError):
        unknown = check_region(names["region"], names["endpoint"])
        if unknown is not None:
            return unknown
        return EndpointUnreachable(
            f"cannot reach {where} for {operation}; the request was not sent: {exc}", **names
        )
    if isinstance(exc, ReadTimeoutError):
        return ReadTimeout(
            f"{where} did not answer {operation} within the read timeout; it may or may not "
            f"have been applied: {exc}",
            **names,
        )
    if isinstance(exc, (HTTPClientError, ChecksumError)):
        return ResponseLost(
            f"the response of {where} to {operation} was lost; it may or may not have been applied: {exc}",
            **names,
        )
    return None


def request_names(client: Any, operation: str, endpoint: str | None = None) -> tuple[str, dict[str, Any]]:
    """How a typed error names a request of ``client``: "<service> at <endpoint> (region
    <region>)", and the :class:`RequestFailed` keywords (``endpoint``: the one botocore
    reports having used, else the client's)."""
    meta = client.meta
    service = str(meta.service_model.service_id)
    endpoint = str(endpoint or meta.endpoint_url)
    where = f"{service} at {endpoint} (region {meta.region_name})"
    return where, {
        "service": service,
        "operation": operation,
        "region": meta.region_name,
        "endpoint": endpoint,
    }


def _bad_response(exc: ClientError, where: str, names: dict[str, Any], prefix: str) -> RequestFailed | None:
    """:class:`AccessDenied` for IAM's refusal (``prefix``: the IAM action prefix);
    :class:`BadResponse` for a status of 300 and up whose body held no AWS error
    (botocore then gives the status as the code); None for the service's own errors."""
    meta = exc.response.get("ResponseMetadata", {})
    status = int(meta.get("HTTPStatusCode") or 0)
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    if code == "AccessDeniedException":
        operation = names["operation"]
        role = _OPERATOR.get(operation, "the policy of the role that sends it")
        return AccessDenied(
            f"{where} refused {operation}: the caller's IAM identity is not allowed "
            f"{prefix}:{operation} ({error.get('Message')}); it is granted by {role} "
            "(docs/security.md); nothing was applied",
            **names,
        )
    if status < 300 or not code.isdigit():
        return None
    kind = meta.get("HTTPHeaders", {}).get("content-type") or "no content type"
    body = " ".join(str(error.get("Message", "")).split())
    snippet = body[:60] + ("..." if len(body) > 60 else "")
    return BadResponse(
        f"{where} answered {names['operation']} with HTTP {status} ({kind}) and no AWS error "
        f"in its body ({snippet!r}): is this endpoint {names['service']}, serving region "
        f"{names['region']}?",
        **names,
    )


def check_region(region: str | None, endpoint: str) -> UnknownRegion | None:
    """:class:`UnknownRegion` for a region botocore does not know that is a typo, else
    None: one close to a known region and not a new number of a known area
    (``eu-wst-1``, not ``eu-west-9``), or any other unknown one whose ``endpoint``'s host
    name does not exist."""
    if not region or region in known_regions():
        return None
    known = sorted(known_regions())
    close = get_close_matches(region, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    check = "check region=, AWS_REGION, AWS_DEFAULT_REGION and your AWS profile"
    if not _new_region_of_known_area(region) and get_close_matches(region, known, n=1, cutoff=0.85):
        return UnknownRegion(
            f"region {region!r} is not one botocore knows{hint} (endpoint {endpoint}): {check}"
        )
    host = urlsplit(endpoint).hostname
    if not host:
        return None
    try:
        socket.getaddrinfo(host, None)
        return None  # it resolves
    except socket.gaierror as exc:
        if exc.errno not in _NO_SUCH_NAME:
            return None
    except OSError:
        return None
    return UnknownRegion(
        f"region {region!r} is not one botocore knows{hint} and the endpoint {endpoint} "
        f"does not resolve: {check}"
    )


_REGION_SHAPE = re.compile(r"^([a-z]{2}(?:-[a-z]+)*-[a-z]+)-\d+$")


def _new_region_of_known_area(region: str) -> bool:
    """Whether ``region`` reads as a region newer than botocore's data: the shape of
    AWS's region names, in an area botocore knows (``eu-west`` of ``eu-west-9``)."""
    shape = _REGION_SHAPE.match(region)
    return shape is not None and shape.group(1) in {known.rsplit("-", 1)[0] for known in known_regions()}


#: The requests only an operator sends (``xor-ack list``, ``scan_unfinished``,
#: ``xor-ack migrate``, table administration), and the policy that grants each.
_OPERATOR = {
    "Scan": "the operator's policy (docs/iam-policy-operator.json), never a worker's or a tenant's",
    "CreateTable": "the table administrator's statement (docs/iam-policy.json, XorAckTableAdmin)",
    "UpdateTable": "the table administrator's statement (docs/iam-policy.json, XorAckTableAdmin)",
    "UpdateTimeToLive": "the table administrator's statement (docs/iam-policy.json, XorAckTableAdmin)",
}

_NO_SUCH_NAME = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


@functools.cache
def known_regions() -> frozenset[str]:
    """Every region named in botocore's endpoint and partition data."""
    from botocore.loaders import Loader

    loader = Loader()
    regions: set[str] = set()
    for data in ("endpoints", "partitions"):
        for partition in loader.load_data(data).get("partitions", []):
            regions.update(partition.get("regions", {}))
    return frozenset(regions)
