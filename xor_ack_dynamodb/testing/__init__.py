"""Local servers for tests, demos and trying things out, and the pytest plugin.

* :class:`MotoServer` (also ``LocalDynamoDB``, its first name): moto's DynamoDB in a
  thread of this process, answering one request at a time; needs ``moto[server]``.
* :class:`DynamoDBLocal`: Amazon's DynamoDB Local (Java) in a child process.
* :func:`standalone_cluster`, :func:`connect_server`: Spark from the installed pyspark.
* :mod:`.plugin`: the pytest fixtures (``xor_ack``, ``memory_ack``, ...), registered
  through the ``pytest11`` entry point; not imported here (it needs pytest).

Importing this package imports neither moto, nor pyspark, nor pytest: each server
imports what it needs when it starts.
"""

from .dynamodb_local import DynamoDBLocal, find_jar
from .moto_server import LocalDynamoDB, MotoServer
from .spark_servers import connect_server, standalone_cluster

__all__ = ["DynamoDBLocal", "LocalDynamoDB", "MotoServer", "connect_server", "find_jar", "standalone_cluster"]
