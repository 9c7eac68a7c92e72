"""How big the reliability runs are, and where their figures go.

``XOR_ACK_RELIABILITY=full`` (what ``make reliability`` sets) selects the full size;
anything else, or nothing, the CI size that ``make test`` runs. When
``XOR_ACK_RELIABILITY_FIGURES`` names a file, every scenario appends one JSON line of
figures to it, which ``scripts/reliability.py`` turns into one table.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

__all__ = ["Size", "SIZE", "record_figures"]


@dataclass(frozen=True)
class Size:
    name: str
    chains: int  # per fault scenario
    max_nodes: int  # per tree
    sum_chains: int  # per sum-mode fault scenario (one batch: as many chains race as in xor's)
    trim_chains: int  # sum mode's trims under faults (a chain per thread)
    threads: int
    batch: int  # chains whose stamps are shuffled together
    kill_rounds: int
    kill_chains: int
    hot_children: int
    hot_threads: int
    hot_processes: int
    low_budget_chains: int


CI = Size(
    "ci",
    chains=20,
    max_nodes=12,
    sum_chains=8,
    trim_chains=4,
    threads=12,
    batch=8,
    kill_rounds=3,
    kill_chains=12,
    hot_children=160,
    hot_threads=16,
    hot_processes=4,
    low_budget_chains=16,
)
FULL = Size(
    "full",
    chains=200,
    max_nodes=16,
    sum_chains=96,
    trim_chains=16,
    threads=16,
    batch=16,
    kill_rounds=10,
    kill_chains=40,
    hot_children=800,
    hot_threads=16,
    hot_processes=4,
    low_budget_chains=80,
)

SIZE = FULL if os.environ.get("XOR_ACK_RELIABILITY", "").lower() == "full" else CI


def record_figures(scenario: str, **figures: Any) -> None:
    """Append one scenario's figures to the figures file, if one is set."""
    path = os.environ.get("XOR_ACK_RELIABILITY_FIGURES")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"scenario": scenario, "size": SIZE.name, **figures}) + "\n")
