"""The study notebooks under papermill: a smoke run (four seeds covering both folds' dev and
test halves, the offline profile's fast models), the parameter contract, the check cell,
byte-identical tables on rerun, and the summary reading the built tables."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import nbformat
import pandas as pd
import papermill
import pytest
from matplotlib.text import Text
from notebook_run import CONTRACT, ROOT, SEEDS, STUDY, TAG, execute, parameters

from evalkit.core.errors import KitError, kit_error_names
from evalkit.datasets.csfcube import annotators
from evalkit.evaluation.evaluate import summarize
from evalkit.pages.explore import SCOPE
from evalkit.promptriever.prompts import load_prompts
from evalkit.study import findings, params
from evalkit.study.human import human_per_query


def table(workspace: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(workspace / "build" / "tables" / f"{name}-{TAG}.csv")


@pytest.mark.parametrize("name", [*STUDY, "promptriever"])
def test_notebooks_declare_only_contract_parameters_and_use_each(name):
    notebook = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    declared = parameters(name)
    extra = {"BEIR", "FOLLOWIR", "INSTRUCTIR"} if name == "promptriever" else set()
    assert set(declared) <= CONTRACT | extra and {"PROFILE", "PROTOCOL", "SEEDS", "OUTPUT_DIR"} <= set(declared)
    later = "\n".join(c.source for c in notebook.cells if c.cell_type == "code"
                      and "parameters" not in c.metadata.get("tags", []))
    assert all(re.search(rf"\b{p}\b", later) for p in declared)
    assert all(not c.outputs for c in notebook.cells if c.cell_type == "code")
    assert "def " not in later


STEPS = {
    "relevance": ["steps.load_runs(", "steps.per_query(", "steps.aggregate(", "steps.paired_tests(", "steps.intervals(",
                  "tables.relevance_table(", "figures.save_figure("],
    "instruction_following": ["steps.load_runs(", "steps.per_query(", "steps.aggregate(",
                              "tables.instruction_following_table(", "figures.save_figure("],
    "sensitivity": ["tables.sensitivity_groups(", "steps.load_variant_runs(", "steps.per_query(",
                    "tables.sensitivity_table(", "figures.save_figure("],
    "hybrid": ["hybrid_study.load_terms(", "hybrid_curve.curve(",
               "hybrid_study.choose_weights(", "hybrid_study.paired_tests(", "hybrid_study.hybrid_table(",
               "hybrid_study.verdicts("],
    "promptriever": ["steps.load_prompt_runs(", "prompt_selection.per_query(", "prompt_selection.selection_table(",
                     "prompt_selection.recipe_datasets(", "load_published("],
    "summary": ["findings.read_tables(", "findings.findings(", "tradeoff.points(", "figures.save_figure("],
}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_each_step_is_a_visible_cell_in_the_studys_order_with_its_sentence(name):
    """The notebook reads as the study: each step in a cell of its own, in order, under a markdown
    sentence, its result shown (the cell ends with it or displays it)."""
    cells = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4).cells
    code = [(i, c.source) for i, c in enumerate(cells) if c.cell_type == "code"]
    where = [next(i for i, source in code if step in source) for step in STEPS[name]]
    assert where == sorted(where) and len(set(where[:-1])) == len(where) - 1  # in order, one cell each
    for i in where:
        assert any(cells[j].cell_type == "markdown" for j in range(max(0, i - 2), i)), cells[i].source
        last = cells[i].source.strip().splitlines()[-1]
        assert "(" in last or last.isidentifier() or ".head()" in last or "query(" in last, last


def test_relevance_table_has_models_human_significance_and_the_papers_rows(workspace, data, collection):
    relevance = table(workspace, "relevance")
    kit = relevance[relevance.source == "kit"].set_index("model")
    assert list(kit.index) == ["bm25", "minilm", "minilm-probe", "human"]
    qids = params.Study("offline", "pool", TAG, seeds=tuple(SEEDS.split(","))).queries(collection)
    human = human_per_query(annotators(data), ["nDCG_csfcube@20"], collection).loc[list(qids)]
    expected = 100 * summarize(collection, human)["nDCG_csfcube@20"]["all"]
    assert kit.loc["human", "all"] == pytest.approx(expected, abs=1e-6)
    assert kit.loc["minilm", "same_as_reference"] == "reference"
    assert kit.loc["bm25", "same_as_reference"] in ("yes", "no") and 0 <= kit.loc["bm25", "p_holm"] <= 1
    assert set(kit.measure) == {"nDCG_csfcube@20"}
    assert (relevance.source != "kit").sum() == 12  # the paper's published rows (Table 1)
    assert kit.loc["minilm", "not_significant"] == "reference" and not kit.not_significant.isna().iloc[:3].all()
    assert (workspace / "figures" / f"relevance-{TAG}.svg").is_file()


def test_instruction_following_table_has_p_mrr_and_ranking_movement(workspace):
    kit = table(workspace, "instruction_following").set_index("model")
    assert kit.loc["minilm", "all"] == 0.0 and kit.loc["minilm", "kendall_tau"] == 1.0
    assert kit.loc["minilm-probe", "kendall_tau"] < 1.0 and kit.loc["human", "all"] > 0


def test_sensitivity_table_has_every_variant_group(workspace):
    sensitivity = table(workspace, "sensitivity")
    assert list(sensitivity.variant) == ["Base", "Generic", "Definition", "Paraphrases (mean of 3)", "Aspect subset"]
    assert {"nDCG_csfcube@20", "p-MRR"} <= set(sensitivity.columns)


def test_hybrid_table_has_the_cross_validated_row_and_the_curve(workspace):
    hybrid = table(workspace, "hybrid")
    assert hybrid.setting.iloc[0].startswith("hybrid") and len(hybrid) == 12
    assert hybrid.setting.iloc[-1] == "a=1.0" and hybrid["p-MRR"].iloc[-1] == 0.0
    verdict = (workspace / "build" / "tables" / f"hybrid-verdict-{TAG}.txt").read_text()
    assert verdict.startswith("all-MiniLM-L6-v2: cross-validated facet hybrid")


def test_summary_states_the_findings_from_the_built_tables(workspace, tmp_path):
    tables = workspace / "build" / "tables"
    stated = (tables / f"findings-{TAG}.txt").read_text().splitlines()
    assert [line[:3] for line in stated] == ["(a)", "(b)", "(c)"]
    assert (workspace / "figures" / f"tradeoff-{TAG}.png").is_file()
    # Read from the CSV files: a changed table changes the findings, nothing is recomputed.
    for name in findings.TABLES:
        (tmp_path / f"{name}-{TAG}.csv").write_bytes((tables / f"{name}-{TAG}.csv").read_bytes())
    relevance = pd.read_csv(tmp_path / f"relevance-{TAG}.csv")
    relevance.loc[relevance.model == "minilm-probe", "all"] = 1.0
    relevance.to_csv(tmp_path / f"relevance-{TAG}.csv", index=False)
    built = findings.read_tables(tmp_path, TAG)
    changed = findings.findings(built["relevance"], built["instruction_following"], built["sensitivity"])
    assert "nDCG_csfcube@20 1.00) does not beat" in changed[0] and changed[1:] == stated[1:] and changed[0] != stated[0]


def test_every_exported_latex_table_compiles(workspace, tmp_path):
    from tests.latex import compile_tables

    tables = sorted((workspace / "build" / "tables").glob("*.tex"))
    assert {p.name.split("-offline")[0] for p in tables} >= {"relevance", "instruction_following", "sensitivity",
                                                           "sensitivity-paper", "hybrid", "tradeoff"}
    assert not any("nan" in p.read_text().split() for p in tables)
    compile_tables(tables, tmp_path)


def test_summary_names_a_missing_table(tmp_path):
    with pytest.raises(Exception, match=r"sensitivity-offline-pool\.csv is missing; fix: build it first"):
        findings.read_tables(tmp_path, "offline-pool", ("sensitivity",))


def test_tables_and_figures_are_byte_identical_on_rerun(workspace):
    tables, figures = workspace / "build" / "tables", workspace / "figures"
    outputs = [tables / f"{n}-{TAG}.{ext}" for n in ("relevance", "tradeoff") for ext in ("csv", "md", "tex")]
    outputs += [figures / f"{n}-{TAG}.{ext}" for n in ("relevance", "tradeoff") for ext in ("png", "svg")]
    before = {p: p.read_bytes() for p in outputs}
    execute("relevance", workspace, out="relevance-again")
    execute("summary", workspace, out="summary-again")
    assert all(p.read_bytes() == before[p] for p in outputs)


def test_check_cell_rejects_a_bad_value_with_one_line(workspace):
    with pytest.raises(papermill.PapermillExecutionError) as raised:
        execute("sensitivity", workspace, out="bad", PROTOCOL="nope")
    assert raised.value.ename == "RequestError" and "\n" not in raised.value.evalue
    assert raised.value.evalue.startswith("PROTOCOL=nope: choose one of pool, released, pooled, full")
    assert "params.check(" in raised.value.source  # the check cell, before any model is built


def test_smoke_runs_get_their_own_tag_in_make_and_in_the_notebooks():
    assert TAG.startswith("offline-pool-smoke-") and params.build_tag("offline", "pool") == "offline-pool"
    shown = subprocess.run(["make", "-n", "--debug=b", "relevance", f"SEEDS={SEEDS}", "OUTPUT_DIR=/nonexistent"],
                           cwd=ROOT, capture_output=True, text=True).stdout
    assert f"Must remake target '/nonexistent/notebooks/relevance-{TAG}.ipynb'" in shown


def write_beir(folder: Path) -> Path:
    """A tiny BEIR folder with dev and test splits."""
    (folder / "qrels").mkdir(parents=True)
    docs = {f"d{i}": f"graph neural network method {i}" if i % 2 else f"corpus annotation data {i}" for i in range(8)}
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n"
                                                 for d, t in docs.items()))
    queries = {"q1": "graph neural network", "q2": "annotation data", "q3": "network method", "q4": "corpus"}
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (folder / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq3\td3\t1\nq4\td4\t1\n")
    return folder


def test_promptriever_notebook_selects_prompts_with_real_runs(workspace):
    beir = write_beir(workspace / "scifact-mini")
    execute("promptriever", workspace, BEIR=str(beir))
    row = table(workspace, "promptriever-csfcube").iloc[0]
    assert row.model == "minilm" and row["best prompt"] in load_prompts()
    assert all(0 <= row[c] <= 100 for c in ("none", "Best", "Selected")) and row.Best >= row.Selected
    prompt_runs = list((workspace / "runs" / "offline" / "csfcube" / "pool").glob("minilm--prompt-*"))
    assert len(prompt_runs) == len(load_prompts()) and all((p / "sidecar.json").is_file() for p in prompt_runs)
    tables = workspace / "build" / "tables"
    datasets = table(workspace, "promptriever-datasets")  # named by the build tag, as every table
    assert datasets.dataset.tolist() == ["scifact-mini"]
    assert (tables / "promptriever-published.csv").is_file()


def test_seeds_that_parse_to_nothing_are_refused():
    """SEEDS="," once meant a silent full run; now it is a one-line error."""
    from evalkit.study.params import seeds_of

    with pytest.raises(KitError, match="names no ids"):  # the request's rule (select_queries'), as every front end's
        seeds_of(" , ,")
    assert seeds_of("") is None and seeds_of("9, 1,9") == ("1", "9")


def test_explore_notebook_renders_one_seed_as_static_html(tmp_path, monkeypatch):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    notebook = nbformat.read(ROOT / "notebooks" / "explore.ipynb", as_version=4)
    later = "\n".join(c.source for c in notebook.cells if c.cell_type == "code"
                      and "parameters" not in c.metadata.get("tags", []))
    assert all(re.search(rf"\b{p}\b", later) for p in parameters("explore")) and "def " not in later
    assert all(not c.outputs for c in notebook.cells if c.cell_type == "code")
    out = tmp_path / "explore.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / "explore.ipynb"), str(out), progress_bar=False, cwd=str(ROOT),
                               parameters={"SEED": "929877", "MODELS": "bm25", "K": 5,  # BM25: no encoding
                                           "RUNS_DIR": str(tmp_path / "runs")})
    executed = nbformat.read(out, as_version=4)
    shown = "".join(o.get("data", {}).get("text/html", "") for c in executed.cells if c.cell_type == "code"
                    for o in c.outputs)
    assert "Seed 929877" in shown and "BM25" in shown
    assert "documents relevant only under background" in shown and "ann" in shown
    view = executed.cells[-1].outputs[-1]  # the views: static HTML and what they ran, no widget (progress bars aside)
    assert view.output_type == "execute_result" and set(view.data) == {"text/html", "text/plain", SCOPE}
    assert view.data[SCOPE] == {"every_query": [], "seed_only": ["BM25"]}  # a cold RUNS_DIR: the seed's queries
    with pytest.raises(papermill.PapermillExecutionError) as raised:
        papermill.execute_notebook(str(ROOT / "notebooks" / "explore.ipynb"), str(tmp_path / "bad.ipynb"),
                                   progress_bar=False, cwd=str(ROOT), parameters={"SEED": "123", "MODELS": "bm25"})
    assert raised.value.ename in kit_error_names() and "SEED" in raised.value.evalue


def test_study_figures_carry_captions_and_the_per_query_figure(workspace):
    figures_dir = workspace / "figures"
    for name in ("relevance", "relevance-per-query", "instruction_following", "instruction_following-per-query"):
        assert (figures_dir / f"{name}-{TAG}.png").is_file()
        caption = (figures_dir / f"{name}-{TAG}.caption.txt").read_text()
        assert "Setting: profile offline, protocol pool" in caption and TAG in caption
    executed = nbformat.read(workspace / "relevance.ipynb", as_version=4)
    shown = "".join(o.get("data", {}).get("text/html", "") for c in executed.cells if c.cell_type == "code"
                    for o in c.outputs)
    assert shown.count("<figcaption") == 2


def test_trade_off_labels_do_not_overlap_and_points_at_one_place_share_a_label():
    from evalkit.study import figures, tradeoff

    rows = [{"label": f"model {i}", "variant": "Base", "relevance": 50 + 0.2 * (i % 5), "p-MRR": 0.1 * (i // 5),
             "kind": "kit", "measure": "nDCG_csfcube@20"} for i in range(15)]
    rows += [{"label": "twin", "variant": "Base", "relevance": 50.0, "p-MRR": 0.0, "kind": "human",
              "measure": "nDCG_csfcube@20"}]
    fig = tradeoff.plot(pd.DataFrame(rows))
    ax = fig.axes[0]
    texts = [t for t in ax.texts]
    assert any(t.get_text() == "model 0 / twin" for t in texts) and len(texts) == 15
    renderer = fig.canvas.get_renderer()
    for text in texts:
        text.update_positions(renderer)
    boxes = [Text.get_window_extent(t, renderer) for t in texts]  # the text, not its leader line
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert figures.colour_of("all-MiniLM-L6-v2") == figures.colour_of("minilm") != figures.colour_of("bm25")


def test_a_smoke_run_of_a_one_facet_seed_builds_its_tables(tmp_path):
    """One query: no t-test, no bootstrap interval, no fold with both halves; blanks, not errors
    (two-facet seeds are the workspace's smoke run)."""
    seeds = "10014168"
    tag = params.build_tag("offline", "pool", seeds)
    for name in ("relevance", "instruction_following", "sensitivity"):
        execute(name, tmp_path, SEEDS=seeds, MODELS="bm25", REFERENCE_MODEL="bm25")
        assert (tmp_path / "build" / "tables" / f"{name}-{tag}.csv").is_file()
    relevance = pd.read_csv(tmp_path / "build" / "tables" / f"relevance-{tag}.csv")
    bm25 = relevance[relevance.model == "bm25"].iloc[0]
    assert bm25["background"] > 0 and pd.isna(bm25["method"]) and pd.isna(bm25["result"])
