"""What each backend of the ``client`` fixture does where they differ, pinned: the
table in docs/testing.md, and the reason some tests adapt to their backend. A backend
upgrade that changes one of these fails here first. (``scripts/backends.py`` measures
the rest: TTL sweeps, BatchGetItem's 16 MB, racing threads, requests per second.)"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import unique_table
from reliability import backends as probes

#: Where a backend departs from DynamoDB; every other backend behaves as DynamoDB does.
QUIRKS: dict[str, set[str]] = {
    "inproc": set(),
    "server": set(),
    "dynalite": {"no ALL_OLD", "no TTL API", "REMOVE of several list indexes"},
    "ddblocal": set(),
}


@pytest.fixture
def backend(request: pytest.FixtureRequest, client: Any) -> tuple[str, Any, str]:
    """(backend name, its client, a fresh table keyed by ``k``)."""
    name = request.node.callspec.params["client"]
    return name, client, probes.make_table(client, unique_table("probe"))


def test_all_old_on_a_failed_condition(backend: tuple[str, Any, str]) -> None:
    name, client, table = backend
    expected = "no ALL_OLD" not in QUIRKS[name]
    assert probes.all_old_on_failed_condition(client, table) == dict.fromkeys(
        ("PutItem", "UpdateItem", "DeleteItem"), expected
    )


def test_ttl_api(backend: tuple[str, Any, str]) -> None:
    name, client, table = backend
    expected = "UnknownOperationException" if "no TTL API" in QUIRKS[name] else "ok"
    assert probes.ttl_api(client, table) == expected


def test_number_add_is_exact_and_capacity_is_reported(backend: tuple[str, Any, str]) -> None:
    _, client, table = backend
    assert probes.add_big_number(client, table)
    assert probes.consumed_capacity(client, table)


def test_list_of_binary_operations(backend: tuple[str, Any, str]) -> None:
    """dynalite applies ``REMOVE ops[0], ops[1]`` one index after the other (removing
    the original [0] and [2]); DynamoDB removes by the indexes of the list as it was."""
    name, client, table = backend
    assert probes.binary_list_ops(client, table) == {
        "list_append": True,
        "contains": True,
        "remove_two": "REMOVE of several list indexes" not in QUIRKS[name],
    }
