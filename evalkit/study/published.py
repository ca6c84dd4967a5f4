"""The paper's published tables (Mysore et al., Tables 1-3, x100 as printed), read from
``config/published_mysore.csv`` with each row's source: the study's tables and figures set the
kit's rows beside them (`evalkit.study.tables`, `evalkit.study.figures`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evalkit.core.cited import read_cited_csv
from evalkit.core.errors import DataError

PUBLISHED = Path(__file__).resolve().parents[1] / "config" / "published_mysore.csv"
PUBLISHED_METRICS = {"relevance": "ndcg@20", "p-MRR": "p-mrr"}  # metric names of the published file
PUBLISHED_TABLES = {"relevance": "Table 1", "p-MRR": "Table 2"}
PUBLISHED_COLUMNS = ["table", "model", "variant", "metric", "background", "method", "result", "all",
                     "not_significant", "protocol", "source", "note"]
COLUMNS = ["background", "method", "result", "all"]
REFERENCE = "reference"


def load_published(path: Path | None = None) -> pd.DataFrame:
    """Every row of the paper's Tables 1-3 (x100 as printed), columns `PUBLISHED_COLUMNS`."""
    path = Path(path) if path else PUBLISHED
    table = read_cited_csv(path, PUBLISHED_COLUMNS, "published figures")
    for column in COLUMNS:
        values = pd.to_numeric(table[column], errors="coerce")
        if values.isna().any():
            raise DataError(f"{path}:{int(values.isna().idxmax()) + 2}", f"{column} must be a number")
        table[column] = values
    for line, marks in enumerate(table["not_significant"], start=2):
        if marks not in ("", REFERENCE) and not set(marks.split(";")) <= set(COLUMNS):
            raise DataError(f"{path}:{line}", f"not_significant lists columns of {', '.join(COLUMNS)} "
                            f"(';'-separated), '{REFERENCE}' or nothing")
    return table


def published_rows(kind: str) -> list[dict]:
    """The paper's rows (x100, full-corpus protocol) of "relevance" (Table 1, NDCG@20, with its
    significance marks) or "p-MRR" (Table 2)."""
    if kind not in PUBLISHED_METRICS:
        raise DataError("published record",
                        f"no published rows of {kind!r}; choose one of {', '.join(PUBLISHED_METRICS)}")
    table = load_published()
    table = table[table.table == PUBLISHED_TABLES[kind]]
    extra = {"measure": "NDCG@20 (paper)"} if kind == "relevance" else {}
    return [{"model": r.model, "label": f"{r.model} (paper)", "role": "published", "source": r.source, **extra,
             **{c: float(getattr(r, c)) for c in COLUMNS},
             **({"not_significant": r.not_significant} if kind == "relevance" else {}), "note": r.note}
            for r in table.itertuples()]
