"""What both word-count pipelines share: the rule for words, the bundled corpus, the
injected faults and a run's options (the inputs: :mod:`.inputs`).

Words: the text is put in Unicode normalization form NFC (so "é" written as "e" plus a
combining accent counts as one letter), then split into maximal runs of letters, where a
letter is a character for which ``str.isalpha()`` is true (Unicode categories Lu, Ll,
Lt, Lm, Lo); each run is lower-cased with ``str.lower()``. Everything else splits words:
digits, punctuation, apostrophes and hyphens, so "don't" is "don" and "t", "co-op" is
"co" and "op", "mp3" is "mp". (The DataFrame pipeline applies the same rule in the JVM,
see :mod:`.frame`.)
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import InvalidConfig

if TYPE_CHECKING:
    from ...interfaces import AckTracker
    from ...spark.outcomes import RunObserver
    from ...spark.output import Location
    from ...spark.rdd.executor import AfterFlush

__all__ = ["tokenize", "default_corpus", "FaultPlan", "InjectedFailure", "Options"]

#: A fast first cut: runs of word characters that are not digits or "_" (a superset of
#: letters: it also admits numerals like "²"; tokenize() splits those out).
_CANDIDATE = re.compile(r"[^\W\d_]+")

#: The bundled sample corpus: package data (``corpus/`` beside this module), so it is in
#: the wheel and a plain ``pip install`` has it. ``examples/data`` holds the same files for
#: the examples that run from a checkout (tests/test_cli.py checks they agree).
CORPUS_PACKAGE = "xor_ack_dynamodb.jobs.wordcount"
CORPUS_DIRECTORY = "corpus"


def tokenize(text: str) -> list[str]:
    """The words of ``text``, in order (see the module doc for the rule)."""
    words: list[str] = []
    for run in _CANDIDATE.findall(unicodedata.normalize("NFC", text)):
        if run.isalpha():
            words.append(run.lower())
        else:
            words.extend(w.lower() for w in "".join(c if c.isalpha() else " " for c in run).split())
    return words


def default_corpus() -> Path:
    """The bundled corpus (24 short texts in English, German and French, 100 KB), a
    directory of the installed package: ``xor-ack wordcount`` counts it when given no
    INPUT. Raises ``FileNotFoundError`` when the package is not installed as files (a
    zip import): Spark reads paths."""
    corpus = resources.files(CORPUS_PACKAGE) / CORPUS_DIRECTORY
    if not isinstance(corpus, Path) or not corpus.is_dir():
        raise FileNotFoundError(f"the bundled corpus {corpus} is missing: pass INPUT files or directories")
    return corpus


class InjectedFailure(RuntimeError):
    """A failure ``--fail-rate`` injected into a word's processing."""


@dataclass(frozen=True)
class FaultPlan:
    """Which word records raise: a ``rate`` fraction of them in each of the first
    ``attempts`` attempts (transient faults: replays after that run clean), chosen by
    hashing the seed, the attempt, the file and the word's position, so a run is
    reproducible and each attempt draws afresh."""

    rate: float
    seed: int = 0
    attempts: int = 1

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate < 1.0:
            raise InvalidConfig(f"the fail rate must be in [0, 1), got {self.rate}")

    def fails(self, attempt: int, file_id: int, position: int) -> bool:
        if self.rate <= 0.0 or attempt > self.attempts:
            return False
        digest = hashlib.blake2b(
            f"{self.seed}/{attempt}/{file_id}/{position}".encode(), digest_size=8
        ).digest()
        return int.from_bytes(digest, "big") < self.rate * 2**64


@dataclass(frozen=True)
class Options:
    """How one word count runs, whichever pipeline (see
    :func:`~.job.run_wordcount`). Attempt ``n`` writes its rows to :meth:`attempt`."""

    output: Location
    run_id: str
    faults: FaultPlan | None = None
    max_attempts: int = 3
    partitions: int | None = None
    bad_bytes: str = "replace"
    split_bytes: int | None = None
    after_flush: AfterFlush | None = None
    observer: RunObserver | None = None
    tracker: AckTracker | None = None
    transactions: bool = False
    #: Where the parts go instead of ``<output>/.parts`` (a directory, when Spark cannot
    #: write where the output goes: ``s3://`` without an S3 file system).
    parts_root: Location | None = None

    @property
    def parts(self) -> Location:
        """Where the attempts' rows go: ``<output>/.parts/<run id>``."""
        return (self.parts_root or self.output.child(".parts")).child(self.run_id)

    def attempt(self, number: int) -> Location:
        return self.parts.child(f"attempt-{number}")
