"""Save tables (CSV, Markdown, LaTeX) and figures (PNG, SVG) deterministically, and the
study's plain figures. Byte-identical on rerun: fixed SVG ids (``svg.hashsalt``), no
timestamps or software versions in the files."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from evalkit.runs import write_atomic  # noqa: E402

FACET_COLUMNS = {"background": "Background", "method": "Method", "result": "Result", "all": "Agg."}


def save_table(table: pd.DataFrame, name: str, out_dir: Path, digits: int = 2) -> list[Path]:
    """Write `name`.csv (full precision), .md and .tex (rounded) under out_dir."""
    out_dir = Path(out_dir)
    rounded = table.round(digits)
    paths = [out_dir / f"{name}.csv", out_dir / f"{name}.md", out_dir / f"{name}.tex"]
    write_atomic(paths[0], table.to_csv(index=False, float_format="%.6f"))
    write_atomic(paths[1], rounded.to_markdown(index=False, floatfmt=f".{digits}f") + "\n")
    write_atomic(paths[2], rounded.to_latex(index=False, float_format=f"%.{digits}f", na_rep="--"))
    return paths


def save_figure(fig: plt.Figure, name: str, fig_dir: Path) -> list[Path]:
    """Write `name`.png and `name`.svg (no timestamps, fixed SVG ids) and close the figure."""
    fig_dir = Path(fig_dir)
    fig_dir.mkdir(parents=True, exist_ok=True)
    paths = [fig_dir / f"{name}.png", fig_dir / f"{name}.svg"]
    with plt.rc_context({"svg.hashsalt": "evalkit"}):
        fig.savefig(paths[0], dpi=150, bbox_inches="tight", metadata={"Software": None})
        fig.savefig(paths[1], bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return paths


def write_lines(lines: list[str], path: Path) -> Path:
    """A plain-text record (e.g. the findings), one statement per line."""
    write_atomic(Path(path), "\n".join(lines) + "\n")
    return Path(path)


def facet_bars(table: pd.DataFrame, metric: str) -> plt.Figure:
    """Grouped bars: one group per facet (and Agg.), one bar per row label."""
    long = table.melt(id_vars="label", value_vars=list(FACET_COLUMNS), var_name="facet", value_name=metric)
    long["facet"] = long.facet.map(FACET_COLUMNS)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    sns.barplot(data=long, x="facet", y=metric, hue="label", ax=ax)
    ax.set_xlabel("")
    ax.set_ylabel(f"{metric} (x100)")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def sensitivity_plot(table: pd.DataFrame, measure: str) -> plt.Figure:
    """`measure` and p-MRR per instruction variant, one line per model."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric in zip(axes, [measure, "p-MRR"]):
        sns.pointplot(data=table, x="variant", y=metric, hue="label", ax=ax)
        ax.set_xlabel("")
        ax.set_ylabel(f"{metric} (x100)")
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def image(path: Path):
    """A saved PNG for display in a notebook (and so in the HTML report)."""
    from IPython.display import Image

    return Image(filename=str(path))
