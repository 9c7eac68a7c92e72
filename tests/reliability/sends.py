"""Every request the package can send, read from its source (nothing imported or run),
and the IAM actions that authorise each.

A request leaves the package in one of four ways, and :func:`sends` finds each:

* a call of a client method, ``<anything>.scan(...)``, ``await client.get_item(...)``:
  any attribute call named like an operation of a service the package builds clients
  for (:data:`SERVICES`);
* a paginator or a waiter, ``client.get_paginator("scan")``, ``get_waiter("table_exists")``:
  the operation it sends; ``scan_pages(client, ...)`` (the checked Scan of
  ``stores/dynamodb/answers.py``): a Scan of its caller;
* an operation named as a string, ``Prepared("GetItem", ...)``, ``self.call("BatchGetItem",
  ...)``, ``self._call("UpdateItem", ...)``: the DynamoDB store sends what it is given
  through ``getattr(client, xform_name(operation))``, so every DynamoDB operation name
  written in the package is read as a send of the function that writes it;
* a dynamic attribute, ``getattr(client, name)`` or a ``__getattr__`` proxy:
  :func:`dynamic_lookups` lists them, for the test to review one by one.

The walk over-reports (``tracker.create_table()`` is named like ``CreateTable``; a
module that only checks answers names operations): the test lists each such site with
its reason, so that every other site is a send that some policy must grant.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import botocore.session
from botocore import xform_name

#: The services the package builds clients for (:func:`client_services` checks that
#: the source names no other).
SERVICES = ("dynamodb", "dynamodbstreams", "sqs", "s3", "events")
#: The services whose operations the DynamoDB store sends by name (``xform_name``).
NAMED = ("dynamodb", "dynamodbstreams")


@dataclass(frozen=True, order=True)
class Send:
    """One place in the package that sends ``service``'s ``operation``."""

    module: str  # path under the package; a generated ``_sync/`` twin reads as ``_async/``
    function: str  # the enclosing ``def`` (``Class.method``), or ``<module>``
    service: str
    operation: str
    line: int
    how: str  # the source of the call or the name


@dataclass(frozen=True, order=True)
class Lookup:
    """A dynamic attribute lookup: ``getattr(x, <not a constant>)`` or a ``__getattr__``."""

    module: str
    function: str
    source: str


@cache
def _session() -> botocore.session.Session:
    return botocore.session.get_session()


@cache
def operations() -> dict[str, frozenset[tuple[str, str]]]:
    """Client method name -> the (service, operation) pairs it sends, for :data:`SERVICES`."""
    found: dict[str, set[tuple[str, str]]] = {}
    for service in SERVICES:
        for operation in _session().get_service_model(service).operation_names:
            found.setdefault(xform_name(operation), set()).add((service, operation))
    return {name: frozenset(pairs) for name, pairs in found.items()}


@cache
def waiters() -> dict[str, frozenset[tuple[str, str]]]:
    """``get_waiter`` name -> the (service, operation) pairs the waiter polls with."""
    found: dict[str, set[tuple[str, str]]] = {}
    for service in SERVICES:
        try:
            model = _session().get_waiter_model(service)
        except Exception:  # noqa: BLE001 - botocore raises a private error for "no waiters"
            continue
        for name in model.waiter_names:
            found.setdefault(xform_name(name), set()).add((service, model.get_waiter(name).operation))
    return {name: frozenset(pairs) for name, pairs in found.items()}


@cache
def _named() -> dict[str, frozenset[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {}
    for service in NAMED:
        for operation in _session().get_service_model(service).operation_names:
            found.setdefault(operation, set()).add((service, operation))
    return {name: frozenset(pairs) for name, pairs in found.items()}


def _module(path: Path, package: Path) -> str:
    return path.relative_to(package).as_posix().replace("/_sync/", "/_async/")


def _sources(package: Path) -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(package.rglob("*.py")):
        yield _module(path, package), ast.parse(path.read_text(encoding="utf-8"), str(path))


class _Walker(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.scope: list[str] = []
        self.sends: list[Send] = []
        self.lookups: list[Lookup] = []

    @property
    def function(self) -> str:
        return ".".join(self.scope) or "<module>"

    def _scoped(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        if node.name in ("__getattr__", "__getattribute__"):
            self.lookups.append(Lookup(self.module, self.function, f"def {node.name}"))
        self.generic_visit(node)
        self.scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _scoped

    def _add(self, pairs: frozenset[tuple[str, str]], node: ast.AST, how: str) -> None:
        for service, operation in sorted(pairs):
            self.sends.append(Send(self.module, self.function, service, operation, node.lineno, how))  # type: ignore[attr-defined]

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        first = node.args[0] if node.args else None
        constant = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        if isinstance(func, ast.Attribute):
            how = ast.unparse(func)
            if func.attr in ("get_paginator", "get_waiter") and constant is None:
                self.lookups.append(Lookup(self.module, self.function, ast.unparse(node)))
            elif func.attr == "get_paginator" and constant is not None:
                self._add(operations().get(constant, frozenset()), node, f"{how}({constant!r})")
            elif func.attr == "get_waiter" and constant is not None:
                self._add(waiters().get(constant, frozenset()), node, f"{how}({constant!r})")
            elif func.attr in operations():
                self._add(operations()[func.attr], node, f"{how}(...)")
        if (func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)) == "scan_pages":
            self._add(operations()["scan"], node, "scan_pages(...)")  # answers.scan_pages: a checked Scan
        if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2:
            if not isinstance(node.args[1], ast.Constant):
                self.lookups.append(Lookup(self.module, self.function, ast.unparse(node)))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value in _named():
            self._add(_named()[node.value], node, repr(node.value))


def _walk(package: Path) -> Iterator[_Walker]:
    for module, tree in _sources(package):
        walker = _Walker(module)
        walker.visit(tree)
        yield walker


@cache
def sends(package: Path) -> list[Send]:
    """Every site in ``package`` that sends (or may send) a request, one per operation."""
    return sorted(send for walker in _walk(package) for send in walker.sends)


@cache
def dynamic_lookups(package: Path) -> frozenset[Lookup]:
    """Every ``getattr`` with a computed name and every ``__getattr__`` in ``package``."""
    return frozenset(lookup for walker in _walk(package) for lookup in walker.lookups)


def client_services(package: Path) -> set[str]:
    """The services ``package`` names when it builds or picks a client: the string first
    argument of ``<...>client(...)``, ``create_client(...)``, ``_clients.get(...)`` and the
    second of ``_Lazy(pipeline, service)``."""
    found: set[str] = set()
    for _, tree in _sources(package):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            position = 1 if name == "_Lazy" else 0
            if not (name.endswith("client") or name.endswith("_clients.get") or name == "_Lazy"):
                continue
            if len(node.args) > position:
                arg = node.args[position]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.add(arg.value)
    return found


#: Operations that IAM authorises under other actions (AWS's Service Authorization
#: Reference): a transaction's entries as the single writes they hold, a batch as its
#: single form, a HEAD as the GET, a listing as ``ListBucket``, a copy as a read and a
#: write, the streams API under ``dynamodb:``.
_ACTIONS: dict[tuple[str, str], frozenset[str]] = {
    ("dynamodb", "TransactWriteItems"): frozenset(
        {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
    ),
    ("sqs", "SendMessageBatch"): frozenset({"sqs:SendMessage"}),
    ("sqs", "DeleteMessageBatch"): frozenset({"sqs:DeleteMessage"}),
    ("s3", "HeadObject"): frozenset({"s3:GetObject"}),
    ("s3", "ListObjectsV2"): frozenset({"s3:ListBucket"}),
    ("s3", "ListObjects"): frozenset({"s3:ListBucket"}),
    ("s3", "DeleteObjects"): frozenset({"s3:DeleteObject"}),
    ("s3", "CopyObject"): frozenset({"s3:GetObject", "s3:PutObject"}),
}


def iam_actions(service: str, operation: str) -> frozenset[str]:
    """The IAM actions a request of ``service``'s ``operation`` needs."""
    if (service, operation) in _ACTIONS:
        return _ACTIONS[service, operation]
    prefix = "dynamodb" if service == "dynamodbstreams" else service
    return frozenset({f"{prefix}:{operation}"})
