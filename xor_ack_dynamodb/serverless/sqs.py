"""The batch loop: an SQS event's records, each through :func:`~.records.process_record`,
and Lambda's partial batch response. :func:`record_function` hands the same unit to
Powertools' ``BatchProcessor`` instead."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .errors import RetryRecord
from .parts import PipelineParts
from .records import Handler, process_record

__all__ = ["process_sqs_batch", "record_function"]


def process_sqs_batch(
    event: Mapping[str, Any], handler: Handler, *, pipeline: PipelineParts, lambda_context: Any = None
) -> dict[str, Any]:
    """Process an SQS event's records with ``handler`` (see :mod:`.records`) and return
    Lambda's partial batch response, ``{"batchItemFailures": [{"itemIdentifier": id}...]}``:
    the records to deliver again. Configure the event source mapping with
    ``FunctionResponseTypes: ["ReportBatchItemFailures"]``. From a FIFO queue, the
    records after the first one to retry are not processed and are reported too (as
    Lambda requires to keep a message group's order). Never raises for one bad record;
    raises :class:`ValueError` for an event that is not an SQS event."""
    records = event.get("Records")
    if not isinstance(records, list):
        raise ValueError("not an SQS event: no 'Records' list")
    fifo = any(str(r.get("eventSourceARN", "")).endswith(".fifo") for r in records)
    failures: list[dict[str, str]] = []
    for record in records:
        message_id = str(record.get("messageId", record.get("MessageId", "")))
        if fifo and failures:  # keep a FIFO group's order: the rest waits for the failed one
            failures.append({"itemIdentifier": message_id})
            continue
        if process_record(record, handler, pipeline=pipeline, lambda_context=lambda_context) == "retry":
            failures.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failures}


def record_function(pipeline: PipelineParts, handler: Handler) -> Callable[[Any], None]:
    """``handler`` as Powertools' ``record_handler``: one record (a Powertools
    ``SQSRecord``, whose ``raw_event`` is the record dict, or the dict itself); returns
    for a record that is finished with (done, dropped, failed its chain), raises
    :class:`RetryRecord` for one to deliver again."""

    def run(record: Any) -> None:
        raw = getattr(record, "raw_event", record)
        outcome = process_record(raw, handler, pipeline=pipeline)
        if outcome == "retry":
            raise RetryRecord(f"message {raw.get('messageId')} is to be delivered again", outcome=outcome)

    return run
