"""The paper's three findings, stated from the BUILT tables (CSV files under OUTPUT_DIR/tables),
so the summary computes nothing new:

(a) instruction-aware models do not beat instruction-agnostic ones on relevance;
(b) instruction-aware models barely follow instructions (p-MRR near 0 or negative);
(c) the Aspect-subset query raises p-MRR and lowers relevance.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.evaluation.evaluate import PMRR
from evalkit.study.hybrid_study import measure_of
from evalkit.study.rows import ran
from evalkit.study.tables import kit_variant

TABLES = ("relevance", "instruction_following", "sensitivity", "hybrid")
AWARE = ("instructed", "probe", "reranker", "aspect")
FOLLOWS = 5.0  # x100 p-MRR below which a model is read as not following instructions


def read_tables(tables_dir: Path, tag: str, names: tuple[str, ...] = TABLES) -> dict[str, pd.DataFrame]:
    """The built tables NAME-TAG.csv; a one-line error names the notebook to run first."""
    found = {}
    for name in names:
        path = Path(tables_dir) / f"{name}-{tag}.csv"
        if not path.is_file():
            raise MissingPrerequisite(f"{path} is missing",
                                      f"build it first (make {name}) with the same PROFILE, PROTOCOL, SEEDS")
        found[name] = ran(pd.read_csv(path))  # "not run" rows hold no values
    measures = {measure_of(found[n]) for n in ("sensitivity", "hybrid") if n in found}
    if "relevance" in found:
        measures |= set(found["relevance"].loc[found["relevance"].source == "kit", "measure"])
    if len(measures) > 1:
        raise DataError("tables",
                        f"the tables of {tag} were built with different DISCOUNTs ({', '.join(sorted(measures))}); "
                        "rebuild them with one")
    return found


def findings(relevance: pd.DataFrame, following: pd.DataFrame, sensitivity: pd.DataFrame) -> list[str]:
    """The three findings, from the computed rows of the built tables."""
    kit = relevance[(relevance.source == "kit") & (relevance.model != "human")]
    aware = kit[kit.role.isin(AWARE)]
    agnostic = kit[kit.role == "agnostic"]
    lines = []
    if len(aware) and len(agnostic):
        best_aware, best_agnostic = aware.loc[aware["all"].idxmax()], agnostic.loc[agnostic["all"].idxmax()]
        verdict = "beats" if best_aware["all"] > best_agnostic["all"] else "does not beat"
        lines.append(f"(a) The best instruction-aware model ({best_aware.label}, {best_aware.measure} "
                     f"{best_aware['all']:.2f}) "
                     f"{verdict} the best instruction-agnostic model ({best_agnostic.label}, "
                     f"{best_agnostic['all']:.2f}).")
    follow = following[(following.source == "kit") & following.role.isin(AWARE)]
    if len(follow):
        values = ", ".join(f"{r.label} {r.all:+.2f}" for r in follow.itertuples())
        above = [r.label for r in follow.itertuples() if r.all >= FOLLOWS]
        verdict = (f"all are below +{FOLLOWS:.0f} (read as near 0 or negative), so the finding holds here" if not above
                   else f"{len(above)} of {len(follow)} reach +{FOLLOWS:.0f} or more ({', '.join(above)}), so the "
                        "finding does not hold for every model here")
        lines.append(f"(b) The paper finds that instruction-aware models barely follow instructions (p-MRR near 0). "
                     f"p-MRR (x100) of the kit's instruction-aware models: {values}; {verdict}.")
    measure = measure_of(sensitivity)
    for _, rows in sensitivity.groupby("model", sort=False):
        named = rows.assign(variant=rows.variant.map(kit_variant)).set_index("variant")
        missing = [v for v in ("base", "aspect-subset") if v not in named.index]
        if missing:  # an instruction file without the study's variants
            lines.append(f"(c) {rows.label.iloc[0]}: not stated: the sensitivity table has no {' or '.join(missing)} "
                         "variant (the instruction file lacks it).")
            continue
        base, subset = named.loc["base"], named.loc["aspect-subset"]
        lines.append(
            f"(c) {base.label}: Aspect subset {'raises' if subset[PMRR] > base[PMRR] else 'does not raise'} "
            f"p-MRR ({base[PMRR]:+.2f} -> {subset[PMRR]:+.2f}) and "
            f"{'lowers' if subset[measure] < base[measure] else 'does not lower'} {measure} "
            f"({base[measure]:.2f} -> {subset[measure]:.2f})."
        )
    return lines
