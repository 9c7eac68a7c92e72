"""The ``xor-ack`` command (also ``python -m xor_ack_dynamodb``).

Each subcommand lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``func`` (taking the parsed arguments, returning the exit status).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import ops, wordcount
from .common import EXIT_CODES_HELP, add_global_options

__all__ = ["main", "build_parser"]

#: Modules that add subcommands, in the order ``--help`` lists them.
SUBCOMMANDS = [wordcount, ops]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xor-ack",
        description="Guaranteed message processing with XOR ack chains kept in DynamoDB.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_global_options(parser, top_level=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (the console script exits with it)."""
    args = build_parser().parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
