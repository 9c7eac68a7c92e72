"""Which files a path names, one rule for the command line's inputs (:func:`find_inputs`)
and a tracked run's directory roots (:func:`files_under`): a file is itself; a local
directory (a path or a ``file:`` URI) the files under it, sorted, hidden ones (a name
starting with ``.`` below it) skipped; ``s3://bucket/prefix/`` the objects under the
prefix, ``s3://bucket/key`` the object itself.
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
    """``path`` as a local path: itself without a scheme, a ``file:`` URI's decoded path,
    None for another URI."""
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
    """Whether ``path`` names a local directory or an ``s3://`` prefix (ending ``/``)."""
    text = os.fspath(path)
    if isinstance(text, str) and text.startswith("s3://"):
        return text.endswith("/")
    local = local_path(text)
    return local is not None and os.path.isdir(local)


def files_under(path: str | bytes | os.PathLike[str]) -> list[Any]:
    """The files ``path`` names (module doc): local ones as resolved paths, ``s3://`` as
    URIs. ``FileNotFoundError`` for a local path that does not exist."""
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
    """The files of ``paths`` (:func:`files_under`), in order, without repeats;
    :class:`InvalidConfig` when there is none."""
    found: dict[Any, None] = {}
    for raw in paths:
        found.update(dict.fromkeys(files_under(raw)))
    if not found:
        raise InvalidConfig("no input files found")
    return list(found)
