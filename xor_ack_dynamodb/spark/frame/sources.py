"""Where a tracked frame's rows come from, in the JVM with no Python per row: files
(:func:`read_text`: columns ``path``, the root's path as given or, for a directory
root, its file's, and ``line``) or the rows of any DataFrame keyed by a column
(:func:`start`, matched by :func:`.keys.match_key`). Each row gets its root and nothing
else; a line that matches no root aborts the job (never dropped); a local file missing
when the attempt starts fails its root; roots Spark cannot read or name go through an
Arrow reader with the same rules; bad UTF-8 is replaced and noted, or fails its root
permanently (``bad_bytes="fail"``); lines are in NFC by default. See docs/spark.md,
"How the tracking works".
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from ...errors import InvalidConfig
from ..files import files_under, is_directory, local_path
from ..outcomes import PERMANENT
from ..output import Location
from ..tags import escape_key, unescape_key
from .columns import CHAIN, TRACKING, local_table
from .keys import match_key, unknown_key
from .tracked import Build, Probes

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["TextRoot", "read_text", "start", "has_filesystem", "spark_skips", "BAD_BYTES_NOTE", "nfc"]

log = logging.getLogger(__name__)

BAD_BYTES_NOTE = "bad bytes: invalid UTF-8 replaced by U+FFFD"
_KEY = "_xa_key"
_ROOT = "_xa_root"
_FAIL = "_xa_err"
_NOTE = "_xa_note"
#: Characters a Hadoop path cannot carry as they are (a scheme separator, glob syntax).
_UNSAFE = set(":*?[]{}\\")


@dataclass(frozen=True)
class TextRoot:
    """One root to read: its chain (index in the attempt's tags) and its path (a local
    path, ``str`` or ``bytes``, or a URI such as ``s3://bucket/key`` or ``file:///x``;
    a file, or a directory of files). (Also one file of a root.)"""

    chain: int
    path: str | bytes

    @property
    def text(self) -> str:
        """The path as text (escaped where it is not UTF-8)."""
        return escape_key(self.path)

    @property
    def key(self) -> str | None:
        """What Spark's name of the file matches (by :func:`.keys.match_key`): a local
        file's absolute path, another URI as given; None when Spark's reader cannot name
        it (then the Arrow reader reads it)."""
        local = local_path(self.path)
        if local is None:
            text = str(self.path)
            return None if spark_skips(text.rsplit("/", 1)[-1]) else text
        try:
            text = os.fsencode(local).decode("utf-8")
        except UnicodeDecodeError:
            return None
        return None if _UNSAFE & set(text) or spark_skips(os.path.basename(text)) else os.path.abspath(text)

    @property
    def uri(self) -> str | None:
        """The URI Spark's reader is given (None: the Arrow reader reads the file)."""
        key = self.key
        return None if key is None else key if "://" in key else "file:" + key

    def files(self) -> list[TextRoot]:
        """The root's files (itself, or those under a directory), same chain; raises
        ``FileNotFoundError`` when the directory went away."""
        if not is_directory(self.path):
            return [self]
        return [
            TextRoot(self.chain, os.fspath(f) if isinstance(f, os.PathLike) else f)
            for f in files_under(self.path)
        ]


def spark_skips(name: str) -> bool:
    """Whether Spark's text reader leaves out a file of this name, even one it is given
    by name, without an error (Hadoop's hidden and in-progress files: ``_x`` but not
    ``_x=y``, ``.x``, ``x._COPYING_``; checked against Spark itself by
    ``tests/test_spark_folders.py``). Such a root's lines would be missing and its chain
    acked as if it were empty: the Arrow reader reads it instead."""
    return (name.startswith("_") and "=" not in name) or name.startswith(".") or name.endswith("._COPYING_")


def has_filesystem(spark: SparkSession, scheme: str) -> bool:
    """Whether Spark has a Hadoop file system for ``scheme`` (``s3`` on EMR: yes; from
    the pip package: no). Classic: asked of Hadoop; Spark Connect: a probe read."""
    from ..context import is_connect

    if not is_connect(spark):
        session: Any = spark
        try:
            hadoop = session._jsc.hadoopConfiguration()
            session._jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, hadoop)
        except Exception:
            return False
        return True
    try:
        _ = spark.read.text(f"{scheme}://xor-ack-probe/none").schema
    except Exception as exc:
        return "No FileSystem for scheme" not in str(exc)
    return True


def nfc(column: str) -> Column:
    """Column ``column`` in Unicode NFC (ICU4J through ``reflect``; ASCII lines as they
    are, without the call; invalid UTF-8 through it too, which replaces it by U+FFFD)."""
    from pyspark.sql import functions as F

    composed = F.expr(f"reflect('com.ibm.icu.text.Normalizer', 'compose', `{column}`, false)")
    # ASCII exactly when its characters are its bytes: counted on the bytes, where a
    # regex (rlike) decodes every line into a Java string first.
    ascii = (F.length(column) == F.octet_length(column)) & F.is_valid_utf8(column)
    return F.when(~ascii, composed).otherwise(F.col(column))


@contextmanager
def _listed_here(spark: SparkSession, uris: Sequence[str]) -> Iterator[None]:
    """Spark lists the files of ``spark.read`` in a job of one task per path once there
    are more than ``spark.sql.sources.parallelPartitionDiscovery.threshold`` (32): for
    710 files, a 710-task job, where the driver would list them itself. Local files
    (``file:``) are listed by the driver instead: on a classic
    session the threshold is raised while the reader builds its file index (the index is
    built then, once; the conf is put back after). Other file systems (HDFS, ``s3://``),
    where a listing is a round trip, and Spark Connect (which lists when it runs the
    query) keep Spark's setting."""
    from ..context import is_connect

    name = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    if is_connect(spark) or not all(u.startswith("file:") for u in uris):
        yield
        return
    old = spark.conf.get(name, None)
    if old is not None and int(old) >= len(uris):
        yield
        return
    spark.conf.set(name, str(len(uris)))
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(name)
        else:
            spark.conf.set(name, old)


def _reader(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """``spark.read.text(paths)``; on a classic session the paths cross to the JVM as one
    string (py4j would send a list one element per round trip)."""
    from ..context import is_connect

    with _listed_here(spark, paths):
        if is_connect(spark) or len(paths) < 2:
            return spark.read.text(list(paths))
        session: Any = spark
        reader = session.read
        split = session._jvm.java.util.regex.Pattern.compile("\x00").split("\x00".join(paths))
        return reader._df(reader._jreader.text(split))  # type: ignore[no-any-return]


def _whole_folders(uris: Sequence[str]) -> dict[str, set[str]]:
    """The local folders whose entries Spark would list are all files of ``uris`` (more
    than one; no subfolder, no link), each with its files' paths."""
    by_folder: dict[str, set[str]] = {}
    for uri in uris:
        if uri.startswith("file:/") and not uri.startswith("file://"):  # a root's own: "file:" + path
            by_folder.setdefault(os.path.dirname(uri[5:]), set()).add(uri[5:])
    whole: dict[str, set[str]] = {}
    for folder, files in by_folder.items():
        try:
            with os.scandir(folder) as entries:
                found = [
                    (e.path, e.is_file(follow_symlinks=False)) for e in entries if not spark_skips(e.name)
                ]
        except OSError:
            continue
        if len(files) > 1 and len(found) == len(files) and all(f and p in files for p, f in found):
            whole[folder] = files
    return whole


def _text(spark: SparkSession, uris: Sequence[str]) -> DataFrame:
    """Spark's text reader over the files ``uris``. A folder stands for its files where
    they are all of it (:func:`_whole_folders`): Spark lists it once where it would
    look up each file. What it listed there is compared with the files it stands for
    before anything runs (a file that came or went meanwhile, one Spark skips), and on
    any difference every file is named instead: the reader reads exactly ``uris``."""
    folders = _whole_folders(uris)
    if folders:
        covered = set().union(*folders.values())
        named = [u for u in uris if not (u.startswith("file:") and u[5:] in covered)]
        paths = [*("file:" + f for f in folders), *named]
        try:
            df = _reader(spark, paths)
            listed = {unquote(urlsplit(f).path) for f in _input_files(spark, df)}
            if {f for f in listed if os.path.dirname(f) in folders} == covered:
                return df
        except Exception as exc:  # e.g. a subfolder made meanwhile: Spark refuses the layout
            log.debug("reading %d folders failed (%s); the files are named instead", len(folders), exc)
    return _reader(spark, uris)


def _input_files(spark: SparkSession, df: DataFrame) -> list[str]:
    """The files Spark's index of ``df`` lists (one round trip on a classic session)."""
    from ..context import is_connect

    if is_connect(spark):
        return df.inputFiles()
    session: Any = spark
    joined = session._jvm.org.apache.hadoop.util.StringUtils.join("\x00", df._jdf.inputFiles())
    return str(joined).split("\x00") if joined else []


def _fallback_lines(location: Location, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``: the lines (bytes) of each root (``chain``, escaped ``path``), one
    whole file or object at a time; an unreadable one yields its error instead."""
    import pyarrow as pa

    schema = pa.schema(
        [(CHAIN, pa.int32()), ("path", pa.string()), ("value", pa.binary()), ("error", pa.string())]
    )
    client = None
    for batch in batches:
        for chain, path in zip(
            batch.column(CHAIN).to_pylist(), batch.column("path").to_pylist(), strict=True
        ):
            try:
                if path.startswith("s3://"):
                    client = client or location.client()
                    bucket, _, key = path[len("s3://") :].partition("/")
                    data = client.get_object(Bucket=bucket, Key=key)["Body"].read()
                else:
                    with open(unescape_key(path), "rb") as handle:
                        data = handle.read()
            except Exception as exc:
                why = f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"
                yield pa.RecordBatch.from_pydict(
                    {CHAIN: [chain], "path": [path], "value": [None], "error": [why]}, schema=schema
                )
                continue
            lines = data.splitlines()
            found = {
                CHAIN: [chain] * len(lines),
                "path": [path] * len(lines),
                "value": lines,
                "error": [None] * len(lines),
            }
            yield pa.RecordBatch.from_pydict(found, schema=schema)


def read_text(
    spark: SparkSession,
    roots: Sequence[TextRoot],
    *,
    bad_bytes: str = "replace",
    normalize: str = "NFC",
    partitions: int = 8,
) -> tuple[Build, dict[int, str]]:
    """The lines of ``roots`` (module doc) as a frame's build (columns ``path``, ``line``,
    the root's), and the roots failing before any row is read (a local file already
    missing) with their reasons. :class:`InvalidConfig` for a bad option."""
    from pyspark.sql import functions as F

    if bad_bytes not in ("replace", "fail"):
        raise InvalidConfig(f"bad_bytes must be 'replace' or 'fail', got {bad_bytes!r}")
    if normalize not in ("NFC", "none"):
        raise InvalidConfig(f"normalize must be 'NFC' or 'none', got {normalize!r}")
    native: list[TextRoot] = []
    other: list[TextRoot] = []
    missing: dict[int, str] = {}
    s3 = None
    for root in roots:
        try:
            files = root.files()
        except FileNotFoundError:
            files = [root]
        for file in files:
            uri = file.uri
            local = local_path(file.path)
            if uri is None or (
                uri.startswith("s3://")
                and not (s3 if s3 is not None else (s3 := has_filesystem(spark, "s3")))
            ):
                other.append(file)
            elif local is not None and not os.path.exists(local):
                missing[file.chain] = f"FileNotFoundError: no such file: {file.text}"
            else:
                native.append(file)
    native = [r for r in native if r.chain not in missing]
    other = [r for r in other if r.chain not in missing]
    parts: list[DataFrame] = []
    if native:
        # One broadcast row per file: its key, chain and path; the lines are matched by
        # Spark's name of their file, through the same match_key as the roots' keys.
        keys = local_table(
            spark,
            {
                _KEY: ("string", [r.key for r in native]),
                CHAIN: ("int", [r.chain for r in native]),
                "path": ("string", [r.text for r in native]),
            },
        ).select(match_key(F.col(_KEY)).alias(_KEY), CHAIN, "path")
        uris = list(dict.fromkeys(r.uri or "" for r in native))  # a file of two roots is read once
        lines = _text(spark, uris).select(F.col("value"), match_key(F.col("_metadata.file_path")).alias(_KEY))
        found = lines.join(F.broadcast(keys), _KEY, "left")
        chain = F.coalesce(
            F.col(CHAIN), F.raise_error(F.concat(F.lit("a line of no root: "), F.col(_KEY))).cast("int")
        )
        parts.append(
            found.select(chain.alias(CHAIN), "path", "value", F.lit(None).cast("string").alias(_FAIL))
        )
    if other:
        where = Location.s3_environment()
        listed = local_table(
            spark, {CHAIN: ("int", [r.chain for r in other]), "path": ("string", [r.text for r in other])}
        )
        read = listed.repartition(max(1, min(len(other), partitions))).mapInArrow(
            partial(_fallback_lines, where), f"{CHAIN} int, path string, value binary, error string"
        )
        parts.append(
            read.select(
                CHAIN, "path", F.col("value").cast("string").alias("value"), F.col("error").alias(_FAIL)
            )
        )
    if not parts:
        empty = spark.createDataFrame([], f"path string, line string, {CHAIN} int")
        return (lambda probes: empty), missing
    strict = bad_bytes == "fail"
    lines = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    valid = F.coalesce(F.is_valid_utf8("value"), F.lit(True))
    bad = F.concat(F.lit(f"{PERMANENT}bad bytes: invalid UTF-8 in "), F.col("path"))
    failing = F.coalesce(F.col(_FAIL), F.when(~valid, bad)) if strict else F.col(_FAIL)
    noted = F.lit(None).cast("string") if strict else F.when(~valid, F.lit(BAD_BYTES_NOTE))
    text = nfc(_ROOT) if normalize == "NFC" else F.col(_ROOT)
    base = lines.select("path", F.col("value").alias(_ROOT), CHAIN, failing.alias(_FAIL), noted.alias(_NOTE))
    can_fail = strict or bool(other)

    def build(probes: Probes) -> DataFrame:
        df = base
        if can_fail:
            df = probes.observe(df, "fail", F.col(_FAIL))
            df = df.where(F.col(probes.column()).isNull()).drop(probes.column())
        if not strict:
            df = probes.observe(df, "note", F.col(_NOTE)).drop(probes.column())
        return df.select("path", text.alias("line"), CHAIN)

    return build, missing


def start(
    df: DataFrame,
    key: str,
    chains: Sequence[tuple[str, int]],
    *,
    known: Sequence[str] | None = None,
) -> DataFrame:
    """The rows of ``df`` whose column ``key`` (as a string) is the key of one of
    ``chains`` (``(key, chain)``), compared by :func:`.keys.match_key` (a path and
    Spark's URI of the file are one key), with their root. Rows of other keys are left
    out; with ``known`` (every key of the run), a row whose key is not in it raises
    :class:`.keys.UnknownRootKey` first (one small Spark job; the message shows the
    row's key and a root's), and so does a row without a key: nothing is dropped
    silently."""
    from pyspark.sql import functions as F

    if set(df.columns) & set(TRACKING):
        raise InvalidConfig("the DataFrame already has tracking columns")
    spark = df.sparkSession
    value = match_key(F.col(key))
    if known is not None:
        listed = local_table(spark, {_KEY: ("string", list(known))}).select(
            match_key(F.col(_KEY)).alias(_KEY)
        )
        rows = df.select(F.col(key).cast("string").alias(_ROOT), value.alias(_KEY))
        stray = rows.join(F.broadcast(listed), _KEY, "left_anti").limit(1).collect()
        if stray:
            raise unknown_key(key, stray[0][_ROOT], list(known))
    roots = local_table(
        spark, {_KEY: ("string", [k for k, _ in chains]), CHAIN: ("int", [c for _, c in chains])}
    ).select(match_key(F.col(_KEY)).alias(_KEY), CHAIN)
    return df.join(F.broadcast(roots), value == F.col(_KEY), "inner").drop(_KEY)
