"""The declared schema of a model registry file (`evalkit.models.registry_file`): each field's rule
refuses a bad value in the registry's one line, naming the place and the field as the loaders did
(the command line's cases: tests/cli/test_faults_inputs.py)."""

from __future__ import annotations

import pytest
import yaml

from evalkit.core.errors import DataError
from evalkit.models import registry
from evalkit.models.registry_file import SHAPE

CASES = {
    "profile not a mapping": ("profiles: {p: 3}", "profile 'p' has no 'models' mapping"),
    "no models": ("profiles: {p: {models: {}}}", "profile 'p' has no 'models' mapping"),
    "depth a boolean": ("profiles: {p: {depth: true, models: {b: {family: bm25}}}}",
                        "profile 'p' has depth True, not a positive integer"),
    "depth too deep": ("profiles: {p: {depth: 1000001, models: {b: {family: bm25}}}}",
                       "profile 'p' has depth 1000001, not a positive integer"),
    "unknown role": ("profiles: {p: {models: {b: {family: bm25, role: boss}}}}",
                     "model 'b' of profile 'p' has role 'boss'; choose one of agnostic, aspect, instructed, probe, "
                     "reranker, oracle"),
    "no family": ("profiles: {p: {models: {b: {label: B}}}}",
                  "model 'b' of profile 'p' has family None; give the name of a model family"),
    "label not text": ("profiles: {p: {models: {b: {family: bm25, label: 3}}}}",
                       "model 'b' of profile 'p' has label 3, not text"),
    "weights not text": ("profiles: {p: {models: {m: {family: dense, model: 5}}}}",
                         "model 'm' of profile 'p' names no 'model' (a hub id, folder or pypi:PACKAGE)"),
    "first stage a list": ("profiles: {p: {first_stage: [b], models: {b: {family: bm25}}}}",
                           "profile 'p' has first_stage ['b'], which is not one of its models"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_rule_is_one_line_naming_the_place_and_the_field(case):
    text, expected = CASES[case]
    with pytest.raises(DataError) as caught:
        registry.check_config("models.yaml", yaml.safe_load(text))
    assert str(caught.value) == f"models.yaml: {expected}; the registry's shape is {SHAPE}"


def test_the_kits_registry_and_its_study_sections_pass():
    data = yaml.safe_load(registry.MODELS_FILE.read_text())
    registry.check_config(registry.MODELS_FILE, data)
    assert all("study" in profile for profile in data["profiles"].values())  # a key the schema leaves to the study
