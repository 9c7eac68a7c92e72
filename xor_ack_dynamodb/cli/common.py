"""What the commands share: global options, exit codes, the one error form.

Global options (``--table``, ``--partition-key``, ``--endpoint-url``, ``--region``,
``--json``) are accepted before or after the subcommand: the top-level parser defines them
with their environment defaults, and each operator subcommand repeats them with
``argparse.SUPPRESS`` defaults, so a value given after the subcommand wins and an absent
one leaves the top-level value in place.

Every error a command reports is one line on stderr, ``xor-ack: error: <Kind>: <message>``
(:func:`error_line`): argparse's own (kind ``UsageError``, after the usage line), the
library's typed errors (kind: their ``.code``), botocore's, a missing extra, an
interrupt. The exit status says which family it is (:data:`EXIT_CODES_HELP`). The
library's hints name its own keywords (``region=``); here they name the flags
(:func:`flag_hints`). A reader of stdout that leaves early (``| head``) ends the command
quietly with :data:`EXIT_PIPE`.

Requests run under :data:`OPERATOR_RETRY`, a budget for a person waiting: one command
gives up within its ``max_seconds`` of its first request, even against an endpoint that
accepts connections and never answers.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from ..errors import (
    BatchIncomplete,
    RequestFailed,
    TableNotFound,
    TableSchemaMismatch,
    XorAckError,
)
from ..retry import RetryPolicy
from ..status import ChainStatus
from ..stores.dynamodb.clients import NO_REGION_MESSAGE
from ..stores.dynamodb.codec import error_code
from .output import discard, flush_stdout, reader_gone

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

    from ..stores.dynamodb.tracker import XorAckDynamoDB

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_TABLE",
    "EXIT_AWS",
    "EXIT_INTERRUPTED",
    "EXIT_PIPE",
    "EXIT_CODES",
    "EXIT_CODES_HELP",
    "WORDCOUNT_EXIT_CODES_HELP",
    "OPERATOR_RETRY",
    "NO_REGION",
    "EXTRAS",
    "add_global_options",
    "tracker",
    "client",
    "UsageError",
    "Parser",
    "error_line",
    "flag_hints",
    "classify",
    "report",
    "call",
    "status_record",
]

EXIT_OK = 0
#: The command ran and the answer is "no": a chain missing, in the wrong state, unreadable,
#: or a race lost for the whole retry budget.
EXIT_FAILED = 1
#: Bad command line, bad input or configuration (no region, no credentials, a missing
#: extra): nothing written (argparse's own code too).
EXIT_USAGE = 2
#: The table does not exist, or exists with another key schema.
EXIT_TABLE = 3
#: DynamoDB or the network said no: permissions, throttling, endpoint down, timeouts.
EXIT_AWS = 4
#: Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130
#: stdout's reader left before everything was written (``| head``): the reader has what
#: it asked for, so the command succeeded (a script under ``set -o pipefail`` goes on).
EXIT_PIPE = EXIT_OK

#: Every exit status the operator commands have, with what ``--help`` says of it.
EXIT_CODES = {
    EXIT_OK: "success (also when stdout's reader left early: xor-ack list | head -1\n"
    "stops quietly)",
    EXIT_FAILED: "the command failed on a chain: tag not found, already exists, acked,\n"
    "failed, expired, another owner's or mode's, lost every race of the retry\n"
    "budget, or an item that cannot be read",
    EXIT_USAGE: "usage, input or configuration error, nothing written: bad option,\n"
    "missing --table, invalid tag, edge or value, no region or credentials, a\n"
    "region that does not exist, a missing extra (pip install '.[spark]')",
    EXIT_TABLE: "the table does not exist (or has another key schema)",
    EXIT_AWS: "AWS or network error: access denied, throttled, endpoint unreachable, a\n"
    "timeout, a response lost or not from AWS",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}


def _codes_help(codes: dict[int, str]) -> str:
    lines = []
    for code, text in codes.items():
        first, *rest = text.split("\n")
        lines.append(f"  {code:<2} {first}")
        lines.extend(f"     {line}" for line in rest)
    return "\n".join(lines)


#: The errors' form and the timeouts, which every command shares.
_SHARED_HELP = """\
errors: one line on stderr, 'xor-ack: error: <Kind>: <message>', where Kind is the
error's type (UsageError for the command line, else the library's error code or
botocore's)"""

EXIT_CODES_HELP = f"""\
exit codes:
{_codes_help(EXIT_CODES)}

{_SHARED_HELP}

environment:
  XOR_ACK_TABLE             default for --table
  XOR_ACK_PARTITION_KEY     default for --partition-key (else tagID)
  AWS_ENDPOINT_URL_DYNAMODB default for --endpoint-url (then AWS_ENDPOINT_URL)
  AWS_REGION                default for --region (then AWS_DEFAULT_REGION)
  credentials come from the usual AWS chain (env, profile, role) and are never printed"""

#: ``xor-ack wordcount``'s exit statuses, where they differ from :data:`EXIT_CODES`.
_WORDCOUNT_CODES = {
    **EXIT_CODES,
    EXIT_OK: "every file ended acked",
    EXIT_FAILED: "a file did not end acked, or (--no-tracking) the Spark job failed",
    EXIT_USAGE: "usage or configuration error: bad option, an INPUT that does not exist, no\n"
    "input file, invalid table name, no region or credentials, an unknown region,\n"
    "no PySpark (pip install '.[spark]')",
    EXIT_TABLE: "the table exists with another key schema",
}

#: ``xor-ack wordcount``'s exit codes.
WORDCOUNT_EXIT_CODES_HELP = f"""\
exit codes:
{_codes_help(_WORDCOUNT_CODES)}

{_SHARED_HELP}"""

#: The retry budget of every request a command sends, sized for a person waiting: 3 s to
#: connect, 4 s per read, 3 botocore attempts a request (3 x 4 s against an endpoint that
#: accepts connections and never answers), then up to 5 library attempts, none started
#: unless it fits in 15 s. botocore's own 60 s per read (30 s here before) made one
#: silent endpoint cost 90 s.
OPERATOR_RETRY = RetryPolicy(
    max_attempts=5, max_seconds=15.0, connect_timeout=3.0, read_timeout=4.0, http_attempts=3
)

#: What a command says when no region is set anywhere (the library's message names its
#: keywords, :data:`~xor_ack_dynamodb.stores.dynamodb.clients.NO_REGION_MESSAGE`).
NO_REGION = (
    "no AWS region: pass --region or set AWS_REGION (or AWS_DEFAULT_REGION, or region in "
    "your AWS config profile)"
)

#: The optional dependencies a command imports only when it runs, by top-level module,
#: and the extra (pyproject.toml) that installs each.
EXTRAS = {"pyspark": "spark", "pandas": "spark", "moto": "local", "aiobotocore": "async"}

#: The library's hints that name its own keywords, and what a command says instead.
_FLAG_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(re.escape(NO_REGION_MESSAGE)), NO_REGION),
    (re.compile(r"(?<![\w-])region=(?=[,;)\s]|$)"), "--region"),
    (re.compile(r"(?<![\w-])endpoint_url=(?=[,;)\s]|$)"), "--endpoint-url"),
    (re.compile(r",? or pass aws_access_key_id= and aws_secret_access_key="), ""),
    (re.compile(r"XorAckDynamoDB\(\.\.\.\)\.create_table\(\) or "), ""),
)


def add_global_options(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    """Add the connection options. On the top-level parser (``top_level``) they carry the
    environment defaults; on a subcommand they are SUPPRESSed unless given."""

    def default(value: Any) -> Any:
        return value if top_level else argparse.SUPPRESS

    env = os.environ
    group = parser.add_argument_group("connection (before or after the command)")
    group.add_argument(
        "--table",
        default=default(env.get("XOR_ACK_TABLE")),
        help="the chains table (env XOR_ACK_TABLE)",
    )
    group.add_argument(
        "--partition-key",
        default=default(env.get("XOR_ACK_PARTITION_KEY") or "tagID"),
        help="the table's String partition key (env XOR_ACK_PARTITION_KEY, default tagID)",
    )
    group.add_argument(
        "--endpoint-url",
        default=default(env.get("AWS_ENDPOINT_URL_DYNAMODB") or env.get("AWS_ENDPOINT_URL")),
        help="a DynamoDB endpoint such as a local moto server (env AWS_ENDPOINT_URL_DYNAMODB)",
    )
    group.add_argument(
        "--region",
        default=default(env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")),
        help="the AWS region (env AWS_REGION, then AWS_DEFAULT_REGION)",
    )
    group.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="print JSON for scripts instead of tables",
    )


def client(args: argparse.Namespace) -> Any:
    """A DynamoDB client for the options, with :data:`OPERATOR_RETRY`'s timeouts and
    botocore attempts, raising the library's typed errors for the network
    (:func:`~xor_ack_dynamodb.stores.dynamodb.clients.dynamodb_client`). Raises
    :class:`~xor_ack_dynamodb.errors.InvalidConfig` with no region anywhere, and
    :class:`~xor_ack_dynamodb.errors.UnknownRegion` for a region that does not exist,
    before any request."""
    from ..stores.dynamodb.clients import dynamodb_client

    return dynamodb_client(region=args.region, endpoint_url=args.endpoint_url, retry=OPERATOR_RETRY)


def tracker(args: argparse.Namespace, **options: Any) -> XorAckDynamoDB:
    """A tracker for the options, under :data:`OPERATOR_RETRY`. Raises
    :class:`UsageError` without a table, and what :func:`client` raises."""
    from ..stores.dynamodb.tracker import XorAckDynamoDB

    if not args.table:
        raise UsageError("--table is required (or set XOR_ACK_TABLE)")
    return XorAckDynamoDB(
        args.table, args.partition_key, client=client(args), retry=OPERATOR_RETRY, **options
    )


class UsageError(Exception):
    """A command line that parsed but cannot run (exit 2). ``kind`` is the word the
    error line names (``UsageError``, or e.g. ``FileNotFoundError`` for a missing
    input)."""

    def __init__(self, message: str, *, kind: str = "UsageError") -> None:
        super().__init__(message)
        self.kind = kind


class Parser(argparse.ArgumentParser):
    """argparse's parser, its errors in the one form: the usage line, then
    ``xor-ack: error: UsageError: <message>`` on stderr, exit 2 (subcommands' parsers
    are of this class too: argparse makes them with the parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, error_line("UsageError", message) + "\n")

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        """argparse's, except that help written to a stdout whose reader has gone
        (``xor-ack --help | head -1``) exits with :data:`EXIT_PIPE`, as a command does,
        where argparse would ignore the error and exit 0."""
        stream = file or sys.stderr
        if not message:
            return
        try:
            stream.write(message)
        except BrokenPipeError:
            if _is_stdout(stream) and reader_gone(sys.stdout):
                discard(sys.stdout)
                raise SystemExit(EXIT_PIPE) from None
        except (AttributeError, OSError):
            pass


def _is_stdout(stream: object) -> bool:
    return stream is sys.stdout


def error_line(kind: str, message: str) -> str:
    """``xor-ack: error: <kind>: <message's first line>``: the one form every error
    takes on stderr."""
    text = message.strip()
    return f"xor-ack: error: {kind}: {text.splitlines()[0] if text else kind}"


def flag_hints(message: str) -> str:
    """``message`` with the library's hints that name its keywords (``region=``,
    ``AckConfig(region=...)``, ``endpoint_url=``) naming the command's flags instead
    (``--region``, ``--endpoint-url``), and those with no flag here left out."""
    for pattern, replacement in _FLAG_HINTS:
        message = pattern.sub(replacement, message)
    return message


def _extra(exc: ModuleNotFoundError) -> str | None:
    """The extra that installs the module ``exc`` did not find, if one does."""
    return EXTRAS.get((exc.name or "").partition(".")[0])


def classify(exc: BaseException) -> tuple[int, str] | None:
    """The exit status (see :data:`EXIT_CODES`) and the kind the error line names, for
    the errors a command reports; None for anything else (a bug: its traceback is what
    to report).

    The library's errors that mean bad input (a ``ValueError``: an invalid tag, edge or
    configuration, an all-zero or mismatched edge, an op id reused for another stamp)
    are usage errors; a network failure and keys left unprocessed past the budget
    (``BatchIncomplete``, throttling) are AWS's; the rest are a chain's answer."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED, "KeyboardInterrupt"
    if isinstance(exc, UsageError):
        return EXIT_USAGE, exc.kind
    if isinstance(exc, ModuleNotFoundError) and _extra(exc) is not None:
        return EXIT_USAGE, type(exc).__name__
    if isinstance(exc, (TableNotFound, TableSchemaMismatch)):
        return EXIT_TABLE, exc.code
    if isinstance(exc, (RequestFailed, BatchIncomplete)):
        return EXIT_AWS, exc.code
    if isinstance(exc, XorAckError):
        return (EXIT_USAGE if isinstance(exc, ValueError) else EXIT_FAILED), exc.code
    if isinstance(exc, (NoRegionError, NoCredentialsError)):
        return EXIT_USAGE, type(exc).__name__
    if isinstance(exc, ClientError):
        code = error_code(exc)
        return (EXIT_TABLE if code == "ResourceNotFoundException" else EXIT_AWS), code or "ClientError"
    if isinstance(exc, BotoCoreError):
        return EXIT_AWS, type(exc).__name__
    return None


def report(exc: BaseException) -> int | None:
    """Print ``exc`` as one error line on stderr and return its exit status, or return
    None (printing nothing) for an error :func:`classify` does not know. Botocore's
    messages carry no credentials; nothing else is added but the flags to pass
    (:func:`flag_hints`) and, for a missing extra, the ``pip install`` that brings it."""
    known = classify(exc)
    if known is None:
        return None
    status, kind = known
    if isinstance(exc, NoRegionError):
        message = NO_REGION
    elif isinstance(exc, KeyboardInterrupt):
        message = "interrupted"
    elif isinstance(exc, ModuleNotFoundError):
        extra = _extra(exc)
        where = f"pip install '.[{extra}]' in a checkout, or the wheel as '<wheel>[{extra}]'"
        message = f"{exc}: this needs the {extra} extra: {where}"
    else:
        message = flag_hints(str(exc))
    print(error_line(kind, message), file=sys.stderr)
    return status


def call(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command: its exit status, or the status of the error it raised, printed in
    the one form (:func:`report`); :data:`EXIT_PIPE`, printing nothing, when stdout's
    reader left before everything was written. An error no kind is known for
    propagates."""
    try:
        status = func(args)
        return status if flush_stdout() else EXIT_PIPE
    except BrokenPipeError:
        if not reader_gone(sys.stdout):
            raise
        discard(sys.stdout)
        return EXIT_PIPE
    except (Exception, KeyboardInterrupt) as exc:
        reported = report(exc)
        if reported is None:
            raise
        return reported


# -- output ---------------------------------------------------------------------------


def status_record(status: ChainStatus) -> dict[str, Any]:
    """A chain's status as a JSON-ready dict."""
    value = status.value
    return {
        "tag": status.tag,
        "state": status.state,
        "mode": status.mode,
        "acked": status.state == "acked",
        "stamp": None if value is None else value.hex() if isinstance(value, bytes) else str(int(value)),
        "version": status.version,
        "owner": status.owner,
        "expires_at": status.expires_at.isoformat() if status.expires_at else None,
        "reason": status.reason,
    }
