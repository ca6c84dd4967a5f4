"""The Promptriever evaluation recipe: any registry model on BEIR / MS MARCO, FollowIR and InstructIR.

Every (model, dataset) pair is one real run through `evalkit.pipeline.runner.obtain` (stored with its
sidecar under `runs_dir`, reused when complete and matching), evaluated with
`evaluation.per_query` / `summarize` on the collection's own measures, x100:

- BEIR folders and ``irds:`` ids: nDCG@10 (MS MARCO dev: RR@10), ranking the whole corpus;
  BEIR folders also "Best" (oracle best prompt on test) and, with dev/test folds (10 sampled
  dev, else train, queries), "Selected" (best on each fold's dev half, reported on its test
  half; blank without folds, as in the paper's Table 4; `prompts.select_prompt`); each
  prompt is a run;
- FollowIR: reranking its candidate lists (protocol ``pool``); AP@1000 (News21: nDCG@5) on the
  "original" stratum, and p-MRR;
- InstructIR: nDCG@10 and robustness@10 (the mean over query groups of the minimum nDCG@10).

Failing early, losing nothing: every dataset is loaded and checked (`Collection.check`: qrels
naming absent documents are an error) and every (model, dataset) pair passes
`runner.bind` (every setting checked) before any model runs; a model that cannot serve a collection (the
multi-vector and facet-hybrid models need CSFCube's sentences) is refused in one line. With
`out`, the table so far is rewritten to that CSV after every finished row, so a later failure
keeps the earlier rows, and a rerun reuses the stored runs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from evalkit.core.errors import DataError, KitError, RequestError
from evalkit.data.collection import Collection
from evalkit.datasets import load_dataset, schemes
from evalkit.datasets.irds import IR_DATASETS
from evalkit.evaluation.evaluate import computed_measures, per_query, ranking_measures, summary_of
from evalkit.models import registry
from evalkit.pipeline.runner import RunSettings, bind, obtain
from evalkit.promptriever.prompts import TIEBREAK, check_prompts, load_prompts, select_prompt

RUNS = Path("runs")
PROTOCOL = "pool"  # FollowIR's candidate lists; the whole corpus where a collection has none
ORIGINAL = "original"  # FollowIR's stratum whose ranking measures the tables report
IRDS_SHORT = tuple(IR_DATASETS)  # bare names taken as irds ids: the adapter's short names


@dataclass(frozen=True)
class Dataset:
    kind: str  # beir, irds, followir or instructir
    source: str  # as given
    collection: Collection


def dataset_spec(kind: str, source: str) -> str:
    """The `load_dataset` spec of one entry of the `beir`, `followir` or `instructir` list.

    An entry with a scheme (``beir:``, ``irds:``...) is taken as is. A bare `beir` entry is a
    folder, or one of `IRDS_SHORT`; anything else is reported as a folder not found.
    """
    scheme, colon, _ = source.partition(":")
    if colon and scheme in {s.name for s in schemes()}:  # read when called: a user's scheme counts
        return source
    if kind != "beir":
        return f"{kind}:{source}"
    if source in IRDS_SHORT:
        return f"irds:{source}"
    if not Path(source).expanduser().is_dir():
        raise DataError(f"beir entry `{source}`", "folder not found; give a BEIR folder (corpus.jsonl, "
                        "queries.jsonl, qrels/test.tsv), or irds:ID for an ir_datasets id (e.g. irds:dl19)")
    return f"beir:{source}"


def load_datasets(beir: Sequence[str], followir: Sequence[str], instructir: Sequence[str]) -> list[Dataset]:
    """Every dataset loaded and checked, in the order given; two with one name are an error."""
    datasets = []
    for kind, sources in (("beir", beir), ("followir", followir), ("instructir", instructir)):
        for source in sources:
            spec = dataset_spec(kind, str(source))
            datasets.append(Dataset(spec.partition(":")[0], str(source), load_dataset(spec)))
    if not datasets:
        raise RequestError("beir", "no datasets given; name at least one BEIR, FollowIR or InstructIR folder")
    seen: dict[str, str] = {}
    for dataset in datasets:
        name = dataset.collection.name
        if name in seen:
            raise DataError("datasets",
                            f"`{seen[name]}` and `{dataset.source}` are both named {name}; their runs would share "
                            "a folder, so rename one folder")
        seen[name] = dataset.source
    return datasets


def plan_runs(profile: str, models: Sequence[str], datasets: Sequence[Dataset],
              runs_dir: Path) -> list[tuple[RunSettings, Dataset]]:
    """Every (model, dataset) pair as run settings, each checked (bound, `runner.bind`)."""
    if not models:
        raise RequestError("models", "no models given; name at least one model of the profile (see `evalkit models`)")
    plan = []
    for model in models:
        for dataset in datasets:
            settings = RunSettings(model=model, dataset=dataset.collection.name, profile=profile, protocol=PROTOCOL)
            bind(settings, dataset.collection, runs_dir)
            plan.append((settings, dataset))
    return plan


def measure_names(collection: Collection) -> list[str]:
    """The per-query measures a row needs: the collection's ranking measures, then what its other
    measures read (nDCG@k for robustness@k; p-MRR's column comes with every paired collection's table)."""
    return ranking_measures(collection, computed_measures(collection.measures))


def reported_stratum(collection: Collection) -> str:
    """FollowIR reports ranking measures on its original instructions; other collections on all queries."""
    return ORIGINAL if ORIGINAL in set(collection.strata.values()) else "all"


def _value(collection: Collection, table: pd.DataFrame, name: str) -> float:
    """A ranking measure on the reported stratum; the others (p-MRR, robustness@k) over all queries."""
    stratum = reported_stratum(collection) if ranking_measures(collection, [name]) else "all"
    return summary_of(collection, table, [name], "folds", {})[name][stratum]


def recipe_row(settings: RunSettings, dataset: Dataset, runs_dir: Path, prompts: Sequence[str]) -> dict:
    """One table row: the collection's measures with no prompt and, where it has folds, Best and
    Selected of its first ranking measure over `prompts`."""
    collection, names = dataset.collection, measure_names(dataset.collection)
    if prompts and TIEBREAK not in names:
        names = [*names, TIEBREAK]  # the authors' tie-break of the dev choice (`prompts.select_prompt`)
    spec = registry.spec(settings.model, settings.profile)

    def table(prompt: str | None) -> pd.DataFrame:
        return per_query(collection, obtain(bind(replace(settings, prompt=prompt), collection, runs_dir)).run, names)

    none = table(None)
    row = {"model": settings.model, "label": spec.label, "role": spec.role, "dataset": collection.name,
           "kind": dataset.kind, **{f"{m} (none)": 100 * _value(collection, none, m) for m in collection.measures}}
    if prompts and (collection.folds or dataset.kind == "beir"):  # BEIR without dev/train: Best only
        headline = ranking_measures(collection)[0]
        chosen = select_prompt(collection, {None: none, **{p: table(p) for p in prompts}}, headline,
                               reported_stratum(collection))
        row.update({f"{headline} (Best)": 100 * chosen.best, f"{headline} (Selected)": 100 * chosen.selected,
                    "best prompt": chosen.best_prompt,
                    "selected prompt": _selected(chosen.selected_prompts) if chosen.selected_prompts
                    else "(no dev/train split)"})
    return row


def _selected(chosen: dict[str, str]) -> str:
    """The prompt chosen on the dev half; with several folds, "fold: prompt" for each."""
    if len(chosen) == 1:
        return next(iter(chosen.values()))
    return "; ".join(f"{fold}: {prompt}" for fold, prompt in chosen.items())


def _write_csv(path: Path, rows: list[dict]) -> None:
    """The rows so far, written to a sibling temporary file and renamed over `path`."""
    handle, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(handle)
    try:
        pd.DataFrame(rows).to_csv(staging, index=False)
        os.replace(staging, path)
    finally:
        Path(staging).unlink(missing_ok=True)


def _check_out(out: Path | None) -> Path | None:
    if out is None:
        return None
    out = Path(out)
    if out.is_dir():
        raise DataError(out, "a folder; give a CSV file path")
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def recipe_table(profile: str, models: list[str], beir: list[str], followir: list[str], instructir: list[str],
                 runs_dir: Path = RUNS, out: Path | None = None, prompts: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per (model, dataset), model by model (module docstring).

    `beir` holds BEIR folders or ``irds:`` ids (msmarco-dev, dl19, dl20 also bare), `followir`
    FollowIR folders or robust04 / news21 / core17, `instructir` InstructIR folders. `prompts`
    defaults to the kit's generic prompts. With `out`, finished rows are kept in that CSV.
    """
    prompts = check_prompts(prompts, "prompts") if prompts is not None else load_prompts()
    out = _check_out(out)
    plan = plan_runs(profile, models, load_datasets(beir, followir, instructir), Path(runs_dir))
    rows: list[dict] = []
    for settings, dataset in plan:
        try:
            rows.append(recipe_row(settings, dataset, Path(runs_dir), prompts))
        except KitError as exc:
            if out is not None and rows:
                raise KitError(f"{exc} ({len(rows)} finished rows kept in {out}; a rerun reuses their runs)") from None
            raise
        if out is not None:
            _write_csv(out, rows)
    return pd.DataFrame(rows)
