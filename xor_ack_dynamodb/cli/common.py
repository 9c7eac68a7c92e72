"""What the operator commands share: global options, exit codes, errors, output.

Global options (``--table``, ``--partition-key``, ``--endpoint-url``, ``--region``,
``--json``) are accepted before or after the subcommand: the top-level parser defines them
with their environment defaults, and each operator subcommand repeats them with
``argparse.SUPPRESS`` defaults, so a value given after the subcommand wins and an absent
one leaves the top-level value in place.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

from ..errors import (
    InvalidConfig,
    InvalidStamp,
    InvalidTag,
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
    "EXIT_CODES_HELP",
    "add_global_options",
    "tracker",
    "client",
    "handle_errors",
    "UsageError",
    "emit_json",
    "status_record",
    "print_table",
]

EXIT_OK = 0
#: The command ran and the answer is "no": a chain missing, in the wrong state, or a race
#: lost for the whole retry budget.
EXIT_FAILED = 1
#: Bad command line or bad input (argparse's own code too).
EXIT_USAGE = 2
#: The table does not exist, or exists with another key schema.
EXIT_TABLE = 3
#: DynamoDB or the network said no: credentials, permissions, throttling, endpoint down.
EXIT_AWS = 4

EXIT_CODES_HELP = """\
exit codes:
  0  success
  1  the command failed on a chain: tag not found, already exists, acked, failed,
     expired, lost every race of the retry budget, or an item that cannot be read
  2  usage error: bad option, missing --table, invalid tag or value
  3  the table does not exist (or has another key schema)
  4  AWS or network error: no credentials or region, access denied, throttled,
     endpoint unreachable
  130 interrupted (Ctrl-C)

environment:
  XOR_ACK_TABLE             default for --table
  XOR_ACK_PARTITION_KEY     default for --partition-key (else tagID)
  AWS_ENDPOINT_URL_DYNAMODB default for --endpoint-url (then AWS_ENDPOINT_URL)
  AWS_REGION                default for --region (then AWS_DEFAULT_REGION)
  credentials come from the usual AWS chain (env, profile, role) and are never printed"""


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
    """A DynamoDB client for the options. Short botocore retries: an operator waits."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(region_name=args.region)
    config = Config(connect_timeout=5, read_timeout=30, retries={"mode": "standard", "max_attempts": 3})
    return session.client("dynamodb", endpoint_url=args.endpoint_url, config=config)


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
    """A command line that parsed but cannot run (exit 2)."""


def _fail(code: int, kind: str, message: str) -> int:
    first_line = message.strip().splitlines()[0] if message.strip() else kind
    print(f"xor-ack: error: {kind}: {first_line}", file=sys.stderr)
    return code


def _classify(exc: Exception) -> tuple[int, str]:
    """The exit status of an error (see :data:`EXIT_CODES_HELP`) and the kind it prints."""
    if isinstance(exc, UsageError):
        return EXIT_USAGE, "usage"
    if isinstance(exc, (TableNotFound, TableSchemaMismatch)):
        return EXIT_TABLE, exc.code
    if isinstance(exc, (InvalidTag, InvalidStamp, InvalidConfig)):
        return EXIT_USAGE, exc.code
    if isinstance(exc, XorAckError):
        return EXIT_FAILED, exc.code
    if isinstance(exc, ClientError):
        code = error_code(exc)
        return (EXIT_TABLE if code == "ResourceNotFoundException" else EXIT_AWS), code or "ClientError"
    return EXIT_AWS, type(exc).__name__


def handle_errors(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn the errors an operator can meet into one line on stderr and an exit code,
    never a traceback. Botocore's messages carry no credentials; nothing else is added."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except NoRegionError:
            return _fail(EXIT_AWS, "NoRegionError", "no AWS region: pass --region or set AWS_REGION")
        except (UsageError, XorAckError, ClientError, BotoCoreError) as exc:
            return _fail(*_classify(exc), str(exc))
        except KeyboardInterrupt:
            return _fail(130, "interrupted", "interrupted")

    return run


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


def emit_json(value: Any, out: TextIO | None = None) -> None:
    json.dump(value, out or sys.stdout, indent=2, sort_keys=True)
    (out or sys.stdout).write("\n")


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A table for people: rich when installed, tab-separated otherwise."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover
        print("\t".join(columns))
        for row in cells:
            print("\t".join(row))
        return
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in cells:
        table.add_row(*row)
    Console(soft_wrap=False).print(table)


def short_hex(data: bytes, width: int = 16) -> str:
    text = data.hex()
    return text if len(text) <= width else text[: width - 1] + "…"
