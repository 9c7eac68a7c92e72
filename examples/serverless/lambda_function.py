"""Lambda entry points. Configure two functions on this file:

- ``lambda_function.on_object_created``: triggered by S3 ``s3:ObjectCreated:*`` on the
  input bucket;
- ``lambda_function.on_work``: triggered by the work queue, with
  ``FunctionResponseTypes: [ReportBatchItemFailures]``.

Nothing is built at import time: the pipeline (tracker, S3 and SQS clients) is built from
the environment on the first invocation and reused while the container stays warm, which
is Lambda's usual "outside the handler" reuse. Tests call ``pipeline.cache_clear()``.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from fanout import Pipeline

logging.getLogger().setLevel(logging.INFO)


@functools.cache
def pipeline() -> Pipeline:
    return Pipeline.from_env()


def on_object_created(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"tags": pipeline().on_object_created(event)}


def on_work(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return pipeline().on_work(event)
