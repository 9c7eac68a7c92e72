"""Which files a path names, by one rule for every caller: the command line's inputs
(``xor-ack wordcount DIR``, :func:`find_inputs`) and a tracked run's roots
(:meth:`~xor_ack_dynamodb.spark.frame.FrameAttempt.read_text` of a directory root,
:func:`files_under`).

A file is itself; a local directory (a path, or a ``file:`` URI) is the files under it
at any depth, hidden ones (a name starting with ``.`` anywhere below it) skipped,
sorted; ``s3://bucket/prefix/`` (ending with ``/``) is the objects under the prefix,
``s3://bucket/key`` the object itself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import InvalidConfig

__all__ = ["find_inputs", "files_under", "local_path", "is_directory"]


def local_path(path: str | bytes | os.PathLike[str]) -> str | bytes | None:
    """``path`` as a local path: itself if it has no scheme, the decoded path of a
    ``file:`` URI (``file:/x``, ``file:///x``, ``file://localhost/x``), None for any
    other URI (``s3://``, ``hdfs://``)."""
    path = os.fspath(path)
    if isinstance(path, bytes):
        return path
    if "://" not in path and not path.startswith("file:"):
        return path
    parts = urlsplit(path)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return unquote(parts.path)


def is_directory(path: str | bytes | os.PathLike[str]) -> bool:
    """Whether ``path`` names a local directory or an ``s3://`` prefix (ends with
    ``/``): what :func:`files_under` expands."""
    text = os.fspath(path)
    if isinstance(text, str) and text.startswith("s3://"):
        return text.endswith("/")
    local = local_path(text)
    return local is not None and os.path.isdir(local)


def files_under(path: str | bytes | os.PathLike[str]) -> list[Any]:
    """The files ``path`` names (module doc): a local file or directory as resolved
    :class:`~pathlib.Path` objects, ``s3://`` as URIs. Raises ``FileNotFoundError`` for
    a local path that does not exist; an empty directory names no file."""
    text = os.fspath(path)
    if isinstance(text, str) and text.startswith("s3://"):
        if not text.endswith("/"):
            return [text]
        from .output import Location  # endpoint and region from the environment

        return [f"{text}{name}" for name in Location.of(text).names("") if not name.endswith("/")]
    local = local_path(text)
    if local is None:
        raise InvalidConfig(f"{text!r} is not a local path or an s3:// URI: it cannot be listed here")
    where = Path(os.fsdecode(local))
    if where.is_dir():
        return [
            child.resolve()
            for child in sorted(where.rglob("*"))
            if child.is_file() and not any(part.startswith(".") for part in child.relative_to(where).parts)
        ]
    if where.is_file():
        return [where.resolve()]
    raise FileNotFoundError(f"no such file or directory: {where}")


def find_inputs(paths: Sequence[str | os.PathLike[str]]) -> list[Any]:
    """The input files of ``paths`` (each by :func:`files_under`), in order and without
    repeats. Raises ``FileNotFoundError`` for a path that does not exist and
    :class:`InvalidConfig` when no file is found."""
    found: dict[Any, None] = {}
    for raw in paths:
        found.update(dict.fromkeys(files_under(raw)))
    if not found:
        raise InvalidConfig("no input files found")
    return list(found)
