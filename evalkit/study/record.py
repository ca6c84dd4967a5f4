"""The published CSFCube record (`config/published_csfcube.csv`) and the verify step that sets
the kit's rows beside it.

Every published CSFCube result outside the study's own tables is reported in the release's
official measures, MAP and NDCG%20 (x100), on the judged pools, as the mean of the two
test-fold means: the Aspire code's rows on the pools as released (the kit's ``released``
protocol, seed 8781666 ranked and judged in its own two pools), the release's SPECTER
rankings without the seed (the kit's ``pool`` protocol; the official measures read only the
ranked list, so the seed's judgment does not count).

One CSV row per (published row, measure): its kit model (blank where no registry row
reproduces it), profile, protocol, the figures per facet and aggregated (blank where not
published), its source and a note.

`verify` scores each record row whose kit model has weights present (a stored run of the
row's protocol is reused; otherwise the model runs, never downloading) and prints
kit against published with the difference, flagging every figure more than `TOLERANCE`
points away and saying what differs. The release's own SPECTER rankings are always scored
too: they check the measures, whatever weights are present.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from evalkit.core.cited import read_cited_csv
from evalkit.core.errors import DataError, KitError, RequestError
from evalkit.data.collection import Collection
from evalkit.data.protocols import protocol_collection
from evalkit.data.runs import ranked
from evalkit.datasets import csfcube, csfcube_official
from evalkit.evaluation.evaluate import per_query, summarize
from evalkit.pipeline.runner import RunSettings, bind, obtain

RECORD = Path(__file__).resolve().parents[1] / "config" / "published_csfcube.csv"
COLUMNS = ["row", "kit_model", "profile", "protocol", "metric", "background", "method", "result", "all",
           "source", "note"]
PARTS = ["background", "method", "result", "all"]
MEASURES = {"MAP": "MAP_csfcube", "NDCG%20": "nDCG_csfcube%20"}  # published name -> kit measure
TOLERANCE = 0.5  # points (x100)
RELEASE_SAMPLE = "release sample (SPECTER rankings)"


def load_record(path: Path | None = None) -> pd.DataFrame:
    """The published record, one row per (published row, measure); figures as floats (NaN = not published)."""
    path = Path(path) if path else RECORD
    table = read_cited_csv(path, COLUMNS, "published record")
    for i, row in table.iterrows():
        where = f"{path}:{i + 2}"
        if row["metric"] not in MEASURES:
            raise DataError(where, f"metric {row['metric']!r} must be one of {', '.join(MEASURES)}")
        if not row["source"].strip():
            raise DataError(where, "every figure needs its source")
    for part in PARTS:
        values = pd.to_numeric(table[part].replace("", math.nan), errors="coerce")
        bad = values.isna() & (table[part] != "") | (values < 0) | (values > 100)
        if bad.any():
            raise DataError(f"{path}:{int(bad.idxmax()) + 2}", f"{part} must be a number between 0 and 100 or blank")
        table[part] = values
    return table


def official_figures(collection, run) -> dict[str, dict[str, float]]:
    """{published metric: {part: value x100}} of a run: the official measures, fold-aggregated."""
    summary = summarize(collection, per_query(collection, run, list(MEASURES.values())))
    # a subset of the queries (a smoke run) may lack a facet: its figure is blank
    return {metric: {part: 100 * summary[kit].get(part, math.nan) for part in PARTS}
            for metric, kit in MEASURES.items()}


def compare(record: pd.DataFrame, row: str, figures: dict[str, dict[str, float]],
            label: str | None = None) -> pd.DataFrame:
    """Kit figures against one published row: published, kit, difference and flag (> `TOLERANCE`)."""
    out = []
    for _, published in record[record["row"] == row].iterrows():
        for part in PARTS:
            if math.isnan(published[part]):
                continue
            kit = figures[published["metric"]][part]
            out.append({"row": label or row, "metric": published["metric"], "part": part,
                        "published": published[part], "kit": round(kit, 2),
                        "difference": round(kit - published[part], 2) + 0.0,
                        "flag": "DIFFERS" if abs(kit - published[part]) > TOLERANCE else ""})
    return pd.DataFrame(out, columns=["row", "metric", "part", "published", "kit", "difference", "flag"])


def ranking_agreement(run, reference) -> tuple[int, int]:
    """(queries ranked exactly as the reference, queries compared): each run ranked as the kit
    ranks it (an official file in the order written, `csfcube_official.read_official`), the run's
    ranking restricted to the documents the reference ranks."""
    shared = sorted(set(run) & set(reference))
    return sum([d for d in ranked(run[q]) if d in reference[q]] == ranked(reference[q]) for q in shared), len(shared)


def kit_rows(record: pd.DataFrame) -> pd.DataFrame:
    """The record's rows a kit model reproduces, one per (row, model, profile, protocol)."""
    return record[record["kit_model"] != ""].drop_duplicates(["row", "kit_model", "profile", "protocol"])


def check_models(record: pd.DataFrame, models: tuple[str, ...] | None) -> None:
    """Refuse a model that reproduces no row of the record (`evalkit verify --models`)."""
    rows = kit_rows(record)
    unknown = sorted(set(models or ()) - set(rows["kit_model"]))
    if unknown:
        raise RequestError("model", f"model {unknown[0]} has no row in the published record; choose among "
                                    f"{', '.join(dict.fromkeys(rows['kit_model']))}")


def verify(record: pd.DataFrame, collection: Collection, runs_dir: Path,
           models: tuple[str, ...] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(kit against published, one row per figure; notes) for the release's SPECTER sample and each
    record row of `models` (default: all), its run stored in `runs_dir` (reused, else made; a row
    whose model cannot run is a note, not an error)."""
    sample = csfcube_official.load_official_run(csfcube.locate() / "sample_ranked_pools", "specter")
    tables = [compare(record, "SPECTER", official_figures(collection, sample), RELEASE_SAMPLE)]
    notes = []
    for _, entry in kit_rows(record).iterrows():
        if models is not None and entry["kit_model"] not in models:
            continue
        settings = RunSettings(model=entry["kit_model"], dataset=csfcube.SCHEME.name, profile=entry["profile"],
                               protocol=entry["protocol"])
        try:
            run = obtain(bind(settings, collection, runs_dir)).run
        except KitError as exc:
            notes.append(f"{entry['row']}: not run ({' '.join(str(exc).split())})")
            continue
        compared = compare(record, entry["row"], official_figures(protocol_collection(collection, entry["protocol"]),
                                                                  run))
        tables.append(compared)
        if entry["kit_model"] == "specter":
            same, total = ranking_agreement(run, sample)
            notes.append(f"{entry['row']}: {same}/{total} queries ranked exactly as the release's sample_ranked_pools")
        if compared["flag"].any():
            notes.append(f"{entry['row']}: more than {TOLERANCE} points from the record; compare the run's "
                         f"sidecar.json (model_settings, protocol {entry['protocol']}) with the source: "
                         f"{entry['source']}")
    return pd.concat(tables, ignore_index=True), notes
