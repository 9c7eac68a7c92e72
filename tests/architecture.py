"""The rules of docs/architecture.md, checked on a package's import graph.

The graph is grimp's (read from the source, nothing imported): every import counts,
at module level, inside a function and under ``if TYPE_CHECKING:``; relative imports are
resolved, and ``from pkg import name`` where ``name`` is a submodule is an import of
that submodule. A package's ``__init__`` counts when it is named (``from ..core import
Chain``), not when Python runs it on the way to a submodule: otherwise a root
``__init__`` that re-exports the public surface would close a circle with every module.

``python tests/architecture.py`` prints every violation of the package.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "xor_ack_dynamodb"
LAYER_DOC = ROOT / "docs" / "architecture.md"

MAX_LINES = 600
MAX_ROOT_MODULES = 10
#: What core/ may import from the package besides core/ itself.
CORE_MAY_IMPORT = ("errors", "stamps", "status")
#: The pipelines, and what each may import from stores/: the trackers and the building of
#: clients (and, for the serverless sends, the check of an AWS service's answer), never a
#: store's requests, items or codecs.
PIPELINES = ("serverless", "spark")
PIPELINE_MAY_IMPORT = ("stores.dynamodb.tracker", "stores.memory", "stores.dynamodb.clients")
SERVERLESS_MAY_IMPORT = ("stores.dynamodb.answers",)
#: Libraries that sleep, read the clock or talk to the network: never in core/.
IO_LIBRARIES = frozenset(
    {
        "time",
        "asyncio",
        "threading",
        "multiprocessing",
        "concurrent",
        "subprocess",
        "sched",
        "select",
        "selectors",
        "socket",
        "ssl",
        "urllib",
        "urllib3",
        "http",
        "requests",
        "aiohttp",
        "tenacity",
        "boto3",
        "botocore",
        "aiobotocore",
    }
)


@dataclass(frozen=True)
class Layer:
    rank: int  # higher imports lower; equal ranks are siblings that import neither way
    name: str
    modules: tuple[str, ...]  # relative to the package; "__init__" is the root itself


def read_layers(doc: Path = LAYER_DOC) -> list[Layer]:
    """The layer table of ``doc``: its rows whose first cell is a rank, the modules in
    backquotes in the third cell."""
    layers = []
    for line in doc.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            modules = tuple(re.findall(r"`([\w.]+)`", cells[2]))
            layers.append(Layer(int(cells[0]), cells[1], modules))
    if not layers:
        raise ValueError(f"{doc}: no layer table (rows `| rank | name | `modules` |`)")
    return layers


def build(package: str = PACKAGE) -> grimp.ImportGraph:
    return grimp.build_graph(package, include_external_packages=True, cache_dir=None)


def _internal(graph: grimp.ImportGraph, package: str) -> set[str]:
    return {m for m in graph.modules if m == package or m.startswith(package + ".")}


def _edge(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    details = graph.get_import_details(importer=importer, imported=imported)
    where = ", ".join(f"line {d['line_number']}: {d['line_contents']}" for d in details)
    return f"{importer} -> {imported} ({where})"


def circles(graph: grimp.ImportGraph, package: str = PACKAGE) -> list[str]:
    """One message per strongly connected set of modules: its members, and a shortest
    circle through them with the import lines that make it."""
    nodes = _internal(graph, package)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & nodes) for m in sorted(nodes)}
    found = []
    for component in _strongly_connected(edges):
        if len(component) == 1 and component[0] not in edges[component[0]]:
            continue
        members = set(component)
        start = min(component)
        path = _shortest_loop(start, {m: [n for n in edges[m] if n in members] for m in members})
        steps = "\n    ".join(_edge(graph, a, b) for a, b in zip(path, path[1:], strict=False))
        found.append(f"import circle among {', '.join(sorted(component))}:\n    {steps}")
    return found


def _strongly_connected(edges: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(component)
    return out


def _shortest_loop(start: str, edges: dict[str, list[str]]) -> list[str]:
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in edges[node]:
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is on no circle")


def core_io(graph: grimp.ImportGraph, package: str = PACKAGE) -> list[str]:
    """Imports by ``core`` of an I/O library or of a package module outside core/ and
    the vocabulary modules."""
    core = f"{package}.core"
    allowed = (core, *(f"{package}.{name}" for name in CORE_MAY_IMPORT))
    found = []
    for module in sorted(m for m in _internal(graph, package) if m == core or m.startswith(core + ".")):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            internal = imported.startswith(package + ".") or imported == package
            if internal and not any(imported == a or imported.startswith(a + ".") for a in allowed):
                rule = f"core may import core and {', '.join(CORE_MAY_IMPORT)}"
                found.append(f"core imports {imported} ({rule}): {_edge(graph, module, imported)}")
            elif not internal and imported.split(".")[0] in IO_LIBRARIES:
                found.append(f"core imports {imported}, which does I/O: {_edge(graph, module, imported)}")
    return found


def pipeline_stores(graph: grimp.ImportGraph, package: str = PACKAGE) -> list[str]:
    """Imports by a pipeline of a part of ``stores`` other than the trackers and clients."""
    found = []
    for pipeline in PIPELINES:
        top = f"{package}.{pipeline}"
        allowed = PIPELINE_MAY_IMPORT + (SERVERLESS_MAY_IMPORT if pipeline == "serverless" else ())
        for module in sorted(m for m in _internal(graph, package) if m == top or m.startswith(top + ".")):
            for imported in sorted(graph.find_modules_directly_imported_by(module)):
                if not imported.startswith(f"{package}.stores.") or imported.endswith(".dynamodb"):
                    continue  # outside stores, or a package on the way to an allowed module
                if imported not in {f"{package}.{a}" for a in allowed}:
                    rule = f"{pipeline} may import from stores only {', '.join(allowed)}"
                    found.append(f"{pipeline} imports {imported} ({rule}): {_edge(graph, module, imported)}")
    return found


def layer_of(module: str, layers: Iterable[Layer], package: str = PACKAGE) -> Layer | None:
    """The layer whose longest entry holds ``module`` (``__init__``: the root only)."""
    best: tuple[int, Layer] | None = None
    for layer in layers:
        for entry in layer.modules:
            if entry == "__init__":
                hit = module == package
            else:
                full = f"{package}.{entry}"
                hit = module == full or module.startswith(full + ".")
            if hit and (best is None or len(entry) > best[0]):
                best = (len(entry), layer)
    return best[1] if best else None


def upward(graph: grimp.ImportGraph, layers: list[Layer], package: str = PACKAGE) -> list[str]:
    """Modules in no layer, and imports of a module in a higher or a sibling layer."""
    found = []
    nodes = _internal(graph, package)
    for module in sorted(nodes):
        mine = layer_of(module, layers, package)
        if mine is None:
            found.append(f"{module} is in no layer of the table in docs/architecture.md")
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(module) & nodes):
            theirs = layer_of(imported, layers, package)
            if theirs is None or theirs == mine or theirs.rank < mine.rank:
                continue
            how = "up" if theirs.rank > mine.rank else "sideways"
            found.append(
                f"{mine.name} (layer {mine.rank}) imports {how} into {theirs.name} (layer {theirs.rank}): "
                + _edge(graph, module, imported)
            )
    return found


def root_modules(source: Path) -> list[str]:
    """More than MAX_ROOT_MODULES modules (not sub-packages) at the package root."""
    found = sorted(p.stem for p in source.glob("*.py"))
    if len(found) > MAX_ROOT_MODULES:
        return [f"{len(found)} modules at the package root (at most {MAX_ROOT_MODULES}): {', '.join(found)}"]
    return []


def long_modules(source: Path) -> list[str]:
    """Modules over MAX_LINES lines, generated ones included."""
    found = []
    for path in sorted(source.rglob("*.py")):
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(source.parent)}: {lines} lines (at most {MAX_LINES})")
    return found


def violations(package: str = PACKAGE, layers: list[Layer] | None = None) -> dict[str, list[str]]:
    """Every rule's violations in ``package`` (importable from ``sys.path``), by rule."""
    graph = build(package)
    source = Path(__import__(package).__file__).parent
    return {
        "circles": circles(graph, package),
        "core": core_io(graph, package),
        "layers": upward(graph, read_layers() if layers is None else layers, package),
        "pipelines": pipeline_stores(graph, package),
        "root": root_modules(source),
        "size": long_modules(source),
    }


if __name__ == "__main__":
    failed = False
    for rule, messages in violations().items():
        print(f"== {rule}: {len(messages) or 'none'}")
        for message in messages:
            print(f"  {message}")
        failed = failed or bool(messages)
    sys.exit(1 if failed else 0)
