"""SQS events as Lambda hands them to a function, built locally: for testing a handler
(a pipeline's ``process_sqs_batch``, Powertools' ``BatchProcessor``) without Lambda.

:func:`sqs_event` builds an event from bodies or records; :func:`sqs_record` one record
(message id, receipt handle, receive count, message attributes, the queue's ARN);
:func:`records_from_messages` turns what ``ReceiveMessage`` returned into records; and
:func:`deliver_sqs` is Lambda's SQS event source against a real (or moto) queue: receive,
invoke, delete what the handler did not report in ``batchItemFailures``. Plain data and
boto3 clients you pass: nothing here imports moto or starts a server.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["DEFAULT_QUEUE_ARN", "deliver_sqs", "records_from_messages", "sqs_event", "sqs_record"]

#: The queue a record says it came from when none is named (a standard queue).
DEFAULT_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:work"

Handler = Callable[[dict[str, Any], Any], Any]


def _lambda_attribute(value: Any) -> dict[str, Any]:
    """A message attribute in Lambda's shape, from a str, an int/float, bytes, or a dict in
    Lambda's (``stringValue``) or the SQS API's (``StringValue``) shape."""
    if isinstance(value, Mapping):
        data_type = str(value.get("dataType", value.get("DataType", "String")))
        out: dict[str, Any] = {"dataType": data_type, "stringListValues": [], "binaryListValues": []}
        string = value.get("stringValue", value.get("StringValue"))
        binary = value.get("binaryValue", value.get("BinaryValue"))
        if string is not None:
            out["stringValue"] = str(string)
        if binary is not None:
            out["binaryValue"] = binary
        return out
    if isinstance(value, bool) or not isinstance(value, (str, int, float, bytes)):
        kind = type(value).__name__
        raise TypeError(f"a message attribute is a str, a number, bytes or a dict, not {kind}")
    if isinstance(value, bytes):
        return {"binaryValue": value, "dataType": "Binary", "stringListValues": [], "binaryListValues": []}
    data_type = "String" if isinstance(value, str) else "Number"
    return {"stringValue": str(value), "dataType": data_type, "stringListValues": [], "binaryListValues": []}


def sqs_record(
    body: str | Mapping[str, Any] | list[Any],
    *,
    message_attributes: Mapping[str, Any] | None = None,
    message_id: str | None = None,
    receive_count: int = 1,
    queue_arn: str = DEFAULT_QUEUE_ARN,
    receipt_handle: str | None = None,
    sent_at: float | None = None,
    message_group_id: str | None = None,
) -> dict[str, Any]:
    """One record of Lambda's SQS event. ``body``: the message body (a dict or list is
    sent as its JSON); ``message_attributes``: by name, a str, number, bytes, or a dict in
    either of SQS's shapes (a pipeline's ``xor-ack`` envelope travels as one);
    ``receive_count``: ``ApproximateReceiveCount`` (a redelivery is 2 or more);
    ``message_id``: default a new UUID (a redelivery of one message keeps its id).

    Raises :class:`ValueError` for a receive count below 1 or a FIFO queue without
    ``message_group_id``, :class:`TypeError` for an attribute of another type."""
    if receive_count < 1:
        raise ValueError(f"receive_count is at least 1, got {receive_count}")
    fifo = queue_arn.endswith(".fifo")
    if fifo and message_group_id is None:
        raise ValueError("a FIFO queue's record needs a message_group_id")
    text = body if isinstance(body, str) else json.dumps(body)
    sent = int((time.time() if sent_at is None else sent_at) * 1000)
    attributes = {
        "ApproximateReceiveCount": str(receive_count),
        "SentTimestamp": str(sent),
        "SenderId": "AIDAEXAMPLE",
        "ApproximateFirstReceiveTimestamp": str(sent),
    }
    if fifo:
        attributes["MessageGroupId"] = str(message_group_id)
        attributes["MessageDeduplicationId"] = hashlib.sha256(text.encode()).hexdigest()
    region = queue_arn.split(":")[3] if queue_arn.count(":") >= 5 else "us-east-1"
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": receipt_handle or uuid.uuid4().hex,
        "body": text,
        "attributes": attributes,
        "messageAttributes": {k: _lambda_attribute(v) for k, v in (message_attributes or {}).items()},
        "md5OfBody": hashlib.md5(text.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def sqs_event(*records: str | Mapping[str, Any], queue_arn: str = DEFAULT_QUEUE_ARN) -> dict[str, Any]:
    """Lambda's SQS event: ``{"Records": [...]}``. Each argument is a record (a dict with
    ``messageId``, as :func:`sqs_record` builds) or a body (a str: a record with defaults)."""
    built = [
        dict(r) if isinstance(r, Mapping) and "messageId" in r else sqs_record(r, queue_arn=queue_arn)
        for r in records
    ]
    return {"Records": built}


def records_from_messages(
    messages: Iterable[Mapping[str, Any]], queue_arn: str = DEFAULT_QUEUE_ARN
) -> list[dict[str, Any]]:
    """The records of Lambda's event for messages as ``ReceiveMessage`` returned them
    (ask for ``AttributeNames=["All"]`` and ``MessageAttributeNames=["All"]``)."""
    records = []
    for m in messages:
        attributes = dict(m.get("Attributes", {}))
        record = sqs_record(
            m["Body"],
            message_attributes=m.get("MessageAttributes", {}),
            message_id=m["MessageId"],
            receive_count=int(attributes.get("ApproximateReceiveCount", 1)),
            queue_arn=queue_arn,
            receipt_handle=m["ReceiptHandle"],
            message_group_id=attributes.get("MessageGroupId"),
        )
        record["attributes"].update(attributes)
        records.append(record)
    return records


def deliver_sqs(
    sqs: Any,
    queue_url: str,
    handler: Handler,
    *,
    context: Any = None,
    batch_size: int = 10,
    idle_receives: int = 1,
    max_batches: int = 1000,
) -> int:
    """Lambda's SQS event source, locally: receive up to ``batch_size`` messages of
    ``queue_url`` (``sqs``: a boto3 SQS client), call ``handler(event, context)``, delete
    the messages it did not report in ``batchItemFailures`` (those are delivered again,
    with a higher receive count, once their visibility timeout passed). Stops after
    ``idle_receives`` empty receives in a row; returns the records delivered.

    Raises :class:`RuntimeError` after ``max_batches`` batches (a message that keeps
    failing on a queue with no redrive policy)."""
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    queue_arn = attributes["Attributes"]["QueueArn"]
    delivered = idle = batches = 0
    while idle < idle_receives:
        if batches >= max_batches:
            raise RuntimeError(f"{queue_url} not drained after {max_batches} batches")
        got = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=batch_size,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        records = records_from_messages(got.get("Messages", []), queue_arn)
        if not records:
            idle += 1
            continue
        idle, batches, delivered = 0, batches + 1, delivered + len(records)
        result = handler({"Records": records}, context) or {}
        failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        done = [r for r in records if r["messageId"] not in failed]
        if done:
            entries = [{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(done)]
            sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)
    return delivered
