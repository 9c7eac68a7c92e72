"""Security: the IAM policies match what the library sends; logs carry no secrets and no
stamps; stamps come from ``secrets``."""

from __future__ import annotations

import base64
import json
import logging
import random
import re
import secrets
from pathlib import Path
from typing import Any

import boto3
import pytest

import xor_ack_dynamodb
from xor_ack_dynamodb import LocalDynamoDB, RetryPolicy, new_stamp, xor

from .faults import FaultInjector, FaultRates, client_config
from .runner import TrackerFactory, make_trees, run_trees, unique_table

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(xor_ack_dynamodb.__file__).parent


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _data_operations() -> set[str]:
    """The item requests the library sends: every request the codec prepares
    (``Prepared("Operation", ...)``) or the store calls directly (``self.call("Operation",
    ...)``; the sync store is generated from the asyncio one)."""
    dynamodb = PACKAGE / "stores" / "dynamodb"
    source = (dynamodb / "codec.py").read_text() + (dynamodb / "_async" / "store.py").read_text()
    return set(re.findall(r'(?:Prepared|self\.call)\(\s*"(\w+)"', source))


def _actions(operations: set[str]) -> set[str]:
    """The IAM actions that authorise ``operations`` (a transaction's entries are
    authorised as the single writes they hold)."""
    return operations - {"TransactWriteItems"}


def _table_operations() -> set[str]:
    """The table requests ``create_table`` sends (``client.<method>(`` in the table
    helper; the sync one is generated from the asyncio one)."""
    source = (PACKAGE / "stores" / "dynamodb" / "_async" / "table.py").read_text()
    return {_camel(m) for m in re.findall(r"client\.(\w+)\(", source) if m != "get_waiter"} | {
        "DescribeTable"
    }


def _statements(name: str) -> dict[str, dict[str, Any]]:
    policy = json.loads((ROOT / "docs" / name).read_text())
    assert policy["Version"] == "2012-10-17"
    return {s["Sid"]: s for s in policy["Statement"]}


def test_policy_grants_exactly_what_the_library_sends() -> None:
    data = _data_operations()
    # PutItem: create, and an xor stamp's conditional write. No Scan, Query, batch writes.
    # TransactWriteItems (the batch calls) has no IAM action of its own: AWS authorises
    # each Put, Update and Delete in it as PutItem, UpdateItem and DeleteItem.
    assert data == {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem", "TransactWriteItems"}
    statements = _statements("iam-policy.json")
    assert set(statements["XorAckChains"]["Action"]) == {f"dynamodb:{op}" for op in _actions(data)}
    admin = {f"dynamodb:{op}" for op in _table_operations()}
    assert set(statements["XorAckTableAdmin"]["Action"]) == admin
    assert admin == {
        f"dynamodb:{op}"
        for op in ("CreateTable", "DescribeTable", "DescribeTimeToLive", "UpdateTimeToLive", "UpdateTable")
    }
    for statement in statements.values():
        assert statement["Effect"] == "Allow"
        assert (
            statement["Resource"] == "arn:aws:dynamodb:REGION:ACCOUNT_ID:table/TABLE_NAME"
        )  # one table, no *


def test_tenant_policy_limits_leading_keys_to_its_prefix() -> None:
    statements = _statements("iam-policy-tenant.json")
    (statement,) = statements.values()
    assert set(statement["Action"]) == {f"dynamodb:{op}" for op in _actions(_data_operations())}
    assert statement["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["TENANT_PREFIX/*"]}
    }
    assert "*" not in str(statement["Resource"])


def test_logs_carry_no_credentials_and_no_stamps(
    moto_server: LocalDynamoDB, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run with races, retries, faults, duplicates and typed errors, the library's
    logger at DEBUG: neither the key, the secret nor any stamp (hex, base64, raw) shows."""
    key_id, secret = "AKIAXORACKLOGTEST01", "xorAckLogTestSecret/0123456789abcdefGHIJ"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    injector = FaultInjector(FaultRates(0.1, 0.05, 0.1, 0.05), seed=5)
    factory = TrackerFactory(moto_server.endpoint_url or "", unique_table("logs"), injector, 2)
    # Credentials from the environment, as in production; botocore retries nothing, so
    # the library's own retry (and its logging) handles every fault.
    factory.client = lambda: injector.attach(  # type: ignore[method-assign]
        boto3.client(
            "dynamodb",
            endpoint_url=moto_server.endpoint_url,
            region_name="us-east-1",
            config=client_config(1),
        )
    )
    caplog.set_level(logging.DEBUG, logger="xor_ack_dynamodb")
    tracker = factory()
    tracker.create_table()
    trees = make_trees(6, random.Random(1), "logs")
    result, _ = run_trees(trees, factory, threads=4, batch=6, rng=random.Random(2))
    root = new_stamp()
    tracker.create("extra", root)
    with pytest.raises(xor_ack_dynamodb.errors.TagExists):
        tracker.create("extra", root)
    tight = factory(RetryPolicy(max_attempts=1))
    for _ in range(3):
        try:
            tight.stamp("extra", new_stamp())
        except Exception:  # noqa: BLE001, S110 - only the logs matter here
            pass
    tracker.fail("extra", "boom")
    assert result.errors == []

    records = [r for r in caplog.records if r.name.startswith("xor_ack_dynamodb")]
    text = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in records)
    # The log did record the run: stamps (PutItem), the fail (UpdateItem), retries.
    assert "retrying" in text and "PutItem" in text and "UpdateItem" in text
    assert key_id not in text and secret not in text
    values = [bytes(e) for t in trees for e in t.edges] + [
        bytes(t.stamp(n)) for t in trees for n in range(t.size)
    ]
    values.append(bytes(root))
    for value in values:
        for form in (value.hex(), base64.b64encode(value).decode(), repr(value)[2:-1]):
            assert form not in text


def test_stamps_come_from_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = secrets.token_bytes

    def recording(size: int) -> bytes:
        calls.append(size)
        return real(size)

    monkeypatch.setattr(secrets, "token_bytes", recording)  # the module stamps.py uses
    values = {bytes(new_stamp()) for _ in range(100)}
    assert len(values) == 100 and calls == [16] * 100
    assert len(new_stamp(32)) == 32 and calls[-1] == 32
    assert not xor(new_stamp(), new_stamp()).acked
    # No stamp or op id comes from the `random` module anywhere in the library.
    for path in PACKAGE.rglob("*.py"):
        assert not re.search(r"^\s*(import random|from random import)", path.read_text(), re.M), path
