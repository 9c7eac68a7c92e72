"""Which files a word count reads: ``xor-ack wordcount INPUT...``'s rule.

A file named as an input is read, whatever its name. A folder (a local directory, a
``file:`` URI, or an ``s3://bucket/prefix/`` ending with ``/``) is read as Spark's text
reader reads it: the files in it, as ``spark.read.text(folder)`` gives them, and those
in its subfolders at any depth, as ``recursiveFileLookup`` gives them. Left out are the
names that reader leaves out
(:func:`~xor_ack_dynamodb.spark.frame.sources.spark_skips`: ``_x`` but not ``_x=y``,
``.x``, ``x._COPYING_``), a folder so named with everything under it; links to folders
are not followed. What is left out is not read, tracked or counted, and is reported
(:attr:`Inputs.skipped`, ``report.json``'s ``skipped``): the outermost name left out,
a folder with a trailing ``/``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InvalidConfig
from ...spark.files import files_under, is_directory, local_path
from ...spark.frame.sources import spark_skips
from ...spark.tags import escape_key

__all__ = ["Inputs", "select_inputs", "expand_folders", "find_inputs"]


@dataclass(frozen=True)
class Inputs:
    """The files a run reads (local ones as resolved :class:`~pathlib.Path`, ``s3://``
    ones as URIs) in order, and what the input folders held that it leaves out (paths
    as text, escaped where not UTF-8; a folder ends with ``/``)."""

    files: list[Any]
    skipped: list[str] = field(default_factory=list)


def select_inputs(paths: Iterable[str | os.PathLike[str]]) -> Inputs:
    """The files of ``paths`` by the module's rule (a named file resolved, as
    :func:`~xor_ack_dynamodb.spark.files.files_under` gives it). Raises
    ``FileNotFoundError`` for a local path that does not exist and :class:`InvalidConfig`
    when no file is left to read (saying how many were skipped)."""
    gathered = _gather(paths, files_under)
    found = Inputs(list(dict.fromkeys(gathered.files)), list(dict.fromkeys(gathered.skipped)))
    if not found.files:
        left_out = len(found.skipped)
        why = f" ({left_out} skipped: Spark's text reader leaves out their names)" if left_out else ""
        raise InvalidConfig(f"no input files found{why}")
    return found


def expand_folders(paths: Iterable[str | os.PathLike[str]]) -> Inputs:
    """``paths`` with each folder replaced by its files (the module's rule) and every
    other path kept as given, unchecked (a file that is missing fails its own chain)."""
    return _gather(paths, lambda path: [path])


def find_inputs(paths: Sequence[str | os.PathLike[str]]) -> list[Any]:
    """The files of ``paths`` (:func:`select_inputs`' ``files``), with its errors."""
    return select_inputs(paths).files


def _gather(
    paths: Iterable[str | os.PathLike[str]], named: Callable[[str | os.PathLike[str]], list[Any]]
) -> Inputs:
    """Folders by :func:`_folder`, other paths by ``named``, in order."""
    found: list[Any] = []
    skipped: list[str] = []
    for path in paths:
        if is_directory(path):
            files, left_out = _folder(path)
            found += files
            skipped += left_out
        else:
            found += named(path)
    return Inputs(found, skipped)


def _folder(path: str | os.PathLike[str]) -> tuple[list[Any], list[str]]:
    """The files Spark's text reader reads under the folder ``path``, and the outermost
    names it leaves out there."""
    text = os.fspath(path)
    if text.startswith("s3://"):
        return _prefix(text)
    local = local_path(text)
    if local is None:  # is_directory() said it is one: not reached
        raise InvalidConfig(f"{text!r} is not a local folder")
    kept: list[Path] = []
    skipped: list[str] = []
    pending = [Path(os.fsdecode(local)).resolve()]
    while pending:
        folder = pending.pop()
        for child in folder.iterdir():
            # Links to folders are not followed: files_under()'s rule, which a
            # folder's files otherwise keep.
            is_folder = child.is_dir() and not child.is_symlink()
            if spark_skips(child.name):
                skipped.append(escape_key(str(child)) + ("/" if is_folder else ""))
            elif is_folder:
                pending.append(child)
            elif child.is_file():
                kept.append(child)
    return [child.resolve() for child in sorted(kept)], sorted(skipped)


def _prefix(prefix: str) -> tuple[list[Any], list[str]]:
    """:func:`_folder` for ``s3://bucket/prefix/``: the object names below it."""
    kept: list[str] = []
    skipped: dict[str, None] = {}
    for uri in files_under(prefix):
        parts = uri[len(prefix) :].split("/")
        left_out = next((n for n, part in enumerate(parts) if spark_skips(part)), None)
        if left_out is None:
            kept.append(uri)
        else:
            below = "/" if left_out < len(parts) - 1 else ""
            skipped[prefix + "/".join(parts[: left_out + 1]) + below] = None
    return kept, list(skipped)
