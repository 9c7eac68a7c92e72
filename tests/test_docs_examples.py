"""Every fenced block of README.md and docs/*.md, run as a reader runs it (issue 22).

One test per block, named by its page and line (``README.md:52``), so a broken example
fails the suite and says where it is. What a block is, is said on the page: an HTML
comment on the line before its fence, ``<!-- example: KIND note -->``, with the same
fact in the page's visible text. Without one, a block's language decides.

- ``python`` (default): a complete program, run in a fresh namespace (after the page's
  setup, if it has one). ``continues``: runs in the namespace of the page's previous
  Python block. ``pytest``: a test module, run by pytest in a subprocess (the plugin's
  fixtures come from the installed package).
- ``sh`` / ``bash`` (default): run by ``bash -e -o pipefail`` in the page's directory,
  with the page's environment and the package's commands on ``PATH``.
- ``setup``: the page's declared setup, run before each of its other blocks. A shell
  setup is a list of ``export`` lines (applied to the page's environment); a Python setup
  runs first in each fresh namespace.
- ``install``: ``pip install`` lines that work today, from a checkout or a built wheel:
  each target is checked (the path exists, every extra is declared in pyproject.toml);
  ``tests/test_packaging.py`` installs the wheel into clean virtualenvs.
  ``index``: install lines for the package index, for when it is published: their
  extras are checked, and the block is reported as not run.
- ``elsewhere``: run by another test, named first in the note (``make demo``: the
  word-count tests); the file must exist; reported as skipped, naming it.
- ``aws``: needs AWS (``sam deploy``, EMR steps, real IAM): reported as skipped with the
  page's reason, never run.
- ``json``: must parse. No language (or ``text``): a diagram or a program's output,
  reported as not code.

The environment is a user's: ``AWS_REGION`` only (``AWS_DEFAULT_REGION``, which botocore
reads, is unset), dummy keys, and the endpoint a page's setup exports. The pages name one
local endpoint, ``http://127.0.0.1:5000`` (``moto_server -p 5000``, as they tell a
reader to start); here it is one moto server shared by the run, whose URL replaces that
string. Each page runs in its own directory (Spark's working directory too), so a block
that writes ``out/`` can run twice; a page's blocks run in order on one worker.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from moto.server import ThreadedMotoServer

REPO = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))]
LOCAL_ENDPOINT = "http://127.0.0.1:5000"
#: Pages whose blocks run in the checkout rather than a fresh directory: testing.md's npm
#: command installs DynamoDB Local into it (``make dynamodb-local``), where its example looks.
IN_CHECKOUT = {"docs/testing.md"}
MARK = re.compile(r"^\s*<!--\s*example:\s*([\w-]+)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
KINDS = {"run", "setup", "continues", "pytest", "install", "index", "aws", "elsewhere", "json", "text"}
SHELLS = {"sh", "bash", "shell"}
#: The extras pyproject.toml declares (install lines may name only these).
EXTRAS = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # the fence's line, 1-based
    lang: str
    kind: str
    note: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def parse(page: str) -> list[Block]:
    """The fenced blocks of ``page``, in order, with their kinds (see the module's doc)."""
    lines = (REPO / page).read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        indent, lang = fence.group(1), fence.group(2).lower()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        body = "\n".join(
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        )
        before = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        mark = MARK.match(before)
        if mark is not None:
            kind, note = mark.group(1), mark.group(2)
        elif lang in ("", "text"):
            kind, note = "text", ""
        elif lang == "json":
            kind, note = "json", ""
        else:
            kind, note = "run", ""
        assert kind in KINDS, f"{page}:{i + 1}: unknown example kind {kind!r}"
        blocks.append(Block(page, i + 1, lang, kind, note, body + "\n"))
        i = end + 1
    return blocks


BLOCKS = [block for page in PAGES for block in parse(page)]


# -- what a page shares between its blocks --------------------------------------------------


class Page:
    """A page's directory, environment and Python namespaces, kept while its blocks run."""

    def __init__(self, page: str, root: Path, endpoint: str) -> None:
        self.page = page
        self.dir = REPO if page in IN_CHECKOUT else root / page.replace("/", "_").replace(".", "_")
        self.dir.mkdir(exist_ok=True)
        self.endpoint = endpoint
        self.scratch = root / ("scratch_" + page.replace("/", "_").replace(".", "_"))
        self.scratch.mkdir()
        self.env: dict[str, str] = {}
        self.python_setup: list[Block] = []
        self.last: dict[str, Any] | None = None
        self.failed: str | None = None

    def source(self, block: Block) -> str:
        return block.text.replace(LOCAL_ENDPOINT, self.endpoint)


@pytest.fixture(scope="module")
def shared_server() -> Iterator[str]:
    """One moto server for the whole run: what ``moto_server -p 5000`` is to a reader
    (threaded, every service; SQS long polls do not hold the others up)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="module")
def pages(shared_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Page]:
    root = tmp_path_factory.mktemp("docs")
    return {page: Page(page, root, shared_server) for page in PAGES}


@pytest.fixture
def user_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The environment a user has: AWS_REGION only, dummy keys, no endpoint but the page's.
    Whatever a block does to ``os.environ`` is undone after it."""
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.startswith(("AWS_ENDPOINT_URL", "AWS_PROFILE", "XOR_ACK_")) or name == "AWS_DEFAULT_REGION":
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bin_dir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ.get("PATH", ""))
    yield
    os.environ.clear()
    os.environ.update(saved)


def _exports(page: Page, block: Block) -> None:
    """A shell setup: its ``export NAME=value ...`` lines, into the page's environment."""
    for raw in page.source(block).splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line)
        assert words[0] == "export", f"{block.id}: a shell setup holds only export lines, not {line!r}"
        for word in words[1:]:
            name, _, value = word.partition("=")
            page.env[name] = value


@contextmanager
def _spark_here(directory: Path) -> Iterator[None]:
    """Relative paths mean ``directory`` to Spark too, as for a user who started it there."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is None:
        yield
        return
    hadoop = session._jvm.org.apache.hadoop.fs  # type: ignore[union-attr]
    local = hadoop.FileSystem.getLocal(session._jsc.hadoopConfiguration())
    before = local.getWorkingDirectory()
    local.setWorkingDirectory(hadoop.Path(str(directory)))
    partitions = session.conf.get("spark.sql.shuffle.partitions")  # the page sets it: restored
    # Structured Streaming resolves a relative checkpoint against the JVM's own directory
    # (FileContext), not the file system's working directory.
    system = session._jvm.java.lang.System  # type: ignore[union-attr]
    user_dir = system.getProperty("user.dir")
    system.setProperty("user.dir", str(directory))
    try:
        yield
    finally:
        system.setProperty("user.dir", user_dir)
        local.setWorkingDirectory(before)
        session.conf.set("spark.sql.shuffle.partitions", partitions)


def _exec(page: Page, block: Block, namespace: dict[str, Any]) -> None:
    code = compile(page.source(block), f"{block.page}:{block.line} (fence line)", "exec")
    exec(code, namespace)


def _run_python(page: Page, block: Block) -> None:
    if block.kind == "continues":
        assert page.last is not None, f"{block.id} continues a block, but none ran before it on the page"
        namespace = page.last
    else:
        namespace = {"__name__": f"docs_example_{block.line}"}
        for setup in page.python_setup:
            _exec(page, setup, namespace)
    _exec(page, block, namespace)
    page.last = namespace


def _run_pytest(page: Page, block: Block) -> None:
    project = page.scratch / f"pytest_{block.line}"
    project.mkdir()
    (project / "test_docs_example.py").write_text(page.source(block))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0", "test_docs_example.py"],
        cwd=project,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"{block.id}:\n{result.stdout[-4000:]}{result.stderr[-2000:]}"
    assert " passed" in result.stdout and "failed" not in result.stdout


def _run_shell(page: Page, block: Block) -> None:
    script = page.source(block)
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=page.dir,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (
        f"{block.id} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )


def _install_targets(block: Block) -> list[str]:
    targets = []
    for raw in block.text.replace("\\\n", " ").splitlines():
        words = shlex.split(raw.split(" #", 1)[0])
        if "install" in words and any(
            w.endswith("pip") or w == "pip3" for w in words[: words.index("install")]
        ):
            targets += [w for w in words[words.index("install") + 1 :] if not w.startswith("-")]
    assert targets, f"{block.id}: an install block without a pip install line"
    return targets


def _check_install(block: Block) -> None:
    """Each target resolves: a checkout path or a wheel glob that ``make dist`` makes, or
    (``index`` blocks only) the package's name; every extra named is declared."""
    for target in _install_targets(block):
        name, _, extras = target.partition("[")
        for extra in filter(None, extras.rstrip("]").split(",")):
            assert extra in EXTRAS, f"{block.id}: {target}: no extra {extra!r} in pyproject.toml"
        if block.kind == "index":
            assert name == "xor-ack-dynamodb", f"{block.id}: {target} is not this package"
        elif name.startswith("dist/"):
            assert name.endswith(".whl") and "make dist" in (REPO / block.page).read_text()
        else:
            assert name in (".", "./") or (REPO / name).exists(), (
                f"{block.id}: {target} is not in the checkout"
            )


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_doc_block(
    block: Block, pages: dict[str, Page], request: pytest.FixtureRequest, user_env: None
) -> None:
    page = pages[block.page]
    if block.kind == "text":
        return  # a diagram or a program's output: not code (counted in test_every_block_is_accounted_for)
    if block.kind == "json":
        json.loads(block.text)
        return
    if block.kind in ("install", "index"):
        _check_install(block)
        if block.kind == "index":
            pytest.skip(
                f"{block.id}: install lines for the package index (not published yet); extras checked"
            )
        return
    if block.kind == "elsewhere":
        where = block.note.split()[0] if block.note else ""
        assert (REPO / where).is_file(), f"{block.id}: name the test that runs it, not {where!r}"
        pytest.skip(f"{block.id} is run elsewhere: {block.note}")
    if block.kind == "aws":
        assert block.note, f"{block.id}: say on the page why it needs AWS"
        pytest.skip(f"{block.id} needs AWS: {block.note}")
    if page.failed is not None:
        pytest.fail(f"{block.id} not run: the page's earlier block {page.failed} failed")
    os.environ.update(page.env)
    if block.kind == "setup" and block.lang in SHELLS:
        _exports(page, block)
        os.environ.update(page.env)
        return
    if block.page == "docs/spark.md":
        request.getfixturevalue("spark")  # the suite's one SparkSession: the page's get_session finds it
    os.chdir(page.dir)
    try:
        with _spark_here(page.dir) if block.page == "docs/spark.md" else nullcontext():
            if block.kind == "setup":
                assert block.lang == "python", f"{block.id}: a setup is sh or python"
                namespace: dict[str, Any] = {"__name__": "docs_setup"}
                _exec(page, block, namespace)
                page.python_setup.append(block)
            elif block.kind == "pytest":
                _run_pytest(page, block)
            elif block.lang == "python":
                _run_python(page, block)
            elif block.lang in SHELLS:
                _run_shell(page, block)
            else:
                pytest.fail(
                    f"{block.id}: a block of language {block.lang!r} the collector cannot run: mark it"
                )
    except BaseException:
        if block.kind == "setup":
            page.failed = block.id
        elif block.lang == "python":
            page.last = None  # a block that continues this one fails too
        raise
    finally:
        os.chdir(REPO)


def test_every_block_is_accounted_for() -> None:
    """Every fenced block is collected, and none is left to a default it cannot have: a
    shell block that installs or deploys must be marked (``install``, ``index``, ``aws``)."""
    counts: dict[str, int] = {}
    for block in BLOCKS:
        counts[block.kind] = counts.get(block.kind, 0) + 1
        if block.kind == "run" and block.lang in SHELLS:
            for word in ("pip install", "sam deploy", "aws ", "spark-submit"):
                assert word not in block.text, f"{block.id} runs {word!r}: mark it install, index or aws"
    fences = sum(1 for page in PAGES for line in (REPO / page).read_text().splitlines() if FENCE.match(line))
    assert 2 * len(BLOCKS) == fences, "a fence the parser did not pair"
    print("docs examples by kind:", dict(sorted(counts.items())))
