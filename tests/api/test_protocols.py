"""The API and the CLI judge a run under one rule (`evalkit.pipeline.run_input.read_run`): on
``released`` the seed is ranked and judged in its own pools, a run is held to each query's
candidates on both pool protocols, and a run of one protocol is not compared with another's."""

from __future__ import annotations

import json

import pytest

from evalkit import api, cli
from evalkit.core.errors import KitError
from evalkit.data.protocols import protocol_collection
from evalkit.data.runs import write_trec

SEED = ["8781666"]  # the seed the release ranks and judges in its own background and result pools
MEASURES = ["nDCG@20", "AP"]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EVALKIT_MODELS", raising=False)


@pytest.fixture
def released(tmp_path):
    return api.evaluate("bm25", protocol="released", seeds=SEED, measures=MEASURES, aggregate="mean",
                        runs_dir=tmp_path / "runs")


def test_released_is_judged_with_the_seed_by_the_api_as_by_the_cli(released, capsys):
    folder = released.runs["base"]
    assert cli.main(["evaluate", "--dataset", "csfcube", "--runs", str(folder), "--measures", ",".join(MEASURES),
                     "--aggregate", "mean", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["settings"]["protocol"] == "released"
    for measure in MEASURES:
        assert released.table.loc[("base", measure), "all"] == pytest.approx(printed[measure]["all"], abs=1e-12)
    # the seed counts: judged without it (the pool rule), the same run scores otherwise
    pool = api.evaluate("bm25", protocol="pool", seeds=SEED, measures=MEASURES, aggregate="mean",
                        runs_dir=released.runs["base"].parents[3])
    assert released.table.loc[("base", "AP"), "all"] != pool.table.loc[("base", "AP"), "all"]


def test_a_reference_outside_the_released_pools_is_refused(released, collection, tmp_path):
    judged = protocol_collection(collection, "released")
    qid = next(iter(released.per_query.loc["base"].index))
    outside = next(d for d in collection.documents if d not in judged.candidates[qid])
    path = tmp_path / "outside.trec"
    write_trec(path, {qid: {outside: 1.0}}, "outside")
    with pytest.raises(KitError, match=f"document {outside} for {qid} is outside the query's candidate list"):
        api.evaluate("bm25", protocol="released", seeds=SEED, measures=MEASURES, reference=str(path),
                     runs_dir=tmp_path / "runs")


def test_a_reference_of_another_protocol_is_refused(released, tmp_path):
    pool_run = api.evaluate("bm25", protocol="pool", seeds=SEED, measures=MEASURES, runs_dir=tmp_path / "runs")
    with pytest.raises(KitError, match="different protocols .*under pool; .*under released"):
        api.evaluate("bm25", protocol="released", seeds=SEED, measures=MEASURES,
                     reference=str(pool_run.runs["base"]), runs_dir=tmp_path / "runs")
