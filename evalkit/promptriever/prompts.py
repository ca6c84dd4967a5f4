"""Generic prompts and prompt selection, as in Promptriever (Weller et al., 2024, arXiv 2409.11136).

A prompt is appended to the query after one space: ``f"{query} {prompt}"`` (`with_prompt`),
the same rule FollowIR and Promptriever use to append an instruction.

Selection (model-agnostic; "none" is never a candidate, as in the paper's tables):

- ``none``: the test value with no prompt;
- ``Best``: the oracle, the prompt with the highest test value;
- ``Selected``: the prompt with the highest dev value, reported on test.

Ties go to the prompt listed first. `select_by_folds` does the same on CSFCube's
official folds: it chooses on each fold's dev half, reports on its test half and
averages the two test-fold means (the official aggregate); the chooser only ever
receives the dev half.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from evalkit.errors import KitError

GENERIC_PROMPTS = Path(__file__).resolve().parents[1] / "config" / "generic_prompts.yaml"
NONE = "none"  # the column / label of the run without a prompt
FOLDS = ("fold1", "fold2")

Value = float | Mapping[str, float] | pd.Series  # a mean, or per-query values to average


def with_prompt(query: str, prompt: str | None) -> str:
    """The query with the prompt appended after one space; the query alone when there is no prompt."""
    return f"{query} {prompt}" if prompt else query


def load_prompts(path: Path | None = None) -> list[str]:
    """The prompt list of a YAML file (``prompts: [...]``); the kit's ten generic prompts by default."""
    path = Path(path) if path else GENERIC_PROMPTS
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KitError(f"{path}: prompt file not found; check the path") from None
    except yaml.YAMLError as exc:
        raise KitError(f"{path}: malformed YAML ({exc}); write 'prompts:' and a list of strings") from None
    prompts = data.get("prompts") if isinstance(data, dict) else None
    if not (isinstance(prompts, list) and prompts and all(isinstance(p, str) and p.strip() for p in prompts)):
        raise KitError(f"{path}: expected 'prompts:' followed by a list of non-empty strings")
    if len(set(prompts)) != len(prompts):
        raise KitError(f"{path}: a prompt is listed twice; list each prompt once")
    return prompts


@dataclass(frozen=True)
class Selection:
    none: float
    best: float
    best_prompt: str
    selected: float
    selected_prompts: dict[str, str]  # split or fold -> the prompt chosen on its dev data


def _mean(value: Value) -> float:
    if isinstance(value, Mapping):
        value = pd.Series(value, dtype=float)
    return float(value.mean()) if isinstance(value, pd.Series) else float(value)


def _argmax(values: Mapping[str, float]) -> str:
    """The key with the highest value (NaN skipped); the first listed among equals."""
    return str(pd.Series(values, dtype=float).idxmax())


def select_prompt(
    evaluate: Callable[[str | None, str], Value], prompts: Sequence[str], dev: str = "dev", test: str = "test"
) -> Selection:
    """none / Best / Selected from ``evaluate(prompt or None, split)`` (a mean or per-query values)."""
    if not prompts:
        raise KitError("no prompts to select from; give at least one")
    on_test = {p: _mean(evaluate(p, test)) for p in prompts}
    on_dev = {p: _mean(evaluate(p, dev)) for p in prompts}
    best, chosen = _argmax(on_test), _argmax(on_dev)
    return Selection(_mean(evaluate(None, test)), on_test[best], best, on_test[chosen], {dev: chosen})


def choose_prompt(dev_values: pd.DataFrame) -> str:
    """The prompt column (not ``none``) with the highest mean over the dev queries given."""
    means = dev_values.drop(columns=[NONE], errors="ignore").mean()
    if means.empty:
        raise KitError("no prompt columns to choose from; add one column per prompt")
    return _argmax(means.to_dict())


def _rows(values: pd.DataFrame, qids: Sequence[str], fold: str) -> pd.DataFrame:
    missing = [q for q in qids if q not in values.index]
    if missing:
        raise KitError(f"query {missing[0]} of {fold} has no values; evaluate every query of the folds")
    return values.loc[list(qids)]


def select_by_folds(values: pd.DataFrame, folds: Mapping[str, Sequence[str]]) -> Selection:
    """Fold-wise none / Best / Selected: per-query `values` (index qid, one column per prompt and ``none``).

    `folds` maps fold1_dev, fold1_test, fold2_dev, fold2_test to query ids. Each value
    reported is the mean of the two test-fold means.
    """
    for name in (f"{fold}_{half}" for fold in FOLDS for half in ("dev", "test")):
        if name not in folds:
            raise KitError(f"folds lack {name}; give fold1_dev, fold1_test, fold2_dev and fold2_test")
    if NONE not in values.columns:
        raise KitError(f"per-query values lack the {NONE!r} column (the run without a prompt); add it")
    chosen = {fold: choose_prompt(_rows(values, folds[f"{fold}_dev"], f"{fold}_dev")) for fold in FOLDS}
    tests = {fold: _rows(values, folds[f"{fold}_test"], f"{fold}_test").mean() for fold in FOLDS}
    official = (tests["fold1"] + tests["fold2"]) / 2  # per column: mean of the two test-fold means
    best = _argmax(official.drop(NONE).to_dict())
    selected = sum(tests[fold][chosen[fold]] for fold in FOLDS) / len(FOLDS)
    return Selection(float(official[NONE]), float(official[best]), best, float(selected), chosen)
