"""dynalite: a second, independent DynamoDB implementation (Node, in memory) for tests.

It validates requests more strictly than moto and does not return the item on a failed
condition (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), so running the suite against
it exercises the library's consistent-read fallback. It is installed from npm into
``.dynalite/`` at the repository root (``make dynalite``, which ``make test`` runs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Any

import boto3

__all__ = ["Dynalite", "DYNALITE_DIR", "install_dynalite", "node_available"]

ROOT = Path(__file__).resolve().parents[2]
DYNALITE_DIR = ROOT / ".dynalite"
PACKAGE = "dynalite@4"

# Listens on a free port of 127.0.0.1 (the CLI cannot: it takes `--port 0` as "default")
# and prints the port once bound. Tables are ACTIVE at once instead of after 500 ms.
_LAUNCHER = """
const server = require('dynalite')({createTableMs: 0, deleteTableMs: 0, updateTableMs: 0});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
"""


def node_available() -> bool:
    """True when both ``node`` and ``npm`` are on PATH."""
    return shutil.which("node") is not None and shutil.which("npm") is not None


def install_dynalite() -> Path:
    """Install dynalite into ``.dynalite/`` unless it is there; return its node_modules.
    Raises ``subprocess.CalledProcessError`` if npm fails."""
    modules = DYNALITE_DIR / "node_modules"
    if not (modules / "dynalite" / "package.json").exists():
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(DYNALITE_DIR), PACKAGE],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return modules


class Dynalite:
    """A dynalite server on 127.0.0.1 and a free port, in memory, in a child process.

    The child exits when it is stopped, and also when this process dies (it watches its
    stdin, a pipe from here), so it never outlives the test session.
    """

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self.endpoint_url: str | None = None

    def start(self) -> Dynalite:
        modules = install_dynalite()
        env = dict(os.environ, NODE_PATH=str(modules))
        process = subprocess.Popen(
            ["node", "-e", _LAUNCHER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line.isdigit():
            process.kill()
            process.wait()
            raise RuntimeError(f"dynalite did not start (printed {line!r})")
        self._process = process
        self.endpoint_url = f"http://127.0.0.1:{int(line)}"
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> Dynalite:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def client(self, **options: Any) -> Any:
        """A low-level DynamoDB client for this server (dynalite accepts any key)."""
        if self.endpoint_url is None:
            raise RuntimeError("dynalite is not started")
        return boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
        ).client("dynamodb", endpoint_url=self.endpoint_url, **options)
