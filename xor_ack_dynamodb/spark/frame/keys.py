"""How a row's key is matched to a root's key (docs/spark.md, "Roots and keys"): by
:func:`match_key`, one Spark SQL expression applied to both sides, so that a root given
as a path matches the rows Spark keys by its URI of the same file, and the reverse. A
``%`` that is no escape stays as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...errors import InvalidConfig

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["match_key", "UnknownRootKey", "unknown_key"]

#: Longer than any key (``substr`` needs a length).
_REST = 1 << 30


class UnknownRootKey(InvalidConfig):
    """A row's key names no root of the run (after :func:`match_key`), or a row has no
    key: raised before the attempt's write runs (one small Spark job finds it), so no
    row is dropped silently. The message shows the row's key and what the roots' keys
    look like."""


def match_key(column: Column) -> Column:
    """The key ``column`` is matched by (module doc), as a string column."""
    from pyspark.sql import functions as F

    text = column.cast("string")
    rest = F.lit(_REST)
    path = (
        F.when(text.startswith("file:///"), text.substr(F.lit(8), rest))
        .when(text.startswith("file://localhost/"), text.substr(F.lit(17), rest))
        .when(text.startswith("file:/"), text.substr(F.lit(6), rest))
        .otherwise(text)
    )
    uri = text.startswith("file:/") | text.contains("://")
    # url_decode reads "+" as a space (form encoding); in a URI's path it is a "+".
    decoded = F.coalesce(F.try_url_decode(F.replace(path, F.lit("+"), F.lit("%2B"))), path)
    return F.when(uri & text.contains("%"), decoded).otherwise(path)


def unknown_key(column: str, found: object, roots: Sequence[object]) -> UnknownRootKey:
    """The error for a row whose ``column`` is ``found`` (None: no key)."""
    example = f"{roots[0]!r}" if roots else "(none: the run has no roots)"
    what = "has no value" if found is None else f"is {found!r}"
    return UnknownRootKey(
        f"a row's {column!r} {what}, not the key of any root of the run; roots' keys look "
        f"like {example} ({len(roots)} roots). Keys are compared as they are, except that "
        "a file: URI (file:///x, file:/x) matches the path /x and percent escapes in URIs "
        "are decoded; start(..., others='skip') leaves such rows out instead"
    )
