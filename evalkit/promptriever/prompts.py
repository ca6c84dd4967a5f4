"""Generic prompts and prompt selection, as in Promptriever (Weller et al., 2024, arXiv 2409.11136).

The default prompts are the paper's ten (its Table 11, `evalkit/config/generic_prompts.yaml`);
``load_prompts(which="kit")`` gives ten written for the kit. On BEIR, the dev half is 10
queries sampled with a fixed seed from the dev split, else from train (`evalkit.datasets.beir`).

A prompt is appended to the query text after one space (`evalkit.runner.with_prompt`, the
rule FollowIR and Promptriever use for instructions); each prompt is a run of its own
(``RunSettings(prompt=...)``).

Selection ("none" is never a candidate, as in the paper's tables):

- ``none``: the value with no prompt;
- ``Best``: the oracle, the prompt with the highest value on the test halves;
- ``Selected``: per fold, the prompt with the highest dev mean (`evalkit.selection`, the kit's
  one dev/test selector), reported on that fold's test half; NaN (blank) on a collection
  without dev/test folds, as the paper leaves it blank for datasets without dev/train data.

Values are the collection's aggregate (`evaluation.summarize`: the fold mean of the test
halves). Ties go to the prompt listed first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from evalkit.collection import Collection
from evalkit.errors import KitError
from evalkit.evaluation import summarize
from evalkit.selection import best_mean, cross_validate

GENERIC_PROMPTS = Path(__file__).resolve().parents[1] / "config" / "generic_prompts.yaml"
NONE = "none"  # the label of the run without a prompt


def check_prompts(prompts: Sequence[str], source: str = "prompts") -> list[str]:
    """The prompts as a list: non-empty, distinct strings."""
    prompts = list(prompts)
    if not (prompts and all(isinstance(p, str) and p.strip() for p in prompts)):
        raise KitError(f"{source}: expected a non-empty list of non-empty strings")
    if len(set(prompts)) != len(prompts):
        raise KitError(f"{source}: a prompt is listed twice; list each prompt once")
    return prompts


PROMPT_SETS = {"paper": "prompts", "kit": "kit_prompts"}  # which -> key of the prompt file


def load_prompts(path: Path | None = None, which: str = "paper") -> list[str]:
    """A prompt list of a YAML file: ``prompts: [...]`` (which="paper"; in the kit's file the ten
    generic prompts of Promptriever's Table 11, the default) or ``kit_prompts: [...]``
    (which="kit": ten prompts written for the kit)."""
    if which not in PROMPT_SETS:
        raise KitError(f"unknown prompt set {which!r}; choose one of {', '.join(PROMPT_SETS)}")
    key = PROMPT_SETS[which]
    path = Path(path) if path else GENERIC_PROMPTS
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KitError(f"{path}: prompt file not found; check the path") from None
    except yaml.YAMLError as exc:
        raise KitError(f"{path}: malformed YAML ({exc}); write 'prompts:' and a list of strings") from None
    prompts = data.get(key) if isinstance(data, dict) else None
    if not isinstance(prompts, list):
        raise KitError(f"{path}: expected '{key}:' followed by a list of non-empty strings")
    return check_prompts(prompts, f"{path}: '{key}:'")


@dataclass(frozen=True)
class Selection:
    none: float
    best: float
    best_prompt: str
    selected: float
    selected_prompts: dict[str, str]  # fold -> the prompt chosen on its dev half


def _first_max(values: Mapping[str, float], what: str) -> str:
    series = pd.Series(values, dtype=float)
    if series.isna().all():
        raise KitError(f"no values of {what} to choose a prompt from; check the test queries' judgments")
    return str(series.idxmax())  # NaN skipped; the first listed among equals


def select_prompt(collection: Collection, tables: Mapping[str | None, pd.DataFrame], measure: str,
                  stratum: str = "all") -> Selection:
    """none / Best / Selected from per-query tables (`evaluation.per_query`) keyed by prompt,
    None for the run without one; `measure` as summarized for `stratum`."""
    if None not in tables:
        raise KitError("prompt selection needs the run without a prompt (key None); add it")
    candidates = {p: t for p, t in tables.items() if p is not None}
    if not candidates:
        raise KitError("no prompts to select from; give at least one")

    def value(table: pd.DataFrame) -> float:
        return summarize(collection, table)[measure][stratum]

    on_test = {p: value(t) for p, t in candidates.items()}
    best = _first_max(on_test, measure)
    if not collection.folds:  # no dev/train split: Best only, Selected left blank (the paper's Table 4)
        return Selection(value(tables[None]), on_test[best], best, math.nan, {})
    reported, chosen = cross_validate(candidates, collection.folds, best_mean(measure))
    return Selection(value(tables[None]), on_test[best], best, value(reported), dict(chosen))
