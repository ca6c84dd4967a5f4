"""The CSFCube release's official ranking format, read and written as the kit's `Run`.

A run file of the release (``test-pid2pool-csfcube-NAME-FACET-ranked.json``, one per facet)
maps each seed to its candidates with a distance, best first: ``{seed: [[candidate, distance],
...]}``; ``eval_scripts/ranking_eval.py`` reads the list in the order written. `read_official`
and `load_official_run` read one (a file, a folder of them), `write_official` writes one from a
run (distance = -score), `official_path` names the file. Kept apart from the adapter
(`evalkit.datasets.csfcube`, which loads the data) because it is a run format, read by the run
input layer and written by the CLI.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from evalkit.core.errors import DataError
from evalkit.data.runs import Run, add_score, check_score, ranked, write_atomic
from evalkit.data.runstore import check_path_part
from evalkit.datasets.csfcube_facets import FACETS


def official_path(directory: Path, name: str, facet: str) -> Path:
    """The file of run `name`'s ranking of one facet in `directory`, named as the release names
    its own; a `name` that is not one plain path part is a one-line error."""
    check_path_part("run name", name)
    return Path(directory) / f"test-pid2pool-csfcube-{name}-{facet}-ranked.json"


def read_official(path: Path, facet: str) -> Run:
    """One facet's ranking in the official format ``{seed: [[candidate, distance], ...]}``,
    ranked in the order written, as the release's ``eval_scripts/ranking_eval.py`` reads it
    (it takes ``pid_score[0]`` of each entry in turn and never looks at the number).

    Where the list order is the kit's order of score = -distance (distance ascending, ties by
    candidate id, as `write_official` writes), the scores are -distance, bit for bit. Otherwise
    (distances that rise and fall, e.g. Aspire's similarities best first, or tied distances out
    of id order) the scores are -position (1, 2, 3, ... along the list), so every ranking of the
    kit follows the list; when the distances run against the list order, one warning line on
    stderr names the file and how many lists. A seed listed twice is an error."""
    run, against = _read_official(path, facet)
    _warn_against(path, against, len(run))
    return run


def _warn_against(where: Path, against: int, lists: int) -> None:
    if against:
        print(f"evalkit: warning: {where}: the distances fall along the list in {against} of {lists} "
              "lists (similarities, best first?); ranked in the order written, as the release's "
              "ranking_eval.py does, the numbers ignored", file=sys.stderr)


def _read_official(path: Path, facet: str) -> tuple[Run, int]:
    """`read_official`'s run, and how many of its lists have distances that fall somewhere."""
    number = _finite_number(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"), object_pairs_hook=_unique_keys(path),
                          parse_float=number, parse_int=number, parse_constant=_constant(path))
    except FileNotFoundError:
        raise DataError(path, "run file not found; check {reference} and {name}") from None
    except IsADirectoryError:
        raise DataError(path, "is a folder, not a ranking file; remove it or check {name}") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, absurd nesting
        raise DataError(path, f"malformed JSON ({type(exc).__name__}); "
                        "write {seed id: [[candidate, distance], ...]}") from None
    if not isinstance(data, dict):
        raise DataError(path, "top level must be an object {seed id: [[candidate, distance], ...]}")
    run: Run = {}
    against = 0  # lists whose distances fall somewhere along the list
    for seed, pairs in data.items():
        qid = f"{seed}_{facet}"
        run[qid] = {}
        if not isinstance(pairs, list):
            raise DataError(path, f"seed {seed} must map to a list of [candidate, distance] pairs")
        distances = []
        for pair in pairs:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise DataError(path, f"seed {seed} has entry {pair!r}; expected [candidate_id, distance]")
            distances.append(check_score(path, f"seed {seed} candidate {pair[0]}", pair[1]))
            add_score(run, path, qid, pair[0], -distances[-1])
        order = [pair[0] for pair in pairs]
        if ranked(run[qid]) != order:
            against += any(a > b for a, b in zip(distances, distances[1:]))
            run[qid] = {doc: -float(position) for position, doc in enumerate(order, start=1)}
    return run, against


def _finite_number(path: Path):
    """JSON numbers as floats; one too large for a float is an error (not inf, not an OverflowError)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except (ValueError, OverflowError):
            value = math.inf
        if not math.isfinite(value):
            shown = text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"
            raise DataError(path, f"number {shown} is too large for a float; write distances as plain numbers")
        return value

    return parse


def _constant(path: Path):
    def parse(name: str) -> float:
        if name == "NaN":
            return math.nan  # reported with its seed and candidate by check_score
        raise DataError(path, f"{name} is not a finite number; write distances as plain numbers")

    return parse


def _unique_keys(path: Path):
    def pairs_hook(pairs: list) -> dict:
        keys = [k for k, _ in pairs]
        repeated = next((k for k in keys if keys.count(k) > 1), None)
        if repeated is not None:
            raise DataError(path, f"key {repeated} appears twice; list each seed once")
        return dict(pairs)

    return pairs_hook


def load_official_run(folder: Path, name: str) -> Run:
    """A run from a folder of official files ``test-pid2pool-csfcube-NAME-FACET-ranked.json``
    (each read as `read_official`; one warning line for the folder)."""
    run: Run = {}
    against = 0
    for facet in FACETS:
        path = official_path(folder, name, facet)
        if path.is_file():
            part, falling = _read_official(path, facet)
            run.update(part)
            against += falling
    if not run:
        raise DataError(folder, f"no test-pid2pool-csfcube-{name}-FACET-ranked.json; check {{name}}")
    _warn_against(official_path(folder, name, "FACET"), against, len(run))  # one line for the folder
    return run


def write_official(path: Path, run: Run, facet: str) -> None:
    """Write the queries of one facet in the official format, best first, distance = -score."""
    suffix = f"_{facet}"
    data = {
        qid.removesuffix(suffix): [[doc, -float(docs[doc])] for doc in ranked(docs)]
        for qid, docs in run.items()
        if qid.endswith(suffix)
    }
    write_atomic(Path(path), json.dumps(data, indent=1) + "\n")
