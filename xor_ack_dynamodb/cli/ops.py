"""Operator commands: ``table create|describe``, ``status``, ``list``, ``stamp``, ``fail``,
``touch``, ``delete``, ``migrate``.

They use the library itself (``XorAckDynamoDB``), so a chain reads the same here as in a
pipeline: ``expired`` is decided from ``expires_at`` against this machine's clock, and
every write is the library's conditional write.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError

from ..core.chain import Chain
from ..errors import (
    ChainModeMismatch,
    CorruptItem,
    ReadTimeout,
    TableNotFound,
    TableSchemaMismatch,
    TagNotFound,
    UnmigratedItem,
)
from ..stamps import RESERVED_PREFIX
from ..stores.dynamodb._sync.table import describe
from ..stores.dynamodb.answers import checked, scan_pages
from ..stores.dynamodb.codec import missing_table_message, table_key
from ..stores.dynamodb.item import ItemCodec
from ..stores.dynamodb.migrate import migrate_table
from .common import (
    EXIT_CODES_HELP,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TABLE,
    UsageError,
    add_global_options,
    error_line,
    status_record,
    tracker,
)
from .output import bar, emit_json, print_table, spinner, tsv_unescape

__all__ = ["register"]

_STATUS_COLUMNS = ("tag", "state", "version", "expires_at", "stamp", "reason")


def _add(subparsers: Any, name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
    """A subcommand's parser, with the exit codes and the connection options."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help,
        description=textwrap.fill(description or help, 88),
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_global_options(parser, top_level=False)
    return parser


def register(subparsers: Any) -> None:
    """Add the operator subcommands to the ``xor-ack`` parser."""

    table = _add(subparsers, "table", "create or describe the chains table")
    actions = table.add_subparsers(dest="table_action", metavar="ACTION", required=True)
    for name, func, text in (
        (
            "create",
            table_create,
            "create the table (on demand, String key, TTL on expires_at); "
            "succeeds if it already exists with that key",
        ),
        ("describe", table_describe, "show the table's key, status, item count and TTL"),
    ):
        _add(actions, name, text).set_defaults(func=func)

    status = _add(
        subparsers,
        "status",
        "show chains by tag (a consistent BatchGetItem)",
        "Show chains by tag: a consistent BatchGetItem per 100 tags, a progress bar on stderr "
        "when it is a terminal. 'status -' reads the tags from stdin, one a line, as 'list' "
        "prints them piped (so 'xor-ack list --state failed | cut -f1 | xor-ack status -' works).",
    )
    status.add_argument("tags", nargs="+", metavar="TAG", help="a chain's tag, or - to read them from stdin")
    status.set_defaults(func=status_cmd)

    listing = _add(
        subparsers,
        "list",
        "list chains: reads the whole table",
        "List chains, optionally by state and tag prefix. This is a Scan: it reads (and is "
        "billed for) the WHOLE table, whatever the filters; a progress indicator shows on "
        "stderr when it is a terminal. 'expired' is decided from expires_at against this "
        "machine's clock, as the library does.",
    )
    listing.add_argument("--state", choices=("pending", "expired", "failed", "acked"))
    listing.add_argument("--prefix", help="only tags starting with this")
    listing.add_argument("--limit", type=int, help="stop after this many matching chains")
    listing.add_argument("--page-size", type=int, default=1000, help="items per Scan request (default 1000)")
    listing.set_defaults(func=list_cmd)

    stamp = _add(
        subparsers,
        "stamp",
        "finish (and start) edges of a chain: one stamp",
        "Apply one stamp to a chain: the edges it finishes (--finish) and starts (--start), "
        "hex digits in xor mode, decimal digits in sum mode, as envelopes carry them. With "
        "--op-id the stamp is applied at most once for that id (the chain remembers it).",
    )
    stamp.add_argument("tag", metavar="TAG")
    stamp.add_argument("--finish", action="append", default=[], metavar="EDGE", help="an edge it finishes")
    stamp.add_argument("--start", action="append", default=[], metavar="EDGE", help="an edge it starts")
    stamp.add_argument("--mode", choices=("xor", "sum"), default="xor", help="the chain's mode (default xor)")
    stamp.add_argument("--op-id", help="the stamp's op id (default: a random one)")
    stamp.add_argument("--owner", help="the chain's owner, if it has one: refused otherwise")
    stamp.set_defaults(func=stamp_cmd)

    fail = _add(subparsers, "fail", "mark a pending or expired chain failed (kept as a tombstone)")
    fail.add_argument("tag", metavar="TAG")
    fail.add_argument("--reason", help="why (stored with the chain, up to 1024 characters)")
    fail.set_defaults(func=fail_cmd)

    touch = _add(subparsers, "touch", "push a pending chain's expiry out (Storm's reset-timeout)")
    touch.add_argument("tag", metavar="TAG")
    touch.add_argument("--ttl", type=float, default=None, help="seconds from now (default 3600)")
    touch.set_defaults(func=touch_cmd)

    delete = _add(subparsers, "delete", "delete a chain whatever its state")
    delete.add_argument("tag", metavar="TAG")
    delete.set_defaults(func=delete_cmd)

    migrate = _add(
        subparsers,
        "migrate",
        "rewrite chains of the 0.1 layout in the current one: once, after upgrading",
        "Rewrite every chain item this library's 0.1 layout wrote (op ids without a lineage), "
        "which this version refuses (UnmigratedItem), in the current layout: a Scan of the whole "
        "table and one conditional PutItem per such item. Run it once, before the new version "
        "uses the table; running it again is harmless.",
    )
    migrate.add_argument("--page-size", type=int, default=1000, help="items per Scan request (default 1000)")
    migrate.set_defaults(func=migrate_cmd)


def _print_statuses(records: list[dict[str, Any]], title: str) -> None:
    rows = [
        (
            r["tag"],
            r["state"],
            r["version"],
            _when(r["expires_at"]),
            r["stamp"],
            r["reason"],
        )
        for r in records
    ]
    print_table(title, _STATUS_COLUMNS, rows)


def _reply(args: argparse.Namespace, data: Any, text: str | None = None, title: str = "") -> int:
    """``data`` as JSON with ``--json``; else ``text``, or ``data`` (chains' statuses, or
    one) as a table titled ``title``. Exit 0."""
    if args.json:
        emit_json(data)
    elif text is not None:
        print(text)
    else:
        _print_statuses(data if isinstance(data, list) else [data], title)
    return EXIT_OK


def _when(iso: str | None) -> str | None:
    """An ISO timestamp shortened for a table cell (UTC, to the second)."""
    return None if iso is None else iso.replace("T", " ").replace("+00:00", "Z")


def table_create(args: argparse.Namespace) -> int:
    ack = tracker(args)
    created = ack.create_table()
    text = f"table {ack.table} {'created' if created else 'already exists'} (key {ack.partition_key})"
    return _reply(args, {"table": ack.table, "partition_key": ack.partition_key, "created": created}, text)


def table_describe(args: argparse.Namespace) -> int:
    ack = tracker(args)
    info = describe(ack.client, ack.table)
    asked = {"TableName": ack.table}
    ttl = checked(ack.client, "DescribeTimeToLive", asked, ack.client.describe_time_to_live(**asked))[
        "TimeToLiveDescription"
    ]
    key = table_key(info)
    record = {
        "table": info.get("TableName"),
        "status": info.get("TableStatus"),
        "partition_key": key[0] if key else None,
        "partition_key_type": key[1] if key else None,
        "billing_mode": info.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED"),
        "item_count": info.get("ItemCount"),
        "size_bytes": info.get("TableSizeBytes"),
        "ttl_status": ttl.get("TimeToLiveStatus"),
        "ttl_attribute": ttl.get("AttributeName"),
        "arn": info.get("TableArn"),
    }
    if args.json:
        emit_json(record)
    else:
        print_table(f"table {record['table']}", ("property", "value"), list(record.items()))
    if key != (ack.partition_key, "S"):
        message = f"the table's key is {key!r}, not a String {ack.partition_key!r}"
        print(error_line(TableSchemaMismatch.__name__, message), file=sys.stderr)
        return EXIT_TABLE
    return EXIT_OK


def _tags(values: list[str]) -> list[str]:
    """The tags a command was given: ``-`` alone reads them from stdin, one a line, as
    ``list`` prints them piped (``\\t``, ``\\n``, ``\\r``, ``\\\\`` unescaped; empty lines
    skipped)."""
    if values != ["-"]:
        return values
    return [tsv_unescape(line.rstrip("\r\n")) for line in sys.stdin if line.strip("\r\n")]


def status_cmd(args: argparse.Namespace) -> int:
    tags = list(dict.fromkeys(_tags(args.tags)))
    if not tags:
        raise UsageError("no tags on stdin")
    ack = tracker(args)
    with bar("chains") as shown:
        task = shown.add_task(f"reading {ack.table}", total=len(tags))
        found = ack.status_many(tags, progress=lambda done, total: shown.update(task, completed=done))
    absent = {"state": None, "error": TagNotFound.__name__}
    records = [status_record(found[t]) if t in found else {"tag": t, **absent} for t in tags]
    if args.json:
        emit_json(records)
    else:
        _print_statuses([r for r in records if r["state"] is not None], f"chains in {ack.table}")
    failed = 0
    for record in records:
        if record["state"] is None:
            print(
                error_line(TagNotFound.__name__, f"chain {record['tag']!r} does not exist"), file=sys.stderr
            )
        elif record["state"] == "corrupt":
            message = f"chain {record['tag']!r} cannot be read: {record['reason']}"
            print(error_line(CorruptItem.__name__, message), file=sys.stderr)
        else:
            continue
        failed += 1
    return EXIT_FAILED if failed else EXIT_OK


@contextmanager
def _scanning(table: str, page_size: int) -> Iterator[None]:
    """A Scan the command sends itself, its errors as the library's calls raise them:
    ``ResourceNotFoundException`` as :class:`TableNotFound`; a :class:`ReadTimeout`
    naming ``--page-size``, since a backend slow to read a page (a local emulator) answers
    a smaller one sooner."""
    try:
        yield
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise TableNotFound(missing_table_message(table)) from None
        raise
    except ReadTimeout as exc:
        where = {"service": exc.service, "operation": exc.operation, "region": exc.region}
        hint = f"; if the endpoint is only slow, a smaller --page-size (now {page_size}) answers sooner"
        raise ReadTimeout(f"{exc}{hint}", endpoint=exc.endpoint, **where) from exc.__cause__


def read_scan_page(page: Mapping[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """One Scan answer, read: its items and how many items DynamoDB scanned for it (the
    one place a command reads a Scan answer by hand)."""
    return list(page.get("Items", [])), int(page.get("ScannedCount", 0))


def _scan(ack: Any, prefix: str | None, page_size: int) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """Every page of a Scan of the table (with the prefix filtered server-side), each
    checked to be DynamoDB's answer (``BadResponse`` otherwise: never an empty table),
    read (:func:`read_scan_page`)."""
    kwargs: dict[str, Any] = {"TableName": ack.table, "Limit": page_size}
    if prefix:
        kwargs.update(
            FilterExpression="begins_with(#pk, :p)",
            ExpressionAttributeNames={"#pk": ack.partition_key},
            ExpressionAttributeValues={":p": {"S": prefix}},
        )
    with _scanning(ack.table, page_size):
        for page in scan_pages(ack.client, **kwargs):
            yield read_scan_page(page)


def list_cmd(args: argparse.Namespace) -> int:
    if args.page_size < 1 or (args.limit is not None and args.limit < 1):
        raise UsageError("--page-size and --limit must be positive")
    ack = tracker(args)
    codec: ItemCodec = ack.codec
    now = int(time.time())
    matched: list[Chain] = []
    scanned = pages = corrupt = 0
    progress = spinner()
    with progress:
        task = progress.add_task(f"scanning {ack.table}", total=None)
        for items, count in _scan(ack, args.prefix, args.page_size):
            pages += 1
            scanned += count
            for item in items:
                if item.get(ack.partition_key, {}).get("S", "").startswith(RESERVED_PREFIX):
                    continue  # a chain's op history, not a chain
                try:
                    chain = codec.parse(item)
                except CorruptItem as exc:
                    corrupt += 1
                    print(error_line(exc.code, f"{exc} (tag {exc.tag!r})"), file=sys.stderr)
                    continue
                if args.state is None or ack.rules.effective_state(chain, now) == args.state:
                    matched.append(chain)
            description = f"scanning {ack.table}: {scanned} items, {len(matched)} matched"
            progress.update(task, description=description)
            if args.limit is not None and len(matched) >= args.limit:
                matched = matched[: args.limit]
                break
    matched.sort(key=lambda c: c.tag)
    records = [status_record(ack.rules.status(c, now)) for c in matched]
    _reply(args, records, title=f"chains in {ack.table}")
    print(
        f"xor-ack: scanned {scanned} items in {pages} pages; {len(records)} matched"
        + (f"; {corrupt} unreadable" if corrupt else ""),
        file=sys.stderr,
    )
    return EXIT_FAILED if corrupt else EXIT_OK


def _other_mode(mode: str) -> str:
    """How to ask for the other mode: the flag's hint."""
    return "pass --mode sum" if mode == "xor" else "leave out --mode (xor is the default)"


def _edge(text: str, mode: str) -> bytes | int:
    try:
        return int(text, 10) if mode == "sum" else bytes.fromhex(text)
    except ValueError:
        digits = "decimal" if mode == "sum" else "hex"
        other = "xor" if mode == "sum" else "sum"
        raise UsageError(
            f"{text!r} is not a {mode}-mode edge ({digits} digits); for a {other}-mode chain, "
            f"{_other_mode(mode)}"
        ) from None


def stamp_cmd(args: argparse.Namespace) -> int:
    if not args.finish and not args.start:
        raise UsageError("give at least one --finish or --start edge")
    finished = [_edge(e, args.mode) for e in args.finish]
    started = [_edge(e, args.mode) for e in args.start]
    ack = tracker(args, mode=args.mode)
    try:
        result = ack.stamp(args.tag, finished=finished, started=started, op_id=args.op_id, owner=args.owner)
    except ChainModeMismatch as exc:
        raise ChainModeMismatch(f"{exc}: {_other_mode(args.mode)}", tag=exc.tag) from None
    again = " (duplicate)" if result.duplicate else ""
    text = f"{args.tag}: {'acked' if result.acked else 'stamped'}{again}"
    return _reply(args, {"tag": args.tag, "acked": result.acked, "duplicate": result.duplicate}, text)


def fail_cmd(args: argparse.Namespace) -> int:
    return _reply(args, status_record(tracker(args).fail(args.tag, args.reason)), title="failed")


def touch_cmd(args: argparse.Namespace) -> int:
    if args.ttl is not None and not args.ttl > 0:
        raise UsageError(f"--ttl must be a positive number of seconds, got {args.ttl}")
    return _reply(args, status_record(tracker(args).touch(args.tag, ttl=args.ttl)), title="touched")


def delete_cmd(args: argparse.Namespace) -> int:
    tracker(args).delete(args.tag)
    return _reply(args, {"tag": args.tag, "deleted": True}, f"deleted {args.tag}")


def migrate_cmd(args: argparse.Namespace) -> int:
    if args.page_size < 1:
        raise UsageError("--page-size must be positive")
    ack = tracker(args)
    with spinner() as progress:
        progress.add_task(f"migrating {ack.table}", total=None)
        with _scanning(ack.table, args.page_size):
            done = migrate_table(ack.client, ack.table, ack.codec, int(time.time()), args.page_size)
    for tag, why in done.failed.items():
        print(error_line(UnmigratedItem.__name__, f"{why} (tag {tag!r})"), file=sys.stderr)
    failed = len(done.failed)
    replay = dict(sorted(done.replay.items()))
    record = {
        "table": ack.table,
        "scanned": done.scanned,
        "migrated": done.migrated,
        "failed": failed,
        "replay": replay,
    }
    text = f"{ack.table}: {done.migrated} chains migrated, {failed} not ({done.scanned} items scanned)"
    text += "".join(f"\nreplay {tag}: {why}" for tag, why in replay.items())
    _reply(args, record, text)
    return EXIT_FAILED if done.failed else EXIT_OK
