"""Published Promptriever figures to compare against (x100 as printed), each traced to the table of
Weller et al. 2024 (arXiv 2409.11136) it comes from: Table 2 (FollowIR, InstructIR), Table 3
(MS MARCO / TREC DL) and Table 4 (BEIR nDCG@10 with no prompt, the Selected and the Best prompt;
Selected is blank in the paper for datasets without dev/train data, so those rows are absent)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evalkit.core.cited import read_cited_csv
from evalkit.core.errors import DataError

PUBLISHED = Path(__file__).resolve().parents[1] / "config" / "published_promptriever.csv"
COLUMNS = ["source", "table", "model", "dataset", "metric", "value", "note"]


def load_published(path: Path | None = None) -> pd.DataFrame:
    """The published figures (x100 as printed), one row each, columns `COLUMNS`."""
    path = Path(path) if path else PUBLISHED
    table = read_cited_csv(path, COLUMNS, "published figures")
    values = pd.to_numeric(table["value"], errors="coerce")
    if values.isna().any():
        row = int(values.isna().idxmax()) + 2
        raise DataError(f"{path}:{row}", "value must be a number")
    return table.assign(value=values)
