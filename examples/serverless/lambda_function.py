"""A tracked word count on S3 + SQS + Lambda: four functions on this file.

on_upload        S3 ObjectCreated (input bucket)      one chain per object; one message per chunk
on_work          SQS (work queue, ReportBatchItemFailures)   split a big chunk, or count a leaf
on_chain_stream  the chain table's DynamoDB stream    each completed chain -> completion queue, once
on_done          SQS (completion queue)               sum a finished object's counts into done/

Settings come from the environment (XOR_ACK_TABLE, XOR_ACK_QUEUE_URL,
XOR_ACK_COMPLETION_QUEUE_URL, OUTPUT_BUCKET, ...); nothing is built at import time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections import Counter
from typing import Any

from xor_ack_dynamodb.serverless import Context, Pipeline

CHUNK, LEAF = int(os.environ.get("CHUNK_LINES", "20")), int(os.environ.get("LEAF_LINES", "5"))


@functools.cache
def pipeline() -> Pipeline:
    return Pipeline.from_env()


def on_upload(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return pipeline().process_s3_event(event, split_object, context)


def on_work(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return pipeline().process_sqs_batch(event, count_words, context)


def on_chain_stream(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return pipeline().process_chain_stream(event, context)


def split_object(ctx: Context) -> None:
    assert ctx.source is not None
    body = pipeline().s3.get_object(Bucket=ctx.source.bucket, Key=ctx.source.key)["Body"].read()
    lines = [line for line in body.decode().splitlines() if line.strip()]
    for i in range(0, len(lines), CHUNK):
        ctx.emit({"lines": lines[i : i + CHUNK]})


def count_words(ctx: Context) -> None:
    lines = ctx.json()["lines"]
    if len(lines) > LEAF:  # split in two: both children are started by this record's stamp
        ctx.emit({"lines": lines[: len(lines) // 2]})
        ctx.emit({"lines": lines[len(lines) // 2 :]})
        return
    # A line that is not {"text": ...} raises: retried, then it fails the object's chain.
    counts = Counter(word for line in lines for word in json.loads(line)["text"].lower().split())
    # Durable before the edge is acked (the stamp runs after this returns); same key on a retry.
    put(f"results/{chain_dir(ctx.tag)}/{ctx.edge_id}.json", counts)


def on_done(event: dict[str, Any], context: Any) -> None:
    for record in event["Records"]:
        done = json.loads(record["body"])
        totals: Counter[str] = Counter()
        s3, bucket = pipeline().s3, os.environ["OUTPUT_BUCKET"]
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=f"results/{chain_dir(done['tag'])}/"
        )
        for obj in (o for page in pages for o in page.get("Contents", [])):
            totals.update(json.loads(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()))
        put(
            f"done/{chain_dir(done['tag'])}.json", {"tag": done["tag"], "words": dict(sorted(totals.items()))}
        )


def put(key: str, value: Any) -> None:
    pipeline().s3.put_object(Bucket=os.environ["OUTPUT_BUCKET"], Key=key, Body=json.dumps(value).encode())


def chain_dir(tag: str) -> str:
    return hashlib.sha256(tag.encode()).hexdigest()[:32]
