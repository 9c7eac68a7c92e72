"""Creating and checking the chains table."""

from __future__ import annotations

import logging
import re
from typing import Any

from botocore.exceptions import ClientError

from ...errors import InvalidConfig, TableNotFound, TableSchemaMismatch

__all__ = ["create_table", "check_table_name", "table_key", "ensure_ttl"]

log = logging.getLogger("xor_ack_dynamodb")

_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")


def check_table_name(table: object) -> str:
    """Return ``table`` if DynamoDB would accept it as a table name, else raise
    :class:`InvalidConfig` (3 to 255 characters of ``A-Z a-z 0-9 _ - .``)."""
    if not isinstance(table, str) or not _TABLE_NAME.match(table):
        raise InvalidConfig(
            f"table name {table!r} is not valid: DynamoDB takes 3 to 255 characters "
            "of letters, digits, '_', '-' and '.'"
        )
    return table


def table_key(description: dict[str, Any]) -> tuple[str, str] | None:
    """The (name, type) of a table's partition key when it has no sort key, else None."""
    schema = description.get("KeySchema", [])
    if len(schema) != 1 or schema[0].get("KeyType") != "HASH":
        return None
    name = schema[0]["AttributeName"]
    types = {a["AttributeName"]: a["AttributeType"] for a in description.get("AttributeDefinitions", [])}
    return name, types.get(name, "?")


def describe(client: Any, table: str) -> dict[str, Any]:
    """DescribeTable, with a missing table raised as :class:`TableNotFound`."""
    try:
        return client.describe_table(TableName=table)["Table"]  # type: ignore[no-any-return]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise TableNotFound(missing_table_message(table)) from exc
        raise


def missing_table_message(table: str) -> str:
    return (
        f"DynamoDB table {table!r} does not exist at this endpoint and region: create it "
        f"with XorAckDynamoDB(...).create_table() or `xor-ack table create --table {table}`"
    )


def create_table(
    client: Any, table: str, partition_key: str, ttl_attribute: str, *, wait: bool = True
) -> bool:
    """Create an on-demand table keyed by a String ``partition_key`` with TTL on
    ``ttl_attribute``. Returns True if it created the table, False if it already existed
    with that key (TTL is then enabled if it was not).

    Raises :class:`TableSchemaMismatch` if the table exists with another key schema.
    """
    created = True
    try:
        client.create_table(
            TableName=table,
            AttributeDefinitions=[{"AttributeName": partition_key, "AttributeType": "S"}],
            KeySchema=[{"AttributeName": partition_key, "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        log.info("created table %s", table)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":
            raise
        created = False
    if wait:
        client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 300})
    key = table_key(describe(client, table))
    if key != (partition_key, "S"):
        raise TableSchemaMismatch(
            f"table {table!r} exists with key schema {key!r}, not a String partition key "
            f"named {partition_key!r}"
        )
    ensure_ttl(client, table, ttl_attribute)
    return created


def ensure_ttl(client: Any, table: str, ttl_attribute: str) -> None:
    """Enable TTL on ``ttl_attribute`` unless it is already enabled (or being enabled).

    Raises :class:`InvalidConfig` if TTL is enabled on another attribute: a table has
    one TTL attribute, and this library's expiry would then never be collected.
    """
    ttl = client.describe_time_to_live(TableName=table).get("TimeToLiveDescription", {})
    status = ttl.get("TimeToLiveStatus")
    if status in ("ENABLED", "ENABLING"):
        if ttl.get("AttributeName") != ttl_attribute:
            raise InvalidConfig(
                f"table {table!r} has TTL on {ttl.get('AttributeName')!r}, not {ttl_attribute!r}"
            )
        return
    try:
        client.update_time_to_live(
            TableName=table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute},
        )
    except ClientError as exc:
        # Some local backends (dynalite) have no UpdateTimeToLive. Expiry is decided on
        # every read and in every condition, so chains still expire; only the garbage
        # collection of old items is missing there.
        if exc.response.get("Error", {}).get("Code") != "UnknownOperationException":
            raise
        log.warning("this endpoint does not support TTL: old chains of %s are never collected", table)
        return
    log.info("enabled TTL on %s.%s", table, ttl_attribute)
