"""Creating and checking the chains table (aiobotocore; the boto3 twin is generated)."""

from __future__ import annotations

import logging
from typing import Any

import tenacity
from botocore.exceptions import ClientError

from ....errors import InvalidConfig, TableNotFound
from ..answers import checked
from ..codec import STREAM, check_key, error_code, missing_table_message, stream_missing, table_request

log = logging.getLogger("xor_ack_dynamodb")


#: How long :func:`create_table` waits for a new table to become ACTIVE, polling every second.
ACTIVE_WITHIN = 300.0


async def describe(client: Any, table: str) -> dict[str, Any]:
    """DescribeTable, with a missing table raised as :class:`TableNotFound` and an
    answer that is not DynamoDB's as :class:`~xor_ack_dynamodb.errors.BadResponse`."""
    request = {"TableName": table}
    try:
        response = await client.describe_table(**request)
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFoundException":
            raise TableNotFound(missing_table_message(table)) from exc
        raise
    return checked(client, "DescribeTable", request, response)["Table"]  # type: ignore[no-any-return]


async def _until_active(client: Any, table: str) -> dict[str, Any]:
    """Its description once ACTIVE; :class:`TableNotFound` if not after :data:`ACTIVE_WITHIN`."""
    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_result(lambda d: d.get("TableStatus") != "ACTIVE")
        | tenacity.retry_if_exception_type(TableNotFound),
        wait=tenacity.wait_fixed(1),
        stop=tenacity.stop_after_delay(ACTIVE_WITHIN),
        reraise=True,
    )
    try:
        return await retrying(describe, client, table)
    except tenacity.RetryError as exc:
        status = exc.last_attempt.result().get("TableStatus")
        raise TableNotFound(
            f"table {table!r} is still {status}, not ACTIVE, {ACTIVE_WITHIN:.0f} s after it was created"
        ) from None


async def create_table(
    client: Any,
    table: str,
    partition_key: str,
    ttl_attribute: str,
    *,
    wait: bool = True,
    stream: bool = False,
) -> bool:
    """Create the table on ``client``, keyed by ``partition_key``, TTL on ``ttl_attribute``:
    :meth:`~xor_ack_dynamodb.XorAckDynamoDB.create_table` (its result and errors)."""
    created = True
    request = table_request(table, partition_key, stream)
    try:
        checked(client, "CreateTable", request, await client.create_table(**request))
        log.info("created table %s", table)
    except ClientError as exc:
        if error_code(exc) != "ResourceInUseException":
            raise
        created = False
    description = await _until_active(client, table) if wait else await describe(client, table)
    check_key(description, table, partition_key)
    await ensure_ttl(client, table, ttl_attribute)
    if stream and stream_missing(description, table, created):
        request = {"TableName": table, **STREAM}
        checked(client, "UpdateTable", request, await client.update_table(**request))
        log.info("enabled the stream of %s", table)
    return created


async def ensure_ttl(client: Any, table: str, ttl_attribute: str) -> None:
    """Enable TTL on ``ttl_attribute`` unless it is already enabled (or being enabled).

    Raises :class:`InvalidConfig` if TTL is enabled on another attribute: a table has
    one TTL attribute, and this library's expiry would then never be collected.
    """
    asked = {"TableName": table}
    response = await client.describe_time_to_live(**asked)
    ttl = checked(client, "DescribeTimeToLive", asked, response)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
        if ttl.get("AttributeName") != ttl_attribute:
            raise InvalidConfig(
                f"table {table!r} has TTL on {ttl.get('AttributeName')!r}, not {ttl_attribute!r}"
            )
        return
    request = {
        "TableName": table,
        "TimeToLiveSpecification": {"Enabled": True, "AttributeName": ttl_attribute},
    }
    try:
        checked(client, "UpdateTimeToLive", request, await client.update_time_to_live(**request))
    except ClientError as exc:
        # dynalite has none: expiry is decided on every read and condition all the same
        if error_code(exc) != "UnknownOperationException":
            raise
        log.warning("this endpoint does not support TTL: old chains of %s are never collected", table)
        return
    log.info("enabled TTL on %s.%s", table, ttl_attribute)
