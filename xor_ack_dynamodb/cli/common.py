"""What the commands share: global options, exit codes, the one error form.

Global options (``--table``, ``--partition-key``, ``--endpoint-url``, ``--region``,
``--json``) are accepted before or after the subcommand: the top-level parser defines them
with their environment defaults, and each operator subcommand repeats them with
``argparse.SUPPRESS`` defaults, so a value given after the subcommand wins and an absent
one leaves the top-level value in place.

Every error a command reports is one line on stderr, ``xor-ack: error: <Kind>: <message>``
(:func:`error_line`): argparse's own (kind ``UsageError``, after the usage line), the
library's typed errors (kind: their ``.code``), botocore's, an interrupt. The exit status
says which family it is (:data:`EXIT_CODES_HELP`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from ..errors import (
    InvalidConfig,
    InvalidStamp,
    InvalidTag,
    RequestFailed,
    TableNotFound,
    TableSchemaMismatch,
    XorAckError,
)
from ..status import ChainStatus
from ..stores.dynamodb.codec import error_code

if TYPE_CHECKING:
    from ..stores.dynamodb.tracker import XorAckDynamoDB

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_TABLE",
    "EXIT_AWS",
    "EXIT_INTERRUPTED",
    "EXIT_CODES_HELP",
    "WORDCOUNT_EXIT_CODES_HELP",
    "add_global_options",
    "tracker",
    "client",
    "UsageError",
    "Parser",
    "error_line",
    "classify",
    "report",
    "call",
    "status_record",
    "short_hex",
]

EXIT_OK = 0
#: The command ran and the answer is "no": a chain missing, in the wrong state, or a race
#: lost for the whole retry budget.
EXIT_FAILED = 1
#: Bad command line, bad input or configuration (no region, no credentials): nothing sent
#: (argparse's own code too).
EXIT_USAGE = 2
#: The table does not exist, or exists with another key schema.
EXIT_TABLE = 3
#: DynamoDB or the network said no: permissions, throttling, endpoint down, timeouts.
EXIT_AWS = 4
#: Ctrl-C (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130

#: The exit codes of AWS, interrupts and errors' form, which every command shares.
_SHARED_CODES = """\
  4  AWS or network error: access denied, throttled, endpoint unreachable, a
     timeout, a response lost or not from AWS
  130 interrupted (Ctrl-C)

errors: one line on stderr, 'xor-ack: error: <Kind>: <message>', where Kind is the
error's type (UsageError for the command line, else the library's error code or
botocore's)"""

EXIT_CODES_HELP = f"""\
exit codes:
  0  success
  1  the command failed on a chain: tag not found, already exists, acked, failed,
     expired, lost every race of the retry budget, or an item that cannot be read
  2  usage or configuration error: bad option, missing --table, invalid tag or
     value, no region or credentials, a region that does not exist
  3  the table does not exist (or has another key schema)
{_SHARED_CODES}

environment:
  XOR_ACK_TABLE             default for --table
  XOR_ACK_PARTITION_KEY     default for --partition-key (else tagID)
  AWS_ENDPOINT_URL_DYNAMODB default for --endpoint-url (then AWS_ENDPOINT_URL)
  AWS_REGION                default for --region (then AWS_DEFAULT_REGION)
  credentials come from the usual AWS chain (env, profile, role) and are never printed"""

#: ``xor-ack wordcount``'s exit codes.
WORDCOUNT_EXIT_CODES_HELP = f"""\
exit codes:
  0  every file ended acked
  1  a file did not end acked, or (--no-tracking) the Spark job failed
  2  usage or configuration error: bad option, an INPUT that does not exist, no
     input file, invalid table name, no region or credentials, an unknown region
  3  the table exists with another key schema
{_SHARED_CODES}"""


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
    """A DynamoDB client for the options, raising the library's typed errors for the
    network (:func:`~xor_ack_dynamodb.stores.dynamodb.clients.dynamodb_client`): short
    timeouts and 3 botocore attempts, an operator is waiting. Raises
    :class:`~xor_ack_dynamodb.errors.InvalidConfig` with no region anywhere, and
    :class:`~xor_ack_dynamodb.errors.UnknownRegion` for a region that does not exist,
    before any request."""
    from botocore.config import Config

    from ..stores.dynamodb.clients import dynamodb_client

    if not args.region:
        import boto3

        if not boto3.session.Session().region_name:  # nor in the AWS config profile
            raise InvalidConfig("no AWS region: pass --region or set AWS_REGION")
    config = Config(connect_timeout=5, read_timeout=30, retries={"mode": "standard", "total_max_attempts": 3})
    return dynamodb_client(region=args.region, endpoint_url=args.endpoint_url, config=config)


def tracker(args: argparse.Namespace, **options: Any) -> XorAckDynamoDB:
    """A tracker for the options, with a retry budget sized for a person waiting."""
    from ..retry import RetryPolicy
    from ..stores.dynamodb.tracker import XorAckDynamoDB

    if not args.table:
        raise UsageError("--table is required (or set XOR_ACK_TABLE)")
    return XorAckDynamoDB(
        args.table,
        args.partition_key,
        client=client(args),
        retry=RetryPolicy(max_attempts=5, max_seconds=15.0),
        **options,
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


def error_line(kind: str, message: str) -> str:
    """``xor-ack: error: <kind>: <message's first line>``: the one form every error
    takes on stderr."""
    text = message.strip()
    return f"xor-ack: error: {kind}: {text.splitlines()[0] if text else kind}"


def classify(exc: BaseException) -> tuple[int, str] | None:
    """The exit status (see :data:`EXIT_CODES_HELP`) and the kind the error line names,
    for the errors a command reports; None for anything else (a bug: its traceback is
    what to report)."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED, "KeyboardInterrupt"
    if isinstance(exc, UsageError):
        return EXIT_USAGE, exc.kind
    if isinstance(exc, (TableNotFound, TableSchemaMismatch)):
        return EXIT_TABLE, exc.code
    if isinstance(exc, (InvalidTag, InvalidStamp, InvalidConfig)):
        return EXIT_USAGE, exc.code
    if isinstance(exc, RequestFailed):
        return EXIT_AWS, exc.code
    if isinstance(exc, XorAckError):
        return EXIT_FAILED, exc.code
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
    messages carry no credentials; nothing else is added."""
    known = classify(exc)
    if known is None:
        return None
    status, kind = known
    if isinstance(exc, NoRegionError):
        message = "no AWS region: pass --region or set AWS_REGION"
    elif isinstance(exc, KeyboardInterrupt):
        message = "interrupted"
    else:
        message = str(exc)
    print(error_line(kind, message), file=sys.stderr)
    return status


def call(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command: its exit status, or the status of the error it raised, printed in
    the one form (:func:`report`). An error no kind is known for propagates."""
    try:
        return func(args)
    except (Exception, KeyboardInterrupt) as exc:
        status = report(exc)
        if status is None:
            raise
        return status


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


def short_hex(data: bytes, width: int = 16) -> str:
    text = data.hex()
    return text if len(text) <= width else text[: width - 1] + "…"
