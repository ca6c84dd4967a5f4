"""The study's tables, each assembled from the steps of `evalkit.study.steps` (the runs loaded once,
their per-query values, the aggregate, the paired tests, the intervals): relevance (Table 1),
instruction following (Table 2), instruction sensitivity (Table 3), the release's official
measures and the runs x measures comparison, with the paper's published rows.

Values are x100, as in the paper. Facet columns: background, method, result and all
(ranking measures: the official fold mean of the test halves; p-MRR: the mean of the
facet means).

Significance marks follow Table 1's convention: a facet (or ``all``) is marked when a paired
t-test against the reference model over that facet's queries finds no significant difference
(p >= 0.05); `not_significant` lists the marked columns (";"-separated, "reference" for the
reference itself), on the kit's rows and the paper's alike (`evalkit/config/published_mysore.csv`).
The tests are `steps.paired_tests` (`evalkit.evaluation.compare.compare`, the one computation of every
front end), Holm-adjusted over the family the notebook names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from evalkit.core.errors import NOTEBOOK, RequestError
from evalkit.data.protocols import POOL_PROTOCOLS, protocol_collection
from evalkit.data.runs import write_atomic
from evalkit.datasets.csfcube_variants import variants_of
from evalkit.evaluation.aggregate import ALL
from evalkit.evaluation.compare_table import ComparisonTable, compare_table
from evalkit.evaluation.evaluate import PMRR, default_measures, per_query, shown_once, summarize
from evalkit.evaluation.stats import ALPHA
from evalkit.pipeline.runner import instructions_identity
from evalkit.study import rows as study_rows
from evalkit.study import steps
from evalkit.study.params import Study
from evalkit.study.published import COLUMNS, REFERENCE, load_published
from evalkit.study.record import MEASURES, PARTS, load_record, official_figures

MARK = "\u00d7"  # Table 1's mark: no significant difference from the reference
UNTESTED = "no test (under 5 paired queries, or no variance)"
# Table 3's variant names -> the kit's sensitivity groups
PAPER_VARIANTS = {"Base": "Base", "Generic": "Generic", "Definition": "Definition",
                  "Paraphrases": "Paraphrases (mean of 3)", "Aspect subset": "Aspect subset"}
SENSITIVITY_GROUPS = {
    "Base": ["base"],
    "Generic": ["generic"],
    "Definition": ["definition"],
    "Paraphrases (mean of 3)": ["paraphrase-1", "paraphrase-2", "paraphrase-3"],
    "Aspect subset": ["aspect-subset"],
}
GROUP_LABELS = {"base": "Base", "generic": "Generic", "definition": "Definition", "aspect-subset": "Aspect subset"}


def kit_variant(label: str) -> str:
    """The kit's variant name of a sensitivity row's label: the study's group label ("Base") or, under
    a user's instruction file, the variant's own name ("base") -> "base"; any other name as it is."""
    return {shown: name for name, shown in GROUP_LABELS.items()}.get(label, label)


def _not_run(study: Study, model: str, reason: str, **values) -> dict:
    return {**steps.labelled(study, model), **values, **{c: math.nan for c in COLUMNS}, study_rows.STATUS: reason}


def _facets(aggregated: pd.DataFrame, label: str, measure: str) -> dict[str, float]:
    row = aggregated[(aggregated.label == label) & (aggregated.measure == measure)]
    return {c: float(row[c].iloc[0]) if len(row) else math.nan for c in COLUMNS}


def _interval(found: pd.DataFrame, label: str, facet: str = ALL) -> dict[str, float]:
    row = found[(found.label == label) & (found.facet == facet)]
    return {"ci_low": float(row.ci_low.iloc[0]), "ci_high": float(row.ci_high.iloc[0])}


def _human_rows(values: pd.DataFrame) -> pd.DataFrame:
    return values[values.model == steps.HUMAN].drop_duplicates("label")[["label", "recipe"]]


def relevance_table(study: Study, runs: steps.StudyRuns, values: pd.DataFrame, aggregated: pd.DataFrame,
                    found: pd.DataFrame, tests: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Table 1: per study model the relevance measure x100 per facet and aggregated (`aggregated`),
    the bootstrap interval over all queries (`found`, from `intervals`), the test against the
    reference (`tests`, from `paired_tests`): ``p_vs_reference``, ``p_holm`` (over the family the
    tests name), ``same_as_reference`` ("reference"; "yes" when p >= 0.05, the paper's mark; "no";
    `UNTESTED` without a p-value), ``not_significant`` (the marked facets); then the Human rows and
    the paper's published rows (`steps.published`, `paper`)."""
    measure, reference = study.measure, study.reference
    ran = set(runs.runs)
    out = []
    for model in study.models:
        if model not in ran:
            out.append(_not_run(study, model, runs.reasons[model], measure=measure))
            continue
        keys = steps.labelled(study, model)
        p = math.nan if model == reference else steps.test_p(tests, model, measure)
        compared = "reference" if model == reference else f"reference {reference} not run" \
            if reference not in ran else UNTESTED if math.isnan(p) else "yes" if p >= ALPHA else "no"
        out.append({**keys, "measure": measure, **_facets(aggregated, keys["label"], measure),
                    **_interval(found, keys["label"]), "p_vs_reference": p,
                    "p_holm": math.nan if model == reference else steps.test_p(tests, model, measure, column="p_holm"),
                    "same_as_reference": compared,
                    "not_significant": REFERENCE if model == reference else "" if reference not in ran
                    else steps.not_significant(tests, model, measure), study_rows.STATUS: study_rows.RAN})
    for row in _human_rows(values).itertuples():
        out.append({"model": steps.HUMAN, "label": row.label, "role": "reference", "source": "kit", "measure": measure,
                    "recipe": row.recipe, **_facets(aggregated, row.label, measure), **_interval(found, row.label),
                    study_rows.STATUS: study_rows.RAN})
    return pd.DataFrame(out + paper.to_dict("records"))


def instruction_following_table(study: Study, runs: steps.StudyRuns, values: pd.DataFrame, aggregated: pd.DataFrame,
                                movement: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Table 2: per study model p-MRR x100 per facet and aggregated (mean of the facet means), how
    much its ranking moves between a seed's two instructions (`movement`), then the Human rows and
    the paper's published rows (`steps.published`, `paper`)."""
    out = []
    moved = movement.set_index("model")
    for model in study.models:
        if model not in runs.runs:
            out.append(_not_run(study, model, runs.reasons[model], kendall_tau=math.nan, kendall_undefined=math.nan))
            continue
        keys = steps.labelled(study, model)
        out.append({**keys, **_facets(aggregated, keys["label"], PMRR),
                    "kendall_tau": moved.loc[model, "kendall_tau"],
                    "kendall_undefined": int(moved.loc[model, "kendall_undefined"]), study_rows.STATUS: study_rows.RAN})
    for row in _human_rows(values).itertuples():
        out.append({"model": steps.HUMAN, "label": row.label, "role": "reference", "source": "kit",
                    "recipe": row.recipe,
                    **_facets(aggregated, row.label, PMRR), "kendall_tau": math.nan, "kendall_undefined": math.nan,
                    study_rows.STATUS: study_rows.RAN})
    return pd.DataFrame(out + paper.to_dict("records"))


def with_marks(table: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """The facet columns as printed in Table 1: the value, then the mark where `not_significant`
    lists the column."""
    shown = table.copy()
    marks = shown.get("not_significant", pd.Series("", index=shown.index)).fillna("").astype(str)
    for column in COLUMNS:
        shown[column] = [("" if pd.isna(v) else f"{v:.{digits}f}") + (MARK if column in m.split(";") else "")
                         for v, m in zip(shown[column], marks)]
    return shown


def official_table(study: Study, runs: steps.StudyRuns) -> pd.DataFrame:
    """The release's official measures (`MAP_csfcube`, `nDCG_csfcube%20`: x100, the mean of the two
    test-fold means) of every study model that ran, on a pool protocol, then the published CSFCube
    record (`evalkit.study.record`) beside them. The record's rows were reported on the pools as released
    (the ``released`` protocol; the release's SPECTER sample, without the seed, under ``pool``):
    each row names its protocol."""
    if study.protocol not in POOL_PROTOCOLS:
        raise RequestError("official", f"the official measures are defined on the judged pools; it needs {{protocol}} "
                           f"{' or '.join(POOL_PROTOCOLS)}, not {study.protocol}", value="yes", front_end=NOTEBOOK)
    made, reasons = runs.runs, runs.reasons
    judged = protocol_collection(runs.collection, study.protocol)
    out = []
    for model in study.models:
        if model in reasons:
            out += [_not_run(study, model, reasons[model], measure=m, protocol=study.protocol) for m in MEASURES]
            continue
        for metric, parts in official_figures(judged, made[model]).items():
            out.append({**steps.labelled(study, model), "measure": metric, "protocol": study.protocol, **parts,
                        study_rows.STATUS: study_rows.RAN})
    for row in load_record().itertuples():
        out.append({"model": row.kit_model, "label": f"{row.row} (published)", "role": "published",
                    "source": row.source, "measure": row.metric, "protocol": row.protocol,
                    **{part: getattr(row, part) for part in PARTS}, "note": row.note})
    return pd.DataFrame(out)


RECORD_TITLE = ("The published CSFCube record (the CSFCube and Aspire papers, model cards; evalkit/config/"
                "published_csfcube.csv): on the judged pools, each row's protocol stated")


def comparison_table(study: Study, runs: steps.StudyRuns, measures: Sequence[str] | None = None) -> ComparisonTable:
    """The study models' runs x measures table (`evalkit.evaluation.compare_table`: x100, marks for the runs
    each is significantly better than, paired t-test, Holm), saved as ``comparison-TAG`` .md
    and .tex beside the other tables; the reference model first."""
    made, collection = runs.runs, runs.collection
    order = sorted(made, key=lambda m: m != study.reference)
    names = list(measures or default_measures(collection))
    if measures is None and study.measure and study.measure not in names:
        names[0] = study.measure  # the study's relevance measure (its DISCOUNT) first
    tables = {steps.labelled(study, m)["label"]: per_query(collection, made[m], names) for m in order}
    if measures is None:
        names = shown_once(names, tables.values())[0]
    table = compare_table(collection, tables, names)
    folder = Path(study.tables_dir)
    write_atomic(folder / f"{study.name('comparison')}.md", table.markdown())
    write_atomic(folder / f"{study.name('comparison')}.tex", table.latex())
    return table


def sensitivity_groups(instructions: str | None = None) -> dict[str, list[str]]:
    """Variant groups of the sensitivity table: the study's (`SENSITIVITY_GROUPS`) for the kit's
    instructions; for a user's file, one group per variant (the study's names where they are the
    study's variants) and its paraphrases together, in file order."""
    if instructions is None:
        return SENSITIVITY_GROUPS

    variants = variants_of(Path(instructions))
    paraphrases = [v for v in variants if v.startswith("paraphrase-")]
    groups: dict[str, list[str]] = {}
    for variant in variants:  # named as in the file, all alike (not "Base" beside a raw "terse")
        if variant in paraphrases:
            groups.setdefault(f"paraphrases (mean of {len(paraphrases)})", paraphrases)
        else:
            groups[variant] = [variant]
    return groups


def sensitivity_table(study: Study, runs: dict[str, steps.StudyRuns], values: pd.DataFrame,
                      groups: dict[str, list[str]]) -> pd.DataFrame:
    """The relevance measure and p-MRR x100 (aggregated) per model and instruction-variant group
    (`sensitivity_groups`; a group of several variants: the mean of their aggregates), each with a
    bootstrap 95% interval of the per-query mean (a group's per-query value: the mean over its
    variants), as the relevance table's (`ci_low`, `ci_high`; `pmrr_ci_low`, `pmrr_ci_high`); `runs`:
    variant -> `steps.load_runs`, `values`: their `steps.per_query` rows. With a user's instruction
    file (`study.instructions`), columns naming the file and its sha256."""
    measure = study.measure
    reasons = {model: reason for loaded in runs.values() for model, reason in loaded.reasons.items()}
    collection = next(iter(runs.values())).collection
    tables = {(model, variant): group.set_index("qid").rename(columns={"facet": "stratum"})
              for (model, variant), group in values.groupby(["model", "variant"], sort=False)}
    named = {}
    if study.instructions is not None:
        found = instructions_identity(study.instructions)
        named = {"instructions": found["file"], "instructions_sha256": found["sha256"]}
    out = []
    for model in study.models:
        for group, variants in groups.items():
            if model in reasons:
                out.append({**steps.labelled(study, model), "variant": group, measure: math.nan, PMRR: math.nan,
                            study_rows.STATUS: reasons[model], **named})
                continue
            chosen = [summarize(collection, tables[model, v]) for v in variants]
            both = sum(tables[model, v][[measure, PMRR]] for v in variants) / len(variants)
            low, high = steps.interval(both[measure])
            pmrr_low, pmrr_high = steps.interval(both[PMRR])
            out.append({**steps.labelled(study, model), "variant": group,
                        measure: 100 * float(np.mean([s[measure]["all"] for s in chosen])),
                        "ci_low": low, "ci_high": high,
                        PMRR: 100 * float(np.mean([s[PMRR]["all"] for s in chosen])),
                        "pmrr_ci_low": pmrr_low, "pmrr_ci_high": pmrr_high, **named,
                        study_rows.STATUS: study_rows.RAN})
    return pd.DataFrame(out).drop(columns="source")


def published_sensitivity() -> pd.DataFrame:
    """Table 3 (GritLM-7B under each instruction variant), one row per variant: NDCG@20 and p-MRR
    per facet and aggregated, x100 as printed; variants named as the kit's sensitivity groups."""
    table = load_published()
    table = table[table.table == "Table 3"]
    wide = {}
    for r in table.itertuples():
        group = PAPER_VARIANTS[r.variant]
        row = wide.setdefault(group, {"model": r.model, "label": f"{r.model} (paper)", "variant": group,
                                      "source": r.source})
        name = "NDCG@20" if r.metric == "ndcg@20" else PMRR
        row.update({(name if c == "all" else f"{name} {c}"): float(getattr(r, c)) for c in COLUMNS})
    return pd.DataFrame(list(wide.values()))


def sensitivity_beside_paper(sensitivity: pd.DataFrame, measure: str) -> pd.DataFrame:
    """The kit's sensitivity table (`sensitivity_table`) beside Table 3: one row per variant group,
    each kit model's aggregated measure and p-MRR, then the paper's GritLM-7B (aggregated), x100."""
    paper = published_sensitivity().set_index("variant")
    kit_groups = list(dict.fromkeys(sensitivity["variant"]))
    own = set(kit_groups) <= set(SENSITIVITY_GROUPS)  # the kit's instructions: Table 3's groups, all of them
    groups = list(dict.fromkeys([*kit_groups, *SENSITIVITY_GROUPS])) if own else kit_groups
    out = pd.DataFrame(index=pd.Index(groups, name="variant"))
    for label, rows in sensitivity.groupby("label", sort=False):
        rows = rows.set_index("variant")
        out[f"{label} {measure}"] = rows[measure]
        out[f"{label} {PMRR}"] = rows[PMRR]
    as_paper = {g: g if own else GROUP_LABELS.get(g) for g in groups}  # a user's "base" is Table 3's Base
    for label, rows in paper.groupby("label", sort=False):
        out[f"{label} NDCG@20"] = [rows["NDCG@20"].get(as_paper[g], math.nan) for g in groups]
        out[f"{label} {PMRR}"] = [rows[PMRR].get(as_paper[g], math.nan) for g in groups]
    return out.reset_index()
