"""A run's settings: built by keyword only; the key a run is stored under holds the settings'
fields alone (the registry entries a run reads are looked up when it is bound, `tests/pipeline/test_bind.py`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import pytest

from evalkit.core.errors import KitError, RequestError
from evalkit.models import registry
from evalkit.pipeline import prerequisites, runner
from evalkit.pipeline.runner import RunSettings, bind, obtain, unavailable
from evalkit.pipeline.settings import EXECUTION_FIELDS

QUERIES = ("929877_background", "929877_method")


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    path = tmp_path / "models.yaml"
    path.write_text(json.dumps({"profiles": {"test": {"first_stage": "bm25-first", "depth": 5, "models": {
        "bm25": {"family": "bm25"}, "bm25-first": {"family": "bm25", "k1": 0.9}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


def test_run_settings_are_built_by_keyword_only():
    with pytest.raises(TypeError):
        RunSettings("bm25")  # a positional argument would silently bind to the wrong field if fields moved
    assert RunSettings(model="bm25").protocol == "pool"


@dataclass(frozen=True, eq=False)
class Counting(registry.Registry):
    """A registry value that records the model names it is asked for."""

    asked: list[str] = field(default_factory=list)

    def spec(self, name, profile):
        self.asked.append(name)
        return super().spec(name, profile)


@pytest.mark.parametrize("protocol, expected", [("pool", ["bm25"]), ("pooled", ["bm25", "bm25-first"])])
def test_a_run_looks_its_model_and_first_stage_up_once(collection, tmp_path, protocol, expected):
    """Checking, keying, building, scoring and the sidecar of one run all read the bound specs."""
    found = registry.load()
    counting = Counting(found.path, found.data)
    asked = counting.asked
    settings = RunSettings(model="bm25", profile="test", protocol=protocol, queries=QUERIES)
    obtain(bind(settings, collection, tmp_path / "runs", counting))  # made: checked, keyed, computed
    assert asked == expected
    asked.clear()
    obtain(bind(settings, collection, tmp_path / "runs", counting))  # reused: bound again, once
    assert asked == expected


def test_the_key_is_the_settings_fields_alone(collection, tmp_path):
    """Binding adds no field to the run-store key (the stored bytes are those of the settings)."""
    settings = RunSettings(model="bm25", profile="test", protocol="pooled", queries=QUERIES)
    bound = bind(settings, collection, tmp_path)
    assert bound.first_stage.name == "bm25-first" and bound.depth == 5
    assert set(bound.key["run_settings"]) == {f for f in RunSettings.__dataclass_fields__} - set(EXECUTION_FIELDS)
    assert bound.folder == runner.run_folder(tmp_path, settings, collection.name)


def test_where_a_run_executes_is_no_part_of_its_key_or_folder(collection, tmp_path):
    """The executor and its workers change the time, not the numbers: a Ray run and an in-process
    one of the same settings have one key and one folder (each reuses the other's run)."""
    settings = RunSettings(model="bm25", profile="test", protocol="pooled", queries=QUERIES)
    local = bind(settings, collection, tmp_path)
    ray = bind(replace(settings, executor="ray", workers=3), collection, tmp_path)
    assert ray.key == local.key and ray.folder == local.folder
    with pytest.raises(RequestError, match="executor="):
        bind(replace(settings, executor="spark"), collection, tmp_path)


def test_the_pool_protocols_have_no_first_stage(collection, monkeypatch):
    """`released` ranks the given candidates as `pool` does: a missing first stage does not block it
    (the first stage was checked on every protocol but ``pool`` before)."""
    monkeypatch.setattr(prerequisites, "missing", lambda spec: [
        prerequisites.Missing(spec.name, "first stage weights absent", "fetch them")] if spec.name == "bm25-first"
        else [])
    for protocol in ("pool", "released"):
        bound = bind(RunSettings(model="bm25", profile="test", protocol=protocol), collection, None)
        assert bound.first_stage is None and bound.depth is None
        assert unavailable(bound) is None
    assert unavailable(bind(RunSettings(model="bm25", profile="test", protocol="pooled"), collection, None)) == (
        "first stage weights absent", "fetch them")


def test_an_unknown_first_stage_is_refused_before_any_work(collection, monkeypatch):
    monkeypatch.setattr(runner, "compute", lambda *args: pytest.fail("ran"))
    settings = RunSettings(model="bm25", profile="test", protocol="pooled", first_stage="nope")
    with pytest.raises(KitError, match="unknown model 'nope' in profile test"):
        bind(settings, collection, None)
