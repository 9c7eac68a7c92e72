"""The Spark word count (``xor-ack wordcount``) on the bundled corpus, tracked and
untracked, each in its own process; the figures come from the ``report.json`` it writes."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["wordcount", "best"]


def _find(totals: Any, name: str) -> Any:
    return totals.get(name) if isinstance(totals, dict) else None


def scaled_corpus(directory: Path, times: int) -> Path:
    """The bundled corpus with every file repeated ``times`` times: as many chains,
    ``times`` as many words."""
    from xor_ack_dynamodb.wordcount import default_corpus

    directory.mkdir(parents=True, exist_ok=True)
    for source in sorted(default_corpus().iterdir()):
        if source.is_file():
            (directory / source.name).write_text(source.read_text(encoding="utf-8") * times, encoding="utf-8")
    return directory


def wordcount(tracking: bool, inputs: list[str] | None = None, timeout: float = 300.0) -> dict[str, Any]:
    """Run the job once on ``inputs`` (default: the bundled corpus). Returns its wall
    seconds, DynamoDB requests, words and requests per word, or ``{"pending": reason}``
    when the job is not available or fails."""
    with tempfile.TemporaryDirectory(prefix="xor-ack-bench-") as tmp:
        out = Path(tmp) / "out"
        command = [sys.executable, "-m", "xor_ack_dynamodb", "wordcount", "--quiet", "--output", str(out)]
        if not tracking:
            command.append("--no-tracking")
        command += inputs or []
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return {"pending": f"the Spark job did not finish within {timeout:.0f} s"}
        process_seconds = time.perf_counter() - start
        report_path = out / "report.json"
        if done.returncode != 0 or not report_path.exists():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return {"pending": f"the Spark job is not ready (exit {done.returncode}: {tail[0][:120]})"}
        report = json.loads(report_path.read_text())
    totals = report.get("totals", report)
    wall = _find(totals, "wall_seconds")
    words = _find(totals, "words")
    requests = _find(totals, "dynamodb_requests")
    per_word = _find(totals, "requests_per_word")
    if per_word is None and isinstance(requests, (int, float)) and isinstance(words, (int, float)) and words:
        per_word = requests / words
    return {
        "tracking": tracking,
        "wall_seconds": float(wall) if isinstance(wall, (int, float)) else process_seconds,
        "process_seconds": process_seconds,
        "words": words,
        "requests": requests,
        "requests_per_word": per_word,
        "report": report,
    }


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs of one mode as one: the fastest wall time, every run's listed."""
    pending = [r for r in runs if "pending" in r]
    if pending or not runs:
        return {"pending": pending[0]["pending"] if pending else "not run"}
    fastest = min(runs, key=lambda r: float(r["wall_seconds"]))
    summary = {k: v for k, v in fastest.items() if k != "report"}
    return {**summary, "walls": [round(float(r["wall_seconds"]), 3) for r in runs]}
