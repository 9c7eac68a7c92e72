"""A reproducible benchmark corpus: hundreds of real-looking text files, a million words.

Built from the bundled sample (``examples/data``, English, German and French prose and
verse) by a word-level Markov chain: each generated file draws a source text (its
"genre"), then writes paragraphs of sentences by walking the bigrams of that text, with
a small chance per step of jumping to the bigrams of the whole sample. The same seed
gives the same bytes on every machine (``random.Random`` is specified to be stable for
a given seed, and the sample is part of the repository).

What makes it look real, and exercises the job:

- sizes follow a log-normal law (many small files, a long tail) plus one file about 30
  times the median, so a file can outgrow a read split;
- files sit in nested directories with names made of their first words, some with
  spaces, ``%``, ``#``, ``&`` or accents in them, and two whose names are Latin-1 bytes
  (not UTF-8: Spark's own file sources skip those without a word);
- line endings are mostly ``\\n``, some files ``\\r\\n``; one starts with a byte-order
  mark; paragraphs are wrapped at about 72 columns, or not wrapped at all.

``python -m benchmarks.corpus DIR [--files N] [--words N] [--seed S]`` writes one.

:func:`replicate` makes a corpus ``k`` times larger from any other (the word count's
larger size: the 710 Debian notices ten times, 7,100 files), each file ``k`` times
under new names, so the words per file stay those of the real files.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CorpusSpec", "build_corpus", "corpus_words", "replicate"]

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "data"
_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENTENCE_END = {".", "!", "?"}
_TOPICS = ("letters", "notes", "stories", "reports", "minutes", "journal", "archive")
_ODD_NAMES = ("draft #2", "q&a", "100% done", "café crème", "smörgåsbord", "naïve plan")


@dataclass(frozen=True)
class CorpusSpec:
    """How many files and words (at least), and the seed."""

    files: int = 520
    words: int = 1_050_000
    seed: int = 2024


class _Chain:
    """Bigram successors per source text and for the whole sample."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.names = sorted(texts)
        self.by_source: dict[str, dict[str, list[str]]] = {}
        self.starts: dict[str, list[str]] = {}
        overall: dict[str, list[str]] = defaultdict(list)
        for name in self.names:
            tokens = _TOKEN.findall(texts[name])
            successors: dict[str, list[str]] = defaultdict(list)
            starts = [tokens[0]]
            for a, b in zip(tokens, tokens[1:], strict=False):
                successors[a].append(b)
                overall[a].append(b)
                if a in _SENTENCE_END and b[:1].isupper():
                    starts.append(b)
            self.by_source[name] = dict(successors)
            self.starts[name] = starts
        self.overall = dict(overall)

    def sentence(self, rng: random.Random, source: str) -> list[str]:
        successors = self.by_source[source]
        token = rng.choice(self.starts[source])
        out = [token]
        for _ in range(60):
            table = self.overall if rng.random() < 0.08 else successors
            nexts = table.get(token) or self.overall.get(token)
            if not nexts:
                break
            token = rng.choice(nexts)
            out.append(_rare_word(rng) if token.isalpha() and rng.random() < 0.03 else token)
            if token in _SENTENCE_END:
                break
        if out[-1] not in _SENTENCE_END:
            out.append(".")
        return out


def _join(tokens: list[str]) -> str:
    text = ""
    for token in tokens:
        if text and (token[0].isalnum() or token in "(\"") and not text.endswith(("(", "'", "\"")):
            text += " "
        text += token
    return text


_SYLLABLES = (
    "ka", "ri", "mo", "lan", "ter", "vis", "dor", "el", "an", "sel", "brok", "hau", "mer", "qui",
    "zel", "tor", "wen", "ith", "ost", "ung", "ré", "çon", "über", "grü", "ny", "sha", "pol", "ex",
)


def _rare_word(rng: random.Random) -> str:
    """A word outside the sample's vocabulary (names, places, coinages): the long tail of
    a real vocabulary."""
    word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
    return word.capitalize() if rng.random() < 0.5 else word


def _wrap(paragraph: str, width: int) -> str:
    if width <= 0:
        return paragraph
    lines: list[str] = []
    line = ""
    for word in paragraph.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines)


def _slug(words: list[str]) -> str:
    letters = [w.lower() for w in words if w.isalpha()][:4]
    return "-".join(letters) or "untitled"


def corpus_words(text: str) -> int:
    """Words by the job's rule, roughly (used only to size the corpus)."""
    return len(re.findall(r"[^\W\d_]+", text))


def build_corpus(directory: Path, spec: CorpusSpec = CorpusSpec()) -> list[Path]:
    """Write the corpus into ``directory`` (created; existing files of the same names are
    overwritten) and return the file paths, sorted. Deterministic for a given spec."""
    texts = {p.name: p.read_text(encoding="utf-8") for p in sorted(SAMPLE.iterdir()) if p.is_file()}
    chain = _Chain(texts)
    rng = random.Random(spec.seed)
    per_file = spec.words / spec.files
    sigma = 0.9
    mu = math.log(per_file) - sigma * sigma / 2
    sizes = [max(40, int(rng.lognormvariate(mu, sigma))) for _ in range(spec.files)]
    sizes[rng.randrange(spec.files)] = int(per_file * 30)  # the one big file
    scale = spec.words / sum(sizes)
    sizes = [max(40, math.ceil(s * scale)) for s in sizes]
    paths: list[Path] = []
    odd = iter(range(len(_ODD_NAMES)))
    latin1_at = {spec.files // 3, (2 * spec.files) // 3}
    for index, size in enumerate(sizes):
        source = chain.names[rng.randrange(len(chain.names))]
        width = rng.choice((72, 72, 72, 64, 80, 0))
        paragraphs: list[str] = []
        words = 0
        first: list[str] = []
        while words < size:
            sentences = []
            for _ in range(rng.randint(2, 7)):
                tokens = chain.sentence(rng, source)
                first = first or tokens
                sentences.append(_join(tokens))
                words += sum(1 for t in tokens if not _TOKEN.fullmatch(t) or t[0].isalnum())
            paragraphs.append(_wrap(" ".join(sentences), width))
        body = "\n\n".join(paragraphs) + "\n"
        if rng.random() < 0.15:
            body = body.replace("\n", "\r\n")
        data = body.encode("utf-8")
        if index == 7:
            data = "\ufeff".encode() + data
        topic = _TOPICS[rng.randrange(len(_TOPICS))]
        folder = directory / topic / str(1990 + rng.randrange(35))
        stem = f"{index:04d}-{_slug(first)}"
        if rng.random() < 0.03:
            name_index = next(odd, None)
            if name_index is not None:
                stem = f"{index:04d} {_ODD_NAMES[name_index]}"
        folder.mkdir(parents=True, exist_ok=True)
        if index in latin1_at:
            # A name that is not UTF-8: Latin-1 bytes, as old archives produce.
            raw = os.fsencode(folder) + b"/" + f"{index:04d}-r".encode() + b"\xe9sum\xe9.txt"
            with open(raw, "wb") as handle:
                handle.write(data)
            paths.append(Path(os.fsdecode(raw)))
            continue
        path = folder / f"{stem}.txt"
        path.write_bytes(data)
        paths.append(path)
    return sorted(paths)


def replicate(source: Path, files: list[Path], directory: Path, times: int) -> list[Path]:
    """Copy each of ``files`` (under ``source``) ``times`` times into ``directory``, at
    the same relative folder, copy ``k`` of ``name.ext`` named ``name.k.ext``; return
    the copies, sorted. Copies that already hold the same bytes are left alone, so a
    second call is quick; copies, not links, so that each is a file of its own (as a
    user's would be, in the page cache too). Deterministic: names and bytes follow from
    the inputs alone."""
    out: list[Path] = []
    for path in files:
        data = path.read_bytes()
        relative = path.relative_to(source)
        folder = directory / relative.parent
        folder.mkdir(parents=True, exist_ok=True)
        for k in range(times):
            copy = folder / f"{relative.stem}.{k}{relative.suffix}"
            if not copy.exists() or copy.stat().st_size != len(data) or copy.read_bytes() != data:
                copy.write_bytes(data)
            out.append(copy)
    return sorted(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--files", type=int, default=CorpusSpec.files)
    parser.add_argument("--words", type=int, default=CorpusSpec.words)
    parser.add_argument("--seed", type=int, default=CorpusSpec.seed)
    args = parser.parse_args()
    paths = build_corpus(args.directory, CorpusSpec(args.files, args.words, args.seed))
    total = sum(path.stat().st_size for path in paths)
    print(f"{len(paths)} files, {total / 1e6:.1f} MB in {args.directory}")


if __name__ == "__main__":
    main()
