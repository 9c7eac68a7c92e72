"""``scripts/mutations.py`` (``make mutations``, not run in CI) removes each guard the
docs promise and runs the tests that must notice. This fast check keeps its list from
rotting: every mutant's edit still applies exactly once to the source, and every test
it names is still in its file. A guard that moved fails here, not silently in the next
mutation run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutations.py"


def test_every_mutant_still_applies_and_names_existing_tests() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split()[1:] == ["mutants", "apply"] and int(run.stdout.split()[0]) >= 40
