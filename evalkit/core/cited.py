"""The kit's files of published figures with citations (`config/published_*.csv`): read as text,
their columns checked, with the one-line errors every reader of them gives."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from evalkit.core.errors import DataError


def read_cited_csv(path: Path, columns: Sequence[str], what: str) -> pd.DataFrame:
    """The CSV at `path` as strings (blank cells stay ""), refused in one line when it is missing
    or its columns are not `columns`; `what` names it in the missing-file error."""
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise DataError(path, f"{what} not found; check the path") from None
    if list(table.columns) != list(columns):
        raise DataError(path, f"columns must be {','.join(columns)}")
    return table
