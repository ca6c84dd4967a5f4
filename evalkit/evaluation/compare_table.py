"""The comparison table a researcher pastes into a paper: runs x measures, per stratum and
``all``, each value marked with the letters of the runs it is significantly better than.

As ranx's ``compare`` report, with the kit's measures and rules: a value is the run's
aggregate as the measures table prints it (x100, `SCALE`; the fold aggregate where the
collection has folds); every pair of runs is tested on the per-query values of that measure
and stratum (`evalkit.evaluation.compare.pair_test`: the paired two-sided t-test by default, or Fisher's
randomization test, seeded, its permutations stated; p-MRR paired by seed), the p-values of
all pairs of runs of one measure and stratum are Holm-adjusted together, and run i is marked
better than run j when the adjusted p is below `alpha` and i's mean per-query difference from
j is positive. The tests, the adjustment and the marks are computed once, by
`evalkit.evaluation.compare.compare`, whose rows (the table's `tests`; ``evalkit evaluate``'s
rows and JSON, ``result.tests``, for the same runs) give each pair's p, p_holm and the run
marked better, so every mark is traceable. A pair with no p-value (fewer than 5 paired units,
no variance) marks nothing, and the notes say so. Printed as text, Markdown or LaTeX (a
booktabs tabular, superscripts as ``$^{ab}$``, the legend and notes as its last row, a table
note that compiles with it); the legend names the family Holm adjusted over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from evalkit.core.errors import RequestError
from evalkit.core.latex import latex_escape
from evalkit.data.collection import Collection
from evalkit.evaluation.aggregate import ALL
from evalkit.evaluation.compare import compare, tested_pairs
from evalkit.evaluation.evaluate import SCALE, paired_by_units
from evalkit.evaluation.stats import ALPHA, FAMILIES, MIN_PAIRED, PERMUTATION_SEED, PERMUTATIONS

FORMATS = ("text", "markdown", "latex")
LETTERS = "abcdefghijklmnoprstuvwxyz"  # no q: Unicode has no superscript q
LEGEND_WIDTH = r"0.9\linewidth"  # the LaTeX table note: a paragraph of this width under the table
SUPERSCRIPT = dict(zip("abcdefghijklmnoprstuvwxyz", "ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻ"))


@dataclass
class ComparisonTable:
    """`values` (index stratum, run; a column per measure; x100), `better` (the same shape: the
    letters of the runs each value is significantly better than), `letters` (run -> letter),
    the test, alpha, permutations and `notes`; `tests`: the rows that made the marks
    (`evalkit.evaluation.compare.compare`: each pair's p, p_holm and the run marked better)."""

    values: pd.DataFrame
    better: pd.DataFrame
    letters: dict[str, str]
    test: str
    alpha: float
    permutations: int | None
    seed: int | None
    notes: list[str] = field(default_factory=list)
    tests: pd.DataFrame = field(default_factory=pd.DataFrame)
    adjust: str = "holm"
    family: str = "pairs"

    @property
    def caption(self) -> str:
        """The legend every format prints with the table: what a mark means, the test and the
        family Holm adjusted over."""
        test = ("paired two-sided t-test" if self.test == "t" else
                f"Fisher's randomization test ({self.permutations:,} permutations, seed {self.seed})")
        runs = len(self.letters)
        pairs = len(tested_pairs(list(self.letters), self.family))
        family = (f"Holm-adjusted over {FAMILIES[self.family]} ({pairs} pair{'s' if pairs != 1 else ''} of "
                  f"{runs} runs)"
                  if self.adjust == "holm" else "not adjusted for multiple comparisons")
        return (f"Values x{SCALE} (the measures table's aggregate); a superscript letter marks a run this one is "
                f"significantly better than ({test} on per-query values, p-MRR paired by seed, {family}, "
                f"p < {self.alpha:g}); each pair's p and adjusted p are the comparison rows' p and p_holm.")

    def cells(self, superscript) -> pd.DataFrame:
        shown = self.values.copy().astype(object)
        for column in self.values.columns:
            shown[column] = [("" if pd.isna(v) else f"{v:.2f}") + (superscript(m) if m and not pd.isna(v) else "")
                             for v, m in zip(self.values[column], self.better[column])]
        return shown

    def _frame(self, superscript) -> pd.DataFrame:
        shown = self.cells(superscript).reset_index()
        shown.insert(1, "", [self.letters[r] for r in shown["run"]])
        return shown

    def text(self) -> str:
        lines = [self.caption]
        shown = self.cells(lambda m: "".join(SUPERSCRIPT[c] for c in m))
        for stratum in dict.fromkeys(shown.index.get_level_values(0)):
            block = shown.loc[stratum]
            block.index = [f"{self.letters[r]}  {r}" for r in block.index]
            lines += ["", f"{stratum}:", block.to_string()]
        return "\n".join(lines + [f"note: {n}" for n in self.notes])

    def markdown(self) -> str:
        shown = self._frame(lambda m: "".join(SUPERSCRIPT[c] for c in m)).map(lambda v: str(v).replace("|", "\\|"))
        align = ["left", "left", "left", *["right"] * len(self.values.columns)]
        body = shown.to_markdown(index=False, disable_numparse=True, colalign=align)
        return "\n".join([body, "", self.caption, "", *[f"- Note: {n}" for n in self.notes]]) + "\n"

    def latex(self) -> str:
        """A booktabs tabular whose last row is the legend and the notes, a table note that
        compiles with the table (one paragraph across every column)."""
        shown = self._frame(lambda m: f"$^{{{m}}}$")
        columns = list(self.values.columns)
        width = len(columns) + 2
        lines = [f"\\begin{{tabular}}{{ll{'r' * len(columns)}}}", r"\toprule",
                 " & ".join(["", "run", *map(latex_escape, columns)]) + r" \\"]
        for stratum in dict.fromkeys(shown["stratum"]):
            lines += [r"\midrule", f"\\multicolumn{{{width}}}{{l}}{{\\emph{{{latex_escape(stratum)}}}}}"
                      r" \\"]
            for row in shown[shown["stratum"] == stratum].itertuples(index=False):
                letter, run, *cells = row[1:]
                lines.append(" & ".join([letter, latex_escape(run), *cells]) + r" \\")
        legend = " ".join([latex_escape(self.caption), *(f"Note: {latex_escape(n)}" for n in self.notes)])
        note = f"\\multicolumn{{{width}}}{{@{{}}p{{{LEGEND_WIDTH}}}@{{}}}}{{\\footnotesize {legend}}}"
        lines += [r"\bottomrule", note + r" \\", r"\end{tabular}", ""]
        return "\n".join(lines)

    def format(self, kind: str = "text") -> str:
        if kind not in FORMATS:
            raise RequestError("format", f"choose one of {', '.join(FORMATS)}", value=kind)
        return {"text": self.text, "markdown": self.markdown, "latex": self.latex}[kind]()

    def __str__(self) -> str:
        return self.text()

    def _repr_markdown_(self) -> str:  # a notebook shows the Markdown table
        return self.markdown()


def compare_table(collection: Collection, tables: Mapping[str, pd.DataFrame], measures: Sequence[str],
                  aggregate_by: str = "folds", test: str = "t", alpha: float = ALPHA,
                  permutations: int = PERMUTATIONS, seed: int = PERMUTATION_SEED,
                  adjust: str = "holm", family: str = "pairs") -> ComparisonTable:
    """The runs x measures table of `tables` (per-query tables, run name -> table); `adjust`
    ``none`` leaves p-values raw (as ranx's report). Its marks are the ``better`` column of
    `evalkit.evaluation.compare.compare`'s rows, kept as the table's `tests`."""
    names = list(tables)  # the adjustment, the test and its options are checked by `compare`'s rules
    if len(names) > len(LETTERS):
        raise RequestError("runs",
                           f"{len(names)} runs: a comparison table marks at most {len(LETTERS)}; compare fewer runs")
    letters = dict(zip(names, LETTERS))
    strata = [*dict.fromkeys(collection.strata.values()), ALL]
    rows = compare(collection, tables, measures, aggregate_by, test, permutations, seed, alpha, adjust, family)
    index = pd.MultiIndex.from_product([strata, names], names=["stratum", "run"])
    better = pd.DataFrame("", index=index, columns=list(measures))
    each = rows.drop_duplicates(["measure", "stratum", "run"])  # every run is a row's run at least once
    values = (SCALE * each.pivot(index=["stratum", "run"], columns="measure", values="aggregate")) \
        .reindex(index=index, columns=list(measures)).astype(float)
    pairs = rows[rows["against"] != ""]
    for row in pairs[pairs["better"] != ""].itertuples(index=False):
        loser = row.against if row.better == row.run else row.run
        better.loc[(row.stratum, row.better), row.measure] += letters[loser]
    for column in better.columns:
        better[column] = better[column].map(lambda m: "".join(sorted(m, key=LETTERS.index)))
    blank = pairs.loc[pairs["note"] != "", "note"].str.split(";").str[0].value_counts()
    notes = [f"{count} pair(s) not tested: {why}" for why, count in sorted(blank.items())]
    for m in (m for m in measures if paired_by_units(collection, m)):
        notes.append(f"{m}: a seed's two facets are one unit of the paired test (they are not independent "
                     f"queries); a stratum needs {MIN_PAIRED} seeds for a test")
    return ComparisonTable(values, better, letters, test, alpha, permutations if test == "fisher" else None,
                           seed if test == "fisher" else None, notes, rows.reset_index(drop=True), adjust, family)
