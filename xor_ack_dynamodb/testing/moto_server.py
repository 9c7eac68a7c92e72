"""The embedded DynamoDB: a moto server in this process, on 127.0.0.1 and a free port.

For demos, tests and local development. It speaks DynamoDB's real HTTP protocol, so
everything that talks to it (other processes, Spark executors, the Node package) goes
through botocore exactly as against AWS. Amazon's own engine, in Java, is
:class:`~.dynamodb_local.DynamoDBLocal`.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from .endpoint import LOCAL_KEY_ID, LOCAL_REGION, LOCAL_SECRET, LocalEndpoint

__all__ = ["LOCAL_KEY_ID", "LOCAL_REGION", "LOCAL_SECRET", "LocalDynamoDB", "MotoServer"]

log = logging.getLogger("xor_ack_dynamodb")


class MotoServer(LocalEndpoint):
    """A moto server started in a background thread of this process, answering one
    request at a time (so conditional writes are atomic, as on DynamoDB).

    Use as a context manager, or call :meth:`start` and :meth:`stop`. ``endpoint_url`` is
    known once started. State lives in this process and is gone when it stops.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._server: Any = None

    def start(self) -> MotoServer:
        # werkzeug logs every request at INFO to stderr; for an embedded backend that is
        # noise (thousands of lines a job). Its warnings and errors still show.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        _snapshot_touched_items()
        _forget_item_objects()
        _measure_items_once()
        _parse_conditions_once()
        server = _serial_moto_server(self._host, self._port)
        server.start()
        host, port = server.get_host_and_port()
        self._server = server
        self.endpoint_url = f"http://{host}:{port}"
        log.info("embedded DynamoDB (moto) listening on %s", self.endpoint_url)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


#: The name :class:`MotoServer` had first (kept: ``from xor_ack_dynamodb import LocalDynamoDB``).
LocalDynamoDB = MotoServer


def _snapshot_touched_items() -> None:
    """Make moto's ``TransactWriteItems`` copy only the items it touches, once.

    moto deep-copies the whole table once per item of a transaction, to roll back if one
    fails: a transaction of 100 creates beside 10,000 items copies a million items (520
    creates took 4.5 s). This keeps the all-or-nothing rule with a snapshot of only the
    items the transaction names (taken once, before it runs), restored if it is
    cancelled; the table copies become references. Applied once per process (requests
    are serialized by the server, so nothing else runs meanwhile).
    """
    import copy
    import functools

    from moto.dynamodb import models
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    backend = models.DynamoDBBackend
    if getattr(backend.transact_write_items, "_xor_ack", False):
        return
    original = backend.transact_write_items

    class _Copies:
        """``copy`` as moto's module sees it: a table is not copied."""

        def deepcopy(self, value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

        def __getattr__(self, name: str) -> Any:
            return getattr(copy, name)

    models.copy = _Copies()  # type: ignore[attr-defined,assignment]

    def _key(table: Table, op_type: str, op: dict[str, Any]) -> tuple[Any, Any]:
        key = op["Item"] if op_type == "Put" else op["Key"]
        range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        return DynamoType(key[table.hash_key_attr]), range_key

    @functools.wraps(original)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved: list[tuple[Table, Any, Any, Any]] = []
        for entry in transact_items[:100]:
            op_type, op = next(iter(entry.items()))
            table = self.tables.get(op.get("TableName"))
            try:
                hash_key, range_key = _key(table, op_type, op)
            except (AttributeError, KeyError, TypeError):
                continue  # moto's own checks report it
            item = table.get_item(hash_key, range_key)
            # moto's Put and Delete replace or drop the item object; only Update changes it.
            saved.append((table, hash_key, range_key, copy.deepcopy(item) if op_type == "Update" else item))
        try:
            original(self, transact_items)
        except Exception:
            for table, hash_key, range_key, item in reversed(saved):
                if item is None:
                    if table.get_item(hash_key, range_key) is not None:
                        table.delete_item(hash_key, range_key)
                elif range_key:
                    table.items[hash_key][range_key] = item
                else:
                    table.items[hash_key] = item
            raise

    transact_write_items._xor_ack = True  # type: ignore[attr-defined]
    backend.transact_write_items = transact_write_items  # type: ignore[method-assign]


class _Forgotten(list[Any]):
    """A list that keeps nothing appended to it."""

    def append(self, value: Any) -> None:
        pass


def _forget_item_objects() -> None:
    """Keep moto from holding every DynamoDB item object it ever built.

    moto's models append each instance they create to a class-wide list (for its
    dashboard), and ``copy.deepcopy`` creates instances too: every copy of an item is
    kept for the life of the process. A stock ``moto_server`` copies the whole table per
    entry of a transaction and so keeps them all (``create_many`` of 1,000 chains took it
    to 874 MiB unfinished after 120 s, and past 2 GiB after 74 s in another run); here
    each ``UpdateItem`` still kept a copy of its item. Items stay in their tables as
    before; moto's dashboard no longer lists them. Applied once per process.
    """
    from moto.dynamodb.models.dynamo_type import Item

    if not isinstance(Item.instances_tracked, _Forgotten):  # type: ignore[attr-defined]
        Item.instances_tracked = _Forgotten()  # type: ignore[attr-defined]


def _measure_items_once() -> None:
    """Make moto's ``Item`` check DynamoDB's item size limit once per item, not once per
    attribute.

    moto builds an item's attributes in a dict that measures the whole item again on
    every insert (quadratic in attributes): a third of the server's time on a
    transaction of 100 chain items. This builds the attributes, then applies the same
    limit to the same total (the per-insert check raised exactly when the total went
    past it: sizes are never negative). Applied once per process, and only when
    ``Item.__init__`` has the signature it replaces.
    """
    import inspect

    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
    from moto.dynamodb.models.utilities import bytesize

    original = Item.__init__
    if getattr(original, "_xor_ack", False):
        return
    if list(inspect.signature(original).parameters) != ["self", "hash_key", "range_key", "attrs"]:
        return  # another moto: leave it as it is

    def __init__(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
        self.hash_key = hash_key
        self.range_key = range_key
        values = {key: DynamoType(value) for key, value in attrs.items()}
        if sum(bytesize(key) + value.size() for key, value in values.items()) > 405000:
            raise ItemSizeTooLarge  # moto's limit: DynamoDB's 400 KB, as moto measures it
        self.attrs = LimitedSizeDict()
        dict.update(self.attrs, values)

    __init__._xor_ack = True  # type: ignore[attr-defined]
    Item.__init__ = __init__  # type: ignore[method-assign]


#: Condition expressions whose parse :func:`_parse_conditions_once` keeps.
_PARSED_LIMIT = 256


def _parse_conditions_once() -> None:
    """Make moto parse a ConditionExpression once per expression, not once per item.

    moto lexes and parses the condition of every item again (twice for an item of a
    transaction: once to check the request, once to apply it): about half of the
    server's time on a transaction of 100 stamps, which all carry the same expression.
    This keeps the syntax tree of an expression, keyed by its text, its attribute names
    (which the tree holds) and the names of its values (which decide what a lookup
    finds), and gives each parse a tree of fresh nodes whose values are the request's
    own: moto builds its condition from them as before, so no parse shares mutable state
    with another. A parse that raises is not kept (the next one raises the same way).
    Applied once per process, and only when the parser has the steps it replaces.
    """
    from moto.dynamodb.comparisons import ConditionExpressionParser as Parser

    original = Parser.parse
    if getattr(original, "_xor_ack", False):
        return
    steps = (
        "_lex_condition_expression",
        "_parse_paths",
        "_apply_functions",
        "_apply_comparator",
        "_apply_in",
        "_apply_between",
        "_apply_parens_and_booleans",
        "_assert_no_redundant_parentheses",
        "_find_literals",
        "_find_expr_attr_values",
        "_make_op_condition",
        "_lookup_expression_attribute_value",
    )
    if not all(hasattr(Parser, step) for step in steps):
        return  # another moto: leave it as it is
    parsed: dict[tuple[Any, ...], tuple[Any, list[str], list[str]]] = {}
    value_kind = Parser.Kind.EXPRESSION_ATTRIBUTE_VALUE

    def rebound(parser: Any, node: Any) -> Any:
        """``node`` anew, with the values of ``parser``'s request."""
        if node.kind == value_kind:
            return node._replace(value=parser._lookup_expression_attribute_value(node.text), children=[])
        return node._replace(children=[rebound(parser, child) for child in node.children])

    def tree(parser: Any) -> Any:
        """moto's steps of ``parse`` up to the syntax tree, checked as moto checks it."""
        nodes = parser._lex_condition_expression()
        for step in steps[1:7]:
            nodes = getattr(parser, step)(nodes)
        node = nodes[0]
        parser._assert_no_redundant_parentheses(node)
        return node

    @functools.wraps(original)
    def parse(self: Any) -> Any:
        if not self.condition_expression:
            return original(self)
        names = self.expression_attribute_names or {}
        try:
            key = (
                self.condition_expression,
                tuple(sorted(names.items())),
                tuple(sorted(self.expression_attribute_values or {})),
            )
            found = parsed.get(key)
        except TypeError:  # a name or value that is not a string: moto's own parse reports it
            return original(self)
        if found is None:
            node = tree(self)
            found = (node, self._find_literals(node), self._find_expr_attr_values(node))
            if len(parsed) >= _PARSED_LIMIT:
                parsed.clear()
            parsed[key] = found
        node, literals, values = found
        self.expr_attr_names_found.extend(literals)
        self.expr_attr_values_found.extend(values)
        return self._make_op_condition(rebound(self, node))

    parse._xor_ack = True  # type: ignore[attr-defined]
    Parser.parse = parse  # type: ignore[method-assign]


class _SerialServer:
    """moto's DynamoDB (and every other service it serves) on a werkzeug server in a
    daemon thread, handling one request at a time.

    moto checks a ConditionExpression and applies the update in two steps with no lock,
    so two threads of its server can both pass the same condition and one write is
    lost (measured: 82 "successful" conditional increments left the counter at 72).
    DynamoDB makes each conditional write atomic; serializing requests restores that.

    Built on what every moto 5 release has (``DomainDispatcherApplication``,
    ``create_backend_app``) and werkzeug's server, not on ``ThreadedMotoServer``'s
    internals, which changed between releases (the declared minimum, moto 5.0.0, has no
    ready event).
    """

    def __init__(self, host: str, port: int) -> None:
        import threading

        from moto.moto_server import werkzeug_app
        from werkzeug.serving import make_server

        lock = threading.Lock()
        app = werkzeug_app.DomainDispatcherApplication(werkzeug_app.create_backend_app)

        def serve(environ: Any, start_response: Any) -> list[bytes]:
            with lock:
                result = app(environ, start_response)
                try:
                    return [b"".join(result)]
                finally:
                    if hasattr(result, "close"):
                        result.close()

        # The request handler moto's own server uses: moto 5.2.5 added one (it keeps the
        # underscores of S3 metadata headers); before it, werkzeug's default, as moto did.
        handler = getattr(werkzeug_app, "MotoRequestHandler", None)
        self._server = make_server(host, port, serve, True, request_handler=handler)
        self._thread = threading.Thread(target=self._serve, name="moto-server", daemon=True)

    def _serve(self) -> None:
        # stop() waits for the loop to look at its flag: every 0.05 s, not 0.5 s.
        self._server.serve_forever(poll_interval=0.05)

    def start(self) -> None:
        self._thread.start()  # the socket is bound and listening already

    def get_host_and_port(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _serial_moto_server(host: str, port: int) -> _SerialServer:
    """A moto server on ``host``:``port`` (0: a free port) that handles one request at
    a time (see :class:`_SerialServer`)."""
    return _SerialServer(host, port)
