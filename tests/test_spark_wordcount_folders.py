"""``xor-ack wordcount FOLDER`` on a real Spark (local[2,4]): it reads what
``spark.read.text(FOLDER)`` reads (below it, what Spark's ``recursiveFileLookup`` reads),
says what it left out, and leaves only its two outputs, with the umask's mode (issue 40)."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from pyspark import cloudpickle
from spark_helpers import read_counts

from xor_ack_dynamodb.cli import main
from xor_ack_dynamodb.jobs.wordcount.job import tokenize

pytestmark = pytest.mark.spark

cloudpickle.register_pickle_by_value(sys.modules[__name__])

#: A folder's files: what Spark's text reader reads, and names it leaves out.
FLAT = {
    "a.txt": "Alpha beta\nbeta GAMMA\n",
    "b.txt": "beta delta\n",
    "_notes.txt": "notes alpha\n",
    ".hidden.txt": "hidden alpha\n",
    "late.txt._COPYING_": "copying alpha\n",
}
#: Below it: a folder Spark's reader descends into when asked to (recursiveFileLookup),
#: folders it leaves out whole, and a name left out there.
NESTED = {
    "sub/c.txt": "gamma epsilon\n",
    "sub/_SUCCESS": "",
    "_tmp/d.txt": "temporary alpha\n",
    ".cache/e.txt": "cached alpha\n",
}


def _folder(root: Path, files: dict[str, str]) -> Path:
    root = root.resolve()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def _spark_count(spark: Any, folder: Path, recursive: bool = False) -> tuple[Counter[str], list[str]]:
    """The plain word count of ``spark.read.text(folder)`` (the documented word rule),
    and the files Spark read, relative to ``folder``."""
    df = spark.read.text(str(folder), recursiveFileLookup=recursive or None)
    counts: Counter[str] = Counter()
    for row in df.collect():
        counts.update(tokenize(row["value"]))
    read = sorted(Path(unquote(urlsplit(f).path)).relative_to(folder).as_posix() for f in df.inputFiles())
    return counts, read


def _run(folder: Path, out: Path, api: str) -> int:
    """``xor-ack wordcount FOLDER`` under umask 022 (reusing the test's SparkSession)."""
    old = os.umask(0o022)
    try:
        return main(["wordcount", str(folder), "--output", str(out), "--api", api, "--quiet"])
    finally:
        os.umask(old)


def _left_only_outputs(out: Path) -> None:
    assert sorted(os.listdir(out)) == ["counts.csv", "report.json"]  # no empty .parts
    assert {stat.S_IMODE((out / n).stat().st_mode) for n in os.listdir(out)} == {0o644}


WHY = "not read: Spark's text reader skips this name"


@pytest.mark.parametrize("api", ["frame", "rdd"])
def test_a_folder_is_counted_as_spark_reads_it_and_the_skipped_files_are_reported(
    spark: Any, api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before (HEAD): ``_notes.txt`` and ``late.txt._COPYING_`` were counted (alpha 3,
    notes 1, copying 1: not what Spark's reader of the folder gives), nothing said what
    was left out, ``counts.csv`` and ``report.json`` were ``0o600`` and an empty
    ``.parts`` stayed in the output."""
    folder = _folder(tmp_path / "in", FLAT)
    expected, read = _spark_count(spark, folder)
    assert read == ["a.txt", "b.txt"]  # the premise: Spark's own reader leaves the others out
    assert expected == Counter({"alpha": 1, "beta": 3, "gamma": 1, "delta": 1})

    status = _run(folder, tmp_path / "out", api)
    captured = capsys.readouterr()

    assert status == 0
    assert read_counts(tmp_path / "out" / "counts.csv") == expected
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["skipped"] == [f"{folder}/{n}" for n in (".hidden.txt", "_notes.txt", "late.txt._COPYING_")]
    assert report["totals"]["skipped"] == 3 and report["totals"]["files"] == report["totals"]["acked"] == 2
    assert sorted(Path(f["path"]).name for f in report["files"]) == read
    # Piped: a line per skipped name, the summary row, and the count on the first line.
    lines = captured.out.splitlines()
    for name in (".hidden.txt", "_notes.txt", "late.txt._COPYING_"):
        assert f"{name}\tskipped\t0\t{WHY}" in lines, name
    assert "files skipped\t3" in lines
    assert ": 2 files (3 skipped), Spark" in captured.err
    _left_only_outputs(tmp_path / "out")


def test_below_a_folder_it_is_what_sparks_recursive_lookup_reads(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Files in subfolders are counted (the rule of ``recursiveFileLookup``, for which
    Spark leaves out ``_x`` and ``.x`` folders whole); before (HEAD), ``_tmp/d.txt``
    and ``sub/_SUCCESS`` were read too."""
    folder = _folder(tmp_path / "in", {**FLAT, **NESTED})
    expected, read = _spark_count(spark, folder, recursive=True)
    assert read == ["a.txt", "b.txt", "sub/c.txt"]

    status = _run(folder, tmp_path / "out", "frame")

    assert status == 0
    assert read_counts(tmp_path / "out" / "counts.csv") == expected
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    left_out = [".cache/", ".hidden.txt", "_notes.txt", "_tmp/", "late.txt._COPYING_", "sub/_SUCCESS"]
    assert report["skipped"] == [f"{folder}/{n}" for n in left_out]
    assert f"_tmp/\tskipped\t0\t{WHY}" in capsys.readouterr().out.splitlines()
    _left_only_outputs(tmp_path / "out")
