"""Tables as printed (evalkit.study.printed): hand-checked cells, Markdown and LaTeX exports (LaTeX
compiled with a real engine), the kit's rows apart from the paper's, wide tables split."""

from __future__ import annotations

import math

import pandas as pd

from evalkit.study import figures, printed
from tests.latex import compile_tables

NASTY = pd.DataFrame({
    "model": ["minilm_probe", "human", "GritLM-7B"], "label": ["A & B {x}", "Human", "GritLM-7B (paper)"],
    "all": [58.254999, math.nan, 42.38], "p_vs_reference": [0.00208, 0.8199, math.nan],
    "kendall_tau": [0.98765, math.nan, math.nan], "not_significant": ["all", "", "method;result"],
    "note": [math.nan, "100% of $5 #1 ~ ^ \\ < > | \u00d7 \u2265 \u2013", "x_y"],
    "source": ["kit", "kit", "Mysore et al., Table 1"]})


def test_cells_are_printed_for_reading():
    assert [printed.cell(v, "p_holm") for v in (0.00208, 0.8199, 1.0, 0.05, 1.2e-05)] == \
        ["0.00208", "0.820", "1.00", "0.0500", "1.20e-05"]
    assert [printed.cell(v, "all") for v in (58.254999, 0.0, -0.004, math.nan, None, 7)] == \
        ["58.25", "0.00", "-0.00", "", "", "7"]
    assert printed.cell(0.98765, "kendall_tau") == "0.988" and printed.cell("x", "p_holm") == "x"
    assert not printed.is_pvalue("p-MRR") and printed.is_pvalue("p_vs_whole")


def test_markdown_has_blanks_full_values_and_no_index():
    text = printed.markdown(NASTY)
    lines = text.splitlines()
    assert lines[0].startswith("| model") and "nan" not in text and "0.00208" in text
    assert " 58.25 " in lines[2] and " 0.00208 " in lines[2] and " 0.988 " in lines[2]
    assert "\\|" in text  # a pipe inside a cell cannot end it


def test_latex_escapes_text_and_compiles(tmp_path):
    text = printed.latex(NASTY)
    assert "p\\_vs\\_reference" in text and "minilm\\_probe" in text and "100\\% of \\$5 \\#1" in text
    assert "nan" not in text and "\\toprule" in text and text.count("\\\\") == 4
    written = figures.save_table(NASTY, "nasty_table", tmp_path)
    assert pd.read_csv(written[0])["all"].iloc[0] == 58.254999  # the CSV keeps full precision
    compile_tables([written[2]], tmp_path)


def test_kit_rows_and_the_papers_rows_are_separate_blocks():
    (kit_title, kit), (paper_title, paper) = printed.blocks(NASTY)
    assert kit_title == printed.KIT_TITLE and list(kit.model) == ["minilm_probe", "human"]
    assert paper_title.startswith(printed.PAPER_TITLE) and "Mysore et al., Table 1" in paper_title
    assert "source" not in kit.columns and "kendall_tau" not in paper.columns  # blank there
    beside = pd.DataFrame({"variant": ["Base"], "MiniLM p-MRR": [1.0], "GritLM-7B (paper) p-MRR": [2.0]})
    assert [list(rows.columns) for _, rows in printed.blocks(beside)] == \
        [["variant", "MiniLM p-MRR"], ["variant", "GritLM-7B (paper) p-MRR"]]


def test_wide_tables_are_split_within_the_width_with_the_keys_repeated():
    wide = pd.DataFrame({"label": ["all-MiniLM-L6-v2 + instruction (prompt-sensitivity probe)"],
                         **{f"column_number_{i}": [12.3456] for i in range(20)}})
    split = printed.parts(wide)
    assert len(split) > 1 and all(part.columns[0] == "label" for part in split)
    assert all(sum(printed.width(part, c) for c in part.columns) <= printed.WIDTH for part in split)
    assert [c for part in split for c in part.columns[1:]] == list(wide.columns[1:])
    shown = printed.show(wide)._repr_html_()
    assert shown.count("<table") == len(split) and "part 1 of" in shown and "<th></th>" not in shown


def test_a_models_p_and_its_holm_p_stay_in_one_part():
    """Table 1's kit block (a smoke run's), split for the report: p_vs_reference and p_holm side by
    side (they fell on either side of the split before)."""
    nan = float("nan")
    table = pd.DataFrame({
        "model": ["bm25", "minilm", "minilm-probe", "human"],
        "label": ["BM25", "all-MiniLM-L6-v2", "all-MiniLM-L6-v2 + instruction (prompt-sensitivity probe)",
                  "Human (annotators vs adjudication)"],
        "role": ["agnostic", "agnostic", "probe", "reference"], "source": "kit", "measure": "nDCG_csfcube@20",
        **{c: [67.0097, 78.9189, 75.8280, 79.8616] for c in ("background", "method", "result", "all", "ci_low",
                                                             "ci_high")},
        "p_vs_reference": [0.1057, nan, 0.4013, nan], "p_holm": [0.2114, nan, 0.4013, nan],
        "same_as_reference": ["yes", "reference", "yes", nan], "not_significant": ["all", "reference", "all", nan],
        "status": ["ran", "ran", "ran", "ran"], "recipe": [nan, nan, nan, "pool"]})
    (_, kit), = printed.blocks(table)
    split = printed.parts(kit)
    holding = [i for i, part in enumerate(split) if "p_vs_reference" in part or "p_holm" in part]
    assert len(split) > 1 and len(holding) == 1, [list(p.columns) for p in split]
