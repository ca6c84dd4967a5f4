"""`evaluate`'s two requests (`RunRequest`, `EvaluationRequest`, or keywords that fill them), the one
rule of each run setting for every front end (a first stage's depth under the pool protocol), the
command line on the API's functions, and what a result returns: the run it made, whatever its
run-store folder holds later."""

from __future__ import annotations

import shutil

import pytest
from fixtures_datasets import write_beir

from evalkit import api, cli
from evalkit.core.errors import CLI, RequestError
from evalkit.data.runs import ranked
from evalkit.datasets import load_dataset
from evalkit.evaluation.request import EvaluationRequest
from evalkit.pipeline import runner
from evalkit.pipeline.settings import RunRequest, RunSettings

pytestmark = pytest.mark.usefixtures("fresh_cache")  # tests/api/conftest.py


def by_number(query, documents):
    """d1 scores 1, ..., d6 scores 6: d6 first."""
    return [float(d.doc_id[1:]) for d in documents]


def by_number_reversed(query, documents):
    """d1 first."""
    return [-float(d.doc_id[1:]) for d in documents]


@pytest.fixture
def beir(tmp_path):
    return f"beir:{write_beir(tmp_path / 'beir')}"


# --- one rule per run setting, for every front end ------------------------------------------------------


@pytest.mark.parametrize("given, option", [({"depth": 5}, ["--depth", "5"]),
                                           ({"first_stage": "bm25"}, ["--first-stage", "bm25"])])
def test_a_first_stage_setting_under_the_pool_protocol_is_refused_alike_by_the_api_and_evalkit_run(
        beir, tmp_path, capsys, given, option):
    """48.3: ``evaluate(..., depth=5)`` under ``pool`` stored a pool run keyed by depth 5 while
    ``evalkit run --depth 5`` refused it; now one rule (`check_stage`) refuses both, with one line."""
    field = next(iter(given))
    with pytest.raises(RequestError) as raised:
        api.evaluate(by_number, beir, name="numbers", runs_dir=tmp_path / "runs", **given)
    assert str(raised.value) == (f"protocol='pool': {field}= applies to the pooled and full protocols; "
                                 "add protocol='pooled' or drop it")
    assert cli.main(["run", "--dataset", beir, "--model", "bm25", "--runs-dir", str(tmp_path / "runs"),
                     *option]) == 2
    assert capsys.readouterr().err == f"evalkit: error: {raised.value.for_front_end(CLI)}\n"
    assert not (tmp_path / "runs").exists()  # nothing stored by either
    with pytest.raises(RequestError) as bound:  # and every run any front end binds (notebooks, integrations)
        runner.bind(RunSettings(model="bm25", dataset=load_dataset(beir).name, **given), load_dataset(beir),
                    tmp_path / "runs")
    assert str(bound.value) == str(raised.value)


# --- the two requests ----------------------------------------------------------------------------------


def test_requests_and_keywords_give_the_same_evaluation(beir, tmp_path):
    keywords = api.evaluate("bm25", beir, runs_dir=tmp_path / "runs", measures=["nDCG@10", "AP"], aggregate="mean")
    requests = api.evaluate("bm25", beir, RunRequest(runs_dir=tmp_path / "runs"),
                            EvaluationRequest(measures=["nDCG@10", "AP"], aggregate="mean"))
    assert requests.table.equals(keywords.table) and requests.runs == keywords.runs
    assert requests.checked.request.dataset == beir  # the request's dataset is the dataset argument


@pytest.mark.parametrize("call, text", [
    (lambda d, r: api.evaluate("bm25", d, RunRequest(runs_dir=r), depth=3),
     "depth= is a field of the run request given; set it there or as a keyword, not both"),
    (lambda d, r: api.evaluate("bm25", d, None, EvaluationRequest(k=10), runs_dir=r, k=5),
     "k= is a field of the evaluation request given; set it there or as a keyword, not both"),
    (lambda d, r: api.evaluate("bm25", d, runs_dir=r, mesures=["AP"]), "mesures= is no argument of evaluate"),
    (lambda d, r: api.evaluate("bm25", d, {"runs_dir": r}), "run= a dict is not a RunRequest"),
    (lambda d, r: api.evaluate("bm25", d, RunRequest(runs_dir=r, protocol="released"),
                               EvaluationRequest(protocol="pool")),
     "protocol='pool': the run request says 'released' and the evaluation request 'pool'; give one protocol"),
    (lambda d, r: api.evaluate("bm25", d, runs_dir=r, query_template="{instruction} {query}"),
     "query_template= applies to a model object"),
    (lambda d, r: api.evaluate("bm25", d, runs_dir=r, protocol="released", corpus=str(r)),
     "corpus= applies to protocol='full'; add it or drop corpus="),
    (lambda d, r: api.evaluate("bm25", d, runs_dir=r, prompt=" "), "prompt= is empty"),
    (lambda d, r: api.evaluate("bm25", d, runs_dir=r, index_dtype="int8"), "index_dtype='int8': is not one of"),
])
def test_each_request_is_checked_once_in_one_line(beir, tmp_path, call, text):
    with pytest.raises(RequestError) as raised:
        call(beir, tmp_path / "runs")
    assert str(raised.value).startswith(text) and "\n" not in str(raised.value), str(raised.value)
    assert not (tmp_path / "runs").exists()


def test_the_commands_call_the_apis_functions(beir, tmp_path, capsys, monkeypatch):
    """`evalkit run` is `store_runs` and `evalkit evaluate` is `evaluate_runs`: no front end has its own
    sequence. The folder and the figures are the API's."""
    seen = []
    for name in ("store_runs", "evaluate_runs"):
        original = getattr(api, name)
        monkeypatch.setattr(api, name, lambda *a, _f=original, _n=name, **k: seen.append(_n) or _f(*a, **k))
    assert cli.main(["run", "--dataset", beir, "--model", "bm25", "--runs-dir", str(tmp_path / "runs")]) == 0
    folder = capsys.readouterr().out.strip()
    assert cli.main(["evaluate", "--dataset", beir, "--runs", folder, "--json", "--aggregate", "mean"]) == 0
    assert seen == ["store_runs", "evaluate_runs"]
    result = api.evaluate("bm25", beir, runs_dir=tmp_path / "runs", aggregate="mean")
    assert str(result.runs["base"]) == folder


# --- what a result returns: the run it made ------------------------------------------------------------


def test_to_ranx_and_run_of_give_the_run_the_evaluation_made(beir, tmp_path):
    """48.1: two evaluations of different models under one ``name=``: ``r1.to_ranx()`` gave the other's run
    (it read the folder). The result holds its own run; the folder's later content does not matter."""
    r1 = api.evaluate(by_number, beir, name="mine", revision="1", runs_dir=tmp_path / "runs", measures=["RR"])
    first = {q: ranked(docs) for q, docs in r1.run_of().items()}
    assert first["q1"] == ["d6", "d5", "d4", "d3", "d2", "d1"]  # by hand: the higher number first
    try:  # the same name, another model: the run store keeps it elsewhere or refuses it in one line
        r2 = api.evaluate(by_number_reversed, beir, name="mine", revision="2", runs_dir=tmp_path / "runs",
                          measures=["RR"])
        assert ranked(r2.run_of()["q1"]) == ["d1", "d2", "d3", "d4", "d5", "d6"]
    except RequestError:
        pass
    shutil.rmtree(r1.runs["base"], ignore_errors=True)  # whatever the folder holds now
    _, run = r1.to_ranx()
    ranks = {q: sorted(docs, key=lambda d: -docs[d]) for q, docs in run.to_dict().items()}
    assert all(ranks[q] == first[q] for q in ranks) and ranks["q1"][0] == "d6"
    assert r1.table.loc[("base", "RR"), "all"] == pytest.approx(
        (1 / 5 + 1 / 4 + 1 / 2) / 3)  # q1: d2 at 5; q2: d3 at 4 (d4 graded 0); q3: d5 at 2


def test_evaluate_runs_is_the_commands_evaluation(beir, tmp_path):
    """`evaluate_runs` on a stored run gives what `evaluate` gave for it; a path alone or a list; bad runs= one line."""
    made = api.evaluate("bm25", beir, runs_dir=tmp_path / "runs", measures=["RR"])
    folder = made.runs["base"]
    for runs in (folder, str(folder), [folder]):
        read = api.evaluate_runs(runs, dataset=beir, measures=["RR"])
        assert read.outcome.summary(read.labels[0])["RR"] == made.table.loc[("base", "RR")].to_dict()
        assert read.protocol == "pool"
    for runs, text in (([], r"runs=\[\]: give a run file or folder"), ([folder, folder], "given twice")):
        with pytest.raises(RequestError, match=text):
            api.evaluate_runs(runs, dataset=beir)
