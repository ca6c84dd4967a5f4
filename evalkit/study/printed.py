"""Tables as a reader sees them: the one formatting rule of every printed table (the Markdown and
LaTeX exports, the notebooks' displays and so the HTML report), and the split of a study table
into the kit's rows and the paper's published rows, each block cut into parts narrow enough to
read at 1,200 px.

CSV files keep full precision (`save_table`); printed: values (the tables
are already x100) at two decimals, p-values to three significant figures, sha256 columns as
their first 12 hex digits, blanks for missing values, no index column, LaTeX-escaped text in
`.tex` files (a booktabs tabular).
"""

from __future__ import annotations

import html
import math
import numbers
from pathlib import Path

import pandas as pd

from evalkit.core.latex import LATEX, latex_escape  # noqa: F401  (printed.latex_escape)
from evalkit.data.runs import write_atomic

DIGITS = {"kendall_tau": 3, "score": 3, "kendall_undefined": 0}  # columns not on the x100 scale
# Columns a block states once in its title when they are constant in it (else shown as columns).
TITLE_COLUMNS = ("measure", "role", "source")
KEYS = ("label", "variant", "setting", "dataset")  # repeated in every part of a split table
WIDTH = 1150  # px a part may take (the report's page is 1,200 px wide)
WRAP = 36  # characters after which a text cell wraps (the report's CSS: max-width 36ch)
CHAR_PX, CELL_PX = 7.5, 16.0  # estimated px per character at the report's 13 px font, and cell padding
KIT_TITLE = "This kit"
PAPER_TITLE = ("The paper's published rows (Mysore et al.; full corpus, hub models): context, "
               "not the same setting")


def is_pvalue(column: str) -> bool:
    """p-value columns (`p`, `p_vs_reference`, `p_holm`, ...); not p-MRR."""
    return column == "p" or str(column).startswith("p_")


def missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, numbers.Real) and math.isnan(value))


def cell(value, column: str) -> str:
    """One value as printed: blank when missing; integers as they are; p-values to three significant
    figures (0.00208, 0.820, 1.00); other numbers at two decimals (`DIGITS` for the few that are
    not x100)."""
    if missing(value):
        return ""
    if str(column).endswith("sha256") and isinstance(value, str) and len(value) == 64:
        return value[:12]  # a checksum as printed: 12 hex digits (the CSV keeps all 64)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        if is_pvalue(column):
            return f"{float(value):#.3g}".rstrip(".")
        return f"{float(value):.{DIGITS.get(str(column), 2)}f}"
    return str(value)


def formatted(table: pd.DataFrame) -> pd.DataFrame:
    """Every cell as a printed string (`cell`), the index dropped."""
    table = table.reset_index(drop=True)
    return pd.DataFrame({c: [cell(v, c) for v in table[c]] for c in table.columns}, columns=list(table.columns))


def numeric(table: pd.DataFrame, column: str) -> bool:
    values = table[column].dropna()
    return bool(len(values)) and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values)


# --- Markdown and LaTeX ------------------------------------------------------------------------

def latex(table: pd.DataFrame) -> str:
    """A booktabs tabular (needs ``\\usepackage{booktabs}``): numbers right-aligned, text escaped."""
    shown = formatted(table)
    align = "".join("r" if numeric(table, c) else "l" for c in table.columns)
    lines = [f"\\begin{{tabular}}{{{align}}}", r"\toprule",
             " & ".join(latex_escape(c) for c in table.columns) + r" \\", r"\midrule"]
    lines += [" & ".join(latex_escape(v) for v in row) + r" \\" for row in shown.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)


def markdown(table: pd.DataFrame) -> str:
    """A pipe table of the printed cells (no re-parsing of numbers, `|` escaped)."""
    shown = formatted(table).map(lambda v: v.replace("|", "\\|"))
    align = ["right" if numeric(table, c) else "left" for c in table.columns]
    return shown.to_markdown(index=False, disable_numparse=True, colalign=align) + "\n"


# --- blocks and parts ----------------------------------------------------------------------------


def blocks(table: pd.DataFrame, published: str = PAPER_TITLE) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows) blocks: the kit's rows, then the published rows (`source` other than "kit",
    or columns named "... (paper) ..."), titled `published` (the study paper's by default);
    columns blank throughout a block are dropped and `TITLE_COLUMNS` constant in it go into its title."""
    if "source" in table.columns:
        kit = table["source"].fillna("kit") == "kit"
        found = [(KIT_TITLE, table[kit]), (published, table[~kit])]
    else:
        paper = [c for c in table.columns if "(paper)" in str(c)]
        keys = key_columns(table)
        found = [(KIT_TITLE, table.drop(columns=paper)), (published, table[keys + paper] if paper else table[[]])]
    out = []
    for title, rows in found:
        if rows.empty or len(rows.columns) == len(key_columns(rows)):
            continue
        rows = rows[[c for c in rows.columns if not rows[c].map(missing).all()]]
        stated = []
        for column in TITLE_COLUMNS:
            if column in rows.columns and rows[column].nunique() == 1:
                value = rows[column].iloc[0]
                if column != "source" or value != "kit":
                    stated.append(f"{column}: {value}")
                rows = rows.drop(columns=column)
        if "source" in rows.columns and (rows["source"] == "kit").all():
            rows = rows.drop(columns="source")
        if {"label", "model"} <= set(rows.columns) and (rows["label"] == rows["model"] + " (paper)").all():
            rows = rows.drop(columns="model")  # the paper's rows: the label says it all
        rows = rows[_reading_order(rows)]
        out.append((title + (f" ({'; '.join(stated)})" if stated else ""), rows.reset_index(drop=True)))
    return out


def _reading_order(table: pd.DataFrame) -> list[str]:
    """Keys and the model name first, then the numbers (so a split keeps them together), then text."""
    first = [c for c in table.columns if c in KEYS or c == "model"]
    numbers = [c for c in table.columns if c not in first and numeric(table, c)]
    return first + numbers + [c for c in table.columns if c not in first and c not in numbers]


def key_columns(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if c in KEYS]


def width(table: pd.DataFrame, column: str) -> float:
    """Estimated px of a column as the report draws it (text wraps after `WRAP` characters)."""
    shown = formatted(table[[column]])[column]
    longest = max([len(str(column)), *(len(v) for v in shown)])
    return min(longest, WRAP) * CHAR_PX + CELL_PX


def parts(table: pd.DataFrame, budget: float = WIDTH) -> list[pd.DataFrame]:
    """Column groups of a table, each within `budget` px (`width`), as few as fit and of even widths,
    the key columns (`KEYS`, else the first column) repeated in every group, columns in table order;
    adjacent p-value columns (``p_vs_reference``, ``p_holm``) never split apart."""
    keys = key_columns(table) or list(table.columns[:1])
    rest = [c for c in table.columns if c not in keys]
    base = sum(width(table, c) for c in keys)
    units: list[list[str]] = []  # columns kept in one part: a run of p-values (a model's p and its Holm p)
    for column in rest:
        if units and is_pvalue(column) and is_pvalue(units[-1][-1]):
            units[-1].append(column)
        else:
            units.append([column])
    widths = {tuple(u): sum(width(table, c) for c in u) for u in units}

    def pack(limit: float) -> list[list[str]]:
        groups: list[list[str]] = [[]]
        used = base
        for unit in units:
            if groups[-1] and used + widths[tuple(unit)] > limit:
                groups.append([])
                used = base
            groups[-1].extend(unit)
            used += widths[tuple(unit)]
        return groups

    groups = pack(budget)
    even = base + sum(widths.values()) / len(groups)  # the same number of parts, of even widths
    while even < budget and len(pack(even)) > len(groups):
        even += CHAR_PX
    groups = pack(min(even, budget))
    return [table[keys + group] for group in groups]


STYLE = ("<style>table.evalkit{border-collapse:collapse;font-size:13px;margin:0.2em 0 1em 0}"
         "table.evalkit th,table.evalkit td{padding:2px 8px;border-bottom:1px solid #ddd;vertical-align:top;"
         "max-width:36ch;white-space:normal}table.evalkit th{border-bottom:1.5px solid #333;text-align:left}"
         "table.evalkit td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
         "p.evalkit-block{font-weight:600;margin:0.6em 0 0.1em 0;font-size:13px}</style>")


def html_table(table: pd.DataFrame) -> str:
    """Static HTML of one part: no index, numbers right-aligned, printed cells."""
    shown = formatted(table)
    kinds = {c: numeric(table, c) for c in table.columns}
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    body = "".join("<tr>" + "".join(f"<td class=\"num\">{html.escape(v)}</td>" if kinds[c] else
                                    f"<td>{html.escape(v)}</td>" for c, v in zip(table.columns, row)) + "</tr>"
                   for row in shown.itertuples(index=False))
    return f'<table class="evalkit"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


class Table:
    """A study table for display (notebook and HTML report): its blocks (`blocks`; one untitled block
    with `split=False`), each in parts (`parts`), as static HTML; plain text as a fallback."""

    def __init__(self, table: pd.DataFrame, title: str | None = None, split: bool = True,
                 published: str = PAPER_TITLE, empty: str | None = None):
        self.table, self.title, self.split, self.published, self.empty = table, title, split, published, empty

    def _blocks(self) -> list[tuple[str, pd.DataFrame]]:
        return blocks(self.table, self.published) if self.split else [("", self.table)]

    def _repr_html_(self) -> str:
        out = [STYLE]
        if self.title:
            out.append(f"<p class=\"evalkit-block\">{html.escape(self.title)}</p>")
        if self.table.empty and self.empty:
            out.append(f"<p><em>{html.escape(self.empty)}</em></p>")
        for title, rows in self._blocks():
            split = parts(rows)
            for i, part in enumerate(split):
                suffix = f" (columns, part {i + 1} of {len(split)})" if len(split) > 1 else ""
                if title or suffix:
                    out.append(f"<p class=\"evalkit-block\">{html.escape((title + suffix).strip())}</p>")
                out.append(html_table(part))
        return "\n".join(out)

    def __repr__(self) -> str:
        if self.table.empty and self.empty:
            return self.empty
        return "\n\n".join(f"{title}\n{formatted(rows).to_string(index=False)}" for title, rows in self._blocks())


def show(table: pd.DataFrame, title: str | None = None, split: bool = True, published: str = PAPER_TITLE,
         empty: str | None = None) -> Table:
    """A study table as printed, for the last line of a notebook cell; `split=False` for a table that
    is not the kit's and the published rows (one block); `published` titles the published block;
    `empty`: the sentence shown instead of a table without rows (why there is none)."""
    return Table(table, title, split, published, empty)


def save_table(table: pd.DataFrame, name: str, out_dir: Path) -> list[Path]:
    """Write `name`.csv (full precision) and, for reading, .md and .tex (`evalkit.study.printed`:
    two decimals, p-values to three significant figures, blanks for missing values, LaTeX-escaped
    text in a booktabs tabular) under out_dir."""
    out_dir = Path(out_dir)
    paths = [out_dir / f"{name}.csv", out_dir / f"{name}.md", out_dir / f"{name}.tex"]
    write_atomic(paths[0], table.to_csv(index=False))
    write_atomic(paths[1], markdown(table))
    write_atomic(paths[2], latex(table))
    return paths
