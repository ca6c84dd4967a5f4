"""The comparison table a researcher pastes into a paper: runs x measures, per stratum and
``all``, each value marked with the letters of the runs it is significantly better than.

As ranx's ``compare`` report, with the kit's measures and rules: a value is the run's
aggregate as the measures table prints it (x100, `SCALE`; the fold aggregate where the
collection has folds); every pair of runs is tested on the per-query values of that measure
and stratum (`evalkit.evaluation.compare.pair_test`: the paired two-sided t-test by default, or Fisher's
randomization test, seeded, its permutations stated; p-MRR paired by seed), the p-values of
all pairs of one measure and stratum are Holm-adjusted together, and run i is marked better
than run j when the adjusted p is below `alpha` and i's mean per-query difference from j is
positive. A pair with no p-value (fewer than 5 paired units, no variance) marks nothing, and
the notes say so. Printed as text, Markdown or LaTeX (booktabs; superscripts as ``$^{ab}$``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import pandas as pd

from evalkit.core.errors import KitError
from evalkit.core.latex import latex_escape
from evalkit.data.collection import Collection
from evalkit.evaluation.aggregate import ALL
from evalkit.evaluation.compare import check_common, pair_test
from evalkit.evaluation.evaluate import SCALE, paired_by_units, summarize
from evalkit.evaluation.stats import MIN_PAIRED, PERMUTATION_SEED, PERMUTATIONS, holm

FORMATS = ("text", "markdown", "latex")
ALPHA = 0.05
LETTERS = "abcdefghijklmnoprstuvwxyz"  # no q: Unicode has no superscript q
SUPERSCRIPT = dict(zip("abcdefghijklmnoprstuvwxyz", "ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻ"))


@dataclass
class ComparisonTable:
    """`values` (index stratum, run; a column per measure; x100), `better` (the same shape: the
    letters of the runs each value is significantly better than), `letters` (run -> letter),
    the test, alpha, permutations and `notes`."""

    values: pd.DataFrame
    better: pd.DataFrame
    letters: dict[str, str]
    test: str
    alpha: float
    permutations: int | None
    seed: int | None
    notes: list[str] = field(default_factory=list)

    @property
    def caption(self) -> str:
        test = ("paired two-sided t-test" if self.test == "t" else
                f"Fisher's randomization test ({self.permutations:,} permutations, seed {self.seed})")
        return (f"Values x{SCALE} (the measures table's aggregate); a superscript letter marks a run this one is "
                f"significantly better than ({test} on per-query values, p-MRR paired by seed, Holm-adjusted over "
                f"the pairs of each measure and stratum, p < {self.alpha:g}).")

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
        shown = self._frame(lambda m: f"$^{{{m}}}$")
        columns = list(self.values.columns)
        lines = [f"% {latex_escape(self.caption)}", f"\\begin{{tabular}}{{ll{'r' * len(columns)}}}", r"\toprule",
                 " & ".join(["", "run", *map(latex_escape, columns)]) + r" \\"]
        for stratum in dict.fromkeys(shown["stratum"]):
            lines += [r"\midrule", f"\\multicolumn{{{len(columns) + 2}}}{{l}}{{\\emph{{{latex_escape(stratum)}}}}}"
                      r" \\"]
            for row in shown[shown["stratum"] == stratum].itertuples(index=False):
                letter, run, *cells = row[1:]
                lines.append(" & ".join([letter, latex_escape(run), *cells]) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", ""]
        return "\n".join(lines)

    def format(self, kind: str = "text") -> str:
        if kind not in FORMATS:
            raise KitError(f"format {kind!r}: choose one of {', '.join(FORMATS)}")
        return {"text": self.text, "markdown": self.markdown, "latex": self.latex}[kind]()

    def __str__(self) -> str:
        return self.text()

    def _repr_markdown_(self) -> str:  # a notebook shows the Markdown table
        return self.markdown()


def compare_table(collection: Collection, tables: Mapping[str, pd.DataFrame], measures: Sequence[str],
                  aggregate_by: str = "folds", test: str = "t", alpha: float = ALPHA,
                  permutations: int = PERMUTATIONS, seed: int = PERMUTATION_SEED,
                  adjust: str = "holm") -> ComparisonTable:
    """The runs x measures table of `tables` (per-query tables, run name -> table); `adjust`
    ``none`` leaves p-values raw (as ranx's report)."""
    if adjust not in ("holm", "none"):
        raise KitError(f"adjust={adjust!r}: choose holm or none")
    if not 0 < alpha < 1:
        raise KitError(f"alpha={alpha!r}: give a significance level between 0 and 1, e.g. 0.05")
    names = list(tables)
    if len(names) > len(LETTERS):
        raise KitError(f"{len(names)} runs: a comparison table marks at most {len(LETTERS)}; compare fewer runs")
    for name in names[1:]:
        check_common({names[0]: tables[names[0]], name: tables[name]})
    letters = dict(zip(names, LETTERS))
    strata = [*dict.fromkeys(collection.strata.values()), ALL]
    summaries = {name: summarize(collection, table, aggregate_by) for name, table in tables.items()}
    index = pd.MultiIndex.from_product([strata, names], names=["stratum", "run"])
    values = pd.DataFrame(index=index, columns=list(measures), dtype=float)
    better = pd.DataFrame("", index=index, columns=list(measures))
    blank: dict[str, int] = {}
    for measure in measures:
        for stratum in strata:
            for name in names:
                values.loc[(stratum, name), measure] = SCALE * summaries[name].get(measure, {}).get(stratum, math.nan)
            results = {(i, j): pair_test(collection, tables[i], tables[j], measure, stratum, test, permutations, seed)
                       for i, j in combinations(names, 2)}
            raw = {pair: r.pvalue for pair, r in results.items()}
            adjusted = holm(raw) if adjust == "holm" else raw
            for (i, j), result in results.items():
                if result.note:
                    blank[result.note.split(";")[0]] = blank.get(result.note.split(";")[0], 0) + 1
                p = adjusted[(i, j)]
                if math.isnan(p) or p >= alpha or result.delta == 0:
                    continue
                winner, loser = (i, j) if result.delta > 0 else (j, i)
                better.loc[(stratum, winner), measure] += letters[loser]
    for column in better.columns:
        better[column] = better[column].map(lambda m: "".join(sorted(m, key=LETTERS.index)))
    notes = [f"{count} pair(s) not tested: {why}" for why, count in sorted(blank.items())]
    for m in (m for m in measures if paired_by_units(collection, m)):
        notes.append(f"{m}: a seed's two facets are one unit of the paired test (they are not independent "
                     f"queries); a stratum needs {MIN_PAIRED} seeds for a test")
    return ComparisonTable(values, better, letters, test, alpha, permutations if test == "fisher" else None,
                           seed if test == "fisher" else None, notes)
