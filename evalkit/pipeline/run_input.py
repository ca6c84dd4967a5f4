"""Reading a run a user gives: a TREC run file, a verified run-store folder or a folder of the
CSFCube release's official ranked files (``evalkit evaluate --runs``, the API's ``reference=``)."""

from __future__ import annotations

from pathlib import Path

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Collection
from evalkit.data.protocols import DEFAULT_PROTOCOL, check_protocol_run
from evalkit.data.runs import read_trec, run_label
from evalkit.data.runstore import RANKING, SIDECAR, load_verified, read_sidecar, unverified
from evalkit.datasets.csfcube_official import load_official_run
from evalkit.evaluation.evaluate import CSFCUBE


def load_any_run(runs: Path, name: str | None, collection: Collection) -> tuple[dict, str | None]:
    """The run at `runs` (the CLI's --runs, the API's reference=) and the protocol its run-store
    sidecar records (None otherwise).

    A file is a TREC run; a folder holding run.trec is a run-store folder (verified against its
    sidecar when it has one); another folder holds official CSFCube files picked by `name`."""
    if runs.is_file():
        if name:
            raise RequestError("name", f"picks official CSFCube files in a folder; {runs} is a TREC run file "
                                       "(drop {name})")
        return read_trec(runs), None
    if not runs.is_dir():
        raise DataError(runs, "no such run file or directory; check {reference}")
    if (runs / RANKING).is_file() or (runs / SIDECAR).is_file():
        if not (runs / RANKING).is_file():
            raise DataError(runs, f"a run-store folder without {RANKING}; the run is incomplete: run it again")
        if name:
            raise RequestError("name", f"picks official CSFCube files; {runs} is a run-store folder (drop {{name}})")
        sidecar = read_sidecar(runs)
        if sidecar is None:  # a run-store folder is never written without one: damaged or edited by hand
            raise DataError(runs, f"sidecar.json is missing or damaged, so {RANKING} cannot be verified; run it "
                            f"again (or give {runs / RANKING} itself to evaluate the file unverified)")
        if sidecar.get("dataset") != collection.name:
            raise DataError(runs, f"the run was made on {sidecar.get('dataset')!r}, not {collection.name!r}; "
                                  "give the {dataset} it was made on")
        if sidecar.get("data_sha256") != collection.identity:
            raise DataError(runs, f"the run was made on other {collection.name} data (data_sha256 differs); "
                            "run it again on this data")
        expected = {"dataset": collection.name, "data_sha256": collection.identity}
        run = load_verified(runs, expected)
        if run is None:
            raise DataError(runs, f"the run fails its check against sidecar.json: "
                            f"{unverified(runs, expected) or 'it changed while read'}; run it again")
        return run, sidecar.get("protocol")
    if collection.name != CSFCUBE:
        raise DataError(runs, f"a folder without {RANKING}; give a TREC run file or a run-store folder")
    if not name:
        raise DataError(runs, "is a directory: give {name} to pick test-pid2pool-csfcube-NAME-FACET-ranked.json")
    return load_official_run(runs, name), None


def read_run(runs: Path, name: str | None, collection: Collection, protocol: str | None = None,
             default: str = DEFAULT_PROTOCOL) -> tuple[dict, str, Collection]:
    """(the run at `runs`, its protocol, the collection as that protocol judges it) for a run a
    user gives (``evalkit evaluate --runs``, the API's ``reference=``), checked.

    The protocol is `protocol` where given, else the one the run's sidecar records, else
    `default`. On the pool protocols (``pool``, ``released``) every document must be one of the
    query's candidates as that protocol gives them (``released``: the seed included, and judged;
    `protocol_collection`); the pooled and full protocols rank beyond the candidates."""
    run, recorded = load_any_run(runs, name, collection)
    protocol = protocol or recorded or default
    return run, protocol, check_protocol_run(run, collection, protocol, source=str(runs))


def run_labels(paths: list[Path]) -> dict[Path, str]:
    """Each run's name in a comparison (`evalkit evaluate --runs`, the API's ``reference=``): its
    run-store name (sidecar), or a file's name without its extension (`run_label`), where no other
    run has it; else the path as given."""
    recorded = {}
    for path in paths:
        sidecar = read_sidecar(path) if path.is_dir() and (path / RANKING).is_file() else None
        name = sidecar.get("run") if sidecar else (run_label(path) if path.is_file() else None)
        recorded[path] = name if isinstance(name, str) and name else None
    names = list(recorded.values())
    return {p: n if n is not None and names.count(n) == 1 and n not in map(str, paths) else str(p)
            for p, n in recorded.items()}
