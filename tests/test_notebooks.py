"""Each study notebook runs under papermill with smoke parameters (two seeds, tiny models)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import papermill
import pytest

from evalkit import csfcube
from evalkit.evaluation import summarize
from evalkit.human import human_per_query
from tiny_models import build_sentence_transformer

ROOT = Path(__file__).resolve().parents[1]
SEEDS = "929877,3264891"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study")
    tiny = str(build_sentence_transformer(folder))
    registry = {"profiles": {"smoke": {
        "first_stage": "tiny", "depth": 30,
        "study": {"reference": "tiny", "relevance": ["bm25", "tiny", "tiny-probe"],
                  "sensitivity": ["tiny-probe"], "hybrid": "tiny", "promptriever": ["tiny"]},
        "models": {"bm25": {"family": "bm25", "label": "BM25"},
                   "tiny": {"family": "dense", "model": tiny, "label": "tiny"},
                   "tiny-probe": {"family": "dense", "model": tiny, "query_template": "{instruction} {query}",
                                  "label": "tiny probe", "role": "probe"}}}}}
    (folder / "models.yaml").write_text(json.dumps(registry))
    return folder


@pytest.fixture(autouse=True)
def env(workspace, monkeypatch):
    monkeypatch.setenv("EVALKIT_MODELS", str(workspace / "models.yaml"))
    monkeypatch.setenv("EVALKIT_CACHE", str(workspace / "cache"))


def execute(name: str, workspace: Path, **overrides) -> Path:
    out = workspace / f"{name}.ipynb"
    params = {"PROFILE": "smoke", "SEEDS": SEEDS, "OUTPUT_DIR": str(workspace / "build"),
              "FIGURES_DIR": str(workspace / "figures"), "RUNS_DIR": str(workspace / "runs"), **overrides}
    papermill.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(out), parameters=params,
                               progress_bar=False, cwd=str(ROOT))
    return out


def test_relevance_notebook_records_the_table_and_findings(workspace):
    execute("relevance", workspace)
    table = pd.read_csv(workspace / "build" / "tables" / "relevance-smoke-pool.csv")
    kit = table[table.source == "kit"].set_index("model")
    assert list(kit.index) == ["bm25", "tiny", "tiny-probe", "human"]
    data = csfcube.load()
    human = human_per_query(data)
    expected = 100 * summarize(human[human.seed.isin(SEEDS.split(","))])["ndcg@20"]["all"]
    assert kit.loc["human", "all"] == pytest.approx(expected, abs=1e-6)
    assert kit.loc["tiny", "same_as_reference"] == "reference"
    assert kit.loc["bm25", "same_as_reference"] in ("yes", "no")
    assert (table.source != "kit").sum() == 7  # the paper's published rows
    findings = (workspace / "build" / "tables" / "findings-smoke-pool.txt").read_text().splitlines()
    assert findings[0].startswith("(a)") and any(line.startswith("(c)") for line in findings)
    assert (workspace / "figures" / "relevance-smoke-pool.svg").is_file()


def test_instruction_following_notebook_records_p_mrr_and_the_hybrid(workspace):
    execute("instruction_following", workspace)
    table = pd.read_csv(workspace / "build" / "tables" / "instruction_following-smoke-pool.csv")
    kit = table[table.source == "kit"].set_index("model")
    assert kit.loc["tiny", "all"] == 0.0 and kit.loc["tiny", "kendall_tau"] == 1.0
    hybrid = pd.read_csv(workspace / "build" / "tables" / "hybrid-smoke-pool.csv")
    assert hybrid.setting.iloc[0].startswith("hybrid") and len(hybrid) == 12
    assert (workspace / "figures" / "tradeoff-smoke-pool.png").is_file()


def test_sensitivity_notebook_records_every_variant_group(workspace):
    execute("sensitivity", workspace)
    table = pd.read_csv(workspace / "build" / "tables" / "sensitivity-smoke-pool.csv")
    assert list(table.variant) == ["Base", "Generic", "Definition", "Paraphrases (mean of 3)", "Aspect subset"]


def test_bad_parameter_fails_with_a_clear_message(workspace):
    with pytest.raises(papermill.PapermillExecutionError, match="unknown protocol 'nope'"):
        execute("sensitivity", workspace, PROTOCOL="nope")


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


def test_promptriever_notebook_selects_prompts_on_csfcube_and_a_beir_folder(workspace):
    beir = write_beir(workspace / "scifact-mini")
    execute("promptriever", workspace, SEEDS="929877,3264891,1936997,11844559", BEIR=str(beir))
    tables = workspace / "build" / "tables"
    selection = pd.read_csv(tables / "promptriever-csfcube-smoke-pool.csv")
    row = selection.iloc[0]
    from evalkit.promptriever import load_prompts

    assert row.model == "tiny" and row["best prompt"] in load_prompts()
    assert all(0 <= row[c] <= 100 for c in ("none", "Best", "Selected"))
    datasets = pd.read_csv(tables / "promptriever-datasets-smoke.csv")
    assert datasets.dataset.tolist() == ["scifact-mini"]
    assert {"ndcg@10 (none)", "ndcg@10 (Best)", "ndcg@10 (Selected)"} <= set(datasets.columns)
    assert (tables / "promptriever-published.csv").is_file()
