"""Rows that run or say why: a study model whose prerequisites are missing (no API key, no
server, no GPU for a 7B model) or whose run fails with a kit error is kept in the tables as
a row with the status "not run: <reason>" and no values, so that one missing key does not
stop the whole study; ``EVALKIT_STRICT=1`` (`Study.strict`) stops at the first instead.

Readers of built tables (figures, findings, trade-off) take `ran` rows only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pandas as pd

from evalkit.core.errors import KitError, MissingPrerequisite
from evalkit.data.collection import Collection
from evalkit.data.runs import Run
from evalkit.pipeline.runner import Failure, NotRun, bind, obtain, unavailable
from evalkit.study.params import Study

STATUS = "status"
RAN = "ran"
NOT_RUN = "not run"
T = TypeVar("T")


def outcomes(study: Study, collection: Collection, variant: str = "base",
             prompt: str | None = None) -> tuple[dict[str, Run], dict[str, str]]:
    """(runs of the study models that ran, reasons of those that did not), by model name; `prompt`
    appended to every query (Promptriever's prompt selection)."""
    ran, reasons = {}, {}
    for model in study.models:
        failure = Failure.STRICT if study.strict else Failure.REASON
        try:
            result = obtain(bind(study.settings(model, collection, variant, prompt), collection, study.runs_dir),
                            failure=failure)
        except KitError as exc:  # a setting refused when the run is bound: as a failed run
            if study.strict:
                raise
            result = NotRun(f"not run: {' '.join(str(exc).splitlines())}")
        if isinstance(result, NotRun):
            reasons[model] = result.reason
        else:
            ran[model] = result.run
    return ran, reasons


def blocked(study: Study, collection: Collection, model: str) -> str | None:
    """"not run: <reason>" for a model whose prerequisites are missing (strict: a KitError), else None:
    for study code that builds the model itself rather than through a run."""
    settings = study.settings(model, collection)
    missing = unavailable(bind(settings, collection, study.runs_dir))
    if missing is None:
        return None
    if study.strict:
        raise MissingPrerequisite(f"{settings.run_name}: {missing[0]}", missing[1])
    return f"not run: {missing[0]}"


def attempt(study: Study, collection: Collection, model: str, compute: Callable[[], T]) -> T | str:
    """`compute()` for a model (study code that builds it itself: the hybrid, prompt selection), or
    "not run: <reason>" when its prerequisites are missing or it fails with a kit error (strict:
    the KitError)."""
    reason = blocked(study, collection, model)
    if reason is not None:
        return reason
    try:
        return compute()
    except KitError as exc:
        if study.strict:
            raise
        return f"{NOT_RUN}: {' '.join(str(exc).splitlines())}"


def ran(table: pd.DataFrame) -> pd.DataFrame:
    """The rows that hold values: those whose status is not "not run: ..."."""
    if STATUS not in table.columns:
        return table
    keep = ~table[STATUS].fillna("").astype(str).str.startswith(NOT_RUN)
    return table[keep].reset_index(drop=True)


def status_line(table: pd.DataFrame) -> str:
    """Which models ran and which did not (with why), for a notebook and the report."""
    if STATUS not in table.columns:
        return "every row ran"
    models = table[table[STATUS].notna()].drop_duplicates("model")
    done = [m for m, s in zip(models.model, models[STATUS]) if not str(s).startswith(NOT_RUN)]
    skipped = [f"{m} ({s})" for m, s in zip(models.model, models[STATUS]) if str(s).startswith(NOT_RUN)]
    return f"ran: {', '.join(done) or 'none'}" + (f"; {'; '.join(skipped)}" if skipped else "; every row ran")
