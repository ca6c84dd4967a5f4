"""The study's three tables, each computed from runs of `evalkit.pipeline.runner` (made on demand,
reused when a verified stored run matches): relevance (Table 1), instruction following
(Table 2) and instruction sensitivity (Table 3), with the paper's published rows.

Values are x100, as in the paper. Facet columns: background, method, result and all
(ranking measures: the official fold mean of the test halves; p-MRR: the mean of the
facet means).

Significance marks follow Table 1's convention: a facet (or ``all``) is marked when a paired
t-test against the reference model over that facet's queries finds no significant difference
(p >= 0.05); `not_significant` lists the marked columns (";"-separated, "reference" for the
reference itself), on the kit's rows and the paper's alike (`evalkit/config/published_mysore.csv`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as scistats

from evalkit.core.errors import NOTEBOOK, RequestError
from evalkit.data.collection import Collection
from evalkit.data.protocols import POOL_PROTOCOLS, protocol_collection
from evalkit.data.runs import Run, write_atomic
from evalkit.datasets.csfcube import CSFCube, annotators
from evalkit.datasets.csfcube_variants import variants_of
from evalkit.evaluation.compare_table import compare_table
from evalkit.evaluation.evaluate import PMRR, default_measures, per_query, shown_once, summarize
from evalkit.evaluation.stats import holm, interval_or_nan, pvalue_or_nan
from evalkit.models import registry
from evalkit.pipeline.runner import instructions_identity
from evalkit.study import printed
from evalkit.study import rows as study_rows
from evalkit.study.human import POOL_LABEL, human_per_query, protocol_label
from evalkit.study.params import BOOTSTRAP_SEED, Study
from evalkit.study.published import (  # noqa: F401  (tables.COLUMNS, tables.load_published: the notebooks' names)
    COLUMNS,
    PUBLISHED,
    PUBLISHED_COLUMNS,
    PUBLISHED_METRICS,
    PUBLISHED_TABLES,
    REFERENCE,
    load_published,
    published_rows,
)
from evalkit.study.record import MEASURES, PARTS, load_record, official_figures

ALPHA = 0.05
MARK = "\u00d7"  # Table 1's mark: no significant difference from the reference
HUMAN_LABEL = POOL_LABEL
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


def runs(study: Study, collection: Collection, variant: str = "base") -> dict[str, Run]:
    """The study models' runs of one instruction variant, by model name: those that ran
    (`evalkit.study.rows`; the others are "not run" rows of the tables)."""
    return study_rows.outcomes(study, collection, variant)[0]


def _not_run_row(study: Study, model: str, reason: str, **values) -> dict:
    return {**_label(study.profile, model), **values, **{c: math.nan for c in COLUMNS}, study_rows.STATUS: reason}


def human_table(study: Study, data: CSFCube, collection: Collection, measures: list[str],
                recipe: str = "pool") -> pd.DataFrame:
    """Per-query values of the Human reference (`evalkit.study.human`, `recipe` pool or protocol: the
    study's protocol list), restricted to the study's queries."""
    chosen = study.queries(collection)
    aware = recipe == "protocol"
    table = human_per_query(annotators(data), measures, collection, recipe=recipe,
                            protocol=study.protocol if aware else "pool",
                            profile=study.profile, corpus=study.corpus, queries=chosen if aware else None)
    return table if chosen is None else table.loc[table.index.isin(chosen)]


def human_recipes(study: Study) -> dict[str, str]:
    """The Human rows a table shows, recipe -> label: the pool recipe, and on the pooled and full
    protocols also the protocol-aware one (on pool the two are the same ranking)."""
    recipes = {"pool": HUMAN_LABEL}
    if study.protocol != "pool":
        recipes["protocol"] = protocol_label(study.protocol)
    return recipes


UNTESTED = "no test (under 5 paired queries, or no variance)"


def not_significant(table: pd.DataFrame, reference: pd.DataFrame, measure: str, alpha: float = ALPHA) -> str:
    """The columns (facets, then ``all``) where a paired t-test of `table` against `reference`
    over that column's queries finds no significant difference (p >= alpha), ";"-separated."""
    marked = []
    for column in COLUMNS:
        rows = table.index if column == "all" else table.index[table["stratum"] == column]
        if pvalue_or_nan(table.loc[rows, measure], reference[measure]) >= alpha:  # NaN: never marked
            marked.append(column)
    return ";".join(marked)


def with_marks(table: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """The facet columns as printed in Table 1: the value, then the mark where `not_significant`
    lists the column."""
    shown = table.copy()
    marks = shown.get("not_significant", pd.Series("", index=shown.index)).fillna("").astype(str)
    for column in COLUMNS:
        shown[column] = [("" if pd.isna(v) else f"{v:.{digits}f}") + (MARK if column in m.split(";") else "")
                         for v, m in zip(shown[column], marks)]
    return shown


def _label(profile: str, model: str) -> dict[str, str]:
    spec = registry.spec(model, profile)
    return {"model": model, "label": spec.label, "role": spec.role, "source": "kit"}


def _scaled(summary: dict[str, float]) -> dict[str, float]:
    return {c: 100 * summary.get(c, math.nan) for c in COLUMNS}  # a smoke run may lack a facet


def _interval(values: pd.Series) -> dict[str, float]:
    low, high = interval_or_nan(values, seed=BOOTSTRAP_SEED)
    return {"ci_low": 100 * low, "ci_high": 100 * high}


def relevance_table(study: Study, collection: Collection, data: CSFCube) -> pd.DataFrame:
    """The relevance measure x100 per facet and aggregated, a bootstrap 95% interval of the
    per-query mean, and the paired t-test against the reference model over the aggregate's
    queries (raw p and Holm-adjusted over the models). `same_as_reference` is "reference"
    for the reference itself, "yes" when p >= 0.05 (no significant difference, the paper's
    mark), `UNTESTED` when there is no p-value (fewer than 5 paired queries, no variance:
    `evalkit.evaluation.stats.paired_test`), else "no". Then Human and the paper's published rows."""
    measure = study.measure
    made, reasons = study_rows.outcomes(study, collection)
    tables = {m: per_query(collection, run, [measure]) for m, run in made.items()}
    reference = tables[study.reference][measure] if study.reference in tables else None
    pvalues = {m: pvalue_or_nan(t[measure], reference) for m, t in tables.items()
               if m != study.reference and reference is not None}
    adjusted = holm(pvalues) if pvalues else {}
    out = []
    for model in study.models:
        if model in reasons:
            out.append(_not_run_row(study, model, reasons[model], measure=measure))
            continue
        table, p = tables[model], pvalues.get(model, math.nan)
        compared = "reference" if model == study.reference else f"reference {study.reference} not run" \
            if reference is None else UNTESTED if math.isnan(p) else "yes" if p >= ALPHA else "no"
        out.append({**_label(study.profile, model), "measure": measure,
                    **_scaled(summarize(collection, table)[measure]), **_interval(table[measure]),
                    "p_vs_reference": p, "p_holm": adjusted.get(model, math.nan), "same_as_reference": compared,
                    "not_significant": REFERENCE if model == study.reference else "" if reference is None
                    else not_significant(table, tables[study.reference], measure), study_rows.STATUS: study_rows.RAN})
    for recipe, label in human_recipes(study).items():
        human = human_table(study, data, collection, [measure], recipe)
        out.append({"model": "human", "label": label, "role": "reference", "source": "kit", "measure": measure,
                    "recipe": recipe, **_scaled(summarize(collection, human)[measure]),
                    **_interval(human[measure]), study_rows.STATUS: study_rows.RAN})
    return pd.DataFrame(out + published_rows("relevance"))


def official_table(study: Study, collection: Collection) -> pd.DataFrame:
    """The release's official measures (`MAP_csfcube`, `nDCG_csfcube%20`: x100, the mean of the two
    test-fold means) of every study model that ran, on a pool protocol, then the published CSFCube
    record (`evalkit.study.record`) beside them. The record's rows were reported on the pools as released
    (the ``released`` protocol; the release's SPECTER sample, without the seed, under ``pool``):
    each row names its protocol."""
    if study.protocol not in POOL_PROTOCOLS:
        raise RequestError("official", f"the official measures are defined on the judged pools; it needs {{protocol}} "
                           f"{' or '.join(POOL_PROTOCOLS)}, not {study.protocol}", value="yes", front_end=NOTEBOOK)
    made, reasons = study_rows.outcomes(study, collection)
    judged = protocol_collection(collection, study.protocol)
    out = []
    for model in study.models:
        if model in reasons:
            out += [_not_run_row(study, model, reasons[model], measure=m, protocol=study.protocol) for m in MEASURES]
            continue
        for metric, parts in official_figures(judged, made[model]).items():
            out.append({**_label(study.profile, model), "measure": metric, "protocol": study.protocol, **parts,
                        study_rows.STATUS: study_rows.RAN})
    for row in load_record().itertuples():
        out.append({"model": row.kit_model, "label": f"{row.row} (published)", "role": "published",
                    "source": row.source, "measure": row.metric, "protocol": row.protocol,
                    **{part: getattr(row, part) for part in PARTS}, "note": row.note})
    return pd.DataFrame(out)


RECORD_TITLE = ("The published CSFCube record (the CSFCube and Aspire papers, model cards; evalkit/config/"
                "published_csfcube.csv): on the judged pools, each row's protocol stated")


def official_section(study: Study, collection: Collection):
    """The relevance notebook's official-measures section: with OFFICIAL=yes, `official_table`
    saved as ``relevance-official-TAG`` and shown; otherwise a line saying how to ask for it."""
    if not study.official:
        from IPython.display import Markdown  # the notebook's display of a sentence (not a quoted string)

        return Markdown("*The release's official measures (MAP_csfcube, nDCG_csfcube%20) beside the published "
                        "CSFCube record: run with `OFFICIAL=yes`.*")
    table = official_table(study, collection)
    printed.save_table(table, study.name("relevance-official"), study.tables_dir)
    return printed.show(table, published=RECORD_TITLE)


def comparison_table(study: Study, collection: Collection, measures: Sequence[str] | None = None):
    """The study models' runs x measures table (`evalkit.evaluation.compare_table`: x100, marks for the runs
    each is significantly better than, paired t-test, Holm), saved as ``comparison-TAG`` .md
    and .tex beside the other tables; the reference model first."""
    made, _ = study_rows.outcomes(study, collection)
    order = sorted(made, key=lambda m: m != study.reference)
    names = list(measures or default_measures(collection))
    if measures is None and study.measure and study.measure not in names:
        names[0] = study.measure  # the study's relevance measure (its DISCOUNT) first
    tables = {registry.spec(m, study.profile).label: per_query(collection, made[m], names) for m in order}
    if measures is None:
        names = shown_once(names, tables.values())[0]
    table = compare_table(collection, tables, names)
    folder = Path(study.tables_dir)
    write_atomic(folder / f"{study.name('comparison')}.md", table.markdown())
    write_atomic(folder / f"{study.name('comparison')}.tex", table.latex())
    return table


def instruction_following_table(study: Study, collection: Collection, data: CSFCube) -> pd.DataFrame:
    """p-MRR x100 per facet and aggregated (mean of facet means), and how much a model's ranking
    moves between a seed's two instructions: mean Kendall tau over paired seeds (1 = unchanged),
    over the seeds where it is defined; ``kendall_undefined`` counts the seeds where it is not
    (one instruction's scores constant), apart from the mean."""
    made, reasons = study_rows.outcomes(study, collection)
    out = []
    for model in study.models:
        if model in reasons:
            out.append(_not_run_row(study, model, reasons[model], kendall_tau=math.nan, kendall_undefined=math.nan))
            continue
        table = per_query(collection, made[model], [])
        tau, undefined = ranking_movement(made[model], collection)
        out.append({**_label(study.profile, model), **_scaled(summarize(collection, table)[PMRR]),
                    "kendall_tau": tau, "kendall_undefined": undefined, study_rows.STATUS: study_rows.RAN})
    for recipe, label in human_recipes(study).items():
        human = human_table(study, data, collection, [], recipe)
        out.append({"model": "human", "label": label, "role": "reference", "source": "kit", "recipe": recipe,
                    **_scaled(summarize(collection, human)[PMRR]), "kendall_tau": math.nan,
                    "kendall_undefined": math.nan, study_rows.STATUS: study_rows.RAN})
    return pd.DataFrame(out + published_rows(PMRR))


def kendall_taus(run: Run, collection: Collection) -> list[float]:
    """Kendall tau-b between the scores a run gives a seed's two instructions, per paired query
    the run holds (each pair once), over the documents both score; NaN where it is undefined
    (one side's scores constant, or fewer than two documents): a constant side is not an
    unchanged ranking, so it is never read as 1."""
    taus = []
    for a, b in collection.pairs.items():
        if a > b or a not in run or b not in run:
            continue
        common = sorted(set(run[a]) & set(run[b]))
        taus.append(float(scistats.kendalltau([run[a][d] for d in common], [run[b][d] for d in common]).statistic))
    return taus


def ranking_movement(run: Run, collection: Collection) -> tuple[float, int]:
    """The mean of `kendall_taus` over the pairs where it is defined, and the number of pairs where
    it is undefined (counted apart: the table's ``kendall_undefined``)."""
    taus = kendall_taus(run, collection)
    defined = [t for t in taus if not math.isnan(t)]
    return (float(np.mean(defined)) if defined else math.nan), len(taus) - len(defined)


GROUP_LABELS = {"base": "Base", "generic": "Generic", "definition": "Definition", "aspect-subset": "Aspect subset"}


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


def sensitivity_table(study: Study, collection: Collection) -> pd.DataFrame:
    """The relevance measure and p-MRR x100 (aggregated) per model and instruction-variant group
    (a group of several variants: the mean of their aggregates), each with a bootstrap 95% interval
    of the per-query mean (a group's per-query value: the mean over its variants), as the relevance
    table's (`ci_low`, `ci_high`; `pmrr_ci_low`, `pmrr_ci_high`); with a user's instruction file
    (`study.instructions`), its variants, and columns naming the file and its sha256."""
    measure = study.measure
    groups = sensitivity_groups(study.instructions)
    tables: dict[str, dict[str, pd.DataFrame]] = {m: {} for m in study.models}
    reasons: dict[str, str] = {}
    for variant in [v for group in groups.values() for v in group]:
        made, failed = study_rows.outcomes(study.with_models([m for m in study.models if m not in reasons]),
                                           collection, variant)
        reasons |= failed
        for model, run in made.items():
            tables[model][variant] = per_query(collection, run, [measure])
    named = {}
    if study.instructions is not None:
        found = instructions_identity(study.instructions)
        named = {"instructions": found["file"], "instructions_sha256": found["sha256"]}
    out = []
    for model in study.models:
        for group, variants in groups.items():
            if model in reasons:
                out.append({**_label(study.profile, model), "variant": group, measure: math.nan, PMRR: math.nan,
                            study_rows.STATUS: reasons[model], **named})
                continue
            chosen = [summarize(collection, tables[model][v]) for v in variants]
            values = sum(tables[model][v][[measure, PMRR]] for v in variants) / len(variants)
            pmrr = _interval(values[PMRR])
            out.append({**_label(study.profile, model), "variant": group,
                        measure: 100 * float(np.mean([s[measure]["all"] for s in chosen])),
                        **_interval(values[measure]),
                        PMRR: 100 * float(np.mean([s[PMRR]["all"] for s in chosen])),
                        "pmrr_ci_low": pmrr["ci_low"], "pmrr_ci_high": pmrr["ci_high"], **named,
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
