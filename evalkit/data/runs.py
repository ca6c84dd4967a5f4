"""Runs: read and write TREC run files, and turn scores into ranks with the kit's one tie rule.

In memory a run is ``{qid: {doc: score}}`` (ranx / BEIR style), higher scores ranking
first. On disk it is a TREC run file (``qid Q0 doc rank score tag``); collections with a
format of their own read it in their adapter (CSFCube's official JSON files).

Tie rule, everywhere: score descending, then document id ascending (as strings),
so results never depend on the order in which a run lists its documents.
"""

from __future__ import annotations

import math
import numbers
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from evalkit.core import configfile
from evalkit.core.errors import DataError

Run = dict[str, dict[str, float]]


def ranked(scores: Mapping[str, float]) -> list[str]:
    """Documents best first: score descending, then document id ascending.

    Stable sorts with C-level keys instead of one sort on a Python tuple key: by score
    descending, after a sort by id only when some scores are tied (a stable sort keeps
    tied documents in id order).
    """
    docs = scores if not has_ties(scores) else sorted(scores)
    return sorted(docs, key=scores.__getitem__, reverse=True)


def has_ties(scores: Mapping[str, float]) -> bool:
    return len(set(scores.values())) < len(scores)


def ranks(scores: Mapping[str, float]) -> dict[str, int]:
    """1-based rank of every document under the tie rule."""
    return {doc: i for i, doc in enumerate(ranked(scores), start=1)}


def is_finite_score(value) -> bool:
    """A score the kit ranks by: a finite real number (not a bool, NaN or infinity)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_score(path: Path, where: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise DataError(path, f"{where} has non-numeric score {value!r}; scores must be numbers")
    if not math.isfinite(value):
        kind = "a NaN" if math.isnan(value) else "an infinite"
        raise DataError(path, f"{where} has {kind} score; give every candidate a finite number")
    return float(value)


def add_score(run: Run, path: Path, qid: str, doc: str, score: float) -> None:
    docs = run.setdefault(qid, {})
    if doc in docs:
        raise DataError(path, f"duplicate candidate {doc} for query {qid}; list each candidate once")
    docs[doc] = score


BLOCK = 1 << 20  # bytes read at a time: a run file is parsed as it streams, never held whole


def read_trec(path: Path) -> Run:
    """Read a TREC run file (``qid Q0 doc rank score tag``); the rank column is ignored. The file
    must be a regular one (`evalkit.core.configfile.open_regular`: a FIFO or a device is one error
    line, not a hang) and is streamed, so memory holds the run, not the file."""
    try:
        with configfile.open_regular(Path(path)) as fh:
            def blocks():
                fh.seek(0)
                yield from iter(lambda: fh.read(BLOCK), b"")
            return _parse(blocks, path)
    except FileNotFoundError:
        raise DataError(path, "run file not found; check {reference}") from None
    except OSError as exc:
        raise DataError(path, f"cannot read the run file ({exc.strerror}); give a TREC run file") from None


# One line as the kit writes it (`write_trec`): six fields, one space between them. `^` and `$`
# (multiline) sit at newlines, and neither `\S` nor the space matches any line break, so a match
# is always one whole line: a text is in this shape when every line is one match.
_PLAIN_LINE = re.compile(r"^(\S+) \S+ (\S+) \S+ (\S+) \S+$", re.MULTILINE)


def parse_trec(data: bytes, path: Path) -> Run:
    """The run held by a TREC file's bytes (`path` names it in errors); `TrecReader` block by block."""
    return _parse(lambda: (data[i:i + BLOCK] for i in range(0, len(data), BLOCK)), path)


def _parse(blocks, path: Path) -> Run:
    """The run of the bytes `blocks()` yields (a fresh iterator each call): read in the fast way;
    on a fault, read again by the general reader alone, which names the faulty line."""
    try:
        return _read_all(TrecReader(path), blocks())
    except TrecFault:
        return _read_all(TrecReader(path, fast=False), blocks())


def _read_all(reader: TrecReader, blocks) -> Run:
    for block in blocks:
        reader.feed(block)
    return reader.result()


class TrecFault(ValueError):
    """A fault the fast reader found in a block it had begun to add to the run (a non-numeric or
    non-finite score, a candidate listed twice): the file is read again by the general reader,
    which names the line (`parse_trec`); a caller that only needs to know, not say (the run
    store's check of a stored file), counts it as a failed check. Never reaches a user."""


class TrecReader:
    """A TREC run read block by block (`feed`, then `result`): memory holds the run and one block,
    never the file or a list of its lines.

    Each block is cut after its last newline (the rest waits for the next), decoded, and read in
    one regular-expression pass when every line is in the kit's own shape (six single-space-
    separated fields, no blank line; about twice as fast as line by line), else by the general
    reader, which accepts any whitespace and blank lines and names each fault by its line. Both
    give the same entries for every line the first accepts, so the run does not depend on where
    blocks are cut; a fault inside a fast block raises `TrecFault`."""

    def __init__(self, path: Path, fast: bool = True):
        self.path, self.fast = path, fast
        self.run: Run = {}
        self.lines = 0  # lines read so far (as str.splitlines counts them), for error messages
        self.entries = 0  # (query, document) entries in the run
        self.rest: list[bytes] = []  # the bytes after the last newline so far (a line not yet ended)

    def feed(self, block: bytes) -> None:
        cut = block.rfind(b"\n") + 1
        if not cut:  # no line ends here: kept aside (joined once, never copied per block)
            self.rest.append(block)
            return
        self._read(b"".join([*self.rest, block[:cut]]) if self.rest else block[:cut])
        self.rest = [block[cut:]] if cut < len(block) else []

    def result(self) -> Run:
        if self.rest:
            self._read(b"".join(self.rest))
            self.rest = []
        return self.run

    def _read(self, data: bytes) -> None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(self.path, f"not a UTF-8 text file ({exc.reason}); "
                            "write 'qid Q0 doc rank score tag' lines") from None
        if not (self.fast and self._read_plain(text)):
            self._read_lines(text)

    def _read_plain(self, text: str) -> bool:
        """Add the lines of `text` when every one is in the kit's shape (True); False, with the run
        untouched, when some line is blank or not six single-space-separated fields."""
        found = _PLAIN_LINE.findall(text)
        lines = text.count("\n") + (not text.endswith("\n"))
        if not found or len(found) != lines:
            return False
        run, total = self.run, 0.0
        try:
            for qid, doc, score in found:
                docs = run.get(qid)
                if docs is None:
                    docs = run[qid] = {}
                docs[doc] = value = float(score)
                total += value  # finite unless some score is NaN or infinite (or the sum overflows)
        except ValueError:
            raise TrecFault(f"{self.path}: a non-numeric score") from None
        entries = sum(map(len, run.values()))
        if entries != self.entries + len(found) or not math.isfinite(total):
            raise TrecFault(f"{self.path}: a candidate listed twice or a non-finite score")
        self.entries, self.lines = entries, self.lines + lines
        return True

    def _read_lines(self, text: str) -> None:
        """The general reader: any whitespace between fields, blank lines skipped, every fault
        named by its line."""
        run, path = self.run, self.path
        for number, line in enumerate(text.splitlines(), start=self.lines + 1):
            self.lines = number
            if not line.strip():
                continue
            fields = line.split()
            if len(fields) != 6:
                raise DataError(f"{path}:{number}", f"expected 6 fields 'qid Q0 doc rank score tag', got {len(fields)}")
            try:
                score = float(fields[4])
            except ValueError:
                raise DataError(f"{path}:{number}", f"non-numeric score {fields[4]!r}") from None
            add_score(run, path, fields[0], fields[2], check_score(path, f"line {number}", score))
            self.entries += 1


def _parse_plain(text: str) -> Run | None:
    """The fast reader alone over a whole text: its run, or None where it hands over (a line not
    in the kit's shape) or faults (the general reader decides)."""
    reader = TrecReader(Path("-"))
    try:
        return reader.run if reader._read_plain(text) else None
    except TrecFault:
        return None


def _parse_lines(text: str, path: Path) -> Run:
    """The general reader alone over a whole text (the reference the fast reader is held to)."""
    reader = TrecReader(path, fast=False)
    reader._read_lines(text)
    return reader.run


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename (readers never see half a file);
    on a failure (a full disk) the temporary file is removed, and an OSError that names no file
    names `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    name = None
    try:
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8") as tmp:
            name = tmp.name
            tmp.write(text)
        os.chmod(name, 0o644)  # readable by others, as any output (temporary files are 0600)
        os.replace(name, path)
    except BaseException as exc:
        if name is not None:
            Path(name).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno and not exc.filename:
            raise OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path)) from exc
        raise


def write_trec(path: Path, run: Run, tag: str) -> None:
    """Write a TREC run with full-precision (repr) scores."""
    lines = [
        f"{qid} Q0 {doc} {rank} {float(docs[doc])!r} {tag}"
        for qid, docs in run.items()
        for rank, doc in enumerate(ranked(docs), start=1)
    ]
    write_atomic(Path(path), "\n".join(lines) + "\n")


def run_label(path: Path) -> str:
    """A run file's name in a comparison's tables: the file's name without its extension
    (``runs/tfidf.trec`` -> ``tfidf``), so the rows read as the runs' names, not as paths."""
    return Path(path).stem
