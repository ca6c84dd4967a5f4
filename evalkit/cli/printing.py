"""What `evaluate` and `human` share in their output: the summary table or JSON, its title and
settings, and the per-query CSV."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence

import pandas as pd

from evalkit.core.errors import DataError
from evalkit.evaluation.evaluate import PMRR, SCALE, default_shape


def null_nan(value):
    """NaN (and any other non-finite float) as JSON null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: null_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [null_nan(v) for v in value]
    return value


def print_summary(summary: dict, as_json: bool, title: str) -> None:
    if as_json:
        print(json.dumps(null_nan(summary), allow_nan=False))
        return
    values = {k: v for k, v in summary.items() if k not in ("queries", "settings", "notes")}
    print(f"{title}, values x{SCALE}")
    print((SCALE * pd.DataFrame(values).T).to_string(float_format=lambda v: f"{v:.2f}", na_rep="-"))
    settings = ", ".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in summary["settings"].items())
    counts = ", ".join(f"{k}={v}" for k, v in summary["queries"].items())
    print(f"queries: {counts}; {settings}")
    for note in summary.get("notes", []):
        print(f"note: {note}")


def summary_title(what: str, collection, aggregate_by: str) -> str:
    """The header of a summary: what is evaluated, on which collection, aggregated how (the fold
    aggregate over the test folds, else the mean over every evaluated query)."""
    part = "test folds" if aggregate_by == "folds" and collection.folds else "mean over all queries"
    return f"{what} on {collection.name} ({part})"


def summary_settings(args: argparse.Namespace, collection, names: Sequence[str]) -> dict:
    aggregate_by = args.aggregate if collection.folds else "mean"  # summarize's plain mean without folds
    settings = {"dataset": args.dataset, "measures": list(names), "aggregate": aggregate_by}
    shape = default_shape(collection, args.discount, args.k) if args.measures is None else None
    if shape is not None:  # the default table the collection declares, as the discount and k shape it
        settings |= shape
    if getattr(args, "pmrr_ties", None) and PMRR in names:
        settings["pmrr_ties"] = args.pmrr_ties
    return settings


def write_per_query(table, path: str | None) -> None:
    if not path:
        return
    try:
        table.to_csv(path)
    except OSError as exc:
        raise DataError(path, f"cannot write the per-query CSV ({exc.strerror or exc})") from None
