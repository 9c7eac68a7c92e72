"""The public surface of docs/architecture.md ("The public surface"), counted from the code.

A package's public names are its ``__all__``, read from its ``__init__.py`` without
importing it (so that spark's count needs no PySpark). The doc's table of counts per
package and per group must match the code, the groups must keep their limits, every
name the pages (README.md, docs/, examples/) import from a package must be exported
there, and no module of the package, its tests, benchmarks or examples imports from a
package a name that package does not export.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "xor_ack_dynamodb"
PACKAGE_DIR = ROOT / PACKAGE
DOC = ROOT / "docs" / "architecture.md"

#: The limits of issue 39 (item 5), by group; a group not named here has none.
LIMITS = {"core": 45, "serverless": 25}
#: The packages each limited group is made of (the doc's table must agree).
LIMITED = {
    "core": (
        PACKAGE,
        f"{PACKAGE}.aio",
        f"{PACKAGE}.core",
        f"{PACKAGE}.drivers",
        f"{PACKAGE}.stores",
        f"{PACKAGE}.stores.dynamodb",
    ),
    "serverless": (f"{PACKAGE}.serverless",),
}
#: Where users are told what to import.
PAGES = (
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "examples").rglob("*.md")),
    *sorted((ROOT / "examples").rglob("*.py")),
)
#: Code that imports the package: its own layers, the tests, the benchmarks, the scripts.
CODE_DIRS = ("xor_ack_dynamodb", "tests", "benchmarks", "scripts", "examples")


def packages() -> list[str]:
    """Every package of the library but the private ones (``_async``, ``_sync``)."""
    found = []
    for init in sorted(PACKAGE_DIR.rglob("__init__.py")):
        parts = init.parent.relative_to(ROOT).parts
        if not any(part.startswith("_") for part in parts):
            found.append(".".join(parts))
    return found


def package_dir(package: str) -> Path:
    return ROOT.joinpath(*package.split("."))


def public_names(package: str) -> list[str]:
    """The ``__all__`` of ``package``'s ``__init__.py`` (a literal list of strings), or []."""
    tree = ast.parse((package_dir(package) / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            assert isinstance(node.value, (ast.List, ast.Tuple)), f"{package}.__all__ is not a literal"
            names = [ast.literal_eval(e) for e in node.value.elts]
            assert len(names) == len(set(names)), f"{package}.__all__ names a name twice"
            return names
    return []


def is_submodule(package: str, name: str) -> bool:
    here = package_dir(package)
    return (here / f"{name}.py").exists() or (here / name / "__init__.py").exists()


def doc_tables() -> tuple[dict[str, tuple[int, str]], dict[str, tuple[int, str]]]:
    """The section's two tables: package -> (names, group) and group -> (names, at most)."""
    section = DOC.read_text().split("## The public surface", 1)[1].split("\n## ", 1)[0]
    by_package: dict[str, tuple[int, str]] = {}
    by_group: dict[str, tuple[int, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or not cells[1].isdigit():
            continue
        if cells[0].startswith("`"):
            by_package[cells[0].strip("`")] = (int(cells[1]), cells[2])
        else:
            by_group[cells[0]] = (int(cells[1]), cells[2].split()[0])
    return by_package, by_group


def counts() -> dict[str, int]:
    return {package: len(public_names(package)) for package in packages()}


# -- the counts, the doc's table and the limits ------------------------------------------


def test_the_doc_counts_every_package_as_the_code_does() -> None:
    by_package, _ = doc_tables()
    assert {p: n for p, (n, _) in by_package.items()} == counts()


def test_the_doc_counts_every_group_as_the_code_does_and_names_its_limit() -> None:
    by_package, by_group = doc_tables()
    sums: dict[str, int] = {}
    for package, (_, group) in by_package.items():
        sums[group] = sums.get(group, 0) + len(public_names(package))
    assert {g: n for g, (n, _) in by_group.items()} == sums
    assert {g: int(at_most) for g, (_, at_most) in by_group.items() if at_most.isdigit()} == LIMITS
    for group, members in LIMITED.items():
        assert {p for p, (_, g) in by_package.items() if g == group} == set(members), group


@pytest.mark.parametrize("group", sorted(LIMITS))
def test_each_group_keeps_its_limit(group: str) -> None:
    total = sum(len(public_names(package)) for package in LIMITED[group])
    assert total <= LIMITS[group], f"{group}: {total} public names (at most {LIMITS[group]})"


@pytest.mark.parametrize("package", [p for members in LIMITED.values() for p in members])
def test_every_public_name_resolves_and_nothing_else_is_re_exported(package: str) -> None:
    """Each name of ``__all__`` is there once imported; and every name the ``__init__``
    imports is in ``__all__`` (or is a submodule): an internal is not kept as a hidden
    re-export, it is imported from its module."""
    module = importlib.import_module(package)
    names = public_names(package)
    assert [n for n in names if not hasattr(module, n)] == []
    tree = ast.parse((package_dir(package) / "__init__.py").read_text())
    imported = [
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module != "__future__"
        for alias in node.names
    ]
    assert [n for n in imported if n not in names and not is_submodule(package, n)] == []


# -- what the pages import is exported; what the code imports is exported -----------------

IMPORT = re.compile(r"^[ \t>]*from (xor_ack_dynamodb[\w.]*) import (\([^)]*\)|[^\n]*)", re.MULTILINE)
REFERENCE = re.compile(r"\bxor_ack_dynamodb((?:\.\w+)+)")


def page_imports(text: str) -> list[tuple[str, str]]:
    """(package, name) for each ``from xor_ack_dynamodb... import name`` in ``text``."""
    found = []
    for module, names in IMPORT.findall(text):
        for name in re.sub(r"#[^\n]*", "", names).strip("()").split(","):
            name = name.split(" as ")[0].strip()
            if name and (package_dir(module) / "__init__.py").exists():
                found.append((module, name))
    return found


def page_references(text: str) -> list[tuple[str, str]]:
    """(package, name) for each dotted ``xor_ack_dynamodb.pkg.name`` where ``name`` is
    not a module (``xor_ack_dynamodb.testing.deliver_sqs``)."""
    found = []
    for match in REFERENCE.finditer(text):
        parts, package = match.group(1).strip(".").split("."), PACKAGE
        while parts and (package_dir(package) / parts[0] / "__init__.py").exists():
            package = f"{package}.{parts.pop(0)}"
        if parts and not parts[0].startswith("__") and not is_submodule(package, parts[0]):
            found.append((package, parts[0]))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_name_a_page_imports_from_a_package_is_exported_there(page: Path) -> None:
    text = page.read_text()
    missing = [
        f"{package}.{name}"
        for package, name in page_imports(text) + page_references(text)
        if name != "*" and name not in public_names(package) and not is_submodule(package, name)
    ]
    assert missing == []


def code_imports(path: Path) -> list[tuple[str, str, int]]:
    """(package, name, line) for each ``from <package> import name`` of ``path``, relative
    imports resolved, where ``<package>`` is one of the library's packages."""
    tree = ast.parse(path.read_text())
    inside = path.resolve().parent.relative_to(ROOT).parts if path.is_relative_to(PACKAGE_DIR) else ()
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = list(inside[: len(inside) - node.level + 1])
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        if module.split(".")[0] == PACKAGE and (package_dir(module) / "__init__.py").exists():
            found.extend((module, alias.name, node.lineno) for alias in node.names)
    return found


def test_no_module_imports_from_a_package_a_name_it_does_not_export() -> None:
    """The tests, the benchmarks, the examples and the package's own layers import an
    internal from the module that defines it, never through a package's namespace (spark
    aside: its API is redesigned elsewhere)."""
    checked = {p for members in LIMITED.values() for p in members} | {f"{PACKAGE}.testing"}
    wrong = []
    for directory in CODE_DIRS:
        for path in sorted((ROOT / directory).rglob("*.py")):
            if any(part.startswith(".") for part in path.relative_to(ROOT).parts):
                continue
            for package, name, line in code_imports(path):
                if package in checked and name != "*" and name not in public_names(package):
                    if not is_submodule(package, name):
                        wrong.append(f"{path.relative_to(ROOT)}:{line}: from {package} import {name}")
    assert wrong == []


def test_the_checks_see_imports_and_references() -> None:
    """The readers above find what they look for (so that the tests cannot pass empty)."""
    text = (
        "from xor_ack_dynamodb.serverless import (\n    Pipeline,  # the pipeline\n    decode_record,\n)\n"
        "see `xor_ack_dynamodb.testing.deliver_sqs` and xor_ack_dynamodb.serverless.envelope.from_json\n"
    )
    assert page_imports(text) == [
        (f"{PACKAGE}.serverless", "Pipeline"),
        (f"{PACKAGE}.serverless", "decode_record"),
    ]
    assert page_references(text) == [(f"{PACKAGE}.testing", "deliver_sqs")]
    assert ("xor_ack_dynamodb.serverless", "Pipeline") in page_imports((ROOT / "README.md").read_text())
    assert counts()[f"{PACKAGE}.serverless"] == len(importlib.import_module(f"{PACKAGE}.serverless").__all__)
