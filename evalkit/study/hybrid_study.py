"""The facet-hybrid experiment (beyond the paper): for an embedding model, the curve of
a * sim(whole seed) + (1 - a) * sim(seed's facet sentences) over the grid of a, and the
weight chosen on each official fold's dev half reported on its test half (the kit's one
dev/test selector, `evalkit.evaluation.selection.cross_validate`, with `hybrid.alpha_chooser`), with
paired t-tests (hybrid vs whole abstract on the relevance measure, hybrid vs Aspect subset
on p-MRR) and bootstrap intervals. Values x100.
"""

from __future__ import annotations

import math

import pandas as pd

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Collection
from evalkit.evaluation.evaluate import PMRR, summarize
from evalkit.evaluation.selection import cross_validate
from evalkit.evaluation.stats import interval_or_nan, paired_test
from evalkit.models import registry
from evalkit.models.dense import BiEncoder
from evalkit.pipeline.runner import bind, prepare
from evalkit.study import hybrid_curve as hybrid
from evalkit.study import rows
from evalkit.study.params import BOOTSTRAP_SEED, Study

CV_SETTING = "hybrid (a chosen on dev, per fold)"
AIM_PMRR_GAIN = 8.0  # x100 p-MRR over the whole abstract, with no loss of the relevance measure


def hybrid_table(study: Study, collection: Collection, candidate_facet: bool = False) -> pd.DataFrame:
    """For each study model: the cross-validated row first, then one row per weight of the grid; a
    model that cannot run is one "not run: <reason>" row (`evalkit.study.rows`)."""
    parts = []
    for model in study.models:
        found = rows.attempt(study, collection, model,
                             lambda m=model: _model_rows(study, collection, m, candidate_facet))
        parts.append(pd.DataFrame([{"model": model, "label": registry.spec(model, study.profile).label,
                                    "setting": CV_SETTING, study.measure: math.nan, PMRR: math.nan,
                                    rows.STATUS: found}]) if isinstance(found, str) else found)
    return pd.concat(parts, ignore_index=True)


def _model_rows(study: Study, collection: Collection, model: str, candidate_facet: bool) -> pd.DataFrame:
    measure = study.measure
    scorer, candidates, _ = prepare(bind(study.settings(model, collection), collection, study.runs_dir))
    if not isinstance(scorer, BiEncoder):
        raise RequestError("model", f"the facet hybrid needs an embedding model (family dense, no hybrid_alpha); "
                           f"{model} is not one")
    whole, facet = hybrid.components(hybrid.FacetHybrid(scorer, 1.0, candidate_facet), collection, candidates)
    tables = hybrid.curve(collection, whole, facet, measure)
    chosen_table, chosen = cross_validate(tables, collection.folds, hybrid.alpha_chooser(measure))
    label = registry.spec(model, study.profile).label
    cv = _row(collection, model, label, CV_SETTING, chosen_table, measure)
    cv["chosen_a"] = ", ".join(f"{fold}: {a:.1f}" for fold, a in chosen.items())
    cv["p_vs_whole"] = paired_test(chosen_table[measure], tables[1.0][measure]).pvalue
    cv["p_pmrr_vs_aspect_subset"] = paired_test(chosen_table[PMRR], tables[0.0][PMRR]).pvalue
    grid = [_row(collection, model, label, f"a={a:.1f}", t, measure) for a, t in tables.items()]
    return pd.DataFrame([cv] + grid).assign(**{rows.STATUS: rows.RAN})


def _row(collection: Collection, model: str, label: str, setting: str, table: pd.DataFrame, measure: str) -> dict:
    summary = summarize(collection, table)
    low, high = interval_or_nan(table[measure], seed=BOOTSTRAP_SEED)
    pmrr_low, pmrr_high = interval_or_nan(table[PMRR], seed=BOOTSTRAP_SEED)
    return {"model": model, "label": label, "setting": setting, measure: 100 * summary[measure]["all"],
            "ci": f"[{100 * low:.2f}, {100 * high:.2f}]", PMRR: 100 * summary[PMRR]["all"],
            "pmrr_ci": f"[{100 * pmrr_low:.2f}, {100 * pmrr_high:.2f}]"}


def verdicts(table: pd.DataFrame) -> list[str]:
    """One sentence per model: does the cross-validated hybrid get relevance and instruction following?"""
    measure = measure_of(table)
    lines = []
    for _, found in table.groupby("model", sort=False):
        cv = found[found.setting == CV_SETTING].iloc[0]
        if str(cv.get(rows.STATUS, "")).startswith(rows.NOT_RUN):
            lines.append(f"{cv.label}: {cv[rows.STATUS]}.")
            continue
        whole = found[found.setting == "a=1.0"].iloc[0]
        subset = found[found.setting == "a=0.0"].iloc[0]
        met = cv[measure] >= whole[measure] and cv[PMRR] - whole[PMRR] >= AIM_PMRR_GAIN
        lines.append(
            f"{cv.label}: cross-validated facet hybrid ({cv.chosen_a}): {measure} {cv[measure]:.2f} vs whole "
            f"abstract {whole[measure]:.2f} ({cv[measure] - whole[measure]:+.2f}, paired t-test p = "
            f"{cv.p_vs_whole:.3f}); p-MRR {cv[PMRR]:+.2f} vs Aspect subset {subset[PMRR]:+.2f} "
            f"(p = {cv.p_pmrr_vs_aspect_subset:.3f}) and whole abstract {whole[PMRR]:+.2f}. Aim (no {measure} "
            f"loss and at least +{AIM_PMRR_GAIN:.0f} p-MRR over the whole abstract): {'met' if met else 'not met'}.")
    return lines


def measure_of(table: pd.DataFrame) -> str:
    """The relevance measure column of a hybrid or sensitivity table."""
    found = [c for c in table.columns if c.startswith("nDCG")]
    if len(found) != 1:
        raise DataError("table", f"table has relevance columns {found}; rebuild it with one DISCOUNT")
    return found[0]
