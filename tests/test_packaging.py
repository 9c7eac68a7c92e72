"""The package as a user gets it.

- The sdist and the wheel that ``python -m build`` makes pass ``twine check --strict`` and
  hold every module, the metadata and the entry points (one build serves this module).
- The wheel with the ``local`` extra, installed into a clean virtualenv (nothing of this
  repository or the test venv on its path), runs the README's first example and the
  walkthrough; with the ``spark`` extra added to that venv (``spark`` holds all of
  ``local``: checked), it gives a working ``xor-ack``: ``--help`` and a tracked word
  count (the embedded moto server, Spark ``local[*]``).
- The README's EMR recipe, run as written (its ``spark-submit`` command is read from the
  README), on a Spark standalone cluster whose workers' Python has no copy of the
  package: a venv with the wheel and the ``cluster`` extra, packed by venv-pack, shipped
  with ``--archives``. The cluster's own PySpark (``pyspark.zip`` of the pyspark package
  that started it, as ``/usr/lib/spark/python/lib/pyspark.zip`` on EMR) is on the
  workers' path, so the archive carries no PySpark: that is what EMR does too, and it
  keeps the archive at about 130 MB. A probe shows that the workers' Python cannot import
  the package without the archive, and, run in the recipe's own application after its
  word count, that they import it from the archive with it.

The clean venvs are installed by the test venv's pip (``pip --python``) from the index
the machine's pip uses, through pip's own cache when it has the files (most of them
``make setup`` fetched in the same run); nothing else outside the repository is needed.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import REPO, corpus_files, free_port, plain_count, read_counts

import xor_ack_dynamodb
from xor_ack_dynamodb import XorAckDynamoDB
from xor_ack_dynamodb.testing.spark_servers import spark_home, standalone_cluster

pytestmark = pytest.mark.spark


def _test_site_packages() -> list[Path]:
    """The test venv's site-packages: nothing the clean environments run may import from it."""
    import site

    return [Path(p).resolve() for p in site.getsitepackages()]


def clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without what would point a Python at this repository
    or the test venv (``PYTHONPATH``, ``VIRTUAL_ENV``, ``PYSPARK_*``, the venv's ``bin``
    on ``PATH``), with fake AWS credentials and a region (an instance profile's part)."""
    dropped = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in dropped and not k.startswith("PYSPARK_") and not k.startswith("AWS_PROFILE")
    }
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_REGION="us-east-1",
        SPARK_LOCAL_IP="127.0.0.1",
    )
    env.update(extra)
    return env


def run(command: list[str], *, timeout: float = 300, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, f"{command[:4]}...: {result.stdout[-3000:]}{result.stderr[-3000:]}"
    return result


def new_venv(path: Path, *requirements: str) -> Path:
    """A virtualenv at ``path`` (no pip of its own: the test venv's pip installs into it,
    ``pip --python``) with ``requirements``; returns its ``bin`` directory. Installed
    without byte-compiling (``--no-compile``): Python compiles what it imports; compiling
    every module of PySpark, pandas and pyarrow up front took two thirds of pip's CPU time
    for the ``spark`` extra (35 s against 16 s)."""
    run([sys.executable, "-m", "venv", "--without-pip", str(path)])
    if requirements:
        pip_install(path, *requirements)
    return path / "bin"


def pip_install(venv: Path, *requirements: str) -> None:
    """``requirements`` installed into ``venv`` by the test venv's pip (no byte-compiling)."""
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"]
    run(pip + ["--quiet", "--disable-pip-version-check", "--no-compile", *requirements], timeout=600)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel of this checkout, built once (``python -m build``: the wheel
    is built from the sdist, so a file the sdist lacks is missing from the wheel too)."""
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)], timeout=600)
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def test_the_sdist_and_the_wheel_pass_twine_check(dist: dict[str, Path]) -> None:
    result = run([sys.executable, "-m", "twine", "check", "--strict", str(dist["sdist"]), str(dist["wheel"])])
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_the_wheel_holds_every_module_its_metadata_and_entry_points(dist: dict[str, Path]) -> None:
    version = xor_ack_dynamodb.__version__
    assert dist["wheel"].name == f"xor_ack_dynamodb-{version}-py3-none-any.whl"
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        names = set(wheel.namelist())
        info = f"xor_ack_dynamodb-{version}.dist-info"
        metadata = email.parser.Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    package = REPO / "xor_ack_dynamodb"
    modules = {p.relative_to(REPO).as_posix() for p in package.rglob("*.py") if "__pycache__" not in p.parts}
    assert modules - names == set(), "modules missing from the wheel"
    assert "xor_ack_dynamodb/py.typed" in names
    assert metadata["Version"] == version
    assert metadata["Requires-Python"] == ">=3.11"
    assert metadata["License-Expression"] == "MIT"
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert {"spark", "cluster", "async", "test", "bench"} <= extras
    cluster = [r for r in metadata.get_all("Requires-Dist") or [] if 'extra == "cluster"' in r]
    assert not any(r.startswith("pyspark") for r in cluster), "the cluster's own PySpark is used"
    assert "Typing :: Typed" in (metadata.get_all("Classifier") or [])
    assert metadata.get_all("Project-URL")
    assert "xor-ack = xor_ack_dynamodb.cli:run" in entry_points
    assert "xor_ack_dynamodb = xor_ack_dynamodb.testing.plugin" in entry_points
    # The console script comes with the base install, and so does what it prints with.
    base = [r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r]
    assert any(re.match(r"rich\s*>=", r) for r in base), base
    # The word count's default input: the bundled corpus, package data.
    corpus = REPO / "xor_ack_dynamodb" / "jobs" / "wordcount" / "corpus"
    bundled = {f"xor_ack_dynamodb/jobs/wordcount/corpus/{p.name}" for p in corpus.iterdir()}
    assert len(bundled) == 24 and bundled <= names, "the bundled corpus is missing from the wheel"
    with tarfile.open(dist["sdist"]) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
    assert {"README.md", "CHANGELOG.md", "pyproject.toml", "examples/spark_submit.py"} <= members
    assert not any(m.startswith("tests/") for m in members), "a partial test suite in the sdist"


def test_the_changelog_has_an_entry_for_this_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(xor_ack_dynamodb.__version__)}\]", changelog, re.MULTILINE)


def _distributions(python: Path) -> set[str]:
    """The names of the distributions installed in the venv of ``python``."""
    script = "import json, importlib.metadata as m; print(json.dumps([d.name for d in m.distributions()]))"
    listing = run([str(python), "-c", script], env=clean_environment())
    return {name.lower() for name in json.loads(listing.stdout)}


@pytest.fixture(scope="module")
def local_venv(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A clean virtualenv with the wheel and the ``local`` extra, nothing else, in which
    the README's first example and ``examples/walkthrough.py`` run at once (from a
    directory outside the repository), before anything else is installed into it: their
    outputs, what was installed then, and the venv (``spark_venv`` adds the ``spark``
    extra to this same venv: one venv, one install of what the two extras share)."""
    readme = (REPO / "README.md").read_text()
    first = re.search(r"```python\n(.*?)```", readme, re.DOTALL)
    assert first is not None
    here = tmp_path_factory.mktemp("local")
    (here / "first.py").write_text(first.group(1))
    python = new_venv(here / "venv", f"{dist['wheel']}[local]") / "python"
    env = clean_environment()
    closed = f"http://127.0.0.1:{free_port()}"
    return {
        "readme": readme,
        "first": first.group(1),
        "venv": here / "venv",
        "installed": _distributions(python),
        "first_out": run([str(python), "first.py"], cwd=here, env=env).stdout,
        "walked": run([str(python), str(REPO / "examples" / "walkthrough.py")], cwd=here, env=env).stdout,
        # S3, SQS, DynamoDB and its stream under moto's mock, on the newest botocore: its
        # streams calls went to an account endpoint moto did not serve (issue 33).
        "serverless": run(
            [str(python), str(REPO / "examples/serverless/run_local.py"), "--objects", "2", "--lines", "5"],
            cwd=here,
            env=env,
        ).stdout,
        "operator": subprocess.run(
            [str(python.parent / "xor-ack"), "list", "--table", "chains", "--endpoint-url", closed],
            cwd=here,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        ),
    }


def test_a_clean_venv_with_the_local_extra_runs_the_readme_example_and_the_walkthrough(
    local_venv: dict[str, Any],
) -> None:
    """The README's install line for the examples, ``pip install '.[local]'`` (here the
    wheel with that extra, nothing else): its first example, as written, and
    ``examples/walkthrough.py`` run on the embedded moto server, and
    ``examples/serverless/run_local.py`` under moto's mock. Before the ``local`` extra,
    the base install failed them with ``ModuleNotFoundError: No module named 'moto'``."""
    assert "pip install '.[local]'" in local_venv["readme"]
    assert "MotoServer()" in local_venv["first"]
    installed = local_venv["installed"]
    assert {"xor-ack-dynamodb", "moto", "rich"} <= installed
    assert not {"pyspark", "pandas", "pyarrow"} & installed, "more than the local extra"
    assert "acked" in local_venv["first_out"]
    assert "-> 00 acked=True" in local_venv["walked"]
    assert local_venv["serverless"].count("acked ") == 2, local_venv["serverless"]
    assert "2 completions" in local_venv["serverless"], local_venv["serverless"]
    # The operator commands run on what the base install brings (rich included): an
    # endpoint that is not there is one typed error line, exit 4.
    operator = local_venv["operator"]
    assert operator.returncode == 4, operator.stderr
    assert operator.stderr.startswith("xor-ack: error: EndpointUnreachable: "), operator.stderr
    assert "Traceback" not in operator.stderr


@pytest.fixture(scope="module")
def spark_venv(local_venv: dict[str, Any], dist: dict[str, Path]) -> Path:
    """``local_venv``'s venv (its runs done) with the wheel's ``spark`` extra installed
    too: the ``spark`` extra holds every requirement of the ``local`` one (checked below),
    so this is the venv ``pip install 'xor-ack-dynamodb[spark]'`` makes, for the price of
    what ``local`` lacks. Returns its ``bin``."""
    venv: Path = local_venv["venv"]
    pip_install(venv, f"{dist['wheel']}[spark]")
    return venv / "bin"


def test_the_spark_extra_holds_every_requirement_of_the_local_extra(dist: dict[str, Path]) -> None:
    """What lets one venv serve both clean-venv tests: ``[spark]`` = ``[local]`` + more."""
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        info = f"xor_ack_dynamodb-{xor_ack_dynamodb.__version__}.dist-info/METADATA"
        requires = email.parser.Parser().parsestr(wheel.read(info).decode()).get_all("Requires-Dist") or []

    def extra(name: str) -> set[str]:
        return {r.split(";")[0].strip() for r in requires if f'extra == "{name}"' in r}

    assert extra("local") and extra("local") <= extra("spark"), (extra("local"), extra("spark"))


def _demo_figures() -> dict[str, int]:
    """The figures docs/wordcount.md's demo output shows (its first code block)."""
    doc = (REPO / "docs" / "wordcount.md").read_text()
    block = re.search(r"```\n(xor-ack wordcount: .*?)```", doc, re.DOTALL)
    assert block is not None
    labels = {
        "files": "files",
        "acked": "files acked",
        "words": "words counted",
        "distinct_words": "distinct words",
        "dynamodb_requests": "DynamoDB requests",
    }
    figures = {}
    for key, label in labels.items():
        found = re.search(rf"│ {re.escape(label)} +│ +(\d+) │", block.group(1))
        assert found is not None, label
        figures[key] = int(found.group(1))
    return figures


def test_a_clean_venv_with_the_spark_extra_runs_xor_ack(spark_venv: Path, tmp_path: Path) -> None:
    """``pip install 'xor-ack-dynamodb[spark]'`` into a clean virtualenv (the built wheel
    instead of PyPI's) gives a working ``xor-ack``: its help, and ``make demo``'s
    ``xor-ack wordcount`` with no arguments at all, run from a directory outside the
    repository: the bundled corpus from the wheel (41ecf98: ``the bundled corpus
    .../site-packages/examples/data is missing``), the embedded moto server, Spark
    ``local[*]``, ``./out``. It ends as docs/wordcount.md shows (files, words, DynamoDB
    requests: transactions by default); piped, its summary is tab-separated lines; and
    its wall seconds are the process's (41ecf98 reported 34.8 s of a 71.5 s process)."""
    import time

    bin_dir = spark_venv
    env = clean_environment()
    where = run(
        [
            str(bin_dir / "python"),
            "-c",
            "import json, importlib.metadata as m, xor_ack_dynamodb as x; "
            "print(json.dumps([x.__file__, x.__version__, m.version('xor-ack-dynamodb')]))",
        ],
        cwd=tmp_path,
        env=env,
    )
    module, version, installed = json.loads(where.stdout)
    assert Path(module).is_relative_to(bin_dir.parent), module
    assert version == installed == xor_ack_dynamodb.__version__
    help_text = run([str(bin_dir / "xor-ack"), "--help"], cwd=tmp_path, env=env).stdout
    assert "wordcount" in help_text
    began = time.time()
    demo = run([str(bin_dir / "xor-ack"), "wordcount"], cwd=tmp_path, env=env)
    measured = time.time() - began
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    totals = report["totals"]
    assert {key: totals[key] for key in _demo_figures()} == _demo_figures()
    assert totals["acked"] == totals["files"] == len(corpus_files())
    assert report["requests"].get("requests.TransactWriteItems") == totals["dynamodb_requests"]
    assert read_counts(tmp_path / "out" / "counts.csv") == plain_count(corpus_files())
    # Piped: one summary row a line, label and value.
    rows = dict(line.split("\t") for line in demo.stdout.splitlines() if "\t" in line)
    assert rows["files acked"] == str(totals["acked"]) and rows["wall seconds"] == str(totals["wall_seconds"])
    # The whole process, but stopping Spark and the embedded server and exiting.
    assert 0.85 * measured <= totals["wall_seconds"] <= measured, (totals["wall_seconds"], measured)
    assert report["phases"]["startup"] > 0


# The README's recipe, on a standalone cluster -------------------------------------------


def readme_recipe() -> list[list[str]]:
    """The commands of the EMR recipe (docs/wordcount.md: its first ``sh`` block under "On
    EMR"), continuation lines joined, each split as the shell would."""
    readme = (REPO / "docs" / "wordcount.md").read_text()
    section = readme[readme.index("## On EMR against real DynamoDB") :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return [shlex.split(line) for line in block.group(1).replace("\\\n", " ").splitlines() if line.strip()]


#: What the test changes in the README's spark-submit command, and nothing else: the
#: master, the archive's place, the inputs, the region and the output (and it adds the
#: moto server's endpoint).
README_PLACES = (
    "yarn",
    "s3://my-bucket/env.tar.gz#env",
    "/mnt/efs/corpus",
    "eu-west-1",
    "s3://my-bucket/wordcount",
)


@pytest.fixture(scope="module")
def packed(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's first commands in a fresh directory: a venv ``env`` with the wheel and
    the ``cluster`` extra, packed by venv-pack into ``env.tar.gz``; returns the directory
    (the one to submit from)."""
    commands = readme_recipe()
    assert ["python3.11", "-m", "venv", "env"] in commands
    assert ["env/bin/pip", "install", "xor-ack-dynamodb[cluster]"] in commands
    assert ["venv-pack", "-p", "env", "-o", "env.tar.gz"] in commands
    here = tmp_path_factory.mktemp("submit")
    new_venv(here / "env", f"{dist['wheel']}[cluster]")
    venv_pack = Path(sys.executable).parent / "venv-pack"
    run([str(venv_pack), "-p", "env", "-o", "env.tar.gz"], cwd=here)
    assert not list((here / "env").glob("lib/python*/site-packages/pyspark")), "PySpark is the cluster's"
    return here


@pytest.fixture(scope="module")
def bare_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """A standalone cluster whose workers' Python is a bare venv (no packages) and whose
    environment has nothing of this repository or the test venv; yields its master URL,
    that Python and the cluster's work directory."""
    workdir = tmp_path_factory.mktemp("bare-cluster")
    bare = new_venv(workdir / "bare") / "python"
    env = clean_environment(PYSPARK_PYTHON=str(bare))
    env["PYTHONPATH"] = ""  # standalone_cluster starts from this process's environment
    with standalone_cluster(workdir, env=env) as master:
        yield master, bare, workdir / "work"


def spark_submit(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``spark-submit`` of the cluster's Spark (the pyspark package), run in ``cwd``."""
    command = [str(spark_home() / "bin" / "spark-submit"), *args]
    return subprocess.run(
        command,
        cwd=cwd,
        env=clean_environment(SPARK_HOME=str(spark_home()), **env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def probe(master: str, cwd: Path, *conf: str) -> dict[str, Any]:
    result = spark_submit(["--master", master, *conf, str(REPO / "tests" / "packaged_probe.py")], cwd)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("PROBE ")]
    answer: dict[str, Any] = json.loads(line.removeprefix("PROBE "))
    return answer


def foreign(path: list[str], cwd: str) -> list[str]:
    """Entries of an executor's ``sys.path`` (relative ones taken in its directory
    ``cwd``) that reach this repository or the test venv's site-packages; the cluster's
    ``pyspark.zip``, py4j zip and jars are allowed: they are the cluster's PySpark, as on
    EMR."""
    spark_python = spark_home() / "python" / "lib"
    bad = []
    for entry in path:
        resolved = (Path(cwd) / entry).resolve()
        if resolved.parent == spark_python or resolved.suffix == ".jar":
            continue
        if resolved.is_relative_to(REPO) or any(resolved.is_relative_to(s) for s in _test_site_packages()):
            bad.append(entry)
    return bad


def test_without_the_archive_the_workers_cannot_import_the_package(
    bare_cluster: tuple[str, Path, Path], tmp_path: Path
) -> None:
    master, bare, _ = bare_cluster
    answer = probe(master, tmp_path, "--conf", f"spark.pyspark.python={bare}")
    assert answer["executable"] == str(bare)
    assert answer["error"] == "ModuleNotFoundError: No module named 'xor_ack_dynamodb'"
    assert foreign(answer["path"], answer["cwd"]) == []


def test_the_readme_emr_recipe_runs_the_word_count_with_the_package_from_the_archive(
    bare_cluster: tuple[str, Path, Path], packed: Path, moto_server: Any
) -> None:
    """The README's spark-submit command, with only its places changed (README_PLACES),
    from the directory that holds ``env``: tracked, exact and acked, on executors that got
    the package from the archive. Its ``spark_submit.py`` runs, unchanged, under
    ``tests/packaged_probe.py``, which then probes an executor of the same application
    (one driver and one set of executors for both): the workers import the package from
    the unpacked archive (and cannot without it: the test above)."""
    master, _, work = bare_cluster
    (submit,) = [c for c in readme_recipe() if c[0] == "spark-submit"]
    text = " ".join(submit)
    for place in README_PLACES:
        assert place in text, f"the README's command no longer has {place!r}"
    inputs = corpus_files()[:4]
    (packed / "corpus").mkdir()
    for path in inputs:
        (packed / "corpus" / path.name).write_bytes(path.read_bytes())
    (packed / "spark_submit.py").write_bytes((REPO / "examples" / "spark_submit.py").read_bytes())
    (packed / "packaged_probe.py").write_bytes((REPO / "tests" / "packaged_probe.py").read_bytes())
    places: Mapping[str, str] = {
        "yarn": master,
        "s3://my-bucket/env.tar.gz#env": "env.tar.gz#env",
        "/mnt/efs/corpus": "corpus",
        "eu-west-1": "us-east-1",
        "s3://my-bucket/wordcount": "out",
    }
    args = [places.get(arg, arg) for arg in submit[1:]] + ["--endpoint-url", moto_server.endpoint_url]
    assert args.count("spark_submit.py") == 1
    args.insert(args.index("spark_submit.py"), "packaged_probe.py")  # runs it, then probes
    apps_before = set(work.glob("app-*"))
    result = spark_submit(args, packed)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"Spark {master}, frame api" in result.stdout
    (line,) = [x for x in result.stdout.splitlines() if x.startswith("PROBE ")]
    answer = json.loads(line.removeprefix("PROBE "))
    assert answer["error"] is None
    executor_dir = Path(answer["cwd"])
    assert executor_dir.is_relative_to(work)  # an executor's directory on the worker
    assert Path(answer["module"]).is_relative_to(executor_dir / "env" / "lib")
    assert answer["version"] == xor_ack_dynamodb.__version__
    assert foreign(answer["path"], answer["cwd"]) == []
    report = json.loads((packed / "out" / "report.json").read_text())
    assert report["totals"]["acked"] == report["totals"]["files"] == len(inputs)
    assert read_counts(packed / "out" / "counts.csv") == plain_count(
        packed / "corpus" / p.name for p in inputs
    )
    tracker = XorAckDynamoDB(table="xor-ack-wordcount", client=moto_server.client())
    states = tracker.status_many([f["tag"] for f in report["files"]])
    assert {s.state for s in states.values()} == {"acked"}
    # The executors ran on the worker, from the unpacked archive; the probe was one of them.
    (app,) = set(work.glob("app-*")) - apps_before
    assert list(app.glob("*/env/bin/python"))
    assert executor_dir.is_relative_to(app)
