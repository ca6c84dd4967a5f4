"""The study's figures as drawn (evalkit.study.figures, query_plot, tradeoff): the kit's rows and the
paper's apart, labels inside the axes and overlapping nothing (drawn text extents), legends whose
markers are the drawn ones, tick labels horizontal and at least 8 pt, a stated and true query order,
error bars and a stated axis on the sensitivity figure, and a caption for every figure."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.text import Text

from evalkit.core.errors import KitError
from evalkit.study import figures, params, query_plot, tradeoff

MEASURE = "nDCG_csfcube@20"
STUDY = params.Study("offline", "pool", "offline-pool", ("bm25", "minilm"), "minilm", MEASURE)


def text_box(text, renderer):
    """The drawn extent of a label's text (an annotation's own extent adds its leader line)."""
    text.update_positions(renderer)
    return Text.get_window_extent(text, renderer)


def texts_inside_and_apart(fig, ax, texts):
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    boxes = [text_box(t, renderer) for t in texts]
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    return boxes


def relevance_rows() -> pd.DataFrame:
    from evalkit.study.published import published_rows

    kit = [{"model": m, "label": label, "source": "kit", "measure": MEASURE, "background": 50 + i, "method": 40 + i,
            "result": 45 + i, "all": 45 + i, "ci_low": 40 + i, "ci_high": 50 + i}
           for i, (m, label) in enumerate([("bm25", "BM25"), ("minilm", "all-MiniLM-L6-v2"),
                                           ("human", "Human (annotators, pool)")])]
    return pd.DataFrame(kit + published_rows("relevance"))


def test_facet_bars_put_the_kit_and_the_paper_in_separate_panels_named_on_the_axis():
    table = relevance_rows()
    fig = figures.facet_bars(table, MEASURE)
    kit_axes, paper_axes = fig.axes[:4], fig.axes[4:]
    assert len(paper_axes) == 4
    kit_names = [t.get_text() for t in kit_axes[0].get_yticklabels()]
    paper_names = [t.get_text() for t in paper_axes[0].get_yticklabels()]
    assert kit_names == ["BM25", "all-MiniLM-L6-v2", "Human (annotators, pool)"]
    assert len(paper_names) == 12 and paper_names[:2] == ["Human", "SciNCL"]
    assert all(len(ax.patches) <= 12 for ax in fig.axes)
    assert kit_axes[0].get_xlabel() == f"{MEASURE} (x100)"
    assert paper_axes[0].get_xlabel() == "NDCG@20 (x100), as published"
    colours = [p.get_facecolor() for p in paper_axes[3].patches]
    assert len({tuple(np.round(c, 3)) for c in colours}) == 12  # one colour per published row
    fig.canvas.draw()
    assert all(t.get_fontsize() >= figures.MIN_FONT for ax in fig.axes for t in ax.get_yticklabels())
    plt.close(fig)


def per_query_rows(reference_constant: bool) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(50):
        qid = f"{1000 + i}_{['background', 'method', 'result'][i % 3]}"
        for model in ("minilm", "bm25", "human"):
            value = 0.0 if reference_constant and model == "minilm" else float(rng.uniform(0, 1))  # fractions
            rows.append({"model": model, "label": {"minilm": "all-MiniLM-L6-v2", "bm25": "BM25"}.get(model, "Human"),
                         "qid": qid, "facet": "x", MEASURE: value})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("constant", [False, True])
def test_per_query_order_is_stated_and_true(constant):
    table = per_query_rows(constant)
    order = query_plot.order(table, MEASURE, "minilm")
    rule = query_plot.order_rule(table, MEASURE, "minilm")
    kit = table[table.model != "human"].groupby("qid")[MEASURE].mean()
    ref = table[table.model == "minilm"].set_index("qid")[MEASURE]
    if constant:
        assert rule.startswith(f"ordered by the mean {MEASURE} of the kit's models")
        assert "gives every query 0.00" in rule
        assert list(kit.loc[order]) == sorted(kit, reverse=True)
    else:
        assert rule.startswith("ordered by the reference minilm's")
        assert list(ref.loc[order]) == sorted(ref, reverse=True)
    assert rule in query_plot.caption(STUDY, table, MEASURE, "minilm")


def test_per_query_tick_labels_are_horizontal_readable_and_apart():
    fig = query_plot.plot(per_query_rows(False), [MEASURE], "minilm")
    fig.savefig(__import__("io").BytesIO(), dpi=150, bbox_inches="tight")
    ax = fig.axes[0]
    labels = ax.get_yticklabels()
    assert len(labels) == 50 and all(t.get_rotation() == 0 and t.get_fontsize() >= figures.MIN_FONT for t in labels)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    legend = fig.legends[0]
    drawn = {line.get_label(): line.get_color() for line in ax.get_lines() if not line.get_label().startswith("_")}
    shown = {t.get_text(): h.get_color() for t, h in zip(legend.get_texts(), legend.legend_handles)}
    assert shown == drawn and "all-MiniLM-L6-v2 (reference)" in shown
    plt.close(fig)


def tradeoff_rows() -> pd.DataFrame:
    rows = [{"label": label, "variant": "Base", "kind": "kit", "measure": MEASURE, "relevance": x, "p-MRR": y}
            for label, x, y in [("all-MiniLM-L6-v2", 58.25, 0.0), ("BM25", 52.34, 0.0),
                                ("all-MiniLM-L6-v2 + instruction (prompt-sensitivity probe)", 58.1, 0.29),
                                ("all-MiniLM-L6-v2 sentences, OT (otAspire-like)", 52.15, 13.6),
                                ("all-MiniLM-L6-v2 sentences, max-sim", 53.43, 15.4),
                                ("SmolLM2-135M PRP over MiniLM top 10 (pipeline demonstration)", 57.36, 0.0)]]
    for label in ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2 + instruction (prompt-sensitivity probe)"):
        for i, variant in enumerate(["Generic", "Definition", "Paraphrases (mean of 3)", "Aspect subset"]):
            rows.append({"label": label, "variant": variant, "kind": "kit", "measure": MEASURE,
                         "relevance": 57.5 + 0.3 * i - (1.5 if variant == "Aspect subset" else 0),
                         "p-MRR": 15.66 if variant == "Aspect subset" else 0.2 * i})
    rows.append({"label": "Human (annotators, pool)", "variant": "Base", "kind": "human", "measure": MEASURE,
                 "relevance": 77.38, "p-MRR": 50.71})
    for a in np.round(np.arange(0, 1.01, 0.1), 1):
        rows.append({"label": "all-MiniLM-L6-v2 hybrid", "variant": f"a={a:.1f}", "kind": "hybrid", "measure": MEASURE,
                     "relevance": 56.69 + 1.56 * a + 2 * a * (1 - a), "p-MRR": 15.66 * (1 - a)})
    rows.append({"label": "all-MiniLM-L6-v2 hybrid", "variant": "hybrid (a chosen on dev, per fold)",
                 "kind": "hybrid-cv", "measure": MEASURE, "relevance": 58.67, "p-MRR": 12.66})
    from evalkit.study.published import published_rows

    pmrr = {r["label"]: r["all"] for r in published_rows("p-MRR")}
    rows += [{"label": r["label"], "variant": "Base", "kind": "paper", "measure": tradeoff.PAPER_MEASURE,
              "relevance": r["all"], "p-MRR": pmrr[r["label"]]} for r in published_rows("relevance")]
    return pd.DataFrame(rows)


def test_trade_off_labels_stay_inside_and_overlap_nothing_drawn():
    fig = tradeoff.plot(tradeoff_rows())
    fig.savefig(__import__("io").BytesIO(), dpi=150, bbox_inches="tight")
    kit, paper = fig.axes[:2]
    renderer = fig.canvas.get_renderer()
    for ax in (kit, paper):
        boxes = texts_inside_and_apart(fig, ax, ax.texts)
        markers = [p for c in ax.collections for p in ax.transData.transform(c.get_offsets())]
        half = 3.0 * fig.dpi / 72
        assert not any(b.x0 + 1 < x - half < b.x1 - 1 and b.y0 + 1 < y < b.y1 - 1 or
                       b.contains(x, y) for b in boxes for x, y in markers)
    curve = kit.get_lines()[0]
    along = figures._along([tuple(p) for p in kit.transData.transform(curve.get_xydata())], 1.0)
    assert not any(b.contains(x, y) for b in (text_box(t, renderer) for t in kit.texts) for x, y in along)
    assert {t.get_text() for t in kit.texts} >= {"all-MiniLM-L6-v2 + instruction", "Paraphrases (mean of 3)", "BM25"}
    assert kit.get_xlabel().startswith(MEASURE) and paper.get_xlabel().startswith("NDCG@20")
    # the legend's markers are those drawn: each model's filled circle in its colour
    legend = {t.get_text(): h for t, h in zip(kit.get_legend().get_texts(), kit.get_legend().legend_handles)}
    assert legend["BM25"].get_color() == figures.colour_of("BM25") and legend["BM25"].get_marker() == "o"
    drawn = {tuple(np.round(c.get_facecolor()[0], 3)) for c in kit.collections if len(c.get_offsets())}
    from matplotlib.colors import to_rgba

    assert tuple(np.round(to_rgba(figures.colour_of("BM25")), 3)) in drawn
    plt.close(fig)


def test_sensitivity_figure_has_error_bars_and_the_axis_its_caption_states():
    rows = [{"model": m, "label": label, "variant": v, MEASURE: 56 + i + j * 0.3, "ci_low": 50 + i, "ci_high": 62 + i,
             "p-MRR": j - 1.0, "pmrr_ci_low": j - 3.0, "pmrr_ci_high": j + 1.0}
            for i, (m, label) in enumerate([("minilm", "all-MiniLM-L6-v2"), ("minilm-probe", "probe")])
            for j, v in enumerate(["Base", "Generic", "Definition", "Paraphrases (mean of 3)", "Aspect subset"])]
    table = pd.DataFrame(rows)
    fig = figures.sensitivity_plot(table, MEASURE)
    left, right = fig.axes
    assert left.get_ylim() == (45.0, 65.0)
    assert "runs from 45 to 65, not from 0" in figures.sensitivity_caption(STUDY, table)
    assert right.get_ylim()[0] < 0 < right.get_ylim()[1]
    bars = [c for c in left.containers if c.has_yerr]
    assert len(bars) == 2 and all(len(c.lines[2][0].get_segments()) == 5 for c in bars)
    renderer = fig.canvas.get_renderer()
    ticks = [t.get_window_extent(renderer) for t in left.get_xticklabels()]
    assert not any(a.overlaps(b) for i, a in enumerate(ticks) for b in ticks[i + 1:])
    assert all(t.get_fontsize() >= figures.MIN_FONT for t in left.get_xticklabels())
    plt.close(fig)


def test_every_figure_has_a_caption(tmp_path):
    fig, _ = plt.subplots()
    with pytest.raises(KitError, match="give it a caption"):
        figures.save_figure(fig, "x", tmp_path, caption=" ")
    fig, _ = plt.subplots()
    png, _ = figures.save_figure(fig, "x", tmp_path, caption="What it shows.")
    assert figures.image(png).caption == "What it shows." and not math.isnan(len(png.read_bytes()))


def test_sensitivity_limits_round_to_fives_and_take_the_full_scale_when_no_row_ran():
    import numpy as np
    import pandas as pd

    from evalkit.study.figures import sensitivity_limits

    ran = pd.DataFrame({"ci_low": [41.2, 47.0], "ci_high": [58.1, 61.0], "nDCG": [50.0, 55.0]})
    assert sensitivity_limits(ran, "nDCG") == (40, 65)
    none = pd.DataFrame({"ci_low": [np.nan], "ci_high": [np.nan], "nDCG": [np.nan]})
    assert sensitivity_limits(none, "nDCG") == (0, 100)
