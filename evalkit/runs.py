"""Runs: read and write rankings, and turn scores into ranks with the kit's one tie rule.

In memory a run is ``{qid: {doc: score}}`` with qid ``"{seed}_{facet}"`` and higher
scores ranking first. On disk it is either the official CSFCube format
(``test-pid2pool-csfcube-NAME-FACET-ranked.json``: ``{seed: [[doc, distance], ...]}``,
smaller distance ranks first, score = -distance) or a TREC run file
(``qid Q0 doc rank score tag``).

Tie rule, everywhere: score descending, then document id ascending (as strings),
so results never depend on the order in which a run lists its documents.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from evalkit.csfcube import FACETS
from evalkit.errors import KitError

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


def official_path(directory: Path, name: str, facet: str) -> Path:
    return Path(directory) / f"test-pid2pool-csfcube-{name}-{facet}-ranked.json"


def trec_path(directory: Path, name: str) -> Path:
    return Path(directory) / f"csfcube-{name}.trec"


def _score(path: Path, where: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KitError(f"{path}: {where} has non-numeric score {value!r}; scores must be numbers")
    if math.isnan(value):
        raise KitError(f"{path}: {where} has a NaN score; give every candidate a finite number")
    return float(value)


def _add(run: Run, path: Path, qid: str, doc: str, score: float) -> None:
    docs = run.setdefault(qid, {})
    if doc in docs:
        raise KitError(f"{path}: duplicate candidate {doc} for query {qid}; list each candidate once")
    docs[doc] = score


def read_official(path: Path, facet: str) -> Run:
    """Read one facet's official ranking file; score = -distance."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KitError(f"{path}: run file not found; check --runs and --name") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise KitError(f"{path}: malformed JSON ({exc}); write {{seed: [[candidate, distance], ...]}}") from None
    if not isinstance(data, dict):
        raise KitError(f"{path}: top level must be an object {{seed: [[candidate, distance], ...]}}")
    run: Run = {}
    for seed, pairs in data.items():
        qid = f"{seed}_{facet}"
        run[qid] = {}
        if not isinstance(pairs, list):
            raise KitError(f"{path}: seed {seed} must map to a list of [candidate, distance] pairs")
        for pair in pairs:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise KitError(f"{path}: seed {seed} has entry {pair!r}; expected [candidate_id, distance]")
            distance = _score(path, f"seed {seed} candidate {pair[0]}", pair[1])
            _add(run, path, qid, pair[0], -distance)
    return run


def read_trec(path: Path) -> Run:
    """Read a TREC run file (``qid Q0 doc rank score tag``); the rank column is ignored."""
    run: Run = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise KitError(f"{path}: run file not found; check --runs") from None
    except UnicodeDecodeError as exc:
        raise KitError(f"{path}: not a UTF-8 text file ({exc.reason}); "
                       "write 'qid Q0 doc rank score tag' lines") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 6:
            raise KitError(f"{path}:{number}: expected 6 fields 'qid Q0 doc rank score tag', got {len(fields)}")
        try:
            score = float(fields[4])
        except ValueError:
            raise KitError(f"{path}:{number}: non-numeric score {fields[4]!r}") from None
        _add(run, path, fields[0], fields[2], _score(path, f"line {number}", score))
    return run


def load_run(runs: Path, name: str | None) -> Run:
    """A run from a TREC file, or from a folder's official files for `name` (else its TREC file)."""
    runs = Path(runs)
    if runs.is_file():
        return read_trec(runs)
    if not runs.is_dir():
        raise KitError(f"{runs}: no such run file or directory; check --runs")
    if not name:
        raise KitError(f"{runs} is a directory: give --name to pick test-pid2pool-csfcube-NAME-FACET-ranked.json")
    run: Run = {}
    for facet in FACETS:
        path = official_path(runs, name, facet)
        if path.is_file():
            run.update(read_official(path, facet))
    if run:
        return run
    if trec_path(runs, name).is_file():
        return read_trec(trec_path(runs, name))
    raise KitError(
        f"{runs}: no test-pid2pool-csfcube-{name}-FACET-ranked.json nor csfcube-{name}.trec; check --name"
    )


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8") as tmp:
        tmp.write(text)
    os.replace(tmp.name, path)


def write_official(path: Path, run: Run, facet: str) -> None:
    """Write the queries of one facet in the official format, best first, distance = -score."""
    suffix = f"_{facet}"
    data = {
        qid.removesuffix(suffix): [[doc, -float(docs[doc])] for doc in ranked(docs)]
        for qid, docs in run.items()
        if qid.endswith(suffix)
    }
    write_atomic(Path(path), json.dumps(data, indent=1) + "\n")


def write_trec(path: Path, run: Run, tag: str) -> None:
    """Write a TREC run with full-precision (repr) scores."""
    lines = [
        f"{qid} Q0 {doc} {rank} {float(docs[doc])!r} {tag}"
        for qid, docs in run.items()
        for rank, doc in enumerate(ranked(docs), start=1)
    ]
    write_atomic(Path(path), "\n".join(lines) + "\n")
