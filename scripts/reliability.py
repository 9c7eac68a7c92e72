"""Run the reliability suite (tests/reliability) and print one table of its figures.

    python scripts/reliability.py [--size full|ci] [pytest args...]

``--size full`` (what ``make reliability`` runs) sets ``XOR_ACK_RELIABILITY=full``: 200
chains per fault scenario and the larger kill, hot-chain and budget runs, and about
5,000 generated pipelines in the differential test of tracked DataFrames
(tests/test_spark_differential.py). Every scenario
writes its figures as it passes or fails; the exit code is pytest's. The hot chain and the
bad-input matrix run on every backend (moto, dynalite, DynamoDB Local), the mixed fault
scenario on DynamoDB Local too. A randomized scenario prints its seed; replay it with
``XOR_ACK_SEED=<seed>``. The serverless layer's model-based test
(``tests/test_once_model.py``) runs here too, with many more examples than in ``make test``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
KINDS = [
    ("lost_response", "lost resp."),
    ("throttle", "throttled"),
    ("server_error", "500s"),
    ("connect_error", "conn. err."),
    ("sigkill", "SIGKILL"),
]


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def table(rows: list[dict[str, Any]], title: str) -> Table:
    out = Table(title=title, show_lines=False)
    out.add_column("scenario", style="bold", no_wrap=True)
    for name in [
        "chains",
        "stamps",
        "requests",
        *(label for _, label in KINDS),
        "lost acks",
        "false acks",
        "corrupt",
        "escaped errors",
        "max req./stamp",
        "p50 ms",
        "p99 ms",
    ]:
        out.add_column(name, justify="right")
    totals: dict[str, int] = {}
    for row in rows:
        faults = row.get("faults", {})
        cells = [
            row["scenario"],
            _cell(row.get("chains")),
            _cell(row.get("stamps")),
            _cell(row.get("requests")),
        ]
        cells += [_cell(faults.get(kind)) for kind, _ in KINDS]
        cells += [
            _cell(row.get(k))
            for k in (
                "lost_acks",
                "false_acks",
                "corrupt",
                "escaped_errors",
                "max_attempts",
                "p50_ms",
                "p99_ms",
            )
        ]
        out.add_row(*cells)
        for key in ("chains", "stamps", "requests", "lost_acks", "false_acks", "corrupt", "escaped_errors"):
            totals[key] = totals.get(key, 0) + int(row.get(key) or 0)
        for kind, _ in KINDS:
            totals[kind] = totals.get(kind, 0) + int(faults.get(kind) or 0)
        totals["max_attempts"] = max(totals.get("max_attempts", 0), int(row.get("max_attempts") or 0))
    out.add_section()
    out.add_row(
        "total",
        *(str(totals.get(k, 0)) for k in ("chains", "stamps", "requests")),
        *(str(totals.get(kind, 0)) for kind, _ in KINDS),
        *(
            str(totals.get(k, 0))
            for k in ("lost_acks", "false_acks", "corrupt", "escaped_errors", "max_attempts")
        ),
        "",
        "",
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=["full", "ci"], default="full")
    args, pytest_args = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        figures = Path(tmp) / "figures.jsonl"
        env = dict(os.environ, XOR_ACK_RELIABILITY=args.size, XOR_ACK_RELIABILITY_FIGURES=str(figures))
        code = subprocess.call(
            [
                sys.executable,
                "-m",
                "pytest",
                "tests/reliability",
                # Tracked DataFrames against plain PySpark: 25 times make test's pipelines.
                "tests/test_spark_differential.py",
                "tests/test_once_model.py",
                "-q",
                "-p",
                "no:cacheprovider",
                "--durations=8",
                # One process, as before the suite went to xdist workers: the scenarios'
                # figures (times, retries) are not shared with three other workers' load.
                "-n",
                "0",
                *pytest_args,
            ],
            cwd=ROOT,
            env=env,
        )
        rows = [json.loads(line) for line in figures.read_text().splitlines()] if figures.exists() else []
    console = Console(width=max(Console().width, 220))
    console.print(table(rows, f"xor-ack-dynamodb reliability, {args.size} size (pytest exit {code})"))
    notes = [
        r
        for r in rows
        if r.get("expired_reported") is not None
        or any(r.get(k) for k in ("typed_escapes", "writers", "seed"))
    ]
    for row in notes:
        extra = {
            k: row[k]
            for k in (
                "typed_escapes",
                "expired_reported",
                "killed_mid_work",
                "writers",
                "mean_attempts",
                "stamps_per_second",
                "seed",
            )
            if k in row
        }
        console.print(f"  {row['scenario']}: {extra}")
    return code


if __name__ == "__main__":
    sys.exit(main())
