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

from evalkit.core.errors import KitError

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
        raise KitError(f"{path}: {where} has non-numeric score {value!r}; scores must be numbers")
    if not math.isfinite(value):
        kind = "a NaN" if math.isnan(value) else "an infinite"
        raise KitError(f"{path}: {where} has {kind} score; give every candidate a finite number")
    return float(value)


def add_score(run: Run, path: Path, qid: str, doc: str, score: float) -> None:
    docs = run.setdefault(qid, {})
    if doc in docs:
        raise KitError(f"{path}: duplicate candidate {doc} for query {qid}; list each candidate once")
    docs[doc] = score


def read_trec(path: Path) -> Run:
    """Read a TREC run file (``qid Q0 doc rank score tag``); the rank column is ignored."""
    try:
        return parse_trec(Path(path).read_bytes(), path)
    except FileNotFoundError:
        raise KitError(f"{path}: run file not found; check --runs") from None


# One line as the kit writes it (`write_trec`): six fields, one space between them. `^` and `$`
# (multiline) sit at newlines, and neither `\S` nor the space matches any line break, so a match
# is always one whole line: a file is in this shape when every line is one match.
_PLAIN_LINE = re.compile(r"^(\S+) \S+ (\S+) \S+ (\S+) \S+$", re.MULTILINE)


def parse_trec(data: bytes, path: Path) -> Run:
    """The run held by a TREC file's bytes (`path` names it in errors).

    A file in the kit's own shape (every line six single-space-separated fields, no blank
    lines) is read in one regular-expression pass, about twice as fast as line by line; any
    other file, and any file with a fault (a non-numeric or non-finite score, a candidate
    listed twice), goes through the general reader, which accepts any whitespace and blank
    lines and names the faulty line. Both give the same run for every file the first accepts."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KitError(f"{path}: not a UTF-8 text file ({exc.reason}); "
                       "write 'qid Q0 doc rank score tag' lines") from None
    run = _parse_plain(text)
    return run if run is not None else _parse_lines(text, path)


def _parse_plain(text: str) -> Run | None:
    """The run of a file in the kit's own shape whose every score is finite and every
    candidate listed once; None for any other file (the general reader decides)."""
    found = _PLAIN_LINE.findall(text)
    if len(found) != text.count("\n") + (not text.endswith("\n")) or not found:
        return None  # some line is blank or not six single-space-separated fields
    run: Run = {}
    try:
        for qid, doc, score in found:
            docs = run.get(qid)
            if docs is None:
                docs = run[qid] = {}
            docs[doc] = float(score)
    except ValueError:
        return None
    if sum(map(len, run.values())) != len(found) or not all(
            math.isfinite(s) for docs in run.values() for s in docs.values()):
        return None
    return run


def _parse_lines(text: str, path: Path) -> Run:
    """The general reader: any whitespace between fields, blank lines skipped, every fault
    named by its line."""
    run: Run = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 6:
            raise KitError(f"{path}:{number}: expected 6 fields 'qid Q0 doc rank score tag', got {len(fields)}")
        try:
            score = float(fields[4])
        except ValueError:
            raise KitError(f"{path}:{number}: non-numeric score {fields[4]!r}") from None
        add_score(run, path, fields[0], fields[2], check_score(path, f"line {number}", score))
    return run


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8") as tmp:
        tmp.write(text)
    os.chmod(tmp.name, 0o644)  # readable by others, as any output (temporary files are 0600)
    os.replace(tmp.name, path)


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
