"""The study's tables: relevance (Table 1), instruction following (Table 2), sensitivity (Table 3).

Notebooks call these; runs are produced on demand by `evalkit.runner` and reused
when a run folder already holds a complete run (its sidecar) with the same settings.
All values in the tables are x100, as in the paper.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as scistats

from evalkit.csfcube import CSFCube
from evalkit.errors import KitError
from evalkit.evaluation import per_query, summarize
from evalkit.human import human_per_query
from evalkit.metrics import DISCOUNTS
from evalkit.models import registry
from evalkit.protocols import check_protocol
from evalkit.runner import RunSettings, data_checksum, execute, sidecar_path
from evalkit.runs import Run, load_run
from evalkit.stats import bootstrap_ci, holm, paired_ttest

PUBLISHED = Path(__file__).parent / "config" / "published_mysore.csv"
COLUMNS = ["background", "method", "result", "all"]
NDCG = "ndcg@20"
ALPHA = 0.05
SENSITIVITY_GROUPS = {
    "Base": ["base"],
    "Generic": ["generic"],
    "Definition": ["definition"],
    "Paraphrases (mean of 3)": ["paraphrase-1", "paraphrase-2", "paraphrase-3"],
    "Aspect subset": ["aspect-subset"],
}


def study_models(profile: str, notebook: str, models: str = "") -> list[str]:
    """The models a notebook runs: a comma-separated override, else the profile's study list."""
    names = [m.strip() for m in models.split(",") if m.strip()] or registry.profile_settings(profile)["study"][notebook]
    for name in names:
        registry.spec(name, profile)  # raises a one-line error listing the valid names
    return names


def hybrid_model(profile: str, model: str = "") -> str:
    """The embedding model of the facet-hybrid study: the override, else the profile's."""
    name = model or registry.profile_settings(profile)["study"]["hybrid"]
    registry.spec(name, profile)
    return name


def check_parameters(profile: str, protocol: str, discount: str, reference: str = "",
                     seeds: str = "") -> tuple[str, tuple[str, ...] | None]:
    """Validate notebook parameters; returns (reference model, seeds tuple or None)."""
    registry.profile_settings(profile)
    check_protocol(protocol)
    if discount not in DISCOUNTS:
        raise KitError(f"unknown DISCOUNT {discount!r}; choose one of {', '.join(DISCOUNTS)}")
    reference = reference or registry.profile_settings(profile)["study"]["reference"]
    registry.spec(reference, profile)
    chosen = tuple(s.strip() for s in seeds.split(",") if s.strip()) or None
    return reference, chosen


def ensure_run(settings: RunSettings, runs_dir: Path, data: CSFCube) -> Path:
    """The run folder holding `settings`' run, produced only when no complete matching run exists."""
    out = Path(runs_dir) / settings.profile / settings.protocol
    sidecar = sidecar_path(out, settings.run_name)
    if sidecar.is_file():
        recorded = json.loads(sidecar.read_text())
        if recorded.get("run_settings") == json.loads(json.dumps(asdict(settings))) and \
                recorded.get("data_sha256") == data_checksum():
            return out
    execute(settings, out, data)
    return out


def get_runs(data: CSFCube, runs_dir: Path, profile: str, protocol: str, models: list[str],
             variant: str = "base", seeds: tuple[str, ...] | None = None, corpus: str = "") -> dict[str, Run]:
    """Runs by model name, producing missing ones first (`corpus`: the full protocol's file)."""
    runs = {}
    for model in models:
        settings = RunSettings(model, profile, protocol, variant, seeds=seeds, corpus=corpus or None)
        runs[model] = load_run(ensure_run(settings, runs_dir, data), settings.run_name)
    return runs


def per_query_tables(data: CSFCube, runs: dict[str, Run], discount: str = "csfcube") -> dict[str, pd.DataFrame]:
    return {model: per_query(data, run, discount=discount) for model, run in runs.items()}


def variant_tables(data: CSFCube, runs_dir: Path, profile: str, protocol: str, models: list[str],
                   seeds: tuple[str, ...] | None, discount: str,
                   corpus: str = "") -> dict[str, dict[str, pd.DataFrame]]:
    """Per-query tables by model and by every variant of SENSITIVITY_GROUPS."""
    variants = [v for group in SENSITIVITY_GROUPS.values() for v in group]
    by_variant: dict[str, dict[str, pd.DataFrame]] = {m: {} for m in models}
    for variant in variants:
        runs = get_runs(data, runs_dir, profile, protocol, models, variant, seeds, corpus)
        for model, table in per_query_tables(data, runs, discount).items():
            by_variant[model][variant] = table
    return by_variant


def human_table(data: CSFCube, seeds: tuple[str, ...] | None, discount: str) -> pd.DataFrame:
    table = human_per_query(data, discount=discount)
    return table if seeds is None else table[table.seed.isin(seeds)]


def _label(profile: str, model: str) -> tuple[str, str]:
    spec = registry.spec(model, profile)
    return spec.label, spec.role


def relevance_table(profile: str, tables: dict[str, pd.DataFrame], human: pd.DataFrame, reference: str,
                    seed: int = 0) -> pd.DataFrame:
    """NDCG@20 x100 per facet and aggregated (official fold mean), bootstrap 95% interval of the
    per-query mean, and the paired t-test against the reference model (raw and Holm-adjusted p).
    `same_as_reference` is "reference" for the reference itself, "yes" when p >= 0.05 (no
    significant difference, the paper's mark), else "no"."""
    if reference not in tables:
        raise KitError(f"REFERENCE_MODEL {reference} is not among the models run; add it to MODELS")
    rows, pvalues = [], {}
    for model, table in tables.items():
        label, role = _label(profile, model)
        if model != reference:
            pvalues[model] = paired_ttest(table[NDCG], tables[reference][NDCG]).pvalue
        rows.append({"model": model, "label": label, "role": role, "source": "kit",
                     **_scaled(summarize(table)[NDCG]), **_interval(table[NDCG], seed)})
    adjusted = holm(pvalues) if pvalues else {}
    for row in rows:
        row["p_vs_reference"] = pvalues.get(row["model"], math.nan)
        row["p_holm"] = adjusted.get(row["model"], math.nan)
        row["same_as_reference"] = ("reference" if row["model"] == reference
                                    else "yes" if row["p_vs_reference"] >= ALPHA else "no")
    rows.append({"model": "human", "label": "Human (annotators vs adjudication)", "role": "reference",
                 "source": "kit", **_scaled(summarize(human)[NDCG]), **_interval(human[NDCG], seed)})
    return pd.DataFrame(rows + published_rows(NDCG))


def instruction_following_table(profile: str, tables: dict[str, pd.DataFrame], human: pd.DataFrame,
                                runs: dict[str, Run], data: CSFCube) -> pd.DataFrame:
    """p-MRR x100 per facet and aggregated (mean of facet means), and how much a model's ranking
    moves between a seed's two instructions: mean Kendall tau over paired seeds (1 = unchanged)."""
    rows = []
    for model, table in tables.items():
        label, role = _label(profile, model)
        rows.append({"model": model, "label": label, "role": role, "source": "kit",
                     **_scaled(summarize(table)["p-mrr"]), "kendall_tau": ranking_movement(runs[model], data)})
    rows.append({"model": "human", "label": "Human (annotators vs adjudication)", "role": "reference",
                 "source": "kit", **_scaled(summarize(human)["p-mrr"]), "kendall_tau": math.nan})
    return pd.DataFrame(rows + published_rows("p-mrr"))


def ranking_movement(run: Run, data: CSFCube) -> float:
    """Mean Kendall tau-b between the scores a run gives under a seed's two instructions."""
    taus = []
    for seed, (first, second) in data.paired_seeds.items():
        a, b = run.get(f"{seed}_{first}"), run.get(f"{seed}_{second}")
        if a is None or b is None:
            continue
        common = sorted(set(a) & set(b))
        tau = scistats.kendalltau([a[d] for d in common], [b[d] for d in common]).statistic
        taus.append(1.0 if math.isnan(tau) else tau)  # constant scores under both: nothing moved
    return float(np.mean(taus)) if taus else math.nan


def sensitivity_table(profile: str, by_variant: dict[str, dict[str, pd.DataFrame]]) -> pd.DataFrame:
    """NDCG@20 and p-MRR x100 (aggregated) per model and instruction variant group."""
    rows = []
    for model, tables in by_variant.items():
        label, role = _label(profile, model)
        for group, variants in SENSITIVITY_GROUPS.items():
            summaries = [summarize(tables[v]) for v in variants]
            rows.append({"model": model, "label": label, "role": role, "variant": group,
                         "ndcg@20": 100 * np.mean([s[NDCG]["all"] for s in summaries]),
                         "p-mrr": 100 * np.mean([s["p-mrr"]["all"] for s in summaries])})
    return pd.DataFrame(rows)


def published_rows(metric: str) -> list[dict]:
    """The paper's rows for a metric (x100, full-corpus protocol), from the cited data file."""
    table = pd.read_csv(PUBLISHED)
    table = table[table.metric == metric]
    return [{"model": r.model, "label": f"{r.model} (paper)", "role": "published", "source": r.source,
             **{c: float(getattr(r, c)) for c in COLUMNS}} for r in table.itertuples()]


def _scaled(summary: dict[str, float]) -> dict[str, float]:
    return {c: 100 * summary[c] for c in COLUMNS}


def _interval(values: pd.Series, seed: int) -> dict[str, float]:
    low, high = bootstrap_ci(values, seed=seed)
    return {"ci_low": 100 * low, "ci_high": 100 * high}


def findings(relevance: pd.DataFrame, following: pd.DataFrame, sensitivity: pd.DataFrame) -> list[str]:
    """The paper's three findings, stated from the computed numbers of this profile."""
    kit = relevance[(relevance.source == "kit") & (relevance.model != "human")]
    aware = kit[kit.role.isin(["instructed", "probe", "reranker", "aspect"])]
    agnostic = kit[kit.role == "agnostic"]
    lines = []
    if len(aware) and len(agnostic):
        best_aware, best_agnostic = aware.loc[aware["all"].idxmax()], agnostic.loc[agnostic["all"].idxmax()]
        verdict = "beats" if best_aware["all"] > best_agnostic["all"] else "does not beat"
        lines.append(f"(a) The best instruction-aware model ({best_aware.label}, NDCG@20 {best_aware['all']:.2f}) "
                     f"{verdict} the best instruction-agnostic model ({best_agnostic.label}, "
                     f"{best_agnostic['all']:.2f}).")
    follow = following[(following.source == "kit") & following.role.isin(["instructed", "probe", "reranker", "aspect"])]
    if len(follow):
        values = ", ".join(f"{r.label} {r.all:+.2f}" for r in follow.itertuples())
        holds = all(v < 5 for v in follow["all"])
        lines.append(f"(b) p-MRR of the instruction-aware models: {values}; "
                     f"{'all below +5, i.e. near 0 or negative: holds' if holds else 'not all below +5: fails'}.")
    for _, rows in sensitivity.groupby("model", sort=False):
        base = rows[rows.variant == "Base"].iloc[0]
        subset = rows[rows.variant == "Aspect subset"].iloc[0]
        lines.append(
            f"(c) {base.label}: Aspect subset {'raises' if subset['p-mrr'] > base['p-mrr'] else 'does not raise'} "
            f"p-MRR ({base['p-mrr']:+.2f} -> {subset['p-mrr']:+.2f}) and "
            f"{'lowers' if subset['ndcg@20'] < base['ndcg@20'] else 'does not lower'} NDCG@20 "
            f"({base['ndcg@20']:.2f} -> {subset['ndcg@20']:.2f})."
        )
    return lines


def hybrid_study(data: CSFCube, profile: str, protocol: str, model: str, seeds: tuple[str, ...] | None,
                 discount: str = "csfcube", candidate_facet: bool = False, seed: int = 0,
                 corpus: str = "") -> pd.DataFrame:
    """The facet-hybrid of an embedding model: the curve over the grid of a, and the weight
    chosen on each official fold's dev half reported on its test half, with paired t-tests
    (hybrid vs whole abstract on NDCG@20, hybrid vs Aspect subset on p-MRR) and bootstrap CIs."""
    from evalkit import hybrid
    from evalkit.models.dense import BiEncoder
    from evalkit.runner import prepare

    scorer, candidates, _ = prepare(RunSettings(model, profile, protocol, seeds=seeds, corpus=corpus or None), data)
    if not isinstance(scorer, BiEncoder):
        raise KitError(f"the facet hybrid needs an embedding model (family dense, no hybrid_alpha); {model} is not one")
    whole, facet = hybrid.components(hybrid.FacetHybrid(scorer, 1.0, candidate_facet), data, candidates)
    tables = hybrid.curve(data, whole, facet, discount=discount)
    cross_validated, chosen = hybrid.cross_validate(tables, data.folds["all"])
    label = registry.spec(model, profile).label
    rows = [_hybrid_row(label, f"a={a:.1f}", t, seed) for a, t in tables.items()]
    cv = _hybrid_row(label, "hybrid (a chosen on dev, per fold)", cross_validated, seed)
    cv["chosen_a"] = ", ".join(f"{fold}: {a:.1f}" for fold, a in chosen.items())
    cv["p_ndcg_vs_whole"] = paired_ttest(cross_validated[NDCG], tables[1.0][NDCG]).pvalue
    cv["p_pmrr_vs_aspect_subset"] = paired_ttest(cross_validated["p-mrr"], tables[0.0]["p-mrr"]).pvalue
    return pd.DataFrame([cv] + rows)


def _hybrid_row(label: str, setting: str, table: pd.DataFrame, seed: int) -> dict:
    summary = summarize(table)
    ndcg_low, ndcg_high = bootstrap_ci(table[NDCG], seed=seed)
    pmrr_low, pmrr_high = bootstrap_ci(table["p-mrr"], seed=seed)
    return {"model": label, "setting": setting, "ndcg@20": 100 * summary[NDCG]["all"],
            "ndcg_ci": f"[{100 * ndcg_low:.2f}, {100 * ndcg_high:.2f}]",
            "p-mrr": 100 * summary["p-mrr"]["all"], "pmrr_ci": f"[{100 * pmrr_low:.2f}, {100 * pmrr_high:.2f}]"}


def tradeoff_points(relevance: pd.DataFrame, following: pd.DataFrame, sensitivity: pd.DataFrame,
                    hybrid_curve: pd.DataFrame) -> pd.DataFrame:
    """NDCG@20 (x) and p-MRR (y), aggregated x100: every model at Base and every sensitivity
    variant, Human, the paper's published points, and the hybrid's curve over a."""
    pmrr = dict(zip(following.label, following["all"]))
    points = [{"label": r["label"], "variant": "Base", "ndcg@20": r["all"], "p-mrr": pmrr.get(r["label"], math.nan),
               "kind": "paper" if r["source"] != "kit" else ("human" if r["model"] == "human" else "kit")}
              for r in relevance.to_dict("records")]
    points += [{"label": r["label"], "variant": r["variant"], "ndcg@20": r["ndcg@20"], "p-mrr": r["p-mrr"],
                "kind": "kit"} for r in sensitivity.to_dict("records") if r["variant"] != "Base"]
    points += [{"label": f"{r['model']} hybrid", "variant": r["setting"], "ndcg@20": r["ndcg@20"],
                "p-mrr": r["p-mrr"], "kind": "hybrid" if r["setting"].startswith("a=") else "hybrid-cv"}
               for r in hybrid_curve.to_dict("records")]
    return pd.DataFrame(points)


def hybrid_verdict(table: pd.DataFrame) -> str:
    """One sentence on whether the cross-validated hybrid gets both relevance and instruction following."""
    cv = table.iloc[0]
    whole = table[table.setting == "a=1.0"].iloc[0]
    subset = table[table.setting == "a=0.0"].iloc[0]
    met = cv["ndcg@20"] >= whole["ndcg@20"] and cv["p-mrr"] - whole["p-mrr"] >= 8
    return (f"Cross-validated facet hybrid ({cv.chosen_a}): NDCG@20 {cv['ndcg@20']:.2f} vs whole abstract "
            f"{whole['ndcg@20']:.2f} ({cv['ndcg@20'] - whole['ndcg@20']:+.2f}, paired t-test p = "
            f"{cv.p_ndcg_vs_whole:.3f}); p-MRR {cv['p-mrr']:+.2f} vs Aspect subset {subset['p-mrr']:+.2f} "
            f"(p = {cv.p_pmrr_vs_aspect_subset:.3f}) and whole abstract {whole['p-mrr']:+.2f}. "
            f"Aim (no NDCG@20 loss and at least +8 p-MRR over the whole abstract): {'met' if met else 'not met'}.")


def prompt_selection_table(data: CSFCube, profile: str, protocol: str, models: list[str],
                           seeds: tuple[str, ...] | None, discount: str = "csfcube",
                           corpus: str = "") -> pd.DataFrame:
    """Promptriever-style prompt selection on CSFCube: each generic prompt appended to the query
    text; "Selected" picks the prompt on each official fold's dev half and reports its test half,
    "Best" is the oracle best prompt, "none" no prompt. NDCG@20 x100 (fold mean of test halves)."""
    from evalkit.instructions import Request, make_request
    from evalkit.promptriever import NONE, load_prompts, select_by_folds, with_prompt
    from evalkit.runner import prepare

    prompts = load_prompts()
    rows = []
    for model in models:
        scorer, candidates, _ = prepare(RunSettings(model, profile, protocol, seeds=seeds, corpus=corpus or None), data)
        qids = list(candidates)
        values = {}
        for prompt in [None, *prompts]:
            run = {}
            for qid in qids:
                base = make_request(data.papers[data.queries[qid].seed], data.queries[qid].facet, "base")
                request = Request(base.seed, base.facet, base.instruction, with_prompt(base.query_text, prompt))
                run[qid] = scorer.score(request, candidates[qid])
            values[prompt or NONE] = per_query(data, run, discount=discount)[NDCG]
        folds = {name: [q for q in fold if q in qids] for name, fold in data.folds["all"].items()}
        if not all(folds.values()):
            raise KitError("SEEDS leave a fold half without queries; choose seeds covering every dev and test half")
        chosen = select_by_folds(pd.DataFrame(values), folds)
        label, role = _label(profile, model)
        rows.append({"model": model, "label": label, "role": role, "none": 100 * chosen.none,
                     "Best": 100 * chosen.best, "Selected": 100 * chosen.selected, "best prompt": chosen.best_prompt,
                     **{f"selected on {fold} dev": p for fold, p in chosen.selected_prompts.items()}})
    return pd.DataFrame(rows)
