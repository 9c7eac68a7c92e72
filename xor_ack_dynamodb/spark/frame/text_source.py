"""Tracked text files: a Spark 4 Python data source (``xor_ack_text``) that reads roots'
files in splits and gives every line an edge.

Why not ``spark.read.text`` with ``_metadata.file_path``: Spark's file sources skip a
file whose name is not valid UTF-8 without a word (it never shows up in the listing, so
it would look like an empty file), decode bytes without saying which were invalid, and
cannot tell an empty file from one they never read. This reader takes the file names as
raw bytes, and accounts for every split it was given:

- **Splits.** A file is cut into splits of ``split_bytes`` (default 32 MiB); a line
  belongs to the split holding its first byte (as Hadoop's line reader does), so every
  byte is read once. A split is read in chunks of about ``chunk_bytes`` (4 MiB) ending at
  a line end, so a task's memory is bounded by the chunk (and the longest line), not by
  the file: a 1 GiB file is 32 tasks of 32 MiB, each holding 4 MiB at a time.
- **Edges.** The chain of a root is created holding its root edge ``r``. The planner
  (on the driver) gives split ``j`` of ``k`` a share ``s_j`` with ``s_0 ^ … ^ s_{k-1} =
  r`` (the root fans out per split); the task reading split ``j`` gives each line a
  derived edge (SplitMix64 stream of a seed keyed by the run key and ``s_j``: see
  :mod:`~xor_ack_dynamodb.spark.edges`) and ends the split with one ghost row whose
  edge makes the split's XOR exactly ``s_j``. A split that was never read leaves its
  share in the chain: no false ack for a file nobody read.
- **Bad bytes.** Each chunk is decoded as UTF-8. With ``bad_bytes=replace`` (default)
  invalid sequences become U+FFFD (which is not a letter) and the root gets a note
  (``bad bytes: N invalid UTF-8 sequence(s), first at byte B``); with ``fail``, the
  split stops at the first bad chunk and its ghost row fails the chain *permanently*
  (a replay would meet the same bytes). An unreadable file (gone, no permission) fails
  its chain with the OS error (that one is replayed).
- **Normalization.** Text is put in NFC (``normalize=NFC``, default; ``none`` to keep it
  as is) one chunk at a time; a chunk ends at ``\\n``, after which no composition can
  reach back, so chunking does not change the result.

Columns: ``path`` (the file name, escaped as
:func:`~xor_ack_dynamodb.spark.tags.escape_key` does when it is not UTF-8), ``offset``
(the byte offset of the line in the file), ``line`` (without its ``\\n``), and the
tracking columns (see :mod:`.columns`).
"""

from __future__ import annotations

import json
import os
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ...errors import InvalidConfig
from ..edges import EdgeKey, mix64
from ..outcomes import PERMANENT
from ..tags import escape_key, unescape_key
from .columns import TRACKING_DDL, to_signed

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["TrackedTextSource", "TextRoot", "read_text", "split_shares", "SPLIT_BYTES", "CHUNK_BYTES"]

SPLIT_BYTES = 32 << 20
CHUNK_BYTES = 4 << 20
SCHEMA = f"path string, offset bigint, line string, {TRACKING_DDL}"


@dataclass(frozen=True)
class TextRoot:
    """One file to read: its chain (index in the attempt's tags), its path (bytes, as
    the file system has it) and its root edge."""

    chain: int
    path: bytes
    edge: int

    def to_json(self) -> list[Any]:
        return [self.chain, escape_key(self.path), f"{self.edge:016x}"]

    @classmethod
    def from_json(cls, item: Sequence[Any]) -> TextRoot:
        return cls(int(item[0]), unescape_key(item[1]), int(item[2], 16))


@dataclass(frozen=True)
class Split:
    root: TextRoot
    index: int
    start: int
    end: int
    share: int
    error: str | None = None


class SplitGroup(InputPartition):
    """The splits one task reads."""

    def __init__(self, splits: list[Split]) -> None:
        super().__init__(None)
        self.splits = splits


def split_shares(edges: EdgeKey, root_edge: int, count: int) -> list[int]:
    """``count`` shares whose XOR is ``root_edge``: derived from it, so a re-planned read
    gives the same shares."""
    seed = edges.seeds(root_edge)[0]
    shares = [mix64((seed + (j + 1) * 0x9E3779B97F4A7C15) & ((1 << 64) - 1)) for j in range(count - 1)]
    last = root_edge
    for share in shares:
        last ^= share
    return [*shares, last]


def plan(roots: Sequence[TextRoot], edges: EdgeKey, split_bytes: int, partitions: int) -> list[SplitGroup]:
    """Splits of every root, packed into at most ``partitions`` groups of similar size
    (largest first into the lightest group; deterministic)."""
    splits: list[Split] = []
    for root in roots:
        try:
            size = os.stat(root.path).st_size
        except OSError as exc:
            splits.append(Split(root, 0, 0, 0, root.edge, f"{type(exc).__name__}: {exc.strerror or exc}"))
            continue
        count = max(1, -(-size // split_bytes))
        shares = split_shares(edges, root.edge, count)
        for j in range(count):
            splits.append(Split(root, j, j * split_bytes, min(size, (j + 1) * split_bytes), shares[j]))
    groups: list[list[Split]] = [[] for _ in range(max(1, min(partitions, len(splits))))]
    loads = [0] * len(groups)
    for split in sorted(splits, key=lambda s: (-(s.end - s.start), s.root.chain, s.index)):
        lightest = loads.index(min(loads))
        groups[lightest].append(split)
        loads[lightest] += split.end - split.start + 1
    return [SplitGroup(g) for g in groups if g]


class _Batches:
    """Builds Arrow batches for one split (numpy edges, no Python per line beyond the
    ``str.split`` that makes the lines)."""

    def __init__(self, split: Split, edges: EdgeKey, track: bool) -> None:
        self.split = split
        self.track = track
        self.path = escape_key(split.root.path)
        self.seed = edges.seeds(split.share)[0]
        self.emitted = 0
        self.xor = 0

    def lines(self, offsets: Any, lines: list[str]) -> pa.RecordBatch:
        import numpy as np
        import pyarrow as pa

        count = len(lines)
        if self.track:
            stream = EdgeKey.stream_array(self.seed, self.emitted, count)
            self.emitted += count
            self.xor ^= int(np.bitwise_xor.reduce(stream)) if count else 0
        else:
            stream = np.zeros(count, dtype=np.uint64)
        return pa.RecordBatch.from_arrays(
            [
                pa.repeat(pa.scalar(self.path, pa.string()), count),
                pa.array(offsets, pa.int64()),
                pa.array(lines, pa.string()),
                pa.array(np.full(count, self.split.root.chain, dtype=np.int32)),
                pa.array(stream.view(np.int64)),
                pa.array(np.zeros(count, dtype=bool)),
                pa.nulls(count, pa.string()),
                pa.nulls(count, pa.string()),
            ],
            schema=_arrow_schema(),
        )

    def balance(self, error: str | None, note: str | None) -> Iterator[pa.RecordBatch]:
        """The split's ghost row: its edge makes the split's XOR exactly its share.
        Untracked, none: an error fails the task instead (as any reader's would)."""
        import pyarrow as pa

        if not self.track:
            if error is not None:
                raise OSError(error)
            return
        edge = self.split.share ^ self.xor
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([self.path], pa.string()),
                pa.array([self.split.start], pa.int64()),
                pa.array([None], pa.string()),
                pa.array([self.split.root.chain], pa.int32()),
                pa.array([to_signed(edge)], pa.int64()),
                pa.array([True]),
                pa.array([error], pa.string()),
                pa.array([note], pa.string()),
            ],
            schema=_arrow_schema(),
        )


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("path", pa.string()),
            ("offset", pa.int64()),
            ("line", pa.string()),
            ("_xa_chain", pa.int32()),
            ("_xa_edge", pa.int64()),
            ("_xa_ghost", pa.bool_()),
            ("_xa_err", pa.string()),
            ("_xa_note", pa.string()),
        ]
    )


def _decode(data: bytes, strict: bool) -> tuple[str, int, int]:
    """Text, number of invalid sequences replaced, offset of the first (or -1)."""
    try:
        return data.decode("utf-8"), 0, -1
    except UnicodeDecodeError as exc:
        if strict:
            return "", 1, exc.start
        text = data.decode("utf-8", "replace")
        return text, text.count("\ufffd") - data.count("\ufffd".encode()), exc.start


class TrackedTextReader(DataSourceReader):
    """See the module doc. Options: ``roots`` (JSON list of :meth:`TextRoot.to_json`),
    ``edge_key`` (hex), ``split_bytes``, ``chunk_bytes``, ``partitions``, ``bad_bytes``
    (``replace`` or ``fail``), ``normalize`` (``NFC`` or ``none``)."""

    def __init__(self, options: Any) -> None:
        self.roots = [TextRoot.from_json(item) for item in json.loads(options["roots"])]
        self.edges = EdgeKey(bytes.fromhex(options["edge_key"]))
        self.split_bytes = int(options.get("split_bytes", SPLIT_BYTES))
        self.chunk_bytes = int(options.get("chunk_bytes", CHUNK_BYTES))
        self.partition_count = int(options.get("partitions", 8))
        self.strict = options.get("bad_bytes", "replace") == "fail"
        self.normalize = options.get("normalize", "NFC")
        self.track = options.get("track", "true") == "true"
        self.after_read = load_hook(options.get("after_flush"))

    def partitions(self) -> list[SplitGroup]:
        return plan(self.roots, self.edges, self.split_bytes, self.partition_count)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SplitGroup)
        for split in partition.splits:
            yield from self._read_split(split)
        if self.after_read is not None:
            from pyspark import TaskContext

            context = TaskContext.get()
            self.after_read("read", context.partitionId() if context is not None else 0)

    def _read_split(self, split: Split) -> Iterator[pa.RecordBatch]:
        batches = _Batches(split, self.edges, self.track)
        if split.error is not None:
            yield from batches.balance(split.error, None)
            return
        error: str | None = None
        bad = 0
        first_bad = -1
        try:
            with open(split.root.path, "rb") as handle:
                position = split.start
                if position > 0:
                    handle.seek(position - 1)
                    if handle.read(1) != b"\n":
                        position += len(handle.readline())
                while position < split.end:
                    data = handle.read(max(1, min(self.chunk_bytes, split.end - position)))
                    if not data:
                        break
                    if not data.endswith(b"\n"):
                        data += handle.readline()
                    text, replaced, where = _decode(data, self.strict)
                    if replaced:
                        bad += replaced
                        first_bad = position + where if first_bad < 0 else first_bad
                        if self.strict:
                            error = (
                                f"{PERMANENT}bad bytes: invalid UTF-8 at byte {first_bad} of "
                                f"{escape_key(split.root.path)}"
                            )
                            break
                    if self.normalize == "NFC":
                        text = unicodedata.normalize("NFC", text)
                    lines = text.split("\n")
                    if lines and lines[-1] == "":
                        lines.pop()
                    offsets = _offsets(position, data, len(lines))
                    yield batches.lines(offsets, lines)
                    position += len(data)
        except OSError as exc:
            error = f"{type(exc).__name__}: {exc.strerror or exc}"
        note = None
        if bad and error is None:
            note = f"bad bytes: {bad} invalid UTF-8 sequence(s), first at byte {first_bad}"
        yield from batches.balance(error, note)


def _offsets(start: int, data: bytes, count: int) -> Any:
    """The byte offset of each of the ``count`` lines of ``data`` (which starts at
    ``start``), as a numpy array."""
    import numpy as np

    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    return (np.concatenate(([0], ends + 1))[:count] + start).astype(np.int64)


class TrackedTextSource(DataSource):
    """The ``xor_ack_text`` data source; see the module doc."""

    @classmethod
    def name(cls) -> str:
        return "xor_ack_text"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> TrackedTextReader:
        return TrackedTextReader(self.options)


def hook_option(hook: Callable[[str, int], None]) -> str:
    """A test hook (e.g. :class:`~xor_ack_dynamodb.spark.faults.DieOnFirstAttempt`) as
    a data source option."""
    import base64

    from pyspark import cloudpickle

    return base64.b64encode(cloudpickle.dumps(hook)).decode("ascii")  # type: ignore[no-untyped-call]


def load_hook(text: str | None) -> Callable[[str, int], None] | None:
    if not text:
        return None
    import base64
    import pickle

    hook: Callable[[str, int], None] = pickle.loads(base64.b64decode(text))
    return hook


def read_text(
    spark: SparkSession,
    roots: Sequence[TextRoot],
    edge_key: bytes,
    *,
    split_bytes: int,
    chunk_bytes: int,
    partitions: int,
    bad_bytes: str,
    normalize: str,
    after_flush: Callable[[str, int], None] | None = None,
    track: bool = True,
) -> DataFrame:
    """The ``xor_ack_text`` source over ``roots`` (see the module doc; ``track=False``:
    no edges, no balance rows). :class:`InvalidConfig` for a bad option."""
    if bad_bytes not in ("replace", "fail"):
        raise InvalidConfig(f"bad_bytes must be 'replace' or 'fail', got {bad_bytes!r}")
    if normalize not in ("NFC", "none"):
        raise InvalidConfig(f"normalize must be 'NFC' or 'none', got {normalize!r}")
    if split_bytes < 1 or chunk_bytes < 1:
        raise InvalidConfig("split_bytes and chunk_bytes must be positive")
    reader = spark.read.format(TrackedTextSource.name()).options(
        roots=json.dumps([r.to_json() for r in roots], ensure_ascii=False),
        edge_key=edge_key.hex(),
        split_bytes=str(split_bytes),
        chunk_bytes=str(chunk_bytes),
        partitions=str(partitions),
        bad_bytes=bad_bytes,
        normalize=normalize,
        track=str(track).lower(),
    )
    if after_flush is not None:
        reader = reader.option("after_flush", hook_option(after_flush))
    return reader.load()


def path_bytes(path: str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> bytes:
    """A path as the file system's bytes (``str`` with surrogates from undecodable names
    map back to the original bytes)."""
    return os.fsencode(path)
