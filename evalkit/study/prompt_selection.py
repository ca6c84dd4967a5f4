"""Promptriever-style prompt selection on CSFCube (Weller et al., 2024, arXiv 2409.11136), step by
step as `promptriever.ipynb` shows it.

Each generic prompt of `evalkit/config/generic_prompts.yaml` is appended to every query text (a run
of its own with its files and sidecar: `evalkit.study.steps.load_prompt_runs`);
`per_query` gives each run's per-query values of the relevance measure and the authors' tie-break
(`TIEBREAK`); `selection_table` applies the recipe's selection
(`evalkit.promptriever.prompts.select_prompt`: the kit's one dev/test selector with the authors'
rule, the dev value rounded to 0.1, ties broken by Recall@100, then the lowest md5) on CSFCube's
official folds:

- ``none``: no prompt (never a candidate, as in the paper's tables);
- ``Best``: the oracle, the prompt with the highest test value;
- ``Selected``: the prompt chosen on each fold's dev half, reported on its test half.

Each value is the official aggregate (mean of the two test-fold means) of the relevance measure, x100.
"""

from __future__ import annotations

import math

import pandas as pd

from evalkit.data.collection import Collection
from evalkit.promptriever.prompts import TIEBREAK, select_prompt
from evalkit.promptriever.recipe import recipe_table
from evalkit.study import figures, rows, steps
from evalkit.study.params import Study, split


def per_query(runs: dict[str | None, steps.StudyRuns], measure: str) -> pd.DataFrame:
    """`steps.per_query` of every prompt's runs (`measure` and `TIEBREAK`, fractions), with a ``prompt``
    column (None: no prompt)."""
    return pd.concat([steps.per_query(found, [measure, TIEBREAK]).assign(prompt=prompt)
                      for prompt, found in runs.items()], ignore_index=True)


def status(runs: dict[str | None, steps.StudyRuns]) -> pd.DataFrame:
    """One row per study model (model, label, role, status): "not run: <reason>" when any prompt's run
    could not be made."""
    table = next(iter(runs.values())).status.drop(columns="variant")
    reasons = {model: reason for found in runs.values() for model, reason in found.reasons.items()}
    return table.assign(**{rows.STATUS: [reasons.get(m, rows.RAN) for m in table.model]})


def selection_table(values: pd.DataFrame, status: pd.DataFrame, collection: Collection, measure: str) -> pd.DataFrame:
    """One row per study model: none, Best, Selected (x100), the best prompt and each fold's choice; a
    model that did not run is its "not run: <reason>" row."""
    out = []
    for model, label, role, found in status[["model", "label", "role", rows.STATUS]].itertuples(index=False):
        row = {"model": model, "label": label, "role": role, "measure": measure}
        if found != rows.RAN:
            out.append(row | {"none": math.nan, "Best": math.nan, "Selected": math.nan, rows.STATUS: found})
            continue
        mine = values[values.model == model]
        tables = {prompt: steps.tables_of(group.drop(columns="prompt"))[label]
                  for prompt, group in mine.groupby("prompt", sort=False, dropna=False)}
        chosen = select_prompt(collection, {None if pd.isna(p) else p: t for p, t in tables.items()}, measure)
        out.append(row | {"none": 100 * chosen.none, "Best": 100 * chosen.best, "Selected": 100 * chosen.selected,
                          "best prompt": chosen.best_prompt,
                          **{f"selected on {fold} dev": p for fold, p in chosen.selected_prompts.items()},
                          rows.STATUS: rows.RAN})
    return pd.DataFrame(out)


def recipe_datasets(study: Study, beir: str, followir: str, instructir: str) -> pd.DataFrame:
    """The recipe on the comma-separated BEIR / FollowIR / InstructIR datasets given (runs under
    the study's runs folder), saved as a table; an empty table when none is given."""
    sources = [split(value) for value in (beir, followir, instructir)]
    if not any(sources):
        return pd.DataFrame()
    table = recipe_table(study.profile, list(study.models), *sources, runs_dir=study.runs_dir)
    figures.save_table(table, study.name("promptriever-datasets"), study.tables_dir)  # the tag names BEIR= etc.
    return table
