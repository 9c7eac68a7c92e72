"""``xor-ack wordcount``: placeholder until the Spark job lands (issue 3)."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser("wordcount", help="the tracked Spark word count")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise SystemExit("wordcount is not built yet")
