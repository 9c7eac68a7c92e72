"""A Spark Connect server's ``foreachBatch`` worker that connects back before it imports.

Spark Connect starts a Python worker for a query's ``foreachBatch`` function when the
query starts, and waits a fixed 10 s for it to connect back
(``PythonWorkerFactory.createSimpleWorker``; no setting changes it). Spark's worker
module, :data:`FOREACH_BATCH_WORKER`, connects only after its imports (PySpark, from
the ``pyspark.zip`` Spark puts first on its path, compiled anew at every start, then
PySpark's Connect client, pandas, pyarrow, grpc): 2.6 s of CPU and more, which at a load
of 10 on two cores takes longer than 10 s. Run by :func:`write_launcher`'s executable
instead, it connects back first, with the standard library only (PySpark's handshake,
:func:`connect_back`), and imports after, within the 300 s Spark gives a started worker
to initialize. Every other Python process the server starts runs unchanged.
"""

from __future__ import annotations

import os
import shlex
import socket
import struct
import sys
from pathlib import Path
from typing import BinaryIO, cast

__all__ = ["FOREACH_BATCH_WORKER", "write_launcher", "connect_back", "main"]

FOREACH_BATCH_WORKER = "pyspark.sql.connect.streaming.worker.foreach_batch_worker"


def write_launcher(directory: Path) -> Path:
    """An executable to give a Spark server as ``PYSPARK_PYTHON``: this interpreter, which
    runs :func:`main` where Spark asks for ``-m`` :data:`FOREACH_BATCH_WORKER`."""
    python, here = shlex.quote(sys.executable), shlex.quote(str(Path(__file__).resolve()))
    launcher = directory / "python"
    launcher.write_text(
        "#!/bin/sh\n"
        f'if [ "$#" = 2 ] && [ "$1" = -m ] && [ "$2" = {FOREACH_BATCH_WORKER} ]; then\n'
        f"  exec {python} {here}\n"
        "fi\n"
        f'exec {python} "$@"\n',
        encoding="utf-8",
    )
    launcher.chmod(0o755)
    return launcher


def connect_back() -> BinaryIO:
    """What ``pyspark.worker_util.get_sock_file_to_executor(timeout=None)`` does, with
    the standard library: connect to the JVM where the environment says (a Unix socket,
    or a port on 127.0.0.1 and the secret to send, which the JVM answers ``ok``), then
    send this process's id. Each string and int is framed as PySpark's serializers do
    (a 4-byte big-endian length, then UTF-8). Raises ``ConnectionError`` when refused."""
    size = int(os.environ.get("SPARK_BUFFER_SIZE", 65536))
    path, secret = (
        os.environ.get("PYTHON_WORKER_FACTORY_SOCK_PATH"),
        os.environ.get("PYTHON_WORKER_FACTORY_SECRET"),
    )
    if path is not None and secret is None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        channel = cast(BinaryIO, sock.makefile("rwb", size))
    else:
        host = "::1" if os.environ.get("SPARK_PREFER_IPV6", "false").lower() == "true" else "127.0.0.1"
        sock = socket.create_connection((host, int(os.environ["PYTHON_WORKER_FACTORY_PORT"])))
        channel = cast(BinaryIO, sock.makefile("rwb", size))
        token = (secret or "").encode("utf-8")
        channel.write(struct.pack("!i", len(token)) + token)
        channel.flush()
        (length,) = struct.unpack("!i", channel.read(4))
        if channel.read(length) != b"ok":
            raise ConnectionError("the JVM refused this worker's secret")
    channel.write(struct.pack("!i", os.getpid()))
    channel.flush()
    return channel


def main() -> None:
    """What ``python -m`` :data:`FOREACH_BATCH_WORKER` does, connected first."""
    sys.path[0] = os.getcwd()  # as under -m (Spark starts it in the session's artifact folder)
    with connect_back() as channel:
        from pyspark.sql.connect.streaming.worker import foreach_batch_worker

        foreach_batch_worker.main(channel, channel)


if __name__ == "__main__":
    main()
