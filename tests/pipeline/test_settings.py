"""A run's settings: built by keyword only, and the registry entries a run reads resolved once per run
(`evalkit.pipeline.runner.Resolved`), the first stage only where the protocol has one."""

from __future__ import annotations

import json

import pytest

from evalkit.core.errors import KitError
from evalkit.models import registry
from evalkit.pipeline import prerequisites, runner
from evalkit.pipeline.runner import RunSettings, check_settings, ensure_run, resolve, sidecar_key, unavailable

QUERIES = ("929877_background", "929877_method")


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    path = tmp_path / "models.yaml"
    path.write_text(json.dumps({"profiles": {"test": {"first_stage": "bm25-first", "depth": 5, "models": {
        "bm25": {"family": "bm25"}, "bm25-first": {"family": "bm25", "k1": 0.9}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def lookups(monkeypatch):
    """The model names `registry.spec` was asked for, in order."""
    asked: list[str] = []
    real = registry.spec

    def counting(name, profile):
        asked.append(name)
        return real(name, profile)

    monkeypatch.setattr(registry, "spec", counting)
    return asked


def test_run_settings_are_built_by_keyword_only():
    with pytest.raises(TypeError):
        RunSettings("bm25")  # a positional argument would silently bind to the wrong field if fields moved
    assert RunSettings(model="bm25").protocol == "pool"


@pytest.mark.parametrize("protocol, expected", [("pool", ["bm25"]), ("pooled", ["bm25", "bm25-first"])])
def test_a_run_looks_its_model_and_first_stage_up_once(collection, tmp_path, lookups, protocol, expected):
    """Checking, keying, building, scoring and the sidecar of one run all read one lookup each."""
    settings = RunSettings(model="bm25", profile="test", protocol=protocol, queries=QUERIES)
    ensure_run(settings, collection, tmp_path / "runs")  # made: checked, keyed, executed, keyed again
    assert lookups == expected
    lookups.clear()
    ensure_run(settings, collection, tmp_path / "runs")  # reused: a later run looks up afresh, once
    assert lookups == expected


def test_the_key_is_the_settings_fields_alone(collection):
    """Resolving adds no field to the run-store key (the stored bytes are those of the settings)."""
    settings = RunSettings(model="bm25", profile="test", protocol="pooled", queries=QUERIES)
    resolved = resolve(settings)
    assert resolve(resolved) is resolved
    assert resolved.run_name == settings.run_name and resolved.protocol == "pooled"
    assert resolved.first_stage_name == "bm25-first" and resolved.first_stage_depth == 5
    key = sidecar_key(settings, collection)
    assert key == sidecar_key(resolved, collection)
    assert set(key["run_settings"]) == {f for f in RunSettings.__dataclass_fields__}


def test_the_pool_protocols_have_no_first_stage(monkeypatch):
    """`released` ranks the given candidates as `pool` does: a missing first stage does not block it
    (the first stage was checked on every protocol but ``pool`` before)."""
    monkeypatch.setattr(prerequisites, "missing", lambda spec: [
        prerequisites.Missing(spec.name, "first stage weights absent", "fetch them")] if spec.name == "bm25-first"
        else [])
    for protocol in ("pool", "released"):
        settings = resolve(RunSettings(model="bm25", profile="test", protocol=protocol))
        assert settings.first_stage_name is None and settings.first_stage_spec is None
        assert unavailable(settings) is None
    assert unavailable(RunSettings(model="bm25", profile="test", protocol="pooled")) == (
        "first stage weights absent", "fetch them")


def test_an_unknown_first_stage_is_refused_before_any_work(collection, monkeypatch):
    monkeypatch.setattr(runner, "execute", lambda *args: pytest.fail("ran"))
    settings = RunSettings(model="bm25", profile="test", protocol="pooled", first_stage="nope")
    with pytest.raises(KitError, match="unknown model 'nope' in profile test"):
        check_settings(settings, collection)
