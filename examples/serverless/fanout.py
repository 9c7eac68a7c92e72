"""An S3 -> SQS -> Lambda fan-out whose completion is tracked by one XOR ack chain per object.

Flow (see README.md):

1. ``on_object_created`` (S3 "ObjectCreated" event): reads the object (JSON lines), splits
   it into chunks, creates the object's chain holding the XOR of one edge per chunk, and
   sends one SQS message per chunk carrying its edge.
2. ``on_work`` (SQS event): a chunk larger than ``leaf_lines`` is split in two; the worker
   stamps, in ONE write, its own edge and the two children's edges, then sends the
   children. A small chunk is counted, its result written to S3, and its edge stamped.
3. The stamp that brings the chain to zero triggers completion: the per-chunk results are
   summed into ``done/<key>.json`` (a conditional put, so it happens once) and, when a
   completion queue is configured, one message is sent to it.

Every edge is derived deterministically (keyed BLAKE2b of the parent edge and the child's
position), and every stamp's op id is the identity of the edge it finishes. So any
duplicate, whether SQS redelivering a message (same message id) or a retried handler
re-sending a child (new message id, same edge), is applied once. Failures never make a
false ack: a lost message leaves the chain pending until it expires, a poison message
fails it with a reason.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import urllib.parse
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from xor_ack_dynamodb import AckConfig, XorAckDynamoDB, derive_edge
from xor_ack_dynamodb.errors import TagAcked, TagExists, TagExpired, TagFailed, TagNotFound
from xor_ack_dynamodb.stamps import xor_all

log = logging.getLogger("serverless_fanout")

#: Keys edge derivation; any constant works, it only keeps these edges apart from others.
EDGE_KEY = b"xor-ack-serverless-example"
EDGE_BYTES = 16

#: Errors after which a message's chain is over: the message is dropped, not retried.
CHAIN_OVER = (TagFailed, TagExpired, TagAcked, TagNotFound)


@dataclass(frozen=True)
class Settings:
    """What the handlers read from their environment."""

    table: str
    work_queue_url: str
    output_bucket: str
    completion_queue_url: str | None = None
    partition_key: str = "tagID"
    chunk_lines: int = 100
    leaf_lines: int = 10
    poison_after: int = 3
    chain_ttl_seconds: float = 3600.0
    max_ops: int = 64

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings:
        """From ``XOR_ACK_TABLE``, ``WORK_QUEUE_URL``, ``OUTPUT_BUCKET`` (required) and
        ``COMPLETION_QUEUE_URL``, ``XOR_ACK_PARTITION_KEY``, ``CHUNK_LINES``,
        ``LEAF_LINES``, ``POISON_AFTER_RECEIVES``, ``CHAIN_TTL_SECONDS``, ``MAX_OPS``."""
        return cls(
            table=env["XOR_ACK_TABLE"],
            work_queue_url=env["WORK_QUEUE_URL"],
            output_bucket=env["OUTPUT_BUCKET"],
            completion_queue_url=env.get("COMPLETION_QUEUE_URL") or None,
            partition_key=env.get("XOR_ACK_PARTITION_KEY", "tagID"),
            chunk_lines=int(env.get("CHUNK_LINES", "100")),
            leaf_lines=int(env.get("LEAF_LINES", "10")),
            poison_after=int(env.get("POISON_AFTER_RECEIVES", "3")),
            chain_ttl_seconds=float(env.get("CHAIN_TTL_SECONDS", "3600")),
            max_ops=int(env.get("MAX_OPS", "64")),
        )


def object_tag(bucket: str, key: str, etag: str) -> str:
    """One chain per object version: a re-upload (new ETag) is a new chain."""
    return f"s3://{bucket}/{key}@{etag.strip(chr(34))}"


def root_edge(tag: str) -> bytes:
    """The object's root edge, derived from its tag so a redelivered S3 event derives the
    same chunks' edges again."""
    return derive_edge(EDGE_KEY, hashlib.blake2b(tag.encode(), digest_size=EDGE_BYTES).digest(), "root")


def op_id(tag: str, edge: bytes) -> str:
    """The op id of the stamp that finishes ``edge``: the same for every copy of its message."""
    return f"{tag}|{edge.hex()}"


class Poison(Exception):
    """The message's data cannot be processed, however often it is delivered."""


class Retry(Exception):
    """The message should be delivered again (reported as a batch item failure)."""


class Pipeline:
    """The three steps, with their clients injected (tests) or built from the environment
    (:meth:`from_env`, what the Lambda entry points use)."""

    def __init__(self, settings: Settings, *, tracker: XorAckDynamoDB, s3: Any, sqs: Any) -> None:
        self.settings = settings
        self.tracker = tracker
        self.s3 = s3
        self.sqs = sqs

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Pipeline:
        import boto3

        settings = Settings.from_env(env)
        session = boto3.session.Session()
        config = AckConfig(
            table=settings.table,
            partition_key=settings.partition_key,
            ttl_seconds=settings.chain_ttl_seconds,
            max_ops=settings.max_ops,
        )
        return cls(settings, tracker=config.connect(), s3=session.client("s3"), sqs=session.client("sqs"))

    # -- step 1: an object arrived ----------------------------------------------------

    def on_object_created(self, event: Mapping[str, Any]) -> list[str]:
        """Start one chain per object in an S3 event; returns their tags. Safe to run
        again on the same event (S3 delivers at least once)."""
        tags = []
        for record in event.get("Records", []):
            s3 = record["s3"]
            bucket = s3["bucket"]["name"]
            key = urllib.parse.unquote_plus(s3["object"]["key"])
            tags.append(self.start(bucket, key, s3["object"].get("eTag")))
        return tags

    def start(self, bucket: str, key: str, etag: str | None = None) -> str:
        obj = self.s3.get_object(Bucket=bucket, Key=key)
        tag = object_tag(bucket, key, etag or obj["ETag"])
        lines = [line for line in obj["Body"].read().decode("utf-8").splitlines() if line.strip()]
        size = self.settings.chunk_lines
        chunks = [lines[i : i + size] for i in range(0, len(lines), size)]
        root = root_edge(tag)
        edges = [derive_edge(EDGE_KEY, root, i) for i in range(len(chunks))]
        if not chunks:
            self.complete(tag, bucket, key)
            return tag
        try:
            # The chain starts holding every chunk's edge: one write for the whole fan-out.
            self.tracker.create(tag, xor_all(edges), op_id=f"create|{tag}")
        except TagExists:
            log.warning("%s: a chain created by another op exists; not starting it again", tag)
            return tag
        self._send(
            {"tag": tag, "bucket": bucket, "key": key, "edge": edge.hex(), "lines": chunk}
            for edge, chunk in zip(edges, chunks, strict=True)
        )
        log.info("%s: started with %d chunks", tag, len(chunks))
        return tag

    # -- step 2: a piece of work ------------------------------------------------------

    def on_work(self, event: Mapping[str, Any]) -> dict[str, list[dict[str, str]]]:
        """Process an SQS batch. Returns Lambda's partial batch response: the messages to
        deliver again (a transient error, or a poison message below its receive limit)."""
        failures = []
        for record in event.get("Records", []):
            try:
                self.work(record)
            except Retry:
                failures.append({"itemIdentifier": record["messageId"]})
        return {"batchItemFailures": failures}

    def work(self, record: Mapping[str, Any]) -> None:
        message = json.loads(record["body"])
        tag: str = message["tag"]
        edge = bytes.fromhex(message["edge"])
        receives = int(record.get("attributes", {}).get("ApproximateReceiveCount", "1"))
        try:
            self._process(message, tag, edge)
        except CHAIN_OVER as exc:
            log.info("%s: dropping message %s: %s", tag, record["messageId"], exc.code)
        except Poison as exc:
            if receives < self.settings.poison_after:
                log.warning("%s: message %s failed (receive %d): %s", tag, record["messageId"], receives, exc)
                raise Retry() from exc
            reason = f"poison message {record['messageId']}: {exc}"
            try:
                self.tracker.fail(tag, reason)
            except CHAIN_OVER:
                pass
            log.error("%s: failed: %s", tag, reason)
        except Exception as exc:
            # Throttling, a lost race past its budget, the network: nothing was acked
            # that should not have been; deliver the message again.
            log.warning("%s: message %s will be retried: %r", tag, record["messageId"], exc)
            raise Retry() from exc

    def _process(self, message: dict[str, Any], tag: str, edge: bytes) -> None:
        lines: list[str] = message["lines"]
        if len(lines) > self.settings.leaf_lines:
            half = len(lines) // 2
            children = [derive_edge(EDGE_KEY, edge, 0), derive_edge(EDGE_KEY, edge, 1)]
            # Finish this edge and start both children in one stamp, then send them.
            after = self.tracker.stamp(tag, xor_all([edge, *children]), op_id=op_id(tag, edge))
            if not any(after):  # a late copy of this message: the chain is complete already
                return  # (acked is only ever True for the stamp that completed the chain)
            # Sent again when this message is redelivered (we cannot know whether the first
            # delivery got to send them): harmless, the children's op ids are their edges.
            self._send(
                {**message, "edge": child.hex(), "lines": part}
                for child, part in zip(children, (lines[:half], lines[half:]), strict=True)
            )
            return
        try:
            counts = count_words(lines)
        except (ValueError, KeyError, TypeError) as exc:
            raise Poison(f"{type(exc).__name__}: {exc}") from exc
        # The result is durable before its edge is acked; a retry overwrites it with the same.
        self.s3.put_object(
            Bucket=self.settings.output_bucket,
            Key=f"results/{_safe(tag)}/{edge.hex()}.json",
            Body=json.dumps(counts).encode(),
        )
        after = self.tracker.stamp(tag, edge, op_id=op_id(tag, edge))
        if after.acked:  # also True for a redelivered last message: complete() runs once
            self.complete(tag, message["bucket"], message["key"])

    # -- step 3: the chain reached zero -----------------------------------------------

    def complete(self, tag: str, bucket: str, key: str) -> bool:
        """Sum the results into ``done/<key>.json``. Returns False if an earlier call did
        it (the marker is a conditional put, so this runs once per object version)."""
        done_key = f"done/{key}.json"
        if self._exists(self.settings.output_bucket, done_key):  # a late copy of the last message
            return False
        totals: Counter[str] = Counter()
        paginator = self.s3.get_paginator("list_objects_v2")
        prefix = f"results/{_safe(tag)}/"
        for page in paginator.paginate(Bucket=self.settings.output_bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                body = self.s3.get_object(Bucket=self.settings.output_bucket, Key=obj["Key"])["Body"].read()
                totals.update(json.loads(body))
        marker = {"tag": tag, "source": f"s3://{bucket}/{key}", "words": dict(sorted(totals.items()))}
        try:
            self.s3.put_object(
                Bucket=self.settings.output_bucket,
                Key=done_key,
                Body=json.dumps(marker).encode(),
                IfNoneMatch="*",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in (
                "PreconditionFailed",
                "ConditionalRequestConflict",
            ):
                log.info("%s: already complete", tag)
                return False
            raise
        if self.settings.completion_queue_url:
            self.sqs.send_message(QueueUrl=self.settings.completion_queue_url, MessageBody=json.dumps(marker))
        log.info("%s: complete", tag)
        return True

    # -- plumbing -----------------------------------------------------------------------

    def _exists(self, bucket: str, key: str) -> bool:
        try:
            self.s3.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def _send(self, messages: Any) -> None:
        """Send messages to the work queue, ten a request; raises if any is refused."""
        batch: list[dict[str, str]] = []
        for message in messages:
            batch.append({"Id": str(len(batch)), "MessageBody": json.dumps(message)})
            if len(batch) == 10:
                self._send_batch(batch)
                batch = []
        if batch:
            self._send_batch(batch)

    def _send_batch(self, batch: list[dict[str, str]]) -> None:
        response = self.sqs.send_message_batch(QueueUrl=self.settings.work_queue_url, Entries=batch)
        if response.get("Failed"):
            raise Retry(f"SQS refused {len(response['Failed'])} messages: {response['Failed'][0]}")


def count_words(lines: list[str]) -> dict[str, int]:
    """The work itself: count the words of JSON lines' ``text``. A line that is not a
    JSON object with a string ``text`` raises (a poison message)."""
    counts: Counter[str] = Counter()
    for line in lines:
        record = json.loads(line)
        text = record["text"]
        if not isinstance(text, str):
            raise TypeError(f"'text' is {type(text).__name__}, not str")
        counts.update(word.lower() for word in text.split())
    return dict(counts)


def _safe(tag: str) -> str:
    """A tag as one S3 key segment."""
    return hashlib.sha256(tag.encode()).hexdigest()[:32]
