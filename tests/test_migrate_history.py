"""``xor-ack migrate`` on items written by the real code of each earlier layout (issue 39).

Each earlier version of the package is taken from this repository's history at test
time (``git archive <commit> xor_ack_dynamodb`` into a temporary directory: nothing from
history is committed) and run in a subprocess (``PYTHONPATH`` = that directory) against
the moto server on 127.0.0.1 this session started; the items it leaves are migrated with
today's code, then every op it applied is delivered again. The layouts
(``git log -- xor_ack_dynamodb/``, CHANGELOG.md):

- the first layout, at its last commit :data:`FIRST` (before 0bda282): op keys are hex
  strings of ``blake2b(op_id)``, a stamp's without its namespace, no ``tok``, no ``seq``;
- 0.1.0, :data:`V0_1` (``tok``, ``seq``, namespaced 8-byte keys with payload hashes,
  ``cutn``): alone, and over a first-layout item it stamped;
- a pre-release of 0.2, :data:`PRE_0_2`, which gave old items a lineage as it wrote
  them: over a 0.1.0 item (``hb``) and over a first-layout item (``adp``).

What must hold whatever the layout: a delivered-again stamp is never applied twice (it
is a duplicate, or raises ``OutcomeUnknown`` and writes nothing), a delivered-again
create does not raise ``TagExists`` while the item holds its op, and the chain can
complete; a chain whose named ops answer ``OutcomeUnknown`` is listed for replay.

A clone without these commits (a shallow one) fails here, with how to fetch them: it
never skips.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

import pytest

from xor_ack_dynamodb import XorAckDynamoDB
from xor_ack_dynamodb.core.chain import BLOCK
from xor_ack_dynamodb.errors import OutcomeUnknown, TagExists, UnmigratedItem
from xor_ack_dynamodb.stores.dynamodb.migrate import Migration, migrate_table

ROOT = Path(__file__).resolve().parents[1]

#: The last commit of the first layout (the one before 0bda282 changed it).
FIRST = "e511706319fda6c8056036a1a8ec309611cd207b"
#: 0.1.0 (CHANGELOG.md: "the state of main before the layout change of issue 20").
V0_1 = "326bcce66498fdcdfcae99f0534532bebe9ded9d"
#: The last pre-release of 0.2 that gave old items a lineage on the fly (``hb``, ``adp``).
PRE_0_2 = "61bd2d6649db9b8fc28cc036071cf604ef516b62"
COMMITS = {FIRST: "the first layout", V0_1: "0.1.0", PRE_0_2: "a pre-release of 0.2"}

#: Run by each old version: its own ``XorAckDynamoDB`` writes the calls it is given.
WRITER = """
import json, sys
import boto3
import xor_ack_dynamodb
from xor_ack_dynamodb import XorAckDynamoDB

job = json.load(sys.stdin)
assert xor_ack_dynamodb.__file__.startswith(job["package"]), xor_ack_dynamodb.__file__
client = boto3.client(
    "dynamodb", endpoint_url=job["endpoint"], region_name="us-east-1",
    aws_access_key_id="testing", aws_secret_access_key="testing",
)
trackers = {}
for call in job["calls"]:
    key = (call["table"], call["mode"], call["max_ops"])
    if key not in trackers:
        options = {"max_ops": call["max_ops"]}
        if call["mode"] != "xor":
            options["mode"] = call["mode"]
        trackers[key] = XorAckDynamoDB(call["table"], "tagID", client=client, **options)
    decode = bytes.fromhex if call["mode"] == "xor" else int
    ack = trackers[key]
    if call["call"] == "create":
        ack.create(call["tag"], decode(call["value"]), op_id=call["op_id"])
    elif "value" in call:
        ack.stamp(call["tag"], decode(call["value"]), op_id=call["op_id"])
    else:
        finished, started = ([decode(e) for e in call[k]] for k in ("finished", "started"))
        ack.stamp(call["tag"], finished=finished, started=started, op_id=call["op_id"])
"""


def _git(*args: str, data: bool = False) -> subprocess.CompletedProcess[Any]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=not data, check=False)


def _extract(commit: str, into: Path) -> Path:
    """The package as it stood at ``commit``, in ``into``. Fails, saying why, when the
    clone lacks that commit."""
    if shutil.which("git") is None:
        pytest.fail(
            "git is not on PATH: these tests take the earlier layouts' code from the repository's history"
        )
    if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        shallow = _git("rev-parse", "--is-shallow-repository").stdout.strip()
        pytest.fail(
            f"commit {commit} ({COMMITS[commit]}) is not in this clone's history "
            f"(git rev-parse --is-shallow-repository: {shallow or 'not a git clone'}): these tests "
            "run the earlier layouts' own code from it; fetch the whole history "
            "(git fetch --unshallow, or actions/checkout with fetch-depth: 0)"
        )
    archive = _git("archive", "--format=tar", commit, "xor_ack_dynamodb", data=True)
    assert archive.returncode == 0, archive.stderr
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def _xor(values: list[bytes]) -> bytes:
    return reduce(lambda a, b: bytes(x ^ y for x, y in zip(a, b, strict=True)), values, bytes(16))


@dataclass
class Plan:
    """One chain: a root that starts ``children``, the calls each version makes on it,
    and what it holds after them."""

    table: str
    tag: str
    mode: str
    children: int
    root: Any = None
    edges: list[Any] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)  # stamp op ids, in order
    drawn: set[str] = field(default_factory=set)  # those sent without their op id

    def __post_init__(self) -> None:
        self.root = self.edge()
        self.edges = [self.edge() for _ in range(self.children)]

    def edge(self) -> Any:
        return secrets.token_bytes(16) if self.mode == "xor" else secrets.randbelow(2**62) + 1

    def text(self, edge: Any) -> str:
        return edge.hex() if self.mode == "xor" else str(edge)

    def payload(self, op_id: str) -> dict[str, Any]:
        """The stamp ``op_id`` sends, as today's ``stamp()`` takes it."""
        if op_id == "fan":
            return {"finished": [self.root], "started": self.edges}
        return {"finished": [self.edges[int(op_id.split("-")[1]) - 1]], "started": []}

    def call(self, op_id: str, max_ops: int, drawn: bool = False) -> dict[str, Any]:
        """The call that sends ``op_id`` (without it, the version drawing one, if ``drawn``)."""
        base = {"table": self.table, "mode": self.mode, "max_ops": max_ops, "tag": self.tag}
        base["op_id"] = None if drawn else op_id
        if drawn:
            self.drawn.add(op_id)
        if op_id == "start":
            return {**base, "call": "create", "value": self.text(self.root)}
        self.applied.append(op_id)
        stamp = self.payload(op_id)
        if self.mode == "xor":  # the first layout takes one value
            return {**base, "call": "stamp", "value": _xor(stamp["finished"] + stamp["started"]).hex()}
        return {**base, "call": "stamp", **{k: [self.text(e) for e in v] for k, v in stamp.items()}}

    def calls(self, op_ids: list[str], max_ops: int, drawn: bool = False) -> list[dict[str, Any]]:
        return [self.call(op_id, max_ops, drawn) for op_id in op_ids]

    def outstanding(self) -> list[Any]:
        done = {int(op.split("-")[1]) - 1 for op in self.applied if op.startswith("child-")}
        return [e for i, e in enumerate(self.edges) if i not in done]

    def value(self) -> Any:
        if self.mode == "sum":
            return sum(self.outstanding())
        return _xor(self.outstanding())


def _children(upto: int) -> list[str]:
    return [f"child-{i}" for i in range(1, upto + 1)]


def _start(count: int) -> list[str]:
    return ["start", "fan", *_children(count)]


@dataclass
class Written:
    """The chains the earlier versions left, by name."""

    plans: dict[str, Plan]
    client: Any

    def tracker(self, name: str) -> XorAckDynamoDB:
        plan = self.plans[name]
        return XorAckDynamoDB(plan.table, "tagID", client=self.client, mode=plan.mode)  # type: ignore[arg-type]

    def item(self, name: str) -> dict[str, Any]:
        plan = self.plans[name]
        found = self.client.get_item(
            TableName=plan.table, Key={"tagID": {"S": plan.tag}}, ConsistentRead=True
        )
        return found["Item"]  # type: ignore[no-any-return]


def _run(commit: str, package: Path, endpoint: str, calls: list[dict[str, Any]]) -> None:
    """Make ``calls`` with the package as it stood at ``commit``."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(package),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    job = {"endpoint": endpoint, "package": str(package), "calls": calls}
    done = subprocess.run(
        [sys.executable, "-c", WRITER],
        input=json.dumps(job),
        env=env,
        cwd=package,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{COMMITS[commit]} ({commit[:7]}) failed:\n{done.stderr[-4000:]}"


@pytest.fixture(scope="module")
def written(moto_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Written]:
    """The chains each earlier version wrote, one table per scenario, in three runs
    (one per version, in the order of history)."""
    packages = {c: _extract(c, tmp_path_factory.mktemp(f"xor-ack-{c[:7]}")) for c in COMMITS}
    client = moto_server.client()
    suffix = secrets.token_hex(3)
    tables = {t: f"migrate-{t}-{suffix}" for t in ("first", "v01-xor", "v01-sum", "mixed", "hb", "adp")}
    for table in tables.values():
        XorAckDynamoDB(table, "tagID", client=client).create_table()
    plans = {
        # The first layout: 4 ops (nothing dropped), and 38 (its window of 32 dropped 6).
        "first/small": Plan(tables["first"], "first/small", "xor", 3),
        "first/big": Plan(tables["first"], "first/big", "xor", 37),
        # 0.1.0 with a window of 8: 31 stamps (dropped without history: 23 in xor mode,
        # 20 in sum mode, whose list is trimmed 20 at a time), and 2 (none).
        "v01-xor/drops": Plan(tables["v01-xor"], "v01/drops", "xor", 31),
        "v01-xor/whole": Plan(tables["v01-xor"], "v01/whole", "xor", 2),
        "v01-sum/drops": Plan(tables["v01-sum"], "v01/drops", "sum", 31),
        "v01-sum/whole": Plan(tables["v01-sum"], "v01/whole", "sum", 2),
        # The first layout, then one stamp by 0.1.0.
        "mixed": Plan(tables["mixed"], "mixed/1", "xor", 3),
        # 0.1.0 (window 8, ops dropped), then one stamp by the pre-release (hb).
        "hb": Plan(tables["hb"], "hb/1", "xor", 13),
        # The first layout, then one stamp by the pre-release (a lineage, adp).
        "adp": Plan(tables["adp"], "adp/1", "xor", 3),
    }
    p = plans
    first = (
        p["first/small"].calls(_start(2), 32)
        + p["first/big"].calls(_start(36), 32)
        + p["mixed"].calls(_start(1), 32)
        + p["adp"].calls(_start(1), 32)
    )
    v0_1 = [
        *(call for name in ("v01-xor/drops", "v01-sum/drops") for call in p[name].calls(_start(30), 8)),
        *(call for name in ("v01-xor/whole", "v01-sum/whole") for call in p[name].calls(_start(1), 8)),
        *p["mixed"].calls(["child-2"], 32),
        *p["hb"].calls(_start(11), 8),
    ]
    # The pre-release refuses a named op on a chain 0.1 dropped ops of: a drawn one.
    pre = p["hb"].calls(["child-12"], 8, drawn=True) + p["adp"].calls(["child-2"], 32)
    for commit, calls in ((FIRST, first), (V0_1, v0_1), (PRE_0_2, pre)):
        _run(commit, packages[commit], moto_server.endpoint_url, calls)
    yield Written(plans, client)


def _migrate(written: Written, name: str) -> Migration:
    plan = written.plans[name]
    done = migrate_table(written.client, plan.table, written.tracker(name).codec, int(time.time()))
    assert done.failed == {}
    return done


def _deliver_again(written: Written, name: str) -> dict[str, str]:
    """Every stamp the earlier versions applied to the chain, delivered again (its op id
    and payload): how each ended. None is applied: the chain's value stays."""
    plan, ack = written.plans[name], written.tracker(name)
    outcomes = {}
    for op_id in plan.applied:
        if op_id in plan.drawn:
            continue
        try:
            result = ack.stamp(plan.tag, op_id=op_id, **plan.payload(op_id))
        except OutcomeUnknown:
            outcomes[op_id] = "unknown"
        else:
            assert result.duplicate, f"{name}: {op_id} delivered again was applied again"
            outcomes[op_id] = "duplicate"
        assert ack.status(plan.tag).value == plan.value(), f"{name}: {op_id} changed the value"
    return outcomes


def _completes(written: Written, name: str, op_id: str | None = None) -> None:
    """Finishing the outstanding edges (drawn op ids unless ``op_id``) acks the chain."""
    plan, ack = written.plans[name], written.tracker(name)
    result = ack.stamp(plan.tag, finished=plan.outstanding(), op_id=op_id)
    assert result.acked and not result.duplicate and ack.status(plan.tag).state == "acked"


def _create_again(written: Written, name: str) -> None:
    plan = written.plans[name]
    created = written.tracker(name).create(plan.tag, plan.root, op_id="start")
    assert created.duplicate and created == plan.value()


def test_the_first_layout_never_applies_an_op_twice_and_is_listed_for_replay(written: Written) -> None:
    """Its op keys are not today's (no namespace) and it never counted what it dropped:
    every op it applied answers OutcomeUnknown (on HEAD, each was applied again), its
    create is a duplicate while the item holds its op, and both chains are listed."""
    with pytest.raises(UnmigratedItem):
        written.tracker("first/small").status("first/small")
    done = _migrate(written, "first/small")
    for name in ("first/small", "first/big"):
        assert set(_deliver_again(written, name).values()) == {"unknown"}
    _create_again(written, "first/small")
    with pytest.raises(TagExists):  # its create's op was dropped by the first layout itself
        written.tracker("first/big").create("first/big", written.plans["first/big"].root, op_id="start")
    _completes(written, "first/small")
    _completes(written, "first/big")
    assert done.migrated == 2 and sorted(done.replay) == ["first/big", "first/small"]
    assert "first layout" in done.replay["first/small"]


@pytest.mark.parametrize("mode", ["xor", "sum"])
def test_0_1_is_read_exactly(written: Written, mode: str) -> None:
    """The ops in its item are duplicates, those it dropped OutcomeUnknown; only the
    chain that dropped some is listed, and the other completes with a named op."""
    drops, whole = f"v01-{mode}/drops", f"v01-{mode}/whole"
    before = written.item(drops)
    kept = len(before["ops"]["L"])
    assert int(before["cutn"]["N"]) + kept == int(before["seq"]["N"]) == 31 > kept
    done = _migrate(written, drops)
    stamps = _start(30)[1:]  # the create's op is kept apart (cop), its position is none
    expected = {op: "unknown" if i < len(stamps) - kept else "duplicate" for i, op in enumerate(stamps)}
    assert _deliver_again(written, drops) == expected
    assert _deliver_again(written, whole) == {"fan": "duplicate", "child-1": "duplicate"}
    _create_again(written, drops)
    _create_again(written, whole)
    assert int(written.item(drops)["cutn"]["N"]) == BLOCK
    _completes(written, drops)
    _completes(written, whole, op_id="child-2")
    assert done.migrated == 2 and list(done.replay) == ["v01/drops"]


def test_0_1_over_the_first_layout_is_not_taken_for_0_1(written: Written) -> None:
    """0.1.0 stamped a first-layout item: a token and positions, but the first layout's
    ops in its list (more ops than positions). On HEAD it was read as 0.1 and a copy of
    child-1 was applied again."""
    done = _migrate(written, "mixed")
    assert _deliver_again(written, "mixed") == {
        "fan": "unknown",
        "child-1": "unknown",
        "child-2": "duplicate",
    }
    _create_again(written, "mixed")
    _completes(written, "mixed")
    assert list(done.replay) == ["mixed/1"] and "carried on" in done.replay["mixed/1"]


def test_a_pre_release_lineage_over_0_1_is_read_exactly(written: Written) -> None:
    """The pre-release gave a 0.1.0 item that had dropped ops a lineage (``hb``)."""
    assert "hb" in written.item("hb")
    done = _migrate(written, "hb")
    outcomes = _deliver_again(written, "hb")
    assert [outcomes[op] for op in ("fan", "child-11")] == ["unknown", "duplicate"]
    _create_again(written, "hb")
    _completes(written, "hb")
    assert done.migrated == 1 and list(done.replay) == ["hb/1"]


def test_a_pre_release_lineage_over_the_first_layout_is_migrated(written: Written) -> None:
    """The pre-release gave a first-layout item a lineage (``adp``) and kept its op keys:
    today's version reads it, and on HEAD the migration left it so (a copy of child-1
    was applied again)."""
    before = written.item("adp")
    assert "adp" in before and "lin" in before and "hb" not in before
    done = _migrate(written, "adp")
    assert _deliver_again(written, "adp") == {"fan": "unknown", "child-1": "unknown", "child-2": "duplicate"}
    _create_again(written, "adp")
    _completes(written, "adp")
    assert done.migrated == 1 and list(done.replay) == ["adp/1"]
    assert _migrate(written, "adp").migrated == 0  # once
