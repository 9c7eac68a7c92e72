"""The figures the docs state, read from the benchmarks' output files.

A figure in README.md or docs/*.md that states a benchmark result is written right after a
marker naming the json file it comes from, the value in it and how it is printed::

    <!-- fig: wordcount_vs_plain.json | {files=710}.median_ratio.frame | .2f -->1.36 ×

- the file is one of ``benchmarks/*.json`` (which benchmark writes which: docs/performance.md);
- the path walks the json: a name is a key, a number an index, ``{key=value,...}`` the one
  element of a list whose keys print as those values (``{backend=DynamoDB Local,processes=32}``);
  two paths joined by `` / ``, `` * ``, `` + `` or `` - `` are computed (``a.p99_ms / a.p50_ms``);
- the format is a Python format spec (``.2f``, ``,d``, ``.0f``); without one the value is
  printed as the json holds it.

A table a benchmark writes is included whole, between::

    <!-- include: benchmarks/wordcount_vs_plain.md -->
    ...
    <!-- /include -->

(its first line, the "written by" comment, left out). A goal rather than a result is marked
``<!-- target -->`` before it, so that the check below does not take it for an unmarked
result.

``python scripts/doc_figures.py`` rewrites every marked figure and included table from the
files; ``--check`` only compares, prints each disagreement and exits 1. The test
``tests/test_doc_figures.py`` runs the check, and fails on a figure that looks like a
benchmark result (``1.36 ×``, ``1.047 requests a stamp``) and carries no marker in the
pages listed in ``STRICT``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"

# The pages whose marked figures are checked and rewritten.
PAGES = ("README.md", "docs/*.md", "benchmarks/README.md")
# The pages where an unmarked result-looking figure fails the check.
STRICT = ("README.md", "docs/performance.md")

FIG = re.compile(
    r"<!--\s*fig:\s*(?P<file>[\w.-]+\.json)\s*\|\s*(?P<expr>[^|]+?)\s*"
    r"(?:\|\s*(?P<fmt>[^|]*?)\s*)?-->(?P<value>-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e-?\d+)?)"
)
TARGET = re.compile(r"<!--\s*target\s*-->(?P<value>[≤≥<>]?\s*-?\d[\d,]*(?:\.\d+)?)")
INCLUDE = re.compile(
    r"(?P<open><!--\s*include:\s*(?P<file>[\w./-]+)\s*-->\n)(?P<body>.*?)(?P<close><!--\s*/include\s*-->)",
    re.S,
)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]+`")

_NUMBER = r"\d+(?:[.,]\d+)*"
_MORE = rf"(?:\s*(?:to|and|or|,|–|-)\s*(?:{_NUMBER}|\x00))*"
# What reads as a benchmark's result: a ratio (1.36 ×, ×1.31, 1.7 to 1.9 ×) or a rate of
# requests or write units (1.047 requests a stamp, 1.7 to 1.9 write units a stamp).
RESULT_LOOKING = (
    re.compile(rf"(?<![\w.]){_NUMBER}(?={_MORE}\s*×)"),
    re.compile(rf"×\s?{_NUMBER}"),
    re.compile(
        rf"(?<![\w.])\d+\.\d+(?={_MORE}\s*(?:requests?|write units?|WCU|read units?)\s*(?:a|per|/)\s*"
        r"(?:stamp|message|word|file|chain))"
    ),
)


class FigureError(Exception):
    """A marker that names no value in its file."""


@dataclass(frozen=True)
class Disagreement:
    page: str
    line: int
    marker: str
    written: str
    computed: str

    def __str__(self) -> str:
        said = f"the page says {self.written!r}, the file {self.computed!r}"
        return f"{self.page}:{self.line}: {self.marker}: {said}"


@cache
def load(name: str, root: Path = BENCHMARKS) -> Any:
    return json.loads((root / name).read_text(encoding="utf-8"))


def _select(items: list[Any], spec: str) -> Any:
    wanted = dict(part.split("=", 1) for part in spec.split(",") if part.strip())
    wanted = {k.strip(): v.strip() for k, v in wanted.items()}
    found = [
        item
        for item in items
        if isinstance(item, dict) and all(k in item and str(item[k]) == v for k, v in wanted.items())
    ]
    if len(found) != 1:
        raise FigureError(f"{{{spec}}} matches {len(found)} elements, not one")
    return found[0]


def _segments(path: str) -> Iterator[str]:
    # Dots separate segments, except inside {...} (values may hold dots).
    depth, start = 0, 0
    for i, ch in enumerate(path):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "." and depth == 0:
            yield path[start:i]
            start = i + 1
    yield path[start:]


def resolve(data: Any, path: str) -> Any:
    value = data
    for segment in _segments(path.strip()):
        try:
            if segment.startswith("{") and segment.endswith("}"):
                value = _select(value, segment[1:-1])
            elif isinstance(value, list):
                value = value[int(segment)]
            else:
                value = value[segment]
        except (KeyError, IndexError, ValueError, TypeError) as error:
            raise FigureError(f"no {segment!r} in {path!r}") from error
    return value


_OPERATOR = re.compile(r"\s+([/*+-])\s+")


_FUNCTIONS: dict[str, Any] = {
    "min": min,
    "max": max,
    "len": len,
    "sum": sum,
    "median": statistics.median,
}
_CALL = re.compile(r"^(?P<name>\w+)\((?P<path>.*)\)$")


def _term(data: Any, term: str) -> Any:
    try:
        return float(term) if "." in term else int(term)
    except ValueError:
        pass
    call = _CALL.match(term)
    if call and call["name"] in _FUNCTIONS:
        return _FUNCTIONS[call["name"]](resolve(data, call["path"]))
    return resolve(data, term)


def compute(file: str, expr: str, root: Path = BENCHMARKS) -> Any:
    """The value of ``expr`` in ``file``: terms (a path, ``min(path)`` ... of a list, a
    number) joined left to right by `` / ``, `` * ``, `` + ``, `` - ``."""
    data = load(file, root)
    parts = _OPERATOR.split(expr.strip())
    value = _term(data, parts[0])
    for op, term in zip(parts[1::2], parts[2::2], strict=True):
        other = _term(data, term)
        value = {"/": value / other, "*": value * other, "+": value + other, "-": value - other}[op]
    return value


def render(value: Any, fmt: str | None) -> str:
    return format(value, fmt) if fmt else str(value)


def figure(match: re.Match[str], root: Path = BENCHMARKS) -> str:
    return render(compute(match["file"], match["expr"], root), match["fmt"] or None)


def included(name: str, root: Path = ROOT) -> str:
    text = (root / name).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    if lines and lines[0].startswith("<!-- written by"):
        lines = lines[1:]
        while lines and not lines[0].strip():
            lines = lines[1:]
    body = "".join(lines)
    return body if body.endswith("\n") else body + "\n"


# Markdown files rendered from a benchmark's json by the benchmark's own function: the
# check holds them to it, and the script writes them again (batch_scale.py writes no
# markdown of its own; the others write theirs, which must still match their json).
RENDERED: dict[str, tuple[str, str, str, str]] = {
    "benchmarks/batch_scale.md": (
        "benchmarks.batch_scale",
        "markdown",
        "batch_scale.json",
        "<!-- written by `python scripts/doc_figures.py` from batch_scale.json; do not edit by hand -->\n\n",
    ),
    "benchmarks/wordcount_vs_plain.md": (
        "benchmarks.wordcount_vs_plain",
        "table",
        "wordcount_vs_plain.json",
        "",
    ),
    "benchmarks/wordcount_parts.md": ("benchmarks.wordcount_parts", "table", "wordcount_parts.json", ""),
    "benchmarks/spark_results.md": ("benchmarks.spark_scale", "markdown", "spark_results.json", ""),
}


def rendered(name: str, root: Path = ROOT) -> str:
    """What ``name`` (a key of RENDERED) holds when it is its json's rendering."""
    module, function, source, prefix = RENDERED[name]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    render_md = getattr(importlib.import_module(module), function)
    body = str(render_md(json.loads((root / "benchmarks" / source).read_text(encoding="utf-8"))))
    return prefix + (body if body.endswith("\n") else body + "\n")


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def check_text(page: str, text: str, root: Path = ROOT) -> list[Disagreement]:
    """Every marked figure and included table of one page that disagrees with its file."""
    wrong: list[Disagreement] = []
    for m in FIG.finditer(text):
        marker = m.group(0)[: -len(m["value"])]
        try:
            computed = figure(m, root / "benchmarks")
        except (FigureError, OSError, ZeroDivisionError) as error:
            computed = f"error: {error}"
        if computed != m["value"]:
            wrong.append(Disagreement(page, _line(text, m.start()), marker, m["value"], computed))
    for m in INCLUDE.finditer(text):
        try:
            body = included(m["file"], root)
        except OSError as error:
            body = f"error: {error}"
        if body != m["body"]:
            wrong.append(
                Disagreement(page, _line(text, m.start()), m["open"].strip(), "(the table)", "(another)")
            )
    return wrong


def rewrite_text(text: str, root: Path = ROOT) -> str:
    """The page with every marked figure and included table taken from its file again."""
    text = INCLUDE.sub(lambda m: m["open"] + included(m["file"], root) + m["close"], text)
    return FIG.sub(lambda m: m.group(0)[: -len(m["value"])] + figure(m, root / "benchmarks"), text)


def unmarked(text: str) -> list[tuple[int, str]]:
    """(line, text) of each result-looking figure not right after a fig or target marker."""

    # Blank out what is checked another way, keeping offsets: included tables, fenced
    # code, marked figures and targets (a marked figure becomes \x00, which still joins a
    # range like "<marked> to 1.9 ×" so that the unmarked end of it is found).
    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    def hide(m: re.Match[str]) -> str:
        return " " * (len(m.group(0)) - 1) + "\x00"

    plain = INCLUDE.sub(blank, text)
    plain = FENCE.sub(blank, plain)
    plain = INLINE_CODE.sub(blank, plain)
    plain = FIG.sub(hide, plain)
    plain = TARGET.sub(hide, plain)
    plain = re.sub(r"<!--.*?-->", blank, plain, flags=re.S)
    found = {(m.start(), m.group(0)) for pattern in RESULT_LOOKING for m in pattern.finditer(plain)}
    return [
        (_line(text, start), text.splitlines()[_line(text, start) - 1].strip()) for start, _ in sorted(found)
    ]


def pages(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in PAGES for p in root.glob(pattern)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a disagreement")
    args = parser.parse_args(argv)
    status = 0
    for name in RENDERED:
        path = ROOT / name
        want = rendered(name)
        have = path.read_text(encoding="utf-8") if path.exists() else ""
        if have != want:
            if args.check:
                print(f"{name}: not what its json renders to (python scripts/doc_figures.py writes it)")
                status = 1
            else:
                path.write_text(want, encoding="utf-8")
                print(f"wrote {name}")
    for path in pages():
        page = str(path.relative_to(ROOT))
        text = path.read_text(encoding="utf-8")
        if args.check:
            for wrong in check_text(page, text):
                print(wrong)
                status = 1
            if page in STRICT:
                for line, context in unmarked(text):
                    print(f"{page}:{line}: a result-looking figure without a marker: {context}")
                    status = 1
            continue
        try:
            new = rewrite_text(text)
        except (FigureError, OSError, ZeroDivisionError) as error:
            print(f"{page}: {error}")
            status = 1
            continue
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {page}")
    return status


if __name__ == "__main__":
    sys.exit(main())
