"""The figures README.md and docs/ state are the benchmarks' own (issue 40).

Each figure that states a benchmark result follows a marker naming the json file a
benchmark wrote and the value in it; each table is a benchmark's markdown output included
whole (``scripts/doc_figures.py`` says how). These tests recompute every marked figure and
included table from the files in ``benchmarks/`` and fail when a page disagrees, fail on a
ratio or a requests-a-stamp figure with no marker in README.md or docs/performance.md,
and hold the checker itself to catching what issue 40 found (a figure from an older run,
a range no run measured, a table edited by hand).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "doc_figures.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doc_figures", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["doc_figures"] = module
    spec.loader.exec_module(module)
    return module


figures = _load()

PAGES = [str(p.relative_to(ROOT)) for p in figures.pages()]


@pytest.mark.parametrize("page", PAGES)
def test_every_marked_figure_and_table_agrees_with_its_benchmark_file(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    wrong = figures.check_text(page, text)
    assert not wrong, "run `python scripts/doc_figures.py`, then read the sentences around:\n" + "\n".join(
        map(str, wrong)
    )


@pytest.mark.parametrize("page", figures.STRICT)
def test_no_result_looking_figure_without_a_marker(page: str) -> None:
    found = figures.unmarked((ROOT / page).read_text(encoding="utf-8"))
    assert not found, (
        f"{page}: figures that look like results, with no marker naming their json:\n"
        + "\n".join(f"  line {line}: {context}" for line, context in found)
    )


@pytest.mark.parametrize("name", sorted(figures.RENDERED))
def test_benchmark_markdown_is_its_json_rendered(name: str) -> None:
    """The tables the docs include are what the benchmark's own renderer makes of its json."""
    assert (ROOT / name).read_text(encoding="utf-8") == figures.rendered(name)


def test_the_word_count_figures_issue_40_found_are_read_from_the_json() -> None:
    """The README's and performance.md's word-count ratios are marked, and equal the json's
    medians (the README said 1.08 and 0.75 while the json said 1.36 and 0.85)."""
    runs = json.loads((ROOT / "benchmarks" / "wordcount_vs_plain.json").read_text(encoding="utf-8"))
    at_710 = next(r for r in runs if r["master"] == "local[*]" and r["files"] == 710)
    marker = "<!-- fig: wordcount_vs_plain.json | {master=local[*],files=710}.median_ratio.frame | .2f -->"
    for page in ("README.md", "docs/performance.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert marker + f"{at_710['median_ratio']['frame']:.2f} ×" in text, page
        assert "1.08 ×" not in text and "0.75 ×" not in text, page


def test_the_command_checks_the_repository() -> None:
    """`python scripts/doc_figures.py --check`, as docs/performance.md gives it, passes here."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


# The checker itself, on a repository of its own.

RUNS = [
    {
        "master": "local[*]",
        "files": 710,
        "median_ratio": {"frame": 1.363, "rdd": 0.847},
        "ratios": [1.43, 1.363],
    },
    {"master": "local[*]", "files": 7100, "median_ratio": {"frame": 1.69, "rdd": 1.764}},
]
RATIO_710 = "<!-- fig: wc.json | {master=local[*],files=710}.median_ratio.frame | .2f -->"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "wc.json").write_text(json.dumps(RUNS))
    (tmp_path / "benchmarks" / "wc.md").write_text(
        "<!-- written by a run -->\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    figures.load.cache_clear()
    return tmp_path


def test_a_figure_from_an_older_run_is_caught_and_rewritten(repo: Path) -> None:
    page = f"The DataFrame path: {RATIO_710}1.08 × the plain job.\n"
    [wrong] = figures.check_text("README.md", page, repo)
    assert (wrong.written, wrong.computed) == ("1.08", "1.36")
    fixed = figures.rewrite_text(page, repo)
    assert fixed == f"The DataFrame path: {RATIO_710}1.36 × the plain job.\n"
    assert figures.check_text("README.md", fixed, repo) == []


def test_computed_figures_and_formats(repo: Path) -> None:
    slower = "<!-- fig: wc.json | {files=7100}.median_ratio.frame / {files=710}.median_ratio.frame | .1f -->"
    assert figures.check_text("p.md", f"{slower}1.2 times\n", repo) == []
    assert figures.check_text("p.md", "<!-- fig: wc.json | 1.files | ,d -->7,100 files\n", repo) == []
    assert figures.check_text("p.md", "<!-- fig: wc.json | max(0.ratios) -->1.43 at most\n", repo) == []
    assert figures.check_text("p.md", "<!-- fig: wc.json | 0.ratios.1 * 100 | .0f -->136%\n", repo) == []


def test_a_marker_naming_a_run_the_file_does_not_hold_fails(repo: Path) -> None:
    """After a rerun without a size, the marker that names it fails, saying why."""
    page = "<!-- fig: wc.json | {master=local[*],files=35500}.median_ratio.frame | .2f -->1.72 ×\n"
    [wrong] = figures.check_text("docs/performance.md", page, repo)
    assert wrong.computed.startswith("error:") and "matches 0 elements" in wrong.computed
    with pytest.raises(figures.FigureError):
        figures.rewrite_text(page, repo)


def test_an_included_table_edited_by_hand_is_caught(repo: Path) -> None:
    page = "<!-- include: benchmarks/wc.md -->\n| a | b |\n|---|---|\n| 1 | 3 |\n<!-- /include -->\n"
    [wrong] = figures.check_text("p.md", page, repo)
    assert "include" in wrong.marker
    fixed = figures.rewrite_text(page, repo)
    assert "| 1 | 2 |" in fixed and "written by" not in fixed
    assert figures.check_text("p.md", fixed, repo) == []


@pytest.mark.parametrize(
    "text",
    [
        "The word count is 1.36 × the plain job.",
        "closest at ×1.31 on DynamoDB Local",
        "1.7 to 1.9 write units a stamp",
        "32 processes take 1.047 requests a stamp",
        f"{RATIO_710}1.36 × at 710 files, 1.69 × at 7,100",
        f"1.7 to {RATIO_710}1.36 ×",
    ],
)
def test_unmarked_result_looking_figures_are_found(text: str) -> None:
    assert figures.unmarked(text + "\n")


@pytest.mark.parametrize(
    "text",
    [
        f"{RATIO_710}1.36 × the plain job",
        "the target, <!-- target -->1.10 ×, is not met",
        "an example: `1.36 ×` in inline code",
        "<!-- include: benchmarks/wc.md -->\n| 1.36 × |\n<!-- /include -->",
        "one file 30 times the median, 40 op ids, 2 units a write",
    ],
)
def test_marked_targets_code_and_included_tables_are_not_flagged(text: str) -> None:
    assert figures.unmarked(text + "\n") == []
