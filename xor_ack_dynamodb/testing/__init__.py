"""Local servers for tests and demos: :class:`MotoServer` (moto in a thread of this
process; its first name, ``LocalDynamoDB``, still works), :class:`DynamoDBLocal` (Amazon's
Java engine in a child process), Spark from the installed pyspark, and SQS events as
Lambda delivers them (:func:`sqs_event`, :func:`deliver_sqs`) for testing handlers.
Importing this package imports neither moto, pyspark nor pytest. The pytest fixtures are in :mod:`.plugin`
(registered through the ``pytest11`` entry point; not imported here: it needs pytest).
"""

from .dynamodb_local import DynamoDBLocal, find_jar
from .moto_server import LocalDynamoDB, MotoServer
from .spark_servers import connect_server, standalone_cluster
from .sqs_events import deliver_sqs, records_from_messages, sqs_event, sqs_record

__all__ = [
    "DynamoDBLocal",
    "LocalDynamoDB",
    "MotoServer",
    "connect_server",
    "deliver_sqs",
    "find_jar",
    "records_from_messages",
    "sqs_event",
    "sqs_record",
    "standalone_cluster",
]
