"""Creating and checking the chains table through an aiobotocore client: the steps of
:func:`xor_ack_dynamodb.stores.dynamodb.table.create_table`, awaited, with the same checks and errors."""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import ClientError

from ..errors import InvalidConfig, TableNotFound, TableSchemaMismatch
from ..stores.dynamodb.table import missing_table_message, table_key

__all__ = ["create_table", "describe"]

log = logging.getLogger("xor_ack_dynamodb")


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


async def describe(client: Any, table: str) -> dict[str, Any]:
    """DescribeTable, with a missing table raised as :class:`TableNotFound`."""
    try:
        response = await client.describe_table(TableName=table)
    except ClientError as exc:
        if _code(exc) == "ResourceNotFoundException":
            raise TableNotFound(missing_table_message(table)) from exc
        raise
    return response["Table"]  # type: ignore[no-any-return]


async def create_table(
    client: Any, table: str, partition_key: str, ttl_attribute: str, *, wait: bool = True
) -> bool:
    """:func:`xor_ack_dynamodb.stores.dynamodb.table.create_table` on an aiobotocore client: returns True
    if it created the table, False if it existed with that key (TTL then enabled if it was
    not). Raises :class:`TableSchemaMismatch` for another key schema,
    :class:`InvalidConfig` for TTL on another attribute."""
    created = True
    try:
        await client.create_table(
            TableName=table,
            AttributeDefinitions=[{"AttributeName": partition_key, "AttributeType": "S"}],
            KeySchema=[{"AttributeName": partition_key, "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        log.info("created table %s", table)
    except ClientError as exc:
        if _code(exc) != "ResourceInUseException":
            raise
        created = False
    if wait:
        waiter = client.get_waiter("table_exists")
        await waiter.wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 300})
    key = table_key(await describe(client, table))
    if key != (partition_key, "S"):
        raise TableSchemaMismatch(
            f"table {table!r} exists with key schema {key!r}, not a String partition key "
            f"named {partition_key!r}"
        )
    await _ensure_ttl(client, table, ttl_attribute)
    return created


async def _ensure_ttl(client: Any, table: str, ttl_attribute: str) -> None:
    ttl = (await client.describe_time_to_live(TableName=table)).get("TimeToLiveDescription", {})
    if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
        if ttl.get("AttributeName") != ttl_attribute:
            raise InvalidConfig(
                f"table {table!r} has TTL on {ttl.get('AttributeName')!r}, not {ttl_attribute!r}"
            )
        return
    try:
        await client.update_time_to_live(
            TableName=table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute},
        )
    except ClientError as exc:
        if _code(exc) != "UnknownOperationException":  # dynalite has no TTL API
            raise
        log.warning("this endpoint does not support TTL: old chains of %s are never collected", table)
        return
    log.info("enabled TTL on %s.%s", table, ttl_attribute)
