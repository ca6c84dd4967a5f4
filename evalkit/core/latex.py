"""The kit's one LaTeX escape, for every .tex table it writes (the study tables,
`evalkit.study.printed`; the comparison table, `evalkit.evaluation.compare_table`)."""

LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
         "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
         ">": r"\textgreater{}", "\u00d7": r"\texttimes{}", "\u2265": r"$\geq$", "\u2264": r"$\leq$",
         "\u00b1": r"\textpm{}", "\u2013": "--", "\u2014": "---", "\u2212": "-", "\u2192": r"$\rightarrow$",
         "\u2026": r"\dots{}"}


def latex_escape(text: str) -> str:
    """Text safe inside a LaTeX tabular: the special characters escaped, the kit's few non-ASCII
    marks (x, >=, dashes) as LaTeX commands."""
    return "".join(LATEX.get(ch, ch) for ch in str(text))
