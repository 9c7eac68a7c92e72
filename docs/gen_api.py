"""Write docs/api.md from the package's docstrings: ``python docs/gen_api.py``.

The reference is generated so it cannot drift from the code: every public name of
``xor_ack_dynamodb`` (its ``__all__``), the error hierarchy, the pytest fixtures, with
signatures and docstrings as they are. ``--check`` exits 1 if docs/api.md is stale.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import xor_ack_dynamodb
from xor_ack_dynamodb import errors, testing

OUT = Path(__file__).resolve().parent / "api.md"
#: Modules documented beside the package's own names (those that exist and import).
EXTRA_MODULES = ("clients", "combiner", "serverless", "spark")


def _doc(obj: Any) -> str:
    return inspect.cleandoc(obj.__doc__ or "").strip()


def _signature(obj: Any) -> str:
    """The signature as written in the source (annotations are strings there)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    empty = inspect.Parameter.empty
    params = [
        p.replace(annotation=_Raw(p.annotation) if isinstance(p.annotation, str) else p.annotation)
        for p in sig.parameters.values()
        if p.name != "self"
    ]
    leaks = [p.name for p in params if isinstance(p.default, Mapping) and p.default is os.environ]
    if leaks:  # a default shown by value would print the environment into the docs
        raise SystemExit(f"{obj.__qualname__}: default {leaks} is os.environ; use None")
    ret = sig.return_annotation
    ret = _Raw(ret) if isinstance(ret, str) else ret
    text = str(sig.replace(parameters=params, return_annotation=ret))
    return text.replace(" -> None", "") if ret in (None, "None", empty) or str(ret) == "None" else text


class _Raw:
    """An annotation shown exactly as written."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _members(cls: type) -> list[tuple[str, Any]]:
    """Public methods and properties of ``cls``, in source order: its own, then those it
    inherits from the package's own base classes (``SyncTracker``'s for the trackers)."""
    out: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for klass in cls.__mro__:
        if klass is not cls and not klass.__module__.startswith("xor_ack_dynamodb"):
            continue
        for name, value in klass.__dict__.items():
            if name.startswith("_") or name in seen:
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if inspect.isfunction(value) or isinstance(value, property):
                seen.add(name)
                out.append((name, value))
    return out


def _class(cls: type, level: str = "###") -> list[str]:
    lines = [f"{level} `{cls.__name__}{_signature(cls)}`", ""]
    if _doc(cls):
        lines += [_doc(cls), ""]
    for name, member in _members(cls):
        if isinstance(member, property):
            lines.append(f"- **`.{name}`** (property)" + (f": {_doc(member)}" if _doc(member) else ""))
            continue
        lines.append(f"- **`.{name}{_signature(member)}`**")
        if _doc(member):
            lines.append("")
            lines += ["  " + line if line else "" for line in _doc(member).splitlines()]
        lines.append("")
    return lines + [""]


def render() -> str:
    lines = [
        "# API reference",
        "",
        "Generated from the docstrings by `python docs/gen_api.py`; do not edit by hand.",
        "Concepts are in [concepts.md](concepts.md), expiry rules in [expiry.md](expiry.md).",
        "",
        "## Package `xor_ack_dynamodb`",
        "",
        _doc(xor_ack_dynamodb),
        "",
    ]
    for name in xor_ack_dynamodb.__all__:
        obj = getattr(xor_ack_dynamodb, name)
        if inspect.isclass(obj):
            lines += _class(obj)
        elif inspect.isfunction(obj):
            lines += [f"### `{name}{_signature(obj)}`", "", _doc(obj), "", ""]
        elif name == "State":
            lines += ["### `State`", "", f"`{obj}`: a chain's state as read. `expired` is never stored.", ""]
    for module_name in EXTRA_MODULES:
        try:
            module = importlib.import_module(f"xor_ack_dynamodb.{module_name}")
        except ImportError:  # an optional extra (pyspark) is not installed
            continue
        lines += [f"## Module `xor_ack_dynamodb.{module_name}`", "", _doc(module), ""]
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if inspect.isclass(obj):
                lines += _class(obj)
            elif inspect.isfunction(obj):
                lines += [f"### `{name}{_signature(obj)}`", "", _doc(obj), "", ""]
    lines += ["## Errors (`xor_ack_dynamodb.errors`)", "", _doc(errors), ""]
    for name in errors.__all__:
        cls = getattr(errors, name)
        bases = ", ".join(b.__name__ for b in cls.__bases__)
        lines += [f"### `{name}({bases})`", "", _doc(cls), ""]
    lines += ["## Pytest fixtures (`xor_ack_dynamodb.testing.plugin`)", "", _doc(testing), ""]
    for name in testing.__all__:
        fixture = getattr(testing, name)
        wrapped = getattr(fixture, "__wrapped__", None) or getattr(fixture, "_fixture_function", fixture)
        lines += [f"### `{name}`", "", _doc(wrapped) or _doc(fixture), ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run python docs/gen_api.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
