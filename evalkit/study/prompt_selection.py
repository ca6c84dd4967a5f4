"""Promptriever-style prompt selection on CSFCube (Weller et al., 2024, arXiv 2409.11136).

Each generic prompt of `evalkit/config/generic_prompts.yaml` is appended to every query
text (`RunSettings(prompt=...)`: a real run with its files and sidecar, like any other).
With the recipe's selection (`evalkit.promptriever.prompts.select_prompt`: the kit's one
dev/test selector, `evalkit.evaluation.selection.cross_validate`, with the authors' rule: the dev value
rounded to 0.1, ties broken by Recall@100, then the lowest md5) on CSFCube's official folds:

- ``none``: no prompt (never a candidate, as in the paper's tables);
- ``Best``: the oracle, the prompt with the highest test value;
- ``Selected``: the prompt chosen on each fold's dev half, reported on its test half.

Each value is the official aggregate (mean of the two test-fold means) of the relevance
measure, x100.
"""

from __future__ import annotations

import math

import pandas as pd

from evalkit.data.collection import Collection
from evalkit.evaluation.evaluate import per_query as evaluate
from evalkit.models import registry
from evalkit.pipeline.runner import bind, obtain
from evalkit.promptriever.prompts import TIEBREAK, load_prompts, select_prompt
from evalkit.promptriever.recipe import recipe_table
from evalkit.study import figures, rows
from evalkit.study.params import Study, split


def _values(study: Study, collection: Collection, model: str, prompt: str | None) -> pd.DataFrame:
    """Per-query values of the model's run with `prompt` appended (made once, then reused): the
    relevance measure and the authors' tie-break (`TIEBREAK`)."""
    run = obtain(bind(study.settings(model, collection, prompt=prompt), collection, study.runs_dir)).run
    return evaluate(collection, run, [study.measure, TIEBREAK])


def prompt_selection_table(study: Study, collection: Collection, prompts: list[str] | None = None) -> pd.DataFrame:
    """One row per study model: none, Best, Selected, the best prompt and each fold's choice; a
    model that cannot run is a "not run: <reason>" row (`evalkit.study.rows`)."""
    prompts = prompts if prompts is not None else load_prompts()
    out = []
    for model in study.models:
        found = rows.attempt(study, collection, model, lambda m=model: _model_row(study, collection, m, prompts))
        if isinstance(found, str):
            spec = registry.spec(model, study.profile)
            found = {"model": model, "label": spec.label, "role": spec.role, "measure": study.measure,
                     "none": math.nan, "Best": math.nan, "Selected": math.nan, rows.STATUS: found}
        out.append(found)
    return pd.DataFrame(out)


def _model_row(study: Study, collection: Collection, model: str, prompts: list[str]) -> dict:
    measure = study.measure
    tables = {p: _values(study, collection, model, p) for p in [None, *prompts]}
    chosen = select_prompt(collection, tables, measure)
    spec = registry.spec(model, study.profile)
    return {"model": model, "label": spec.label, "role": spec.role, "measure": measure,
            "none": 100 * chosen.none, "Best": 100 * chosen.best, "Selected": 100 * chosen.selected,
            "best prompt": chosen.best_prompt,
            **{f"selected on {fold} dev": p for fold, p in chosen.selected_prompts.items()}, rows.STATUS: rows.RAN}


def recipe_datasets(study: Study, beir: str, followir: str, instructir: str) -> pd.DataFrame:
    """The recipe on the comma-separated BEIR / FollowIR / InstructIR datasets given (runs under
    the study's runs folder), saved as a table; an empty table when none is given."""
    sources = [split(value) for value in (beir, followir, instructir)]
    if not any(sources):
        return pd.DataFrame()
    table = recipe_table(study.profile, list(study.models), *sources, runs_dir=study.runs_dir)
    figures.save_table(table, study.name("promptriever-datasets"), study.tables_dir)  # the tag names BEIR= etc.
    return table
