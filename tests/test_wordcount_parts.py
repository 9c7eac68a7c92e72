"""The decomposition benchmark (``benchmarks/wordcount_parts.py``) on the bundled sample:
each step is the plain word count with one more of the tracked job's mechanisms, so
every step, the library's own ``read_text`` build included, must count the words the
plain query counts (the run's exit status says so), in processes started as a user
starts them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.wordcount_parts import STEPS, main  # noqa: E402

pytestmark = pytest.mark.spark


def test_every_step_counts_the_plain_words_and_the_table_reads_its_json(tmp_path: Path) -> None:
    assert (
        main(
            [
                "--corpus",
                str(ROOT / "examples" / "data"),
                "--sizes",
                "1",
                "--rounds",
                "1",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    (result,) = json.loads((tmp_path / "wordcount_parts.json").read_text())
    assert (result["files"], result["words"], result["same_counts"]) == (24, 6752, True)
    assert list(result["steps"]) == list(STEPS)
    for step in result["steps"].values():
        (run,) = step["runs"]
        assert (run["words"], run["distinct"]) == (6752, result["steps"]["plain"]["runs"][0]["distinct"])
        assert run["seconds"] > 0 and run["cpu"] > 0
    table = (tmp_path / "wordcount_parts.md").read_text()
    assert table.count("| 24 files / 6,752 words |") == len(STEPS)
