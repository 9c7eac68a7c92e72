"""How the commands print: tables for a person at a terminal, lines for a pipe.

stdout a terminal: rich tables. stdout anything else (a pipe, a file): each table row is
one line of tab-separated fields, in the order the table shows them, with no title and
no header, so ``xor-ack list | grep -c day1`` counts chains and ``cut -f1`` gives tags.
A tab, newline, carriage return or backslash inside a field is written ``\\t``, ``\\n``,
``\\r``, ``\\\\`` (the text format of PostgreSQL's COPY), so a field never spans lines or
columns. ``--json`` (handled by the commands) is the same data as one JSON document.
Progress displays go to stderr and only when stderr is a terminal.

Whether a stream is a terminal is ``stream.isatty()``: nothing else (no environment
variable) changes the format.

A reader that leaves early (``xor-ack list | head -1``) closes the pipe: the next write
raises ``BrokenPipeError``. :func:`reader_gone` tells that case from any other broken
pipe, and :func:`discard` points stdout at the null device, so that nothing complains
again when the interpreter flushes it at exit.
"""

from __future__ import annotations

import json
import os
import re
import select
import sys
from collections.abc import Sequence
from typing import IO, Any

from rich.console import Console
from rich.progress import (
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from ..stats import progress_bar

__all__ = [
    "is_terminal",
    "reader_gone",
    "discard",
    "flush_stdout",
    "tsv_field",
    "tsv_unescape",
    "print_table",
    "print_rows",
    "emit_json",
    "stdout_console",
    "stderr_console",
    "spinner",
    "bar",
]

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


def is_terminal(stream: IO[str]) -> bool:
    """True when ``stream`` is a terminal (a closed or detached stream is not)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def reader_gone(stream: IO[str]) -> bool:
    """True when ``stream`` is a pipe whose reading end is closed: polling its descriptor
    reports an error (``POLLERR``), which a pipe with a reader, a file or a terminal
    never does. Where ``poll`` does not exist (Windows), any broken pipe is taken as
    that."""
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    if not hasattr(select, "poll"):  # pragma: no cover - Windows
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def discard(stream: IO[str]) -> None:
    """Point ``stream``'s file descriptor at the null device: what is still buffered, and
    anything written later, goes nowhere instead of raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


def flush_stdout() -> bool:
    """Flush stdout; False (and stdout discarded, :func:`discard`) when its reader has gone
    (:func:`reader_gone`). Raises any other ``BrokenPipeError``."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        if not reader_gone(sys.stdout):
            raise
        discard(sys.stdout)
        return False
    return True


def tsv_field(value: Any) -> str:
    """A table cell as one tab-separated field: ``None`` empty, the rest ``str()``, with
    tab, newline, carriage return and backslash escaped."""
    return "" if value is None else str(value).translate(_ESCAPES)


def tsv_unescape(field: str) -> str:
    """The inverse of :func:`tsv_field`'s escaping (``\\t`` -> tab, ...): a backslash
    before any other character is kept as it is."""
    return _ESCAPED.sub(lambda m: _UNESCAPES.get(m.group(1), m.group(0)), field)


def print_rows(rows: Sequence[Sequence[Any]], out: IO[str] | None = None) -> None:
    """``rows`` as tab-separated lines (see :func:`tsv_field`), one row a line."""
    out = out or sys.stdout
    for row in rows:
        out.write("\t".join(tsv_field(v) for v in row) + "\n")


def stdout_console() -> Console:
    """A console on stdout that never wraps a line (a cell too wide folds instead)."""
    return Console(soft_wrap=False)


def stderr_console() -> Console:
    return Console(stderr=True, soft_wrap=True)


def print_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    out: IO[str] | None = None,
) -> None:
    """A table: rich on a terminal, tab-separated lines otherwise (no title, no header)."""
    out = out or sys.stdout
    if not is_terminal(out):
        print_rows(rows, out)
        return
    table = Table(title=title or None, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    Console(file=out, soft_wrap=False).print(table)


def emit_json(value: Any, out: IO[str] | None = None) -> None:
    """``value`` as one indented JSON document (keys sorted) and a newline."""
    out = out or sys.stdout
    json.dump(value, out, indent=2, sort_keys=True)
    out.write("\n")


def spinner() -> Progress:
    """A transient spinner with a description and the time elapsed, on stderr; disabled
    (prints nothing) when stderr is not a terminal."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=True,
        disable=not is_terminal(sys.stderr),
    )


def bar(
    unit: str, *, console: Console | None = None, transient: bool = True, enabled: bool = True
) -> Progress:
    """The package's progress bar (:func:`xor_ack_dynamodb.stats.progress_bar`) on
    stderr; disabled when stderr is not a terminal or ``enabled`` is false."""
    console = console or stderr_console()
    return progress_bar(unit, console, transient=transient, enabled=enabled and is_terminal(console.file))
