"""Which files ``xor-ack wordcount`` reads from a folder (Spark's rule, what it leaves
out reported), and how it writes its outputs; without Spark (issue 40)."""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from xor_ack_dynamodb.cli import main
from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.jobs.wordcount.job import WordCountReport, find_inputs, write_outputs


def _tree(root: Path) -> Path:
    """A folder with files Spark's text reader reads and names it leaves out."""
    for name in [
        "a.txt",
        "sub/b.txt",
        "k=v/c.txt",  # a partition folder: read
        "_k=v.txt",  # "_" with "=": read
        "_notes.txt",
        ".hidden.txt",
        "late.txt._COPYING_",
        "_tmp/d.txt",
        ".cache/e.txt",
        "sub/_SUCCESS",
        "sub/.f.txt",
    ]:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{path.stem}\n", encoding="utf-8")
    return root


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def test_a_folder_is_what_spark_reads_and_what_it_leaves_out_is_reported(tmp_path: Path) -> None:
    """Before (HEAD), ``_notes.txt``, ``_tmp/d.txt`` and ``sub/_SUCCESS`` were counted
    (Spark's reader of the folder skips them) and nothing said what was left out."""
    folder = _tree(tmp_path / "in").resolve()
    read = ["_k=v.txt", "a.txt", "k=v/c.txt", "sub/b.txt"]
    assert [p.relative_to(folder).as_posix() for p in find_inputs([folder])] == read

    from xor_ack_dynamodb.jobs.wordcount.inputs import select_inputs

    found = select_inputs([folder])
    assert found.files == find_inputs([folder])
    assert found.skipped == [
        f"{folder}/.cache/",
        f"{folder}/.hidden.txt",
        f"{folder}/_notes.txt",
        f"{folder}/_tmp/",
        f"{folder}/late.txt._COPYING_",
        f"{folder}/sub/.f.txt",
        f"{folder}/sub/_SUCCESS",
    ]


def test_a_file_named_as_an_input_is_read_whatever_its_name(tmp_path: Path) -> None:
    from xor_ack_dynamodb.jobs.wordcount.inputs import expand_folders, select_inputs

    folder = _tree(tmp_path / "in").resolve()
    named = [folder / "_notes.txt", folder / ".hidden.txt", folder / "_tmp"]
    found = select_inputs(named)
    assert found.files == [folder / "_notes.txt", folder / ".hidden.txt", folder / "_tmp" / "d.txt"]
    assert found.skipped == []
    # run_wordcount's own expansion: folders by the rule, files as given (unchecked).
    given = expand_folders([str(folder / "missing.txt"), folder / "sub"])
    assert given.files == [str(folder / "missing.txt"), folder / "sub" / "b.txt"]
    assert given.skipped == [f"{folder}/sub/.f.txt", f"{folder}/sub/_SUCCESS"]


def test_a_folder_with_only_skipped_names_is_no_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "in"
    (folder / "_tmp").mkdir(parents=True)
    (folder / "_notes.txt").write_text("notes\n", encoding="utf-8")
    (folder / "_tmp" / "x.txt").write_text("x\n", encoding="utf-8")
    with pytest.raises(InvalidConfig, match=r"no input files found \(2 skipped"):
        find_inputs([folder])
    assert main(["wordcount", str(folder), "--output", str(tmp_path / "out")]) == 2  # before Spark starts
    assert "no input files found (2 skipped" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _report(**more: Any) -> WordCountReport:
    return WordCountReport(
        "run", False, [], Counter({"b": 1, "a": 2}), Counter({"requests": 0}), 1.0, [], **more
    )


@pytest.mark.parametrize(
    ("mask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)], ids=["022", "027", "002"]
)
def test_the_outputs_take_the_umask_mode(tmp_path: Path, mask: int, mode: int) -> None:
    """Before (HEAD) both files were ``0o600`` whatever the umask (a temporary file's
    mode, renamed into place)."""
    out = tmp_path / "out"
    with _umask(mask):
        write_outputs(_report(), out)
    assert sorted(os.listdir(out)) == ["counts.csv", "report.json"]  # no temporary file left
    for name in ("counts.csv", "report.json"):
        assert stat.S_IMODE((out / name).stat().st_mode) == mode, name
    assert (out / "counts.csv").read_text(encoding="utf-8").splitlines() == ["word,count", "a,2", "b,1"]


def test_the_report_lists_and_counts_what_was_skipped(tmp_path: Path) -> None:
    import json

    write_outputs(_report(skipped=["/in/_notes.txt", "/in/_tmp/"]), tmp_path)
    written = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert written["skipped"] == ["/in/_notes.txt", "/in/_tmp/"]
    assert written["totals"]["skipped"] == 2


def test_an_s3_prefix_is_what_spark_reads_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rule on the object names below an ``s3://`` prefix (moto in-process)."""
    import boto3
    from moto import mock_aws

    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="corpus")
        for key in ("in/a.txt", "in/sub/b.txt", "in/_notes.txt", "in/.h.txt", "in/_tmp/c.txt", "in/_k=v.txt"):
            s3.put_object(Bucket="corpus", Key=key, Body=b"word\n")
        files = find_inputs(["s3://corpus/in/"])
        assert files == ["s3://corpus/in/_k=v.txt", "s3://corpus/in/a.txt", "s3://corpus/in/sub/b.txt"]

        from xor_ack_dynamodb.jobs.wordcount.inputs import select_inputs

        found = select_inputs(["s3://corpus/in/"])
    assert found.files == files
    assert found.skipped == ["s3://corpus/in/.h.txt", "s3://corpus/in/_notes.txt", "s3://corpus/in/_tmp/"]


def test_links_to_folders_are_not_followed_and_odd_names_are_escaped(tmp_path: Path) -> None:
    from xor_ack_dynamodb.jobs.wordcount.inputs import select_inputs

    folder = _tree(tmp_path / "in").resolve()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.txt").write_text("x\n", encoding="utf-8")
    (folder / "link").symlink_to(elsewhere, target_is_directory=True)
    with open(os.fsencode(folder) + b"/_r\xe9sum\xe9.txt", "wb") as handle:
        handle.write(b"word\n")
    found = select_inputs([folder])
    assert [p.relative_to(folder).as_posix() for p in found.files] == [
        "_k=v.txt",
        "a.txt",
        "k=v/c.txt",
        "sub/b.txt",
    ]
    assert [p[len(str(folder)) + 1 :] for p in found.skipped] == [
        ".cache/",
        ".hidden.txt",
        "_notes.txt",
        "_r%E9sum%E9.txt",
        "_tmp/",
        "late.txt._COPYING_",
        "sub/.f.txt",
        "sub/_SUCCESS",
    ]
