"""Reading a run a user gives: a TREC run file, a verified run-store folder or a folder of the
collection's own ranked files, read by its `Collection.read_runs` (CSFCube's official files)
(``evalkit evaluate --runs``, the API's ``reference=``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Collection
from evalkit.data.protocols import DEFAULT_PROTOCOL, check_protocol_run
from evalkit.data.runs import read_trec, run_label
from evalkit.data.runstore import RANKING, SIDECAR, load_verified, read_sidecar, unverified


def load_any_run(runs: Path, name: str | None, collection: Collection) -> tuple[dict, str | None]:
    """The run at `runs` (the CLI's --runs, the API's reference=) and the protocol its run-store
    sidecar records (None otherwise).

    A file is a TREC run; a folder holding run.trec is a run-store folder (verified against its
    sidecar when it has one); another folder holds the collection's own ranked files, the run
    picked by `name` (`Collection.read_runs`: CSFCube's official files)."""
    if runs.is_file():
        if name:
            raise RequestError("name", f"picks a run in a folder of ranked files; {runs} is a TREC run file "
                                       "(drop {name})")
        return read_trec(runs), None
    if not runs.is_dir():
        raise DataError(runs, "no such run file or directory; check {reference}")
    if (runs / RANKING).is_file() or (runs / SIDECAR).is_file():
        if not (runs / RANKING).is_file():
            raise DataError(runs, f"a run-store folder without {RANKING}; the run is incomplete: run it again")
        if name:
            raise RequestError("name", f"picks a run in a folder of ranked files; {runs} is a run-store folder "
                                       "(drop {name})")
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
    if collection.read_runs is None:
        raise DataError(runs, f"a folder without {RANKING}; give a TREC run file or a run-store folder")
    if not name:
        raise DataError(runs, "is a folder of ranked files: give {name} to pick a run of them")
    return collection.read_runs(runs, name), None


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


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths are one existing file (a run given twice under two names)."""
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def one_protocol(protocols: Sequence[tuple[str, str]], field: str = "runs") -> str:
    """The one protocol of the runs compared ((run label, the protocol it was made under) each):
    the CLI's ``--runs``, the API's ``reference=`` beside the model's runs; `field` names the
    request's field an error is about."""
    found = sorted({protocol for _, protocol in protocols})
    if len(found) > 1:
        made = "; ".join(f"{label} under {protocol}" for label, protocol in protocols)
        raise RequestError(field, f"the runs were made under different protocols ({made}); compare runs of one "
                                  "protocol, or give {protocol} to judge them all under one")
    return found[0]


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
