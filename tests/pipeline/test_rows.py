"""Rows that run or say why: a study model with a missing key, no GPU for its size or a failing
server becomes a "not run: <reason>" row; EVALKIT_STRICT=1 stops at the first instead."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import yaml
from notebook_cells import run_cells

from evalkit.core.errors import KitError
from evalkit.pipeline import prerequisites
from evalkit.study import hybrid_study, params, rows, tables
from evalkit.study.published import COLUMNS
from tests.loopback import Loopback

SEED = "929877"  # two annotated facets: a p-MRR pair


class Refusing(Loopback):
    def respond(self, payload, headers):
        return 400, {"error": "model not found"}


@pytest.fixture
def registry_file(tmp_path, monkeypatch):
    server = Refusing().__enter__()
    models = {
        "bm25": {"family": "bm25", "label": "BM25", "role": "agnostic"},
        "bm25-strong": {"family": "bm25", "k1": 1.5, "label": "BM25 k1=1.5", "role": "agnostic"},
        "api-prp": {"family": "llm", "backend": "openai", "base_url": "https://api.example.org/v1", "model": "gpt-4o",
                    "api_key_env": "EVALKIT_TEST_KEY", "method": "prp", "variant": "sliding", "k": 1, "depth": 3,
                    "first_stage": "bm25", "role": "reranker"},
        "broken-server": {"family": "llm", "backend": "openai", "base_url": server.url, "model": "m",
                          "method": "pw", "depth": 2, "first_stage": "bm25", "max_retries": 0, "role": "reranker"},
        "big-llm": {"family": "llm", "model": "mistralai/Mistral-7B-Instruct-v0.2", "method": "pw", "depth": 3,
                    "first_stage": "bm25", "role": "reranker"},
    }
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"t": {"first_stage": "bm25", "depth": 10, "models": models,
                                                        "study": {"reference": "bm25"}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EVALKIT_TEST_KEY", raising=False)
    monkeypatch.delenv(params.STRICT_ENV, raising=False)
    monkeypatch.setattr(prerequisites, "gpu_count", lambda: 0)
    yield path
    server.__exit__()


def study_of(tmp_path, models: str, reference: str = "bm25", notebook: str = "relevance"):
    return params.check(notebook, PROFILE="t", PROTOCOL="pool", MODELS=models,
                        REFERENCE_MODEL=reference if notebook == "relevance" else None,
                        DISCOUNT="csfcube", SEEDS=SEED, OUTPUT_DIR=str(tmp_path / "build"),
                        RUNS_DIR=str(tmp_path / "runs"))


def test_relevance_table_keeps_rows_that_cannot_run(registry_file, tmp_path, collection, data):
    study = study_of(tmp_path, "bm25,api-prp,big-llm,broken-server")
    table = run_cells("relevance", study)["relevance"].set_index("model")
    assert table.loc["bm25", "status"] == "ran" and table.loc["bm25", "all"] > 0
    assert table.loc["api-prp", "status"] == "not run: no API key (EVALKIT_TEST_KEY is not set)"
    assert table.loc["big-llm", "status"] == "not run: no GPU for the 7B model mistralai/Mistral-7B-Instruct-v0.2"
    assert table.loc["broken-server", "status"].startswith("not run: ")
    assert "answered HTTP 400" in table.loc["broken-server", "status"]  # failed while running: one line
    assert all(math.isnan(table.loc["api-prp", c]) for c in COLUMNS)
    assert table.loc["human", "status"] == "ran"
    shown = rows.ran(table.reset_index())
    assert "api-prp" not in set(shown.model) and "bm25" in set(shown.model) and "human" in set(shown.model)
    line = rows.status_line(table.reset_index())
    assert line.startswith("ran: bm25, human; api-prp (not run: no API key")


def test_a_reference_that_cannot_run_leaves_the_others_uncompared(registry_file, tmp_path, collection, data):
    study = study_of(tmp_path, "api-prp,bm25", reference="api-prp")
    table = run_cells("relevance", study)["relevance"].set_index("model")
    assert table.loc["bm25", "same_as_reference"] == "reference api-prp not run"
    assert math.isnan(table.loc["bm25", "p_vs_reference"])


def test_instruction_following_and_sensitivity_say_why(registry_file, tmp_path, collection, data):
    following = run_cells("instruction_following", study_of(tmp_path, "bm25,api-prp",
                                                            notebook="instruction_following"))["following"]
    following = following.set_index("model")
    assert following.loc["api-prp", "status"].startswith("not run: no API key")
    assert following.loc["bm25", "status"] == "ran"
    sensitivity = run_cells("sensitivity", study_of(tmp_path, "bm25,api-prp", notebook="sensitivity"))["sensitivity"]
    skipped = sensitivity[sensitivity.model == "api-prp"]
    assert len(skipped) == len(tables.SENSITIVITY_GROUPS) and skipped.status.str.startswith("not run").all()
    assert (sensitivity[sensitivity.model == "bm25"].status == "ran").all()


def test_the_hybrid_says_why(registry_file, tmp_path, collection):
    table = run_cells("hybrid", study_of(tmp_path, "big-llm", notebook="hybrid"))["hybrid"]
    assert len(table) == 1 and table.status[0].startswith("not run: no GPU")
    assert hybrid_study.verdicts(table) == [f"{table.label[0]}: {table.status[0]}."]


def test_strict_stops_at_the_first_row_that_cannot_run(registry_file, tmp_path, collection, data, monkeypatch):
    monkeypatch.setenv(params.STRICT_ENV, "1")
    # fail early: the parameter check lists what the rows lack, before any model loads
    with pytest.raises(KitError, match=r"api-prp: no API key .*fix: export EVALKIT_TEST_KEY="):
        study_of(tmp_path, "bm25,api-prp")
    monkeypatch.delenv(params.STRICT_ENV)
    study = replace(study_of(tmp_path, "bm25,api-prp"), strict=True)  # a row failing while the study runs
    with pytest.raises(KitError, match=r"api-prp: no API key .*fix: export EVALKIT_TEST_KEY="):
        run_cells("relevance", study)
    monkeypatch.setenv(params.STRICT_ENV, "1")
    monkeypatch.setenv(params.STRICT_ENV, "maybe")
    with pytest.raises(KitError, match="EVALKIT_STRICT='maybe'"):
        study_of(tmp_path, "bm25")
