"""A Ray run's workers reach an LLM the kit serves: `prepare` hands the run's worker count to a
scorer that can spread its judgments over vLLM replicas (`use_workers`), and only under Ray."""

from __future__ import annotations

import pytest

from evalkit.pipeline import runner
from evalkit.pipeline.runner import RunSettings, bind, prepare

QUERIES = ("929877_background",)


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    monkeypatch.delenv("EVALKIT_MODELS", raising=False)
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def asked(monkeypatch):
    """What each built scorer was asked to use (a real BM25 scorer given a `use_workers`)."""
    calls: list[tuple] = []
    build = runner.registry.build

    def built(*args, **kwargs):
        scorer = build(*args, **kwargs)
        scorer.use_workers = lambda workers, placement: calls.append((workers, placement))
        return scorer

    monkeypatch.setattr(runner.registry, "build", built)
    return calls


@pytest.mark.parametrize(("executor", "workers", "expected"),
                         [("ray", 2, [(2, "ray")]), ("ray", None, [(1, "ray")]), ("local", None, [])])
def test_the_runs_workers_reach_a_scorer_that_serves_replicas(collection, tmp_path, asked, executor, workers,
                                                              expected):
    settings = RunSettings(model="bm25", queries=QUERIES, executor=executor, workers=workers)
    prepare(bind(settings, collection, tmp_path / "runs"))  # BM25 over the pool: nothing is sent to Ray
    assert asked == expected
