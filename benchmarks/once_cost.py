"""Issue 31's cost of exactness: a three-level serverless fan-out, every message
delivered twice and a share of the copies late, on several containers, with faults.

    python -m benchmarks.once_cost [--backends ddblocal,server] [--modes sum,xor]
        [--caches warm,off,cold] [--objects 1] [--shape 20x24] [--containers 4]
        [--late 0.1] [--lose 0.02] [--throttle 0.02] [--resend 0.05] [--out DIR]

Each object is one chain, started by ``Pipeline.start`` with ``shape[0]`` children; each
child emits ``shape[1]`` grandchildren (leaves): ``20x24`` is 20 + 480 = 500 messages an
object, three levels with the start. The messages travel through a real SQS queue (moto
in-process: visibility timeouts and ``ApproximateReceiveCount`` as SQS keeps them), and
the tracker talks to a real DynamoDB over HTTP: Amazon's DynamoDB Local, or the moto
server in a child process.

Lambda is played by ``containers`` containers, each its own ``Pipeline`` over its own
tracker and its own boto3 clients (so its own last-known views and its own history
cache, as a Lambda container has); each received batch (up to 10 messages) goes to one
of them, at random (seeded). ``--caches`` picks what the containers keep:

* ``warm``: the library as shipped (views and history blocks kept per container);
* ``off``: the history cache off (``CallFactory.history`` None: a call keeps only the
  blocks it read itself), the views kept: what the cache saves;
* ``cold``: every batch a new container (no view, no block): every invocation a cold
  start, the worst case.

Every message is processed and left undeleted (its function "timed out"), so SQS
delivers it again (receive 2) interleaved with the others; ``late`` of the second
deliveries are held back until every other message was processed (their first copies'
op ids are then in the chain's history, not its item). Each object's last leaf waits
until after them, so that they find their chain still pending. A second delivery of a
child sends its grandchildren again (that is what the library does: a duplicate's
children are re-sent, and are duplicates in turn); those copies are messages too.

Faults, on the containers' clients: ``lose`` of the stamp writes (``PutItem`` and
``UpdateItem``) are applied by the backend and their response is lost (botocore sends
them again); ``throttle`` of them are answered ``ProvisionedThroughputExceeded`` without
reaching the backend (botocore tries again; AWS bills no throttled request);
``resend`` of the ``SendMessageBatch`` calls are applied twice (a lost response,
botocore's resend: every child of the batch twice, receive count 1 each).

Counted: every HTTP request that reached DynamoDB, by operation (botocore's resends
included, the injected throttles apart); write units: what the backend reported for
the successful writes (``ReturnConsumedCapacity``), plus, for a refused conditional
write, AWS's rule (it bills the size of the item it compared, at least one unit:
computed from the item the refusal returned); read units as reported. The completion
(the stream handler's claim, on a client without faults) is counted apart. A run is
exact when every chain ends acked and its completion fired once. Request counts do not
depend on the machine's load.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import platform
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .itemsize import item_size, write_units

HERE = Path(__file__).resolve().parent
#: Writes AWS bills write units for.
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
#: The writes faults are injected into (a stamp's, a history block's, a trim's).
FAULTY = ("PutItem", "UpdateItem")
CACHES = ("warm", "off", "cold")
BACKENDS = {"ddblocal": "DynamoDB Local", "server": "moto server"}


# -- metering and faults on one DynamoDB client --------------------------------------------


class Meter:
    """Hooks on one DynamoDB client: requests by operation (every attempt that reached
    the backend), injected faults, write and read units, refused writes, and the size
    of every chain item a write returned or wrote."""

    def __init__(
        self, client: Any, pick: random.Random | None = None, lose: float = 0.0, throttle: float = 0.0
    ) -> None:
        from botocore.httpsession import URLLib3Session

        self.requests: Counter[str] = Counter()
        self.throttled = self.lost = self.refused = 0
        self.write_units = self.read_units = 0.0
        self.item_bytes = 0
        self.item_ops = 0
        self.pick, self.lose, self.throttle = pick, lose, throttle
        self._http = URLLib3Session(timeout=120)
        events = client.meta.events
        events.register("before-send.dynamodb", self._send)
        events.register("before-parameter-build.dynamodb.PutItem", self._remember_put)
        events.register("after-call.dynamodb", self._after)

    def _send(self, request: Any, event_name: str, **_: Any) -> Any:
        from botocore.exceptions import ReadTimeoutError

        operation = event_name.rsplit(".", 1)[-1]
        if self.pick is not None and operation in FAULTY:
            draw = self.pick.random()
            if draw < self.throttle:
                self.throttled += 1
                return _throttled(request.url)
            if draw < self.throttle + self.lose:
                self.requests[operation] += 1
                self.lost += 1
                reply = self._http.send(request)  # the backend applies it; the answer is lost
                self._bill(operation, reply.status_code, json.loads(reply.content or b"{}"))
                raise ReadTimeoutError(endpoint_url=request.url)
        self.requests[operation] += 1
        return None

    @staticmethod
    def _remember_put(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["metered_item"] = params.get("Item")

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, context: Any, **_: Any) -> None:
        self._bill(model.name, http_response.status_code, parsed)
        if http_response.status_code < 300:
            item = parsed.get("Attributes") if model.name == "UpdateItem" else None
            if model.name == "PutItem":
                item = context.get("metered_item")
            if item and "ops" in item:
                self.item_bytes = max(self.item_bytes, item_size(item))
                self.item_ops = max(self.item_ops, len(item["ops"].get("L", [])))

    def _bill(self, operation: str, status: int, parsed: dict[str, Any]) -> None:
        if status >= 300:
            if operation in WRITES and _error_code(parsed) == "ConditionalCheckFailedException":
                self.refused += 1  # AWS bills the compared item's size, at least a unit
                item = parsed.get("Item")
                self.write_units += write_units(item_size(item)) if item else 1
            return
        found = parsed.get("ConsumedCapacity") or []
        units = sum(
            float(c.get("CapacityUnits") or 0) for c in (found if isinstance(found, list) else [found])
        )
        if operation in WRITES:
            self.write_units += units
        else:
            self.read_units += units


def _error_code(parsed: dict[str, Any]) -> str:
    error = parsed.get("Error") or {}
    code = str(error.get("Code") or parsed.get("__type") or "")
    return code.rsplit("#", 1)[-1]


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def _throttled(url: str) -> Any:
    from botocore.awsrequest import AWSResponse, HTTPHeaders

    code = "ProvisionedThroughputExceededException"
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": "injected"}).encode()
    headers = HTTPHeaders()
    headers["Content-Type"] = "application/x-amz-json-1.0"
    return AWSResponse(url, 400, headers, _Raw(body))


class Resends:
    """An SQS client whose ``SendMessageBatch`` is applied twice, ``share`` of the time:
    the same entries sent again through a second client (as botocore does after a lost
    response: two copies of every child, receive count 1 each)."""

    def __init__(self, sqs: Any, spare: Any, pick: random.Random, share: float) -> None:
        self.spare, self.pick, self.share = spare, pick, share
        self.batches = self.resent = 0
        sqs.meta.events.register("after-call.sqs.SendMessageBatch", self._again)

    def _again(self, http_response: Any, context: Any, **kwargs: Any) -> None:
        self.batches += 1
        params = context.get("resend_params")
        if params is not None and self.pick.random() < self.share:
            self.resent += 1
            self.spare.send_message_batch(**params)

    def remember(self, sqs: Any) -> None:
        def keep(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            context["resend_params"] = dict(params)

        sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", keep)


# -- one run ------------------------------------------------------------------------------------


@dataclass
class Run:
    backend: str
    mode: str
    cache: str
    objects: int
    shape: tuple[int, int]
    containers: int
    late: float
    faults: dict[str, float]
    deliveries: int = 0
    edges: int = 0  # distinct messages (edges finished) over all objects
    requests: Counter[str] = field(default_factory=Counter)
    throttled: int = 0
    lost: int = 0
    refused: int = 0
    write_units: float = 0.0
    read_units: float = 0.0
    item_bytes: int = 0
    item_ops: int = 0
    window: int = 0
    tracker_events: Counter[str] = field(default_factory=Counter)
    pipeline_events: Counter[str] = field(default_factory=Counter)
    sends: int = 0
    resent_batches: int = 0
    completion_requests: int = 0
    states: Counter[str] = field(default_factory=Counter)
    completions: Counter[str] = field(default_factory=Counter)
    tags: list[str] = field(default_factory=list)
    containers_used: int = 0
    seconds: float = 0.0
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    @property
    def per_message(self) -> float:
        return self.total / self.deliveries if self.deliveries else float("nan")

    @property
    def wcu_per_message(self) -> float:
        return self.write_units / self.deliveries if self.deliveries else float("nan")

    @property
    def exact(self) -> bool:
        return self.states == Counter({"acked": self.objects}) and self.completions == Counter(
            {t: 1 for t in self.tags}
        )

    def floor(self) -> dict[str, int]:
        """The requests no delivery can avoid: one write a delivery (a stamp applied, or
        a copy's refused or read answer), a create an object, a history write and a trim
        (sum: two requests) or a history write (xor: the trim rides in the stamp's own
        write) per block moved, and sum mode's completion write an object."""
        blocks = self.tracker_events.get("history_writes", 0)
        moves = 2 * blocks if self.mode == "sum" else blocks
        completions = self.objects if self.mode == "sum" else 0
        return {
            "deliveries": self.deliveries,
            "creates": self.objects,
            "block moves": moves,
            "completion writes": completions,
        }

    @property
    def floor_total(self) -> int:
        return sum(self.floor().values())

    def summary(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("tags",)}
        out.update(
            requests=dict(self.requests),
            total=self.total,
            per_message=round(self.per_message, 4),
            wcu_per_message=round(self.wcu_per_message, 4),
            floor=self.floor(),
            floor_total=self.floor_total,
            floor_per_message=round(self.floor_total / self.deliveries, 4) if self.deliveries else None,
            exact=self.exact,
            states=dict(self.states),
            completions=dict(self.completions),
        )
        return out


class Backend:
    """Clients for one running DynamoDB (its endpoint) and SQS (moto in-process)."""

    def __init__(self, name: str, endpoint_url: str) -> None:
        self.name, self.endpoint_url = name, endpoint_url

    def dynamodb(self) -> Any:
        from xor_ack_dynamodb import AckConfig, RetryPolicy
        from xor_ack_dynamodb.stores.dynamodb.clients import client_for
        from xor_ack_dynamodb.testing.endpoint import LOCAL_KEY_ID, LOCAL_REGION, LOCAL_SECRET

        # A read timeout above the default: a local server on a loaded 2-core machine
        # queues requests for seconds, and the default would turn that into resends.
        return client_for(
            AckConfig(
                table="unused",
                endpoint_url=self.endpoint_url,
                region=LOCAL_REGION,
                aws_access_key_id=LOCAL_KEY_ID,
                aws_secret_access_key=LOCAL_SECRET,
                retry=RetryPolicy(read_timeout=120.0),
            )
        )

    def streams(self) -> Any:
        from xor_ack_dynamodb import RetryPolicy
        from xor_ack_dynamodb.stores.dynamodb.clients import aws_client
        from xor_ack_dynamodb.testing.endpoint import LOCAL_KEY_ID, LOCAL_REGION, LOCAL_SECRET

        return aws_client(
            "dynamodbstreams",
            region=LOCAL_REGION,
            endpoint_url=self.endpoint_url,
            aws_access_key_id=LOCAL_KEY_ID,
            aws_secret_access_key=LOCAL_SECRET,
            retry=RetryPolicy(read_timeout=120.0),
        )


def _handler(children: int) -> Callable[[Any], None]:
    def handle(ctx: Any) -> None:
        body = ctx.json()
        if body["level"] == 1:
            for i in range(children):
                ctx.emit({"level": 2, "parent": body["i"], "i": i})

    return handle


def run(
    backend: Backend,
    *,
    mode: str,
    cache: str,
    objects: int = 1,
    shape: tuple[int, int] = (20, 24),
    containers: int = 4,
    late: float = 0.1,
    lose: float = 0.02,
    throttle: float = 0.02,
    resend: float = 0.05,
    seed: int = 31,
) -> Run:
    """One run (see the module doc): a fresh table, ``objects`` chains."""
    import boto3

    from xor_ack_dynamodb import XorAckDynamoDB
    from xor_ack_dynamodb.serverless import Completion, Pipeline, PipelineConfig

    if cache not in CACHES:
        raise ValueError(f"cache must be one of {CACHES}")
    pick = random.Random(seed)
    faults = random.Random(seed + 1)
    table = f"once-cost-{uuid.uuid4().hex[:10]}"
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue = sqs.create_queue(QueueName=table, Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    out = Run(
        backend.name,
        mode,
        cache,
        objects,
        shape,
        containers,
        late,
        {"lose": lose, "throttle": throttle, "resend": resend},
    )
    fired: list[Completion] = []
    admin = XorAckDynamoDB(table, client=backend.dynamodb(), mode=mode)  # type: ignore[arg-type]
    config = PipelineConfig(queue_url=queue, metrics_namespace=None)
    completer = Pipeline(admin, config, sqs=sqs, on_complete=[fired.append])
    completer.create_table()
    out.window = admin.max_ops

    meters: list[Meter] = []
    senders: list[Resends] = []
    pipelines: list[Any] = []

    def container() -> Any:
        client = backend.dynamodb()
        meters.append(Meter(client, faults, lose, throttle))
        tracker = XorAckDynamoDB(table, client=client, mode=mode)  # type: ignore[arg-type]
        if cache == "off":
            tracker.calls = dataclasses.replace(tracker.calls, history=None)
        own_sqs = boto3.client("sqs", region_name="us-east-1")
        sender = Resends(own_sqs, sqs, faults, resend)
        sender.remember(own_sqs)
        senders.append(sender)
        pipeline = Pipeline(tracker, config, sqs=own_sqs)
        pipelines.append(pipeline)
        return pipeline

    warm = [container() for _ in range(containers)] if cache != "cold" else []
    out.load = os.getloadavg()
    began = time.monotonic()
    starter = warm[0] if warm else container()
    for n in range(objects):
        started = starter.start(
            f"object-{n}", [{"level": 1, "i": i} for i in range(shape[0])], start_id=f"upload-{n}"
        )
        out.tags.append(started.tag)
    handler = _handler(shape[1])
    closer = {"level": 2, "parent": shape[0] - 1, "i": shape[1] - 1}
    held: list[str] = []
    closers: list[str] = []
    seen: set[tuple[int, int, int]] = set()

    def hide(handle: str, seconds: int) -> None:
        sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=handle, VisibilityTimeout=seconds)

    def drain(final: bool = False) -> None:
        while True:
            got = sqs.receive_message(
                QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
            ).get("Messages", [])
            if not got:
                return
            from xor_ack_dynamodb.testing import records_from_messages

            records = []
            for record in records_from_messages(got):
                body = json.loads(record["body"])
                first = record["attributes"]["ApproximateReceiveCount"] == "1"
                if not final and first and {k: body.get(k) for k in closer} == closer:
                    closers.append(record["receiptHandle"])  # unprocessed until the late copies are in
                    hide(record["receiptHandle"], 3600)
                else:
                    records.append(record)
            if not records:
                continue
            target = container() if cache == "cold" else pick.choice(warm)
            result = target.process_sqs_batch({"Records": records}, handler)
            assert result["batchItemFailures"] == [], result
            out.deliveries += len(records)
            delete = []
            for record in records:
                body = json.loads(record["body"])
                seen.add((body["level"], body.get("parent", -1), body["i"]))
                handle = record["receiptHandle"]
                if record["attributes"]["ApproximateReceiveCount"] != "1":
                    delete.append({"Id": str(len(delete)), "ReceiptHandle": handle})
                elif not final and pick.random() < late:
                    held.append(handle)  # invisible until every other message was processed
                    hide(handle, 3600)
                else:  # the function "timed out": visible again at once, received again later
                    hide(handle, 0)
            if delete:
                sqs.delete_message_batch(QueueUrl=queue, Entries=delete)

    drain()
    for batch, final in ((held, False), (closers, True)):
        while batch:
            for handle in batch:
                hide(handle, 0)
            batch.clear()
            drain(final)  # late copies' own re-sent children, and their copies, come too
        drain(True)
    out.seconds = time.monotonic() - began
    out.edges = len(seen) * objects  # the same (level, parent, i) names a message in every object
    for meter in meters:
        out.requests.update(meter.requests)
        out.throttled += meter.throttled
        out.lost += meter.lost
        out.refused += meter.refused
        out.write_units += meter.write_units
        out.read_units += meter.read_units
        out.item_bytes = max(out.item_bytes, meter.item_bytes)
        out.item_ops = max(out.item_ops, meter.item_ops)
    for p in pipelines:
        out.tracker_events.update(p.tracker.stats.events)
        out.pipeline_events.update(p.stats.events)
        out.sends += p.stats.requests.get("sqs.SendMessageBatch", 0)
    out.resent_batches = sum(s.resent for s in senders)
    out.containers_used = len(pipelines)
    before = admin.stats.total_requests
    completer.stream_poller(backend.streams()).drain()
    out.completion_requests = admin.stats.total_requests - before
    out.completions = Counter(c.tag for c in fired)
    out.states = Counter(s.state for s in admin.status_many(out.tags).values())
    sqs.delete_queue(QueueUrl=queue)
    return out


# -- output -----------------------------------------------------------------------------------


def _ops(requests: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(requests.items()))


def markdown(runs: list[Run]) -> str:
    head = (
        "| backend | mode | containers | messages (edges) | DynamoDB requests by operation "
        "| requests / message "
        "| floor / message | history reads | refused writes | faults: lost, throttled, batches sent twice "
        "| WCU / message | largest item | completion requests | exact |"
    )
    rows = [head, "|" + "---|" * 14]
    for r in runs:
        used = (
            f"{r.containers} warm"
            if r.cache == "warm"
            else (
                f"{r.containers}, no history cache"
                if r.cache == "off"
                else f"{r.containers_used} cold (one a batch)"
            )
        )
        rows.append(
            f"| {BACKENDS.get(r.backend, r.backend)} | {r.mode} | {used} | {r.deliveries} ({r.edges}) "
            f"| {r.total} ({_ops(r.requests)}) | **{r.per_message:.3f}** "
            f"| {r.floor_total / r.deliveries:.3f} | {r.requests.get('BatchGetItem', 0)} | {r.refused} "
            f"| {r.lost}, {r.throttled}, {r.resent_batches} of {r.sends} "
            f"| {r.wcu_per_message:.3f} | {r.item_bytes} B / {r.item_ops} ids | {r.completion_requests} "
            f"| {'yes' if r.exact else 'NO: ' + str(dict(r.states)) + ' ' + str(dict(r.completions))} |"
        )
    return "\n".join(rows)


def rich_table(runs: list[Run]) -> Any:
    from rich.table import Table

    table = Table(title="Three-level fan-out, every message twice, some late, with faults (issue 31)")
    for name in (
        "backend",
        "mode",
        "cache",
        "messages",
        "requests",
        "req/msg",
        "floor",
        "BatchGetItem",
        "refused",
        "lost/throttled/resent",
        "WCU/msg",
        "exact",
    ):
        table.add_column(name)
    for r in runs:
        table.add_row(
            BACKENDS.get(r.backend, r.backend),
            r.mode,
            f"{r.cache} ({r.containers_used})",
            str(r.deliveries),
            str(r.total),
            f"{r.per_message:.3f}",
            f"{r.floor_total / r.deliveries:.3f}",
            str(r.requests.get("BatchGetItem", 0)),
            str(r.refused),
            f"{r.lost}/{r.throttled}/{r.resent_batches}",
            f"{r.wcu_per_message:.3f}",
            "yes" if r.exact else "[red]NO[/red]",
        )
    return table


def process_runs(
    backend: Backend, counts: list[int], modes: list[str], stamps: int, windows: list[int]
) -> list[Any]:
    """One chain finished by N whole processes (:mod:`.processes`), each mode, with drawn
    op ids and with named ones checked from the root's position, for each chain window
    (``max_ops``)."""
    from xor_ack_dynamodb import XorAckDynamoDB

    from .processes import ProcessPool, one_chain_many_processes

    table = f"once-cost-processes-{uuid.uuid4().hex[:8]}"
    XorAckDynamoDB(table, client=backend.dynamodb()).create_table()
    found = []
    with ProcessPool(max(counts), counts) as pool:
        for n, mode, window, named in itertools.product(counts, modes, windows, (False, True)):
            found.append(
                one_chain_many_processes(
                    pool, BACKENDS[backend.name], backend.endpoint_url, table, mode, n, stamps, named, window
                )
            )
    return found


def process_markdown(runs: list[Any]) -> str:
    rows = [
        "| backend | processes | mode | max_ops | op ids | stamps | requests by operation | requests / stamp "
        "| WCU / stamp | largest item | trims (refused) | history reads "
        "| other stamps since the view (median, max) | views older than max_ops (their reads) "
        "| first stamps (their reads) | ok |",
        "|" + "---|" * 16,
    ]
    for r in runs:
        st = r.staleness()
        rows.append(
            f"| {r.backend} | {r.processes} | {r.mode} | {r.window} "
            f"| {'named, after=' if r.named else 'drawn'} "
            f"| {r.stamps} | {_ops(r.requests)} | **{r.requests_per_stamp:.3f}** | {r.wcu_per_stamp:.2f} "
            f"| {r.max_item_bytes} B / {r.max_ops} ids "
            f"| {r.events.get('trims', 0)} ({r.events.get('trims_skipped', 0)}) "
            f"| {r.events.get('history_reads', 0)} "
            f"| {st['median_since_view']}, {st['max_since_view']} "
            f"| {st['over_window']} ({st['over_window_reads']}) "
            f"| {st['no_view']} ({st['no_view_reads']}) | {'ok' if r.ok else '; '.join(r.problems[:2])} |"
        )
    return "\n".join(rows)


@contextmanager
def _backend(name: str) -> Iterator[Backend]:
    if name == "ddblocal":
        from xor_ack_dynamodb import DynamoDBLocal

        with DynamoDBLocal() as server:
            yield Backend(name, server.endpoint_url or "")
    elif name == "server":
        from .server import ServerProcess

        with ServerProcess() as server:
            yield Backend(name, server.endpoint_url)
    else:
        raise ValueError(f"unknown backend {name!r}")


def _write(out: Path, runs: list[Run], processes: list[Any], args: argparse.Namespace) -> None:
    """Write ``once_cost.md`` and ``once_cost.json`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    environment = (
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs shared with other work, "
        f"load average {os.getloadavg()[0]:.1f} at the end; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    (out / "once_cost.md").write_text(
        f"<!-- written by `python -m benchmarks.once_cost --out`; do not edit by hand -->\n\n"
        f"{environment}\n\n{markdown(runs)}\n\n{process_markdown(processes)}\n",
        encoding="utf-8",
    )
    document = {
        "environment": environment,
        "args": vars(args) | {"out": str(out)},
        "runs": [r.summary() for r in runs],
        "processes": [r.summary() for r in processes],
    }
    (out / "once_cost.json").write_text(json.dumps(_plain(document), indent=2, default=str), encoding="utf-8")


def _plain(value: Any) -> Any:
    """``value`` with every mapping's keys as text (some counters are keyed by tuples)."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else repr(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.once_cost", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--backends", default="ddblocal,server")
    parser.add_argument("--modes", default="sum,xor")
    parser.add_argument("--caches", default="warm,off,cold")
    parser.add_argument("--objects", type=int, default=1)
    parser.add_argument("--shape", default="20x24", help="children of the start x grandchildren of each")
    parser.add_argument("--containers", type=int, default=4)
    parser.add_argument("--late", type=float, default=0.1)
    parser.add_argument("--lose", type=float, default=0.02)
    parser.add_argument("--throttle", type=float, default=0.02)
    parser.add_argument("--resend", type=float, default=0.05)
    parser.add_argument(
        "--processes", default="32", help="process counts finishing one chain on DynamoDB Local ('' for none)"
    )
    parser.add_argument("--process-modes", default="sum")
    parser.add_argument("--process-stamps", type=int, default=10)
    parser.add_argument(
        "--process-windows",
        default="8,40",
        help="chain windows (max_ops) of the process runs: the default, and one sized to 32 writers",
    )
    parser.add_argument("--out", type=Path, default=None, help="write once_cost.{md,json} here")
    args = parser.parse_args(argv)
    shape = tuple(int(n) for n in args.shape.split("x"))
    if len(shape) != 2 or min(shape) < 1:
        parser.error("--shape takes AxB (children x grandchildren)")

    from moto import mock_aws
    from rich.console import Console

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
    console = Console() if sys.stdout.isatty() else Console(width=200)
    runs: list[Run] = []
    processes: list[Any] = []
    with mock_aws():
        for name in args.backends.split(","):
            with _backend(name) as backend:
                for mode in args.modes.split(","):
                    for cache in filter(None, args.caches.split(",")):  # "" for none
                        found = run(
                            backend,
                            mode=mode,
                            cache=cache,
                            objects=args.objects,
                            shape=(shape[0], shape[1]),
                            containers=args.containers,
                            late=args.late,
                            lose=args.lose,
                            throttle=args.throttle,
                            resend=args.resend,
                        )
                        runs.append(found)
                        console.log(
                            f"{BACKENDS[name]}, {mode}, cache {cache}: {found.deliveries} messages, "
                            f"{found.per_message:.3f} requests/message ({_ops(found.requests)}), "
                            f"floor {found.floor_total / found.deliveries:.3f}, WCU/message "
                            f"{found.wcu_per_message:.3f}, {found.seconds:.0f} s (load {found.load[0]:.1f}), "
                            f"exact: {found.exact}"
                        )
                        if args.out is not None:  # as it goes: a long run stopped early keeps its rows
                            _write(args.out, runs, processes, args)
                if name == "ddblocal" and args.processes:
                    counts = [int(n) for n in args.processes.split(",")]
                    windows = [int(n) for n in args.process_windows.split(",")]
                    for r in process_runs(
                        backend, counts, args.process_modes.split(","), args.process_stamps, windows
                    ):
                        processes.append(r)
                        console.log(
                            f"{r.backend}, {r.processes} processes, {r.mode}, max_ops {r.window}, "
                            f"{'named' if r.named else 'drawn'} op ids: "
                            f"{r.requests_per_stamp:.3f} requests/stamp "
                            f"({_ops(r.requests)}), WCU/stamp {r.wcu_per_stamp:.2f}, ok: {r.ok}"
                        )
                    if args.out is not None:
                        _write(args.out, runs, processes, args)
    console.print(rich_table(runs))
    if processes:
        console.print(process_markdown(processes))
    if args.out is not None:
        _write(args.out, runs, processes, args)
    return 0 if all(r.exact for r in runs) and all(r.ok for r in processes) else 1


if __name__ == "__main__":
    sys.exit(main())
