"""The facet-hybrid experiment (beyond the paper), step by step as `hybrid.ipynb` shows it: for an
embedding model, the two similarity terms once per (query, candidate) (`load_terms`), the per-query
values of a * sim(whole seed) + (1 - a) * sim(seed's facet sentences) over the grid of a
(`evalkit.study.hybrid_curve.curve`, shown long by `curve_values`), the weight chosen on each
official fold's dev half and reported on its test half (`choose_weights`: the kit's one dev/test
selector, `evalkit.evaluation.selection.cross_validate`, with `hybrid_curve.alpha_chooser`), the
paired t-tests (`paired_tests`: hybrid vs whole abstract on the relevance measure, hybrid vs Aspect
subset on p-MRR) and the table with bootstrap intervals (`hybrid_table`). Values x100.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Collection
from evalkit.data.runs import Run
from evalkit.evaluation.evaluate import PMRR, summarize
from evalkit.evaluation.selection import cross_validate
from evalkit.evaluation.stats import interval_or_nan, paired_test
from evalkit.models.dense import BiEncoder
from evalkit.pipeline.runner import bind, prepare
from evalkit.study import hybrid_curve, printed, rows
from evalkit.study.params import BOOTSTRAP_SEED, Study
from evalkit.study.steps import labelled

CV_SETTING = "hybrid (a chosen on dev, per fold)"
AIM_PMRR_GAIN = 8.0  # x100 p-MRR over the whole abstract, with no loss of the relevance measure
Curves = dict[str, dict[float, pd.DataFrame]]  # model -> weight -> per-query table (index qid)
Chosen = dict[str, tuple[pd.DataFrame, dict[str, float]]]  # model -> (test-half values, fold -> weight)


@dataclass(frozen=True)
class HybridTerms:
    """Each study model's two terms (model -> (whole-abstract run, facet-sentences run)) for the models
    that ran, and a status table (model, label, status: "ran" or "not run: <reason>")."""

    terms: dict[str, tuple[Run, Run]]
    status: pd.DataFrame

    def _repr_html_(self) -> str:
        return printed.show(self.status, split=False)._repr_html_()

    def __repr__(self) -> str:
        return self.status.to_string(index=False)


def load_terms(study: Study, collection: Collection, candidate_facet: bool = False) -> HybridTerms:
    """Both terms of the facet hybrid for each study model over its candidates (`hybrid_curve.components`);
    a model that cannot run, or is no embedding model, is a "not run: <reason>" status row."""
    terms, status = {}, []
    for model in study.models:
        found = rows.attempt(study, collection, model, lambda m=model: _terms(study, collection, m, candidate_facet))
        if not isinstance(found, str):
            terms[model] = found
        status.append({"model": model, "label": labelled(study, model)["label"],
                       rows.STATUS: found if isinstance(found, str) else rows.RAN})
    return HybridTerms(terms, pd.DataFrame(status, columns=["model", "label", rows.STATUS]))


def _terms(study: Study, collection: Collection, model: str, candidate_facet: bool) -> tuple[Run, Run]:
    scorer, candidates, _ = prepare(bind(study.settings(model, collection), collection, study.runs_dir))
    if not isinstance(scorer, BiEncoder):
        raise RequestError("model", f"the facet hybrid needs an embedding model (family dense, no hybrid_alpha); "
                           f"{model} is not one")
    return hybrid_curve.components(hybrid_curve.FacetHybrid(scorer, 1.0, candidate_facet), collection, candidates)


def curve_values(curves: Curves) -> pd.DataFrame:
    """The per-query values of every model and weight as one long frame (model, a, qid, facet, fold,
    measures; fractions)."""
    frames = [table.reset_index().rename(columns={"index": "qid", "stratum": "facet"}).assign(model=model, a=a)
              for model, by_weight in curves.items() for a, table in by_weight.items()]
    if not frames:
        return pd.DataFrame(columns=["model", "a", "qid"])
    out = pd.concat(frames, ignore_index=True)
    return out[["model", "a", *[c for c in out.columns if c not in ("model", "a")]]]


def choose_weights(curves: Curves, collection: Collection, measure: str) -> Chosen:
    """Per model, the weight chosen on each fold's dev half (`hybrid_curve.alpha_chooser`) and the
    per-query values of its test half (`evalkit.evaluation.selection.cross_validate`)."""
    return {model: cross_validate(tables, collection.folds, hybrid_curve.alpha_chooser(measure))
            for model, tables in curves.items()}


def weights(chosen: Chosen) -> pd.DataFrame:
    """The chosen weights: one row per (model, fold)."""
    return pd.DataFrame([(m, fold, a) for m, (_, by_fold) in chosen.items() for fold, a in by_fold.items()],
                        columns=["model", "fold", "a"])


def paired_tests(curves: Curves, chosen: Chosen, measure: str) -> pd.DataFrame:
    """Per model, paired two-sided t-tests (`evalkit.evaluation.stats.paired_test`, the test `compare`
    runs) of the cross-validated hybrid: `measure` against the whole abstract (a = 1), p-MRR against
    the Aspect subset (a = 0). Two hypotheses per model, reported unadjusted."""
    return pd.DataFrame([(m, paired_test(table[measure], curves[m][1.0][measure]).pvalue,
                          paired_test(table[PMRR], curves[m][0.0][PMRR]).pvalue) for m, (table, _) in chosen.items()],
                        columns=["model", "p_vs_whole", "p_pmrr_vs_aspect_subset"])


def hybrid_table(terms: HybridTerms, collection: Collection, curves: Curves, chosen: Chosen,
                 tests: pd.DataFrame, measure: str) -> pd.DataFrame:
    """For each study model: the cross-validated row first (chosen weights, tests), then one row per
    weight of the grid, each with its aggregate and bootstrap interval x100; a model that did not run
    is one "not run: <reason>" row."""
    parts = []
    for model, label, status in terms.status.itertuples(index=False):
        if model not in curves:
            parts.append(pd.DataFrame([{"model": model, "label": label, "setting": CV_SETTING, measure: math.nan,
                                        PMRR: math.nan, rows.STATUS: status}]))
            continue
        table, by_fold = chosen[model]
        cv = _row(collection, model, label, CV_SETTING, table, measure)
        cv["chosen_a"] = ", ".join(f"{fold}: {a:.1f}" for fold, a in by_fold.items())
        cv |= tests.set_index("model").loc[model].to_dict()
        grid = [_row(collection, model, label, f"a={a:.1f}", t, measure) for a, t in curves[model].items()]
        parts.append(pd.DataFrame([cv] + grid).assign(**{rows.STATUS: rows.RAN}))
    return pd.concat(parts, ignore_index=True)


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
