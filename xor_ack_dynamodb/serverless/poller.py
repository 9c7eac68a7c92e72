"""Lambda's DynamoDB stream event source, on this machine (docs/lambda.md, "Without
Lambda"): records of a shard in order, a batch whose response names a failed record
read again from it, a shard after its parent.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ..errors import InvalidConfig
from ..stats import RequestStats

#: The host suffixes of AWS's own endpoints (the standard, China and dual-stack partitions).
_AWS_HOSTS = (".amazonaws.com", ".amazonaws.com.cn", ".api.aws")

StreamHandler = Callable[[dict[str, Any], Any], Any]


def _json_safe(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    if isinstance(value, Mapping):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def lambda_record(record: Mapping[str, Any], stream_arn: str) -> dict[str, Any]:
    """A record from ``GetRecords`` as Lambda delivers it: JSON (Binary as base64,
    times as epoch seconds) with the stream's ARN."""
    return {"eventSource": "aws:dynamodb", **_json_safe(dict(record)), "eventSourceARN": stream_arn}


def streams_client(dynamodb: Any) -> Any:
    """A DynamoDB Streams client beside the boto3 DynamoDB client ``dynamodb``: its
    region, credentials and botocore settings, and its endpoint if local (a moto server,
    DynamoDB Local serve both APIs), else the regional streams endpoint: botocore 1.44+
    would name one after the stream ARN's account, which moto's ``mock_aws`` does not
    serve."""
    import boto3

    meta = dynamodb.meta
    endpoint: str | None = meta.endpoint_url
    config = meta.config
    if endpoint is None or (urlsplit(endpoint).hostname or "").endswith(_AWS_HOSTS):
        endpoint = None
        from botocore.config import Config

        if "account_id_endpoint_mode" in Config.OPTION_DEFAULTS:  # botocore >= 1.35
            config = config.merge(Config(account_id_endpoint_mode="disabled"))
    import botocore.session

    get = getattr(dynamodb, "_get_credentials", None)  # deferred credentials, botocore >= 1.35
    credentials = get() if get is not None else dynamodb._request_signer._credentials
    core = botocore.session.Session()
    # The DynamoDB client's own credentials object, not a frozen copy of its keys: a
    # role's refreshable credentials go on refreshing for a long-running poller.
    core._credentials = credentials  # type: ignore[attr-defined]  # botocore's only way in
    from ..stores.dynamodb.clients import typed_client  # the library's typed network errors

    return typed_client(
        boto3.session.Session(botocore_session=core, region_name=meta.region_name).client(
            "dynamodbstreams", endpoint_url=endpoint, config=config
        )
    )


class StreamPoller:
    """Reads ``stream_arn`` and calls ``handler(event, None)`` per batch of at most
    ``batch_size`` records. ``start``: ``TRIM_HORIZON`` (every record the stream holds)
    or ``LATEST``. ``twice``: hand every batch to the handler twice (as a retried batch
    gets it; the second answer counts). ``streams`` is a ``dynamodbstreams`` client.
    Its requests are counted in :attr:`stats` (``streams.GetRecords``...)."""

    def __init__(
        self,
        streams: Any,
        stream_arn: str,
        handler: StreamHandler,
        *,
        batch_size: int = 100,
        start: str = "TRIM_HORIZON",
        twice: bool = False,
    ) -> None:
        if start not in ("TRIM_HORIZON", "LATEST"):
            raise InvalidConfig(f"start must be TRIM_HORIZON or LATEST, got {start!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= 1000:
            raise InvalidConfig(f"batch_size must be an int from 1 to 1000, got {batch_size!r}")
        self.streams, self.stream_arn, self.handler = streams, stream_arn, handler
        self.batch_size, self.start, self.twice = batch_size, start, twice
        self.stats = RequestStats()
        self._iterators: dict[str, str] = {}
        self._closed: set[str] = set()
        self.delivered = 0

    @classmethod
    def for_table(
        cls, dynamodb: Any, streams: Any, table: str, handler: StreamHandler, **options: Any
    ) -> StreamPoller:
        """The poller of ``table``'s stream (``streams`` None: :func:`streams_client`'s).
        Raises :class:`InvalidConfig` when the table has no stream (dynalite has none)."""
        description = dynamodb.describe_table(TableName=table)["Table"]
        arn = description.get("LatestStreamArn")
        if not arn or not (description.get("StreamSpecification") or {}).get("StreamEnabled"):
            raise InvalidConfig(
                f"table {table!r} has no stream: create it with create_table(stream=True) "
                "(moto and DynamoDB Local serve streams; dynalite does not)"
            )
        return cls(streams if streams is not None else streams_client(dynamodb), str(arn), handler, **options)

    def _shards(self) -> list[dict[str, Any]]:
        shards: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"StreamArn": self.stream_arn}
        while True:
            self.stats.request("streams.DescribeStream")
            description = self.streams.describe_stream(**kwargs)["StreamDescription"]
            shards += description.get("Shards", [])
            last = description.get("LastEvaluatedShardId")
            if not last:
                return shards
            kwargs["ExclusiveStartShardId"] = last

    def _iterator(self, shard: str, kind: str, sequence: str | None = None) -> str:
        self.stats.request("streams.GetShardIterator")
        extra = {"SequenceNumber": sequence} if sequence is not None else {}
        response = self.streams.get_shard_iterator(
            StreamArn=self.stream_arn, ShardId=shard, ShardIteratorType=kind, **extra
        )
        return str(response["ShardIterator"])

    def poll(self) -> int:
        """One pass over the stream's open shards, parents first: one ``GetRecords`` per
        shard, its batch to the handler. Returns the records handed over."""
        delivered = 0
        shards = self._shards()
        known = {s["ShardId"] for s in shards}
        for shard in shards:
            shard_id, parent = shard["ShardId"], shard.get("ParentShardId")
            if shard_id in self._closed or (parent in known and parent not in self._closed):
                continue
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._iterator(shard_id, self.start)
            self.stats.request("streams.GetRecords")
            got = self.streams.get_records(ShardIterator=self._iterators[shard_id], Limit=self.batch_size)
            records = got.get("Records", [])
            following = got.get("NextShardIterator")
            if records:
                delivered += len(records)
                event = {"Records": [lambda_record(r, self.stream_arn) for r in records]}
                answer: Any = None
                for _ in range(2 if self.twice else 1):
                    answer = self.handler(event, None)
                failed = [f["itemIdentifier"] for f in (answer or {}).get("batchItemFailures", [])]
                if failed:  # read again from the first failure, as Lambda does
                    first = min(failed, key=int)
                    self._iterators[shard_id] = self._iterator(shard_id, "AT_SEQUENCE_NUMBER", first)
                    continue
            if following:
                self._iterators[shard_id] = following
            else:
                self._closed.add(shard_id)
                self._iterators.pop(shard_id, None)
        self.delivered += delivered
        return delivered

    def drain(self, max_rounds: int = 1000) -> int:
        """Poll until a pass hands nothing over; returns the records handed over. Raises
        ``RuntimeError`` after ``max_rounds`` passes that all delivered something (a
        record that keeps failing)."""
        total = 0
        for _ in range(max_rounds):
            got = self.poll()
            if not got:
                return total
            total += got
        raise RuntimeError(f"the stream still delivered records after {max_rounds} passes")
