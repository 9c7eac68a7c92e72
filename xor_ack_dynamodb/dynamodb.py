"""XorAckDynamoDB: ack chains kept in DynamoDB with conditional writes.

Every write is conditional on what the writer last saw, so concurrent trackers (threads,
processes, Spark executors, Lambda functions, a Node service) can share chains without a
lock. Every stamp carries an op id remembered in the chain, so a stamp that is delivered
twice (botocore resending a write whose response was lost, a retried Spark task, a
redelivered SQS message) is applied once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar, cast

import tenacity
from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

from .cache import LastKnown
from .errors import (
    BatchIncomplete,
    BufferLengthsUnequal,
    InvalidConfig,
    StaleLocalData,
    TableNotFound,
    TableSchemaMismatch,
    TagAcked,
    TagExists,
    TagExpired,
    TagFailed,
    TagNotFound,
    ZeroBufferNoOp,
)
from .item import Chain, Item, ItemCodec
from .model import ChainStatus, create_op_key, op_key, random_op_key
from .retry import RetryPolicy
from .stamps import Stamp, as_bytes, check_tag, check_tags, xor_all
from .stats import RequestStats
from .table import check_table_name, create_table, describe, missing_table_message, table_key

if TYPE_CHECKING:
    from .config import AckConfig

__all__ = ["XorAckDynamoDB", "TRANSIENT_CODES"]

log = logging.getLogger("xor_ack_dynamodb")

_T = TypeVar("_T")

#: Error codes after which a request may or may not have been applied, and which are
#: worth another attempt once botocore's own retries are spent.
TRANSIENT_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "TransactionConflictException",
    }
)

_BATCH_SIZE = 100


class _Conflict(Exception):
    """An attempt lost the optimistic-concurrency race; the next one starts from
    ``chain``, the item as the table holds it now."""

    def __init__(self, chain: Chain | None) -> None:
        super().__init__("conditional write lost a race")
        self.chain = chain


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ClientError):
        return exc.response.get("Error", {}).get("Code") in TRANSIENT_CODES
    return isinstance(exc, (ConnectionError, HTTPClientError))


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _retry_attempts(response: Mapping[str, Any]) -> int:
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)


def _seconds(value: timedelta | float | int, name: str) -> int:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not seconds > 0:
        raise InvalidConfig(f"{name} must be positive, got {value!r}")
    return max(1, round(seconds))


class XorAckDynamoDB:
    """Ack chains in one DynamoDB table.

    :param table: the table's name. Create it with :meth:`create_table`.
    :param partition_key: the name of the table's String partition key.
    :param client: a boto3 low-level DynamoDB client; built from the environment when
        omitted (``AWS_REGION``, ``AWS_ENDPOINT_URL_DYNAMODB`` and the usual credentials).
    :param ttl: how long a chain may stay pending before it reads as ``expired``.
    :param retention: how long an ``acked`` or ``failed`` chain is kept as a tombstone
        (so that a poller can tell done from timed out, and a late duplicate is caught).
    :param delete_on_ack: delete a chain when it reaches zero instead of keeping a
        tombstone, as the Node package does. A stamp arriving after that then raises
        :class:`~xor_ack_dynamodb.errors.TagNotFound`, duplicate or not.
    :param max_ops: how many op ids each chain remembers. A duplicate delivery is caught
        while fewer than ``max_ops`` other ops have landed on the chain since.
    :param retry: the budget for lost races and transient errors.
    :param cache_size: how many chains' last known values to keep (0 disables). With it,
        a stamp that follows this tracker's own write costs one request.
    :param clock: the time source, in epoch seconds (tests move it to expire chains).

    A tracker is thread-safe; share one per process. Raises
    :class:`~xor_ack_dynamodb.errors.InvalidConfig` for arguments out of range.
    """

    def __init__(
        self,
        table: str,
        partition_key: str = "tagID",
        *,
        client: Any = None,
        ttl: timedelta | float = timedelta(hours=1),
        retention: timedelta | float = timedelta(days=1),
        delete_on_ack: bool = False,
        max_ops: int = 32,
        retry: RetryPolicy | None = None,
        ttl_attribute: str = "expires_at",
        cache_size: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = check_table_name(table)
        if not isinstance(partition_key, str) or not 1 <= len(partition_key.encode()) <= 255:
            raise InvalidConfig(f"partition_key must be a name of 1 to 255 bytes, got {partition_key!r}")
        if partition_key in {"stamp", "state", "version", "ops", "reason", "created_at", "updated_at"}:
            raise InvalidConfig(f"partition_key {partition_key!r} collides with a chain attribute")
        if not isinstance(max_ops, int) or max_ops < 1:
            raise InvalidConfig(f"max_ops must be a positive int, got {max_ops!r}")
        self.partition_key = partition_key
        self.ttl_seconds = _seconds(ttl, "ttl")
        self.retention_seconds = _seconds(retention, "retention")
        self.delete_on_ack = bool(delete_on_ack)
        self.max_ops = max_ops
        self.retry = retry or RetryPolicy()
        self.codec = ItemCodec(partition_key, ttl_attribute)
        self.stats = RequestStats()
        self._cache: LastKnown[Chain] = LastKnown(cache_size)
        self._clock = clock
        if client is None:
            import boto3

            client = boto3.session.Session().client("dynamodb")
        self.client = client

    @classmethod
    def from_config(cls, config: AckConfig, client: Any = None) -> XorAckDynamoDB:
        """A tracker built from a picklable :class:`~xor_ack_dynamodb.AckConfig` (what a
        Spark executor or a Lambda function does)."""
        return config.connect(client)

    def __repr__(self) -> str:
        return f"XorAckDynamoDB(table={self.table!r}, partition_key={self.partition_key!r})"

    # -- table ------------------------------------------------------------------------

    def create_table(self, *, wait: bool = True) -> bool:
        """Create the table: on demand, String partition key, TTL on the expiry
        attribute. Returns False, after making sure TTL is enabled, if it already exists
        with that key. Raises :class:`~xor_ack_dynamodb.errors.TableSchemaMismatch` if
        it exists with another key."""
        return create_table(self.client, self.table, self.partition_key, self.codec.ttl_attribute, wait=wait)

    # -- chains -----------------------------------------------------------------------

    def create(self, tag: str, stamp: bytes | bytearray | memoryview, *, op_id: str | None = None) -> Stamp:
        """Start a chain holding ``stamp``; it expires ``ttl`` from now.

        Returns the stored stamp (``acked`` is False). A chain whose expiry has passed
        (a timed-out pending chain, or a tombstone past its retention) is overwritten.
        Idempotent per ``op_id``: a create that is delivered again (botocore resending
        it, a retried task) returns the chain's current value instead of raising.

        Raises :class:`TagExists` for a live chain with that tag, :class:`ZeroBufferNoOp`
        for an all-zero stamp, :class:`InvalidTag`/:class:`InvalidStamp` for bad input.
        """
        tag = check_tag(tag)
        data = as_bytes(stamp, tag=tag)
        if not any(data):
            raise ZeroBufferNoOp("cannot create a chain with an all-zero stamp", tag=tag)
        op = create_op_key(op_id) if op_id is not None else random_op_key()

        def attempt() -> Stamp:
            now = self._now()
            chain, applied = self._update(
                tag,
                UpdateExpression=(
                    "SET #s = :s, #st = :pending, #e = :exp, #ops = :ops, #c = :now, "
                    "#u = :now, #v = if_not_exists(#v, :zero) + :one REMOVE #r"
                ),
                ConditionExpression="attribute_not_exists(#pk) OR #e < :now",
                ExpressionAttributeNames=self.codec.names(
                    "#pk", "#s", "#st", "#e", "#ops", "#c", "#u", "#v", "#r"
                ),
                ExpressionAttributeValues={
                    ":s": {"B": data},
                    ":pending": {"S": "pending"},
                    ":exp": {"N": str(now + self.ttl_seconds)},
                    ":ops": {"L": [{"S": op}]},
                    ":now": {"N": str(now)},
                    ":zero": {"N": "0"},
                    ":one": {"N": "1"},
                },
            )
            if applied and chain is not None:
                return Stamp(chain.stamp)
            if chain is None:  # deleted since the condition was checked: try again
                raise _Conflict(None)
            if op in chain.ops:
                self.stats.add("duplicates")
                log.debug("create %s: op already applied, returning current value", tag)
                return Stamp(chain.stamp)
            raise TagExists(f"chain {tag!r} already exists ({chain.effective_state(now)})", tag=tag)

        return self._retrying(tag, attempt)

    def stamp(self, tag: str, stamp: bytes | bytearray | memoryview, *, op_id: str | None = None) -> Stamp:
        """XOR ``stamp`` into the chain. Returns the new stored value; its ``acked`` is
        True when the chain reached zero (it is then an ``acked`` tombstone, or deleted
        with ``delete_on_ack``).

        Guarantees: the stamp is applied at most once per ``op_id`` (a random op id is
        used when none is given, which covers botocore's resends; pass your own to cover
        redeliveries), and exactly once if the call returns. A duplicate of an op the
        chain already applied returns the current value without applying it again.
        A lost race is retried within the retry budget; when it is spent,
        :class:`StaleLocalData` is raised and nothing was applied by this call, unless a
        transient error hid the outcome, in which case retrying with the same ``op_id``
        tells (it is then caught as a duplicate).

        Raises :class:`TagNotFound`, :class:`TagFailed`, :class:`TagExpired`,
        :class:`TagAcked` for a chain in that state, :class:`BufferLengthsUnequal` for a
        stamp whose length differs from the chain's, :class:`ZeroBufferNoOp` for an
        all-zero stamp, :class:`InvalidTag`/:class:`InvalidStamp` for bad input; a
        ``ClientError`` (or botocore connection error) only when transient errors
        outlast the budget.
        """
        tag = check_tag(tag)
        delta = as_bytes(stamp, tag=tag)
        if not any(delta):
            raise ZeroBufferNoOp("stamping with an all-zero stamp changes nothing", tag=tag)
        op = op_key(op_id) if op_id is not None else random_op_key()
        known: list[Chain | None] = [self._cache.get(tag)]

        def attempt() -> Stamp:
            try:
                return self._stamp_once(tag, delta, op, known[0])
            except _Conflict as conflict:
                known[0] = conflict.chain
                raise
            except BaseException:
                known[0] = None  # the outcome is unknown: start from a fresh read
                raise

        return self._retrying(tag, attempt)

    def _stamp_once(self, tag: str, delta: bytes, op: str, chain: Chain | None) -> Stamp:
        now = self._now()
        if chain is not None and self._objection(chain, delta, op, now):
            # The last known value may be stale: only a fresh read may decide against
            # writing (or call the stamp a duplicate).
            chain = None
        if chain is None:
            chain = self._read(tag)
        duplicate = self._judge(chain, delta, op, now)
        if duplicate is not None:
            return duplicate
        new = xor_all((chain.stamp, delta))
        ops = (chain.ops + (op,))[-self.max_ops :]
        try:
            if new.acked and self.delete_on_ack:
                self._write_delete(chain, now)
                self._cache.discard(tag)
                return new
            updated = self._write_stamp(chain, new, ops, now)
        except ClientError as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise
            current = self._old_item(exc, tag)
            if current is None:
                if new.acked and self.delete_on_ack and _retry_attempts(exc.response) > 0:
                    # Our own completing delete was applied and its response lost: the
                    # resend finds nothing. (Only a concurrent delete(tag) looks the same.)
                    log.debug("stamp %s: resent completing delete found the chain gone", tag)
                    return new
                raise TagNotFound(f"chain {tag!r} does not exist", tag=tag) from None
            self._cache.put(tag, current)
            duplicate = self._judge(current, delta, op, self._now())
            if duplicate is not None:
                return duplicate
            self.stats.add("conflicts")
            raise _Conflict(current) from None
        self._cache.put(tag, updated)
        if new.acked:
            log.debug("chain %s acked", tag)
        return new

    @staticmethod
    def _objection(chain: Chain, delta: bytes, op: str, now: int) -> bool:
        """True when ``chain`` gives any reason not to write ``delta`` on it."""
        return op in chain.ops or chain.effective_state(now) != "pending" or len(delta) != len(chain.stamp)

    def _judge(self, chain: Chain, delta: bytes, op: str, now: int) -> Stamp | None:
        """Decide, from a fresh read of ``chain``, whether ``delta`` may be written on it:
        None if so; the current value if ``op`` was already applied; otherwise raise the
        error for the chain's state."""
        if op in chain.ops:
            self.stats.add("duplicates")
            log.debug("stamp %s: op already applied, returning current value", chain.tag)
            return Stamp(chain.stamp)
        self._raise_for_state(chain, now)
        if len(delta) != len(chain.stamp):
            raise BufferLengthsUnequal(
                f"stamp is {len(delta)} bytes but chain {chain.tag!r} holds {len(chain.stamp)}",
                tag=chain.tag,
            )
        return None

    def _guard(self, chain: Chain, now: int) -> tuple[str, dict[str, dict[str, Any]]]:
        """The condition that ``chain`` is still exactly what the table holds and live."""
        version = "attribute_not_exists(#v)" if chain.version == 0 else "#v = :v"
        values: dict[str, dict[str, Any]] = {
            ":old": {"B": chain.stamp},
            ":now": {"N": str(now)},
            ":pending": {"S": "pending"},
        }
        if chain.version:
            values[":v"] = {"N": str(chain.version)}
        condition = (
            f"#s = :old AND {version} AND (attribute_not_exists(#st) OR #st = :pending) "
            "AND (attribute_not_exists(#e) OR #e >= :now)"
        )
        return condition, values

    def _write_stamp(self, chain: Chain, new: Stamp, ops: tuple[str, ...], now: int) -> Chain:
        condition, values = self._guard(chain, now)
        values.update(
            {
                ":new": {"B": bytes(new)},
                ":v1": {"N": str(chain.version + 1)},
                ":ops": {"L": [{"S": o} for o in ops]},
            }
        )
        update = "SET #s = :new, #v = :v1, #ops = :ops, #u = :now"
        state, expires_at = chain.state, chain.expires_at
        if new.acked:
            update += ", #st = :acked, #e = :ret"
            values[":acked"] = {"S": "acked"}
            values[":ret"] = {"N": str(now + self.retention_seconds)}
            state, expires_at = "acked", now + self.retention_seconds
        self._call(
            "UpdateItem",
            chain.tag,
            Key=self.codec.key(chain.tag),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=self.codec.names("#s", "#v", "#st", "#e", "#ops", "#u"),
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return Chain(chain.tag, bytes(new), state, chain.version + 1, expires_at, ops, chain.reason)

    def _write_delete(self, chain: Chain, now: int) -> None:
        condition, values = self._guard(chain, now)
        self._call(
            "DeleteItem",
            chain.tag,
            Key=self.codec.key(chain.tag),
            ConditionExpression=condition,
            ExpressionAttributeNames=self.codec.names("#s", "#v", "#st", "#e"),
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )

    def fail(self, tag: str, reason: str | None = None) -> ChainStatus:
        """Mark a pending (or expired) chain failed, keeping it as a tombstone for
        ``retention``. Failing a failed chain changes nothing (the first reason stays).
        Returns the chain's status.

        Raises :class:`TagNotFound`, or :class:`TagAcked` for a chain that completed.
        """
        tag = check_tag(tag)
        if reason is not None and not isinstance(reason, str):
            raise InvalidConfig(f"reason must be a str, got {type(reason).__name__}")

        def attempt() -> ChainStatus:
            now = self._now()
            update = "SET #st = :failed, #e = :ret, #u = :now ADD #v :one"
            values: dict[str, dict[str, Any]] = {
                ":failed": {"S": "failed"},
                ":ret": {"N": str(now + self.retention_seconds)},
                ":now": {"N": str(now)},
                ":one": {"N": "1"},
                ":pending": {"S": "pending"},
            }
            names = self.codec.names("#pk", "#st", "#e", "#u", "#v")
            if reason:
                update = update.replace("#u = :now", "#u = :now, #r = :reason")
                values[":reason"] = {"S": reason[:1024]}
                names.update(self.codec.names("#r"))
            chain, applied = self._update(
                tag,
                UpdateExpression=update,
                ConditionExpression="attribute_exists(#pk) AND (attribute_not_exists(#st) OR #st = :pending)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
            if chain is None:
                raise TagNotFound(f"chain {tag!r} does not exist", tag=tag)
            if applied:
                log.debug("chain %s failed: %s", tag, reason)
                return chain.status(now)
            if chain.state == "acked":
                raise TagAcked(f"chain {tag!r} is already acked", tag=tag)
            if chain.state == "failed":
                return chain.status(now)
            raise _Conflict(chain)

        return self._retrying(tag, attempt)

    def touch(self, tag: str, ttl: timedelta | float | None = None) -> ChainStatus:
        """Push a pending chain's expiry to ``ttl`` (default: the tracker's) from now,
        as Storm resets a tuple tree's timeout. Returns the chain's status.

        Raises :class:`TagNotFound`, :class:`TagAcked`, :class:`TagFailed`, or
        :class:`TagExpired` (an expired chain is not revived: replay it).
        """
        tag = check_tag(tag)
        seconds = self.ttl_seconds if ttl is None else _seconds(ttl, "ttl")

        def attempt() -> ChainStatus:
            now = self._now()
            chain, applied = self._update(
                tag,
                UpdateExpression="SET #e = :exp, #u = :now ADD #v :one",
                ConditionExpression=(
                    "attribute_exists(#pk) AND (attribute_not_exists(#st) OR #st = :pending) "
                    "AND (attribute_not_exists(#e) OR #e >= :now)"
                ),
                ExpressionAttributeNames=self.codec.names("#pk", "#st", "#e", "#u", "#v"),
                ExpressionAttributeValues={
                    ":exp": {"N": str(now + seconds)},
                    ":now": {"N": str(now)},
                    ":one": {"N": "1"},
                    ":pending": {"S": "pending"},
                },
            )
            if chain is None:
                raise TagNotFound(f"chain {tag!r} does not exist", tag=tag)
            if applied:
                return chain.status(now)
            self._raise_for_state(chain, now)
            raise _Conflict(chain)

        return self._retrying(tag, attempt)

    def _raise_for_state(self, chain: Chain, now: int) -> None:
        state = chain.effective_state(now)
        if state == "acked":
            raise TagAcked(f"chain {chain.tag!r} is already acked", tag=chain.tag)
        if state == "failed":
            raise TagFailed(
                f"chain {chain.tag!r} has failed" + (f": {chain.reason}" if chain.reason else ""),
                tag=chain.tag,
                reason=chain.reason,
            )
        if state == "expired":
            raise TagExpired(f"chain {chain.tag!r} expired before it was acked", tag=chain.tag)

    def status(self, tag: str) -> ChainStatus:
        """The chain as it is now (a strongly consistent read). Raises :class:`TagNotFound`."""
        tag = check_tag(tag)
        chain = self._retrying(tag, lambda: self._read(tag))
        return chain.status(self._now())

    def status_many(self, tags: Iterable[str]) -> dict[str, ChainStatus]:
        """The status of many chains: BatchGetItem, 100 keys a request, strongly
        consistent, unprocessed keys retried with backoff. Tags with no chain are absent
        from the result. Raises :class:`BatchIncomplete` if keys are still unprocessed
        when the retry budget is spent."""
        wanted = list(dict.fromkeys(check_tags(tags)))
        found: dict[str, ChainStatus] = {}
        for start in range(0, len(wanted), _BATCH_SIZE):
            keys = [self.codec.key(t) for t in wanted[start : start + _BATCH_SIZE]]
            for chain in self._batch_get(keys):
                found[chain.tag] = chain.status(self._now())
        return {t: found[t] for t in wanted if t in found}

    def _batch_get(self, keys: list[Item]) -> Iterator[Chain]:
        pending = keys
        retrying = self.retry.retrying(
            tenacity.retry_if_exception_type(_Conflict) | tenacity.retry_if_exception(_is_transient)
        )
        try:
            for attempt in retrying:
                with attempt:
                    response = self._call(
                        "BatchGetItem",
                        None,
                        RequestItems={self.table: {"Keys": pending, "ConsistentRead": True}},
                    )
                    for item in response.get("Responses", {}).get(self.table, []):
                        yield self.codec.parse(item)
                    pending = response.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
                    if pending:
                        raise _Conflict(None)
        except tenacity.RetryError as exc:
            last = exc.last_attempt.exception()
            if isinstance(last, _Conflict):
                raise BatchIncomplete(
                    f"{len(pending)} keys still unprocessed after the retry budget"
                ) from None
            raise last from None  # type: ignore[misc]

    def delete(self, tag: str) -> None:
        """Delete the chain whatever its state. Raises :class:`TagNotFound` if there is
        none, unless the request had to be sent again (by botocore or by this library's
        retry), since the first attempt may be the one that deleted it."""
        tag = check_tag(tag)
        attempts = 0

        def attempt() -> None:
            nonlocal attempts
            attempts += 1
            response = self._call("DeleteItem", tag, Key=self.codec.key(tag), ReturnValues="ALL_OLD")
            self._cache.discard(tag)
            if "Attributes" not in response:
                if _retry_attempts(response) > 0 or attempts > 1:
                    log.debug("delete %s: resent request found nothing; taking it as deleted", tag)
                    return
                raise TagNotFound(f"chain {tag!r} does not exist", tag=tag)

        self._retrying(tag, attempt)

    # -- plumbing -----------------------------------------------------------------------

    def _key_mismatch(self, exc: ClientError) -> bool:
        """Whether a ValidationException comes from the table's key schema. The message
        says so on DynamoDB ("does not match the schema") but not always elsewhere (a key
        of another type, moto's bare "Validation Exception"): then DescribeTable decides.
        One more request, on an error path only."""
        message = str(exc).lower()
        if "key" in message and "schema" in message:
            return True
        try:
            return table_key(describe(self.client, self.table)) != (self.partition_key, "S")
        except (ClientError, TableNotFound):
            return False

    def _update(self, tag: str, **request: Any) -> tuple[Chain | None, bool]:
        """One conditional UpdateItem on ``tag``'s chain. Returns the chain as written and
        True when it was applied; the chain as the failed condition saw it (None if there
        is none) and False when it was not. Either way the result is remembered."""
        try:
            response = self._call(
                "UpdateItem",
                tag,
                Key=self.codec.key(tag),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **request,
            )
        except ClientError as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise
            current = self._old_item(exc, tag)
            if current is not None:
                self._cache.put(tag, current)
            return current, False
        chain = self.codec.parse(response["Attributes"], tag)
        self._cache.put(tag, chain)
        return chain, True

    def _now(self) -> int:
        return int(self._clock())

    def _read(self, tag: str) -> Chain:
        response = self._call("GetItem", tag, Key=self.codec.key(tag), ConsistentRead=True)
        item = response.get("Item")
        if item is None:
            self._cache.discard(tag)
            raise TagNotFound(f"chain {tag!r} does not exist", tag=tag)
        chain = self.codec.parse(item, tag)
        self._cache.put(tag, chain)
        return chain

    def _old_item(self, exc: ClientError, tag: str) -> Chain | None:
        """The item a failed condition saw (``ALL_OLD``), or a consistent read of it for
        backends that do not return it; None if there is no item."""
        item = cast("Item | None", exc.response.get("Item"))
        if item is not None:
            return self.codec.parse(item, tag)
        try:
            return self._read(tag)
        except TagNotFound:
            return None

    def _retrying(self, tag: str, attempt: Callable[[], _T]) -> _T:
        """Run ``attempt`` under the retry budget: again after a lost race (``_Conflict``)
        or a transient error. A spent budget raises :class:`StaleLocalData` for races and
        the last error itself otherwise."""
        retrying = self.retry.retrying(
            tenacity.retry_if_exception_type(_Conflict) | tenacity.retry_if_exception(_is_transient)
        )
        retrying.before_sleep = self._before_retry
        try:
            return retrying(attempt)
        except tenacity.RetryError as exc:
            last = exc.last_attempt.exception()
            if isinstance(last, _Conflict):
                raise StaleLocalData(
                    f"chain {tag!r} kept changing: {exc.last_attempt.attempt_number} attempts lost the race",
                    tag=tag,
                ) from None
            assert last is not None
            raise last from None

    def _before_retry(self, state: tenacity.RetryCallState) -> None:
        self.stats.add("retries")
        if state.outcome is not None and not isinstance(state.outcome.exception(), _Conflict):
            log.debug("retrying after transient error: %r", state.outcome.exception())

    def _call(self, operation: str, tag: str | None, **kwargs: Any) -> dict[str, Any]:
        """One request. Counts it (with botocore's own resends) and the capacity it
        consumed (when the backend reports it), logs it without its body, and turns a
        missing table or a key schema mismatch into typed errors."""
        method = getattr(self.client, _METHODS[operation])
        log.debug("%s %s tag=%r", operation, self.table, tag)
        try:
            if operation != "BatchGetItem":  # the only request that names its table(s) inside
                kwargs["TableName"] = self.table
            kwargs.setdefault("ReturnConsumedCapacity", "TOTAL")
            response: dict[str, Any] = method(**kwargs)
        except ClientError as exc:
            self.stats.request(operation, 1 + _retry_attempts(exc.response))
            code = _error_code(exc)
            if code == "ResourceNotFoundException":
                raise TableNotFound(missing_table_message(self.table)) from exc
            if code == "ValidationException" and self._key_mismatch(exc):
                raise TableSchemaMismatch(
                    f"table {self.table!r} does not have a String partition key named "
                    f"{self.partition_key!r}: {exc.response.get('Error', {}).get('Message')}",
                    tag=tag,
                ) from exc
            raise
        self.stats.request(operation, 1 + _retry_attempts(response))
        self.stats.add_capacity(_capacity_units(response.get("ConsumedCapacity")))
        return response


def _capacity_units(consumed: Any) -> float:
    """Total CapacityUnits of a response's ConsumedCapacity: one entry for a single-item
    request, a list (one per table) for a batch; 0.0 when the backend reports none."""
    entries = consumed if isinstance(consumed, list) else [consumed] if isinstance(consumed, dict) else []
    return float(sum(float(e.get("CapacityUnits") or 0) for e in entries if isinstance(e, dict)))


_METHODS = {
    "GetItem": "get_item",
    "PutItem": "put_item",
    "UpdateItem": "update_item",
    "DeleteItem": "delete_item",
    "BatchGetItem": "batch_get_item",
}
