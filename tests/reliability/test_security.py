"""Security: every request the package can send is granted by the policy of the role
that sends it, and each policy grants no more than its role sends; the tenant policy
keeps a tenant to its own chains as IAM evaluates it; logs carry no secrets and no
stamps; stamps come from ``secrets``.

There is no IAM here: :mod:`.sends` reads the package's source for every request it can
send, and :mod:`.iam` evaluates the JSON of docs/ as IAM documents it, on requests the
library really makes (captured from botocore, on moto in-process)."""

from __future__ import annotations

import base64
import json
import logging
import random
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import boto3
import pytest

import xor_ack_dynamodb
from xor_ack_dynamodb import LocalDynamoDB, RetryPolicy, XorAckDynamoDB, new_stamp, xor
from xor_ack_dynamodb.serverless.replay import scan_unfinished
from xor_ack_dynamodb.stamps import RESERVED_PREFIX
from xor_ack_dynamodb.stores.dynamodb.migrate import migrate_table

from .faults import FaultInjector, FaultRates, client_config
from .iam import Request, allows, requests
from .runner import TrackerFactory, make_trees, run_trees, unique_table
from .sends import SERVICES, Send, client_services, dynamic_lookups, iam_actions, sends

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PACKAGE = Path(xor_ack_dynamodb.__file__).parent
TABLE = "arn:aws:dynamodb:REGION:ACCOUNT_ID:table/TABLE_NAME"
LEADING = "dynamodb:LeadingKeys"
STREAM_ACTIONS = frozenset(
    f"dynamodb:{a}" for a in ("DescribeStream", "GetRecords", "GetShardIterator", "ListStreams")
)

#: Each role: the statements (policy file, Sid; ``*`` every one) that make it up.
ROLES: dict[str, tuple[tuple[str, str], ...]] = {
    "chains": (("iam-policy.json", "XorAckChains"),),
    "table admin": (("iam-policy.json", "XorAckTableAdmin"),),
    "tenant": (("iam-policy-tenant.json", "*"),),
    "operator": (("iam-policy-operator.json", "*"),),
    "worker": tuple(
        ("iam-policy-serverless.json", sid)
        for sid in ("XorAckChains", "SendChildren", "ReadUploads", "WriteOutputs")
    ),
    "completion": tuple(
        ("iam-policy-serverless.json", sid)
        for sid in ("CompletionClaim", "ChainStream", "SendCompletions", "CompletionEvents")
    ),
    "queue poller": (("iam-policy-serverless.json", "EventSourceMapping"),),
    "stream poller": (
        ("iam-policy-serverless.json", "ChainStream"),
        ("iam-policy-operator.json", "XorAckTableRead"),
    ),
}
#: The roles whose policy must grant exactly what they send (the serverless policy also
#: grants what the user's handlers and Lambda itself do: it must hold the package's).
EXACT = ("chains", "table admin", "tenant", "operator")

#: Who sends what: (module, function) patterns, the first match wins, and the roles
#: that run that code. A send no pattern matches fails the test.
WHO_SENDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # Every tracker's data path: the codec prepares, the store sends by name.
    ("stores/dynamodb/codec.py", "*", ("chains", "tenant", "operator")),
    ("stores/dynamodb/_async/store.py", "*", ("chains", "tenant", "operator")),
    # create_table(); its describe() is also `xor-ack table describe`'s.
    ("stores/dynamodb/_async/table.py", "describe", ("table admin", "operator")),
    ("stores/dynamodb/_async/table.py", "*", ("table admin",)),
    # Whole-table reads (Scan) and the operator's commands.
    ("cli/*", "*", ("operator",)),
    ("serverless/replay.py", "*", ("operator",)),
    ("stores/dynamodb/tracker.py", "XorAckDynamoDB.scan_unfinished", ("operator",)),
    ("stores/dynamodb/migrate.py", "*", ("operator",)),
    ("stores/dynamodb/answers.py", "scan_pages", ("operator",)),
    # The serverless functions.
    ("serverless/sending.py", "*", ("worker",)),
    ("serverless/starts.py", "*", ("worker",)),
    ("serverless/completion.py", "*", ("completion",)),
    # The completion claim, sent by the tracker for serverless/completion.py.
    ("stores/dynamodb/claims.py", "*", ("completion",)),
    ("serverless/poller.py", "*", ("stream poller",)),
    ("testing/sqs_events.py", "deliver_sqs", ("queue poller",)),
)

#: Sites the walk reports that send nothing: (module, function, operation) -> why.
NOT_SENDS: dict[tuple[str, str, str], str] = {
    ("cli/ops.py", "table_create", "CreateTable"): "XorAckDynamoDB.create_table(): table.py sends",
    ("cli/wordcount.py", "*", "CreateTable"): "XorAckDynamoDB.create_table(): table.py sends",
    ("testing/plugin.py", "*", "CreateTable"): "XorAckDynamoDB.create_table(): table.py sends",
    ("serverless/pipeline.py", "Pipeline.create_table", "CreateTable"): (
        "XorAckDynamoDB.create_table(): table.py sends"
    ),
    ("stores/dynamodb/answers.py", "<module>", "*"): "the operations whose answers it checks",
    ("stores/dynamodb/answers.py", "shape_problem", "*"): "the operations whose answers it checks",
    ("stores/dynamodb/resend.py", "*", "*"): "names botocore's resend events and the requests they are of",
    ("stores/dynamodb/failures.py", "<module>", "*"): "the operations whose AccessDenied names their policy",
    ("stores/memory.py", "*", "BatchGetItem"): "MemoryAck counts its reads under DynamoDB's name",
    ("testing/moto_server.py", "*", "*"): "moto's table model, patched in-process: not a client",
    ("testing/dynamodb_local.py", "*", "ListTables"): "probes the DynamoDB Local it started on 127.0.0.1",
}

#: Sends outside this package's policies, never DynamoDB's: (module, function) -> why.
OUTSIDE: dict[tuple[str, str], str] = {
    ("spark/*", "*"): "the Spark job's inputs and outputs on S3, under the cluster's role (spark.md)",
}

#: Every dynamic attribute lookup, reviewed: (module, source) -> why it sends nothing the
#: walk does not read.
LOOKUPS: dict[tuple[str, str], str] = {
    ("stores/dynamodb/_async/store.py", "getattr(client, xform_name(operation))"): (
        "sends the operation it is given: every DynamoDB operation named in the package is read as a send"
    ),
    ("serverless/pipeline.py", "def __getattr__"): "_Lazy: the pipeline's client, its callers' calls read",
    ("serverless/pipeline.py", "getattr(self.pipeline.client(self.service), name)"): "the same _Lazy",
    ("drivers/base.py", "def __getattr__"): "DatedBase: the store, whose sends are read",
    ("drivers/base.py", "getattr(self.store, name)"): "the same DatedBase",
    ("serverless/pipeline.py", "getattr(self, name)"): "a config's own fields",
    ("retry.py", "getattr(self, name)"): "a retry policy's own fields",
    ("spark/chains.py", "getattr(tracker, name, None)"): "a tracker's create_many / stamp_many",
    ("spark/frame/columns.py", "getattr(pa, _ARROW_TYPES[kind])"): "a pyarrow type",
    ("testing/moto_server.py", "*"): "moto's parser and copy module, patched in-process",
}


def _policy(name: str, **names: str) -> dict[str, Any]:
    """docs/``name``, its placeholders replaced by ``names``."""
    text = (DOCS / name).read_text()
    for placeholder, value in names.items():
        text = text.replace(placeholder, value)
    policy: dict[str, Any] = json.loads(text)
    assert policy["Version"] == "2012-10-17"
    return policy


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _role_statements(role: str) -> list[dict[str, Any]]:
    found = [s for name, sid in ROLES[role] for s in _policy(name)["Statement"] if sid in ("*", s["Sid"])]
    assert len(found) >= len(ROLES[role]), f"{role}: a statement of {ROLES[role]} is missing"
    return found


def _grants(statement: dict[str, Any], action: str) -> bool:
    """Whether ``statement`` allows ``action`` on the resource it acts on (the chains
    table; its stream for the streams API)."""
    if statement["Effect"] != "Allow" or action not in _listed(statement["Action"]):
        return False
    if action in STREAM_ACTIONS:
        return _listed(statement["Resource"]) == [f"{TABLE}/stream/*"]
    if action.startswith("dynamodb:"):
        return _listed(statement["Resource"]) == [TABLE]
    return True


def _excused(send: Send) -> str | None:
    for (module, function, operation), why in NOT_SENDS.items():
        if fnmatchcase(send.module, module) and fnmatchcase(send.function, function):
            if fnmatchcase(send.operation, operation):
                return why
    return None


def _roles(send: Send) -> tuple[str, ...] | None:
    for module, function, roles in WHO_SENDS:
        if fnmatchcase(send.module, module) and fnmatchcase(send.function, function):
            return roles
    return None


def _outside(send: Send) -> str | None:
    for (module, function), why in OUTSIDE.items():
        if fnmatchcase(send.module, module) and fnmatchcase(send.function, function):
            return why
    return None


def _sends() -> list[Send]:
    return [s for s in sends(PACKAGE) if _excused(s) is None]


def _needs() -> dict[str, set[str]]:
    """The IAM actions each role's code sends."""
    needs: dict[str, set[str]] = {role: set() for role in ROLES}
    for send in _sends():
        for role in _roles(send) or ():
            needs[role] |= iam_actions(send.service, send.operation)
    return needs


def test_the_walk_finds_every_way_the_package_sends() -> None:
    """The reader of the source sees each kind of send, in every layer: a client call, a
    paginator, an operation named for the store, the serverless clients, the streams."""
    found = {(s.module, s.operation) for s in sends(PACKAGE)}
    for expected in [
        ("stores/dynamodb/codec.py", "GetItem"),  # Prepared("GetItem", ...)
        ("stores/dynamodb/codec.py", "PutItem"),  # a history block
        ("stores/dynamodb/_async/store.py", "TransactWriteItems"),  # self.call("...")
        ("stores/dynamodb/_async/table.py", "CreateTable"),
        ("cli/ops.py", "Scan"),  # get_paginator("scan")
        ("stores/dynamodb/tracker.py", "Scan"),  # scan_unfinished
        ("serverless/replay.py", "ListObjectsV2"),
        ("stores/dynamodb/migrate.py", "Scan"),
        ("stores/dynamodb/migrate.py", "PutItem"),  # client.put_item(...)
        ("stores/dynamodb/claims.py", "UpdateItem"),  # the claim, through the tracker
        ("serverless/completion.py", "SendMessage"),
        ("serverless/completion.py", "PutEvents"),
        ("serverless/sending.py", "SendMessageBatch"),
        ("serverless/starts.py", "HeadObject"),
        ("serverless/poller.py", "GetRecords"),
        ("spark/output.py", "PutObject"),
    ]:
        assert expected in found, expected


def test_the_package_builds_clients_only_for_the_services_read() -> None:
    """A client of another service would send operations the walk does not know."""
    assert client_services(PACKAGE) == set(SERVICES)


def test_every_dynamic_lookup_is_reviewed() -> None:
    """A ``getattr`` with a computed name could send anything: each one is known."""
    unknown = [
        lookup
        for lookup in dynamic_lookups(PACKAGE)
        if not any(
            fnmatchcase(lookup.module, module) and source in ("*", lookup.source)
            for module, source in LOOKUPS
        )
    ]
    assert unknown == []


def _ungranted(found: list[Send]) -> list[str]:
    """Each of ``found`` that no role claims, or that a role claiming it is not granted."""
    problems = []
    for send in found:
        if _excused(send) is not None:
            continue
        where = f"{send.module}:{send.line} {send.function} {send.how}"
        if _outside(send) is not None:
            if send.service in ("dynamodb", "dynamodbstreams"):
                problems.append(f"{where}: DynamoDB outside every policy")
            continue
        roles = _roles(send)
        if roles is None:
            problems.append(f"{where}: {send.service}:{send.operation} sent by no known role")
            continue
        for role in roles:
            statements = _role_statements(role)
            for action in sorted(iam_actions(send.service, send.operation)):
                if not any(_grants(s, action) for s in statements):
                    problems.append(f"{where}: {role} ({ROLES[role]}) does not grant {action}")
    return problems


def test_every_request_is_granted_to_the_role_that_sends_it() -> None:
    """Each request the package can send, wherever it is sent from (the CLI, replay,
    migrate, table creation, the serverless layer, the streams poller), is granted by
    every role that runs that code."""
    assert _ungranted(sends(PACKAGE)) == []


def test_a_new_send_path_fails_the_check(tmp_path: Path) -> None:
    """A request added anywhere, in any of the ways the package sends, is found; one its
    role is not granted, or that no role claims, is reported."""
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "ops.py").write_text(
        "def count(client):\n"
        '    return client.query(TableName="acks")\n'
        "def peek(client, name):\n"
        "    return getattr(client, name)()\n"
    )
    (tmp_path / "stores").mkdir()
    (tmp_path / "stores" / "fast.py").write_text(
        "def wipe(store):\n"
        '    store.call("BatchWriteItem", {})\n'
        "def each(client):\n"
        '    return client.get_paginator("scan").paginate(TableName="acks")\n'
    )
    found = sends(tmp_path)
    assert {(s.module, s.operation) for s in found} == {
        ("cli/ops.py", "Query"),
        ("stores/fast.py", "BatchWriteItem"),
        ("stores/fast.py", "Scan"),
    }
    problems = _ungranted(found)
    assert len(problems) == 3
    assert "operator (" in problems[0] and "does not grant dynamodb:Query" in problems[0]
    assert all("sent by no known role" in p for p in problems[1:])
    assert {lookup.source for lookup in dynamic_lookups(tmp_path)} == {"getattr(client, name)"}


def test_each_policy_grants_exactly_what_its_role_sends() -> None:
    needs = _needs()
    assert needs["chains"] == {
        f"dynamodb:{op}" for op in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem")
    }
    assert needs["tenant"] == needs["chains"]
    assert "dynamodb:Scan" in needs["operator"]
    for role in EXACT:
        granted = {a for s in _role_statements(role) for a in _listed(s["Action"])}
        assert granted == needs[role], role
    for name in ("iam-policy.json", "iam-policy-tenant.json", "iam-policy-operator.json"):
        for statement in _policy(name)["Statement"]:
            assert statement["Effect"] == "Allow"
            assert "*" not in "".join(_listed(statement["Action"])), statement["Sid"]
            if any(a.startswith("dynamodb:") for a in _listed(statement["Action"])):
                assert _listed(statement["Resource"]) == [TABLE], statement["Sid"]  # one table


def test_only_the_operator_scans() -> None:
    """Scan (``xor-ack list``, ``scan_unfinished``, ``migrate``) is the operator's: no
    other policy grants it, nor Query, nor anything that reads without a key."""
    scanners = {(s.module, s.function) for s in _sends() if s.operation == "Scan"}
    assert {module for module, _ in scanners} >= {
        "cli/ops.py",
        "stores/dynamodb/tracker.py",
        "stores/dynamodb/migrate.py",
    }
    for module, function in scanners:
        assert _roles(Send(module, function, "dynamodb", "Scan", 0, "")) == ("operator",), (module, function)
    keyless = {"dynamodb:Scan", "dynamodb:Query", "dynamodb:PartiQLSelect", "dynamodb:ExecuteStatement"}
    for name in ("iam-policy.json", "iam-policy-tenant.json", "iam-policy-serverless.json"):
        for statement in _policy(name)["Statement"]:
            assert not keyless & set(_listed(statement["Action"])), (name, statement["Sid"])


def _tenant(prefix: str, *, extra_actions: tuple[str, ...] = (), null: bool = True) -> dict[str, Any]:
    """The tenant policy for ``prefix``; ``extra_actions`` granted beside its own (the
    mistake of adding Scan to it), ``null=False`` without its ``Null`` condition."""
    policy = _policy("iam-policy-tenant.json", TENANT_PREFIX=prefix)
    for statement in policy["Statement"]:
        statement["Action"] = _listed(statement["Action"]) + list(extra_actions)
        if not null:
            statement["Condition"].pop("Null", None)
    return policy


def _get(tag: str) -> Request:
    return Request("dynamodb:GetItem", TABLE, {"dynamodb:LeadingKeys": [tag]})


def test_the_tenant_policy_keeps_a_tenant_to_its_own_chains() -> None:
    """As IAM evaluates it: a tenant reads and writes its own tags; another tenant's tag,
    a batch with one, a neighbour's prefix and a request without keys are refused."""
    acme = _tenant("acme")
    assert allows(acme, _get("acme/orders/1"))
    for other in ("globex/orders/1", "acme2/orders/1", "acme", "xacme/1", "ACME/1"):
        assert not allows(acme, _get(other)), other
    batch = Request("dynamodb:BatchGetItem", TABLE, {"dynamodb:LeadingKeys": ["acme/1", "globex/1"]})
    assert not allows(acme, batch)
    scan = Request("dynamodb:Scan", TABLE)
    assert not allows(acme, scan)  # not granted
    # The page's limit: the op history pattern (`?xa/` and 32 characters) also spans the
    # tags of a three-character prefix ending in `xa`, for history's PutItem and
    # BatchGetItem; never for a GetItem.
    lookalike = "bxa/" + "0" * 32 + "/1"
    assert allows(acme, Request("dynamodb:PutItem", TABLE, {LEADING: [lookalike]}))
    assert not allows(acme, _get(lookalike))
    for statement in _policy("iam-policy-tenant.json")["Statement"]:
        assert statement["Condition"]["Null"] == {"dynamodb:LeadingKeys": "false"}, statement["Sid"]


def test_a_request_without_keys_is_refused_even_where_granted() -> None:
    """Why the ``Null`` condition: ``ForAllValues`` over a key the request does not carry
    is true, so a tenant role granted Scan would read every tenant's chains. With
    ``Null: false`` an absent ``dynamodb:LeadingKeys`` refuses the request."""
    scan = Request("dynamodb:Scan", TABLE)
    assert allows(_tenant("acme", extra_actions=("dynamodb:Scan",), null=False), scan)  # the hole
    assert not allows(_tenant("acme", extra_actions=("dynamodb:Scan",)), scan)  # closed
    assert allows(_policy("iam-policy-operator.json"), scan)


@contextmanager
def _captured(client: Any) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every DynamoDB request ``client`` sends meanwhile: (operation, parameters)."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        seen.append((model.name, dict(params)))

    client.meta.events.register("before-parameter-build.dynamodb", record, unique_id="xor-ack-iam")
    try:
        yield seen
    finally:
        client.meta.events.unregister("before-parameter-build.dynamodb", unique_id="xor-ack-iam")


def _evaluated(seen: list[tuple[str, dict[str, Any]]]) -> list[Request]:
    return [r for operation, params in seen for r in requests(operation, params, "tagID", TABLE)]


def test_a_tenants_tracker_is_allowed_every_request_and_no_other_tenant_is(inproc_client: Any) -> None:
    """A tenant's whole life of chains (create, stamps past the op window, so that op
    history items are written, a redelivery read from that history, batches, status,
    fail, touch, delete), captured from botocore: the tenant's policy allows every
    request, and another tenant's refuses every one that names a chain."""
    XorAckDynamoDB("acks", client=inproc_client).create_table()
    with _captured(inproc_client) as seen:
        ack = XorAckDynamoDB("acks", client=inproc_client, max_ops=1)
        root = ack.new_edge()
        ack.create("acme/upload-1", root)
        edges = [ack.new_edge() for _ in range(50)]
        ack.stamp("acme/upload-1", finished=[root], started=edges, op_id="start")
        for i, edge in enumerate(edges[:-1]):
            ack.stamp("acme/upload-1", finished=[edge], op_id=f"word-{i}")
        # A redelivery, by a process that never saw the history: read from it.
        again = XorAckDynamoDB("acks", client=inproc_client, max_ops=1)
        again.stamp("acme/upload-1", finished=[edges[0]], op_id="word-0")
        assert ack.stamp("acme/upload-1", finished=[edges[-1]], op_id="last").acked
        ack.status_many(["acme/upload-1", "acme/none"])
        ack.create("acme/upload-2", ack.new_edge())
        ack.touch("acme/upload-2")
        ack.fail("acme/upload-2", "bad input")
        ack.status("acme/upload-2")
        ack.delete("acme/upload-2")
    operations = {operation for operation, _ in seen}
    assert {"PutItem", "BatchGetItem", "GetItem", "UpdateItem", "DeleteItem"} <= operations
    named = [(r.action, k) for r in _evaluated(seen) for k in r.context.get(LEADING, ())]
    history = {action for action, key in named if key.startswith(RESERVED_PREFIX)}
    assert history == {"dynamodb:PutItem", "dynamodb:BatchGetItem"}  # written, then read
    acme, globex = _tenant("acme"), _tenant("globex")
    refused = [r for r in _evaluated(seen) if not allows(acme, r)]
    assert refused == []
    chains = [r for r in _evaluated(seen) if any(k.startswith("acme/") for k in r.context.get(LEADING, ()))]
    assert chains and not any(allows(globex, r) for r in chains)


def test_the_operators_scans_are_the_operator_policys_alone(inproc_client: Any) -> None:
    """``scan_unfinished`` and ``migrate`` as sent: the operator policy allows each
    request; a tenant policy refuses their Scan even with Scan granted to it."""
    XorAckDynamoDB("acks", client=inproc_client).create_table()
    ack = XorAckDynamoDB("acks", client=inproc_client)
    ack.create("acme/1", ack.new_edge())
    ack.fail("acme/1", "boom")
    with _captured(inproc_client) as seen:
        assert [s.tag for s in scan_unfinished(ack, prefix="acme/")] == ["acme/1"]
        migrate_table(inproc_client, "acks", ack.codec, now=0)
    scans = [r for r in _evaluated(seen) if r.action == "dynamodb:Scan"]
    assert len(scans) >= 2
    operator = _policy("iam-policy-operator.json")
    assert all(allows(operator, r) for r in _evaluated(seen))
    tenant = _tenant("acme", extra_actions=("dynamodb:Scan",))
    assert not any(allows(tenant, r) for r in scans)


def _security_table() -> dict[str, set[str]]:
    """docs/security.md's table of roles: role -> the actions it lists."""
    text = (DOCS / "security.md").read_text()
    rows: dict[str, set[str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("**"):
            rows[cells[0].strip("*")] = {
                a if ":" in a else f"dynamodb:{a}" for a in re.findall(r"`([\w:]+)`", cells[2])
            }
    return rows


def test_the_security_page_says_what_each_role_sends() -> None:
    """docs/security.md's table of roles lists, for each policy of docs/, the actions its
    role sends (what the tests above derive from the source)."""
    needs = _needs()
    table = _security_table()
    assert {role: table.get(role) for role in EXACT} == {role: needs[role] for role in EXACT}
    text = (DOCS / "security.md").read_text()
    promises = ("iam-policy-operator.json", "`AccessDenied`", "`Null`", "scan_unfinished", "xor-ack list")
    assert [p for p in promises if p not in text] == []


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
