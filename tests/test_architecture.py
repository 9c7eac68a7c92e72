"""The package keeps the rules of docs/architecture.md (checked by tests/architecture.py),
and the checker itself finds each kind of violation planted in a small package."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest
from architecture import (
    LAYER_DOC,
    MAX_LINES,
    PACKAGE,
    Layer,
    build,
    circles,
    core_io,
    layer_of,
    long_modules,
    pipeline_stores,
    read_layers,
    root_modules,
    upward,
    violations,
)


@pytest.fixture(scope="module")
def found() -> dict[str, list[str]]:
    return violations()


@pytest.mark.parametrize("rule", ["circles", "core", "layers", "pipelines", "root", "size"])
def test_the_package_keeps_the_rule(found: dict[str, list[str]], rule: str) -> None:
    assert not found[rule], "\n".join(found[rule])


def test_the_table_places_the_public_modules() -> None:
    layers = read_layers(LAYER_DOC)
    names = (PACKAGE, f"{PACKAGE}.core.rules", f"{PACKAGE}.testing.plugin")
    surface, core, plugin = (layer_of(name, layers) for name in names)
    assert surface is not None and core is not None and plugin is not None
    assert (surface.name, core.name, plugin.name) == ("surface", "core", "testing")
    assert surface.rank > plugin.rank > core.rank


# -- the checker on planted packages ------------------------------------------------------

_names = itertools.count()


def fresh_name(tmp_path: Path) -> str:
    return f"planted_{next(_names)}_{tmp_path.name.replace('-', '_')}"


def plant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], name: str = "") -> str:
    """A package of ``files`` (paths relative to it) importable as ``name`` (default: a fresh one)."""
    name = name or fresh_name(tmp_path)
    for relative, text in {"__init__.py": "", **files}.items():
        path = tmp_path / name / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        if relative.count("/"):
            (path.parent / "__init__.py").touch(exist_ok=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


BACK_IMPORTS = {
    "function-level": "def f():\n    from . import high\n",
    "TYPE_CHECKING": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .high import thing\n",
    "from the package, a submodule": "from {pkg} import high\n",
    "relative, two levels": None,  # below: low sits in a sub-package
}


@pytest.mark.parametrize("form", BACK_IMPORTS)
def test_a_planted_circle_is_found_whatever_the_import_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    back, pkg = BACK_IMPORTS[form], fresh_name(tmp_path)
    if back is None:
        files = {"high.py": "from .sub import low\nthing = 1\n", "sub/low.py": "from ..high import thing\n"}
        low = "sub.low"
    else:
        files = {"high.py": "from . import low\nthing = 1\n", "low.py": back.format(pkg=pkg)}
        low = "low"
    plant(tmp_path, monkeypatch, {"other.py": "from . import high\n", **files}, pkg)
    found = circles(build(pkg), pkg)
    assert len(found) == 1, found
    assert found[0].startswith(f"import circle among {pkg}.high, {pkg}.{low}:")
    assert f"{pkg}.{low} -> {pkg}.high (line " in found[0]
    assert "other" not in found[0]


def test_no_circle_no_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = plant(tmp_path, monkeypatch, {"a.py": "from . import b\n", "b.py": "import json\n"})
    assert circles(build(pkg), pkg) == []


def test_core_importing_io_or_a_module_outside_the_vocabulary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = plant(
        tmp_path,
        monkeypatch,
        {
            "errors.py": "",
            "retry.py": "",
            "core/rules.py": "import dataclasses\nfrom ..errors import *\nfrom . import calls\n",
            "core/calls.py": "def later():\n    import time\n    from urllib.parse import quote\n"
            "from .. import retry\n",
        },
    )
    found = core_io(build(pkg), pkg)
    assert [m.split(":")[0] for m in found] == [
        f"core imports {pkg}.retry (core may import core and errors, stamps, status)",
        "core imports time, which does I/O",
        "core imports urllib, which does I/O",
    ]


def test_a_pipeline_importing_a_store_beyond_its_trackers_and_clients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = plant(
        tmp_path,
        monkeypatch,
        {
            "stores/memory.py": "",
            "stores/dynamodb/tracker.py": "",
            "stores/dynamodb/clients.py": "",
            "stores/dynamodb/answers.py": "",
            "stores/dynamodb/codec.py": "",
            "spark/job.py": "from ..stores.dynamodb import tracker, clients\nfrom ..stores import memory\n",
            "spark/late.py": "def f():\n    from ..stores.dynamodb.answers import x\n",
            "serverless/send.py": "from ..stores.dynamodb import answers\n"
            "from ..stores.dynamodb.codec import y\n",
        },
    )
    found = pipeline_stores(build(pkg), pkg)
    assert [m.split(" (")[0] for m in found] == [
        f"serverless imports {pkg}.stores.dynamodb.codec",
        f"spark imports {pkg}.stores.dynamodb.answers",
    ]


def test_imports_up_sideways_and_outside_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "architecture.md"
    doc.write_text(
        "| rank | layer | modules | what |\n|---|---|---|---|\n"
        "| 3 | top | `__init__`, `app` | |\n| 2 | left | `left` | |\n"
        "| 2 | right | `right`, `left.special` | |\n| 1 | base | `base` | |\n"
    )
    layers = read_layers(doc)
    assert layers[2] == Layer(2, "right", ("right", "left.special"))
    pkg = plant(
        tmp_path,
        monkeypatch,
        {
            "app.py": "from . import left, base\n",
            "left/__init__.py": "from .. import base\n",
            "left/special.py": "from ..base import x\n",
            "right.py": "from . import left\n",
            "base.py": "x = 1\ndef f():\n    from . import app\n",
            "stray.py": "",
        },
    )
    assert layer_of(f"{pkg}.left.special", layers, pkg) == layers[2]
    found = upward(build(pkg), layers, pkg)
    assert [m.split(": ")[0] for m in found] == [
        "base (layer 1) imports up into top (layer 3)",
        "right (layer 2) imports sideways into left (layer 2)",
        f"{pkg}.stray is in no layer of the table in docs/architecture.md",
    ]
    assert f"{pkg}.right -> {pkg}.left (line 1: from . import left)" in found[1]


def test_too_many_root_modules_and_too_long_modules(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    for i in range(10):
        (root / f"m{i}.py").write_text("x = 1\n" * (MAX_LINES if i == 0 else 1))
    (root / "sub" / "deep.py").write_text("# generated by a tool\n" + "x = 1\n" * MAX_LINES)
    assert root_modules(root) == []
    assert long_modules(root) == [f"pkg/sub/deep.py: {MAX_LINES + 1} lines (at most {MAX_LINES})"]
    (root / "m10.py").touch()
    names = ", ".join(["m0", "m1", "m10", *(f"m{i}" for i in range(2, 10))])
    assert root_modules(root) == [f"11 modules at the package root (at most 10): {names}"]


# -- the public surface needs no optional extra ------------------------------------------

EXTRAS = ("moto", "werkzeug", "pyspark", "pandas", "pyarrow", "aiobotocore", "pytest", "rich")

NO_EXTRAS = f"""
import importlib.abc, sys

class NoExtras(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {EXTRAS!r}:
            raise ImportError(f"{{name}} is not installed (an optional extra)")

sys.meta_path.insert(0, NoExtras())
import xor_ack_dynamodb, xor_ack_dynamodb.testing, xor_ack_dynamodb.serverless
from xor_ack_dynamodb import DynamoDBLocal, LocalDynamoDB, MotoServer
from xor_ack_dynamodb.testing import connect_server, standalone_cluster
assert LocalDynamoDB is MotoServer and MotoServer.__name__ == "MotoServer"
assert MotoServer().endpoint_url is None and DynamoDBLocal().endpoint_url is None
print("imported")
"""


def test_the_package_and_its_servers_import_without_the_extras() -> None:
    """``import xor_ack_dynamodb`` (and ``.testing``, ``.serverless``) works in a plain
    install: moto, pyspark, pytest... are imported only when a server starts or a fixture
    runs."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", NO_EXTRAS], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"
