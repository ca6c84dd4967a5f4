"""Generic prompts and prompt selection, as in Promptriever (Weller et al., 2024, arXiv 2409.11136).

The default prompts are the paper's ten (its Table 11, `evalkit/config/generic_prompts.yaml`);
``load_prompts(which="kit")`` gives ten written for the kit. On BEIR, the dev half is 10
queries sampled with a fixed seed from the dev split, else from train (`evalkit.datasets.beir`).

A prompt is appended to the query text after one space (`evalkit.pipeline.runner.with_prompt`, the
rule FollowIR and Promptriever use for instructions); each prompt is a run of its own
(``RunSettings(prompt=...)``).

Selection ("none" is never a candidate, as in the paper's tables):

- ``none``: the value with no prompt;
- ``Best``: the oracle, the prompt with the highest value on the test halves;
- ``Selected``: per fold, the prompt chosen on the dev half (`evalkit.evaluation.selection`, the kit's
  one dev/test selector), reported on that fold's test half; NaN (blank) on a collection
  without dev/test folds, as the paper leaves it blank for datasets without dev/train data.

The dev choice (``rule``): ``promptriever`` (default), as the authors' script
(orionw/promptriever at commit cde6c3a1, scripts/tables/make_prompt_table_from_results.py
``get_best_dev_prompt``) reads the values their pipeline hands it: each dev mean as trec_eval
prints it (4 decimals, ``%.4f``), read back and x100 (scripts/tables/gather_results.py;
`trec_eval_value`); nDCG rounded to 0.1 (``f"{v:.1f}"``), ties broken by the highest dev
`TIEBREAK` (Recall@100 at trec_eval's 4 decimals, x100; missing counts 0), then by the lowest
prompt hash (the md5 hex of the prompt, as their run scripts name prompts: ``echo -n "$prompt"
| md5sum``). The script compares the rounded values as strings, which orders e.g. "9.5" above
"10.2"; the kit compares them as numbers (the same whenever the values have equally many
digits; the README's departures table lists it). A tied prompt without a recall counts 0 for
the maximum but is dropped as the script drops it (its ``None`` never equals the maximum), so
a prompt with recall 0.0 wins over one with none. Where no tied prompt has a recall, the
script filters every prompt out and fails (``min()`` of nothing); the kit keeps them all and
goes on to the hash.
``mean``: the highest unrounded dev mean, the first listed among equals.

Values are the collection's aggregate (`evaluation.summarize`: the fold mean of the test
halves). Best's ties go to the prompt listed first.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from evalkit.core import configfile
from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Collection
from evalkit.evaluation.evaluate import summarize
from evalkit.evaluation.selection import best_mean, cross_validate

GENERIC_PROMPTS = Path(__file__).resolve().parents[1] / "config" / "generic_prompts.yaml"
NONE = "none"  # the label of the run without a prompt
RULES = ("promptriever", "mean")
TIEBREAK = "R@100"


def check_prompts(prompts: Sequence[str], source: str = "prompts") -> list[str]:
    """The prompts as a list: non-empty, distinct strings."""
    prompts = list(prompts)
    if not (prompts and all(isinstance(p, str) and p.strip() for p in prompts)):
        raise DataError(source, "expected a non-empty list of non-empty strings")
    if len(set(prompts)) != len(prompts):
        raise DataError(source, "a prompt is listed twice; list each prompt once")
    return prompts


PROMPT_SETS = {"paper": "prompts", "kit": "kit_prompts"}  # which -> key of the prompt file


def load_prompts(path: Path | None = None, which: str = "paper") -> list[str]:
    """A prompt list of a YAML file: ``prompts: [...]`` (which="paper"; in the kit's file the ten
    generic prompts of Promptriever's Table 11, the default) or ``kit_prompts: [...]``
    (which="kit": ten prompts written for the kit)."""
    if which not in PROMPT_SETS:
        raise RequestError("prompts", f"unknown prompt set {which!r}; choose one of {', '.join(PROMPT_SETS)}")
    key = PROMPT_SETS[which]
    path = Path(path) if path else GENERIC_PROMPTS
    try:
        data = yaml.safe_load(configfile.read_text(path))
    except FileNotFoundError:
        raise DataError(path, "prompt file not found; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(path, f"cannot read the prompt file ({getattr(exc, 'strerror', None) or exc})") from None
    except yaml.YAMLError as exc:
        raise DataError(path, f"malformed YAML ({exc}); write 'prompts:' and a list of strings") from None
    prompts = data.get(key) if isinstance(data, dict) else None
    if not isinstance(prompts, list):
        raise DataError(path, f"expected '{key}:' followed by a list of non-empty strings")
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
        raise DataError("per-query values",
                        f"no values of {what} to choose a prompt from; check the test queries' judgments")
    return str(series.idxmax())  # NaN skipped; the first listed among equals


def prompt_hash(prompt: str) -> str:
    """The authors' name for a prompt: the md5 hex digest of its text."""
    return hashlib.md5(prompt.encode("utf-8")).hexdigest()


def trec_eval_value(mean: float) -> float:
    """A mean as the authors' tables hold it: trec_eval's print of it (``%.4f``) read back, x100
    (orionw/promptriever scripts/tables/gather_results.py: ``float(match.group(1)) * 100``)."""
    return float(f"{mean:.4f}") * 100


def promptriever_choice(measure: str, tiebreak: str = TIEBREAK) -> Callable[[dict[str, pd.DataFrame]], str]:
    """A chooser (`evalkit.evaluation.selection`): the authors' get_best_dev_prompt (module docstring)."""

    def choose(dev: dict[str, pd.DataFrame]) -> str:
        rounded = {p: float(f"{trec_eval_value(t[measure].mean()):.1f}") for p, t in dev.items()}
        if all(math.isnan(v) for v in rounded.values()):
            raise DataError("dev queries", f"no dev values of {measure} to choose from; check the dev queries")
        top = max(v for v in rounded.values() if not math.isnan(v))
        tied = [p for p, v in rounded.items() if v == top]
        if len(tied) > 1:
            recall = {p: (trec_eval_value(dev[p][tiebreak].mean()) if tiebreak in dev[p] else math.nan)
                      for p in tied}
            top = max(0.0 if math.isnan(v) else v for v in recall.values())  # the script's ``v[1] or 0``
            # a prompt without a recall never equals the top (the script's None == 0.0 is false)
            tied = [p for p in tied if recall[p] == top] or tied  # none has one: the script fails; keep all
        return min(tied, key=prompt_hash)

    return choose


def select_prompt(collection: Collection, tables: Mapping[str | None, pd.DataFrame], measure: str,
                  stratum: str = "all", rule: str = "promptriever") -> Selection:
    """none / Best / Selected from per-query tables (`evaluation.per_query`) keyed by prompt,
    None for the run without one; `measure` as summarized for `stratum`; the dev choice by
    `rule` (module docstring; ``promptriever`` reads the tables' `TIEBREAK` column where present)."""
    if rule not in RULES:
        raise RequestError("rule", f"unknown prompt-selection rule {rule!r}; choose one of {', '.join(RULES)}")
    if None not in tables:
        raise DataError("runs", "prompt selection needs the run without a prompt (key None); add it")
    candidates = {p: t for p, t in tables.items() if p is not None}
    if not candidates:
        raise RequestError("prompts", "no prompts to select from; give at least one")

    def value(table: pd.DataFrame) -> float:
        return summarize(collection, table)[measure][stratum]

    on_test = {p: value(t) for p, t in candidates.items()}
    best = _first_max(on_test, measure)
    if not collection.folds:  # no dev/train split: Best only, Selected left blank (the paper's Table 4)
        return Selection(value(tables[None]), on_test[best], best, math.nan, {})
    chooser = promptriever_choice(measure) if rule == "promptriever" else best_mean(measure)
    reported, chosen = cross_validate(candidates, collection.folds, chooser)
    return Selection(value(tables[None]), on_test[best], best, value(reported), dict(chosen))
