"""The ``xor-ack`` command (also ``python -m xor_ack_dynamodb``).

Each subcommand lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``func`` (taking the parsed arguments, returning the exit status).
:func:`main` runs it and reports what it raises in the one error form
(:func:`.common.call`); output goes through :mod:`.output` (tables on a terminal, lines
in a pipe, ``--json``).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Sequence
from typing import NoReturn

from . import ops, wordcount
from .clock import process_start
from .common import EXIT_CODES_HELP, EXIT_PIPE, Parser, add_global_options, call
from .output import flush_stdout

__all__ = ["main", "run", "build_parser"]

#: Modules that add subcommands, in the order ``--help`` lists them.
SUBCOMMANDS = [wordcount, ops]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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


def main(argv: Sequence[str] | None = None, *, started_at: float | None = None) -> int:
    """Run the command; returns the exit status (the console script exits with it).

    ``started_at`` (``time.time()`` seconds) is when the work being timed began: the
    word count's ``wall seconds`` count from it. The console script passes the process's
    start; called as a function, the call is the start. A bad command line raises
    ``SystemExit(2)`` after the error line (argparse's way)."""
    started_at = time.time() if started_at is None else started_at
    args = build_parser().parse_args(argv)
    args.started_at = started_at
    return call(args.func, args)


def run() -> NoReturn:
    """The console script (``xor-ack``, ``python -m xor_ack_dynamodb``): :func:`main`
    timed from the process's start, then exit with its status. The objects the run
    leaves are frozen first (:func:`gc.freeze`), so the interpreter's exit skips a last
    garbage collection over all of them: a word count leaves about 200,000 (Spark's,
    moto's, botocore's), and that collection took 0.5 to 0.8 s after the work was done.
    Every file the command writes is closed before :func:`main` returns. stdout is
    flushed here, so that a reader gone early (``xor-ack --help | head -1``) ends it
    with :data:`~.common.EXIT_PIPE` instead of the interpreter's complaint at exit."""
    try:
        status: int | str | None = main(started_at=process_start())
    except SystemExit as exc:  # argparse's --help and usage errors
        status = exc.code
    if not flush_stdout():
        status = EXIT_PIPE
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":  # pragma: no cover
    run()
