"""Models without YAML (``st:`` specs on the CLI and in MODELS), runs keyed by the identity of user
code and files, a user registry without a study reference, and user instruction files; through
the CLI, the runner and the study parameters, on real CSFCube data and a tiny local model."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from fixtures_datasets import readme_instructions
from notebook_cells import run_cells
from tiny_models import build_sentence_transformer

from evalkit import api, cli
from evalkit.core.errors import KitError
from evalkit.data.runstore import SIDECAR, check_run_name
from evalkit.datasets import csfcube_variants, load_dataset
from evalkit.models import registry
from evalkit.models.bm25 import BM25
from evalkit.models.family import Family
from evalkit.pipeline.runner import RunSettings, bind, obtain
from evalkit.study import params, steps, tables

SEED = "929877"  # annotated for two facets
ROOT = Path(__file__).resolve().parents[2]
QUERIES = ("929877_background", "929877_method")


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EVALKIT_MODELS", raising=False)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_sentence_transformer(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def cached_data(collection, monkeypatch):
    # `evalkit run` and `evaluate` read their --dataset through the API
    monkeypatch.setattr(api, "load_dataset", lambda spec: collection if spec == "csfcube" else None)


def _sidecar(folder: Path) -> dict:
    return json.loads((Path(folder) / SIDECAR).read_text())


def _one_line_error(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_runs_an_st_model_with_templates_and_a_safe_run_name(cached_data, tiny, capsys, tmp_path):
    argv = ["run", "--dataset", "csfcube", "--model", f"st:{tiny}", "--query-template", "{instruction} {query}",
            "--seeds", SEED, "--runs-dir", str(tmp_path / "runs")]
    assert cli.main(argv) == 0
    folder = Path(capsys.readouterr().out.strip())
    assert re.fullmatch(r"st-tiny-st-[0-9a-f]{8}@subset-[0-9a-f]{10}", folder.name)
    sidecar = _sidecar(folder)
    check_run_name(sidecar["run"])
    assert sidecar["role"] == "instructed" and sidecar["model_settings"]["query_template"] == "{instruction} {query}"
    assert len(sidecar["model_identity"]["model"]["folder_sha256"]) == 64
    assert cli.main(["evaluate", "--dataset", "csfcube", "--runs", str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["queries"]["all"] == 2


def test_changed_weights_in_an_st_folder_give_new_numbers(collection, tiny, tmp_path):
    import torch
    from sentence_transformers import SentenceTransformer

    folder = shutil.copytree(tiny, tmp_path / "model")
    settings = RunSettings(model=f"st:{folder}", queries=QUERIES)
    first = obtain(bind(settings, collection, tmp_path / "runs")).run
    assert obtain(bind(settings, collection, tmp_path / "runs")).run == first
    model = SentenceTransformer(str(folder), device="cpu")
    with torch.no_grad():
        next(model.parameters()).add_(0.5)
    model.save(str(folder))
    changed = obtain(bind(settings, collection, tmp_path / "runs")).run
    fresh = obtain(bind(settings, collection, tmp_path / "fresh")).run
    assert changed == fresh and changed != first


def test_a_hub_id_is_pinned_only_by_a_revision():
    assert registry.identity(registry.spec("st:org/some-model", "offline")) is None
    pinned = registry.spec("st:org/some-model;revision=abc123", "offline")
    assert registry.identity(pinned) == {"model": {"hub_id": "org/some-model", "revision": "abc123"}}


def test_a_registry_folder_and_a_user_family_are_keyed_by_their_content(collection, tiny, tmp_path, monkeypatch):
    def words(settings, profile, collection):
        return BM25()

    def titles(settings, profile, collection):
        return BM25(k1=1.2)  # another scorer under the same family name

    registry_file = tmp_path / "models.yaml"
    registry_file.write_text(yaml.safe_dump({"profiles": {"mine": {"models": {
        "folder": {"family": "dense", "model": str(tiny)}, "custom": {"family": "custom"}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(registry_file))
    assert "folder" in registry.identity(registry.spec("folder", "mine"))
    settings = RunSettings(model="custom", profile="mine", queries=QUERIES)
    key = bind(settings, collection, None, registry.load().with_family(Family("custom", words))).key
    assert key["model_identity"]["family_code"]["object"].endswith("words")
    again = bind(settings, collection, None, registry.load().with_family(Family("custom", titles))).key
    assert again["model_identity"] != key["model_identity"]


def test_a_user_registry_without_study_reference_uses_the_first_model(tmp_path, monkeypatch):
    registry_file = tmp_path / "models.yaml"
    registry_file.write_text(yaml.safe_dump({"profiles": {"mine": {"models": {"bm25": {"family": "bm25"},
                                                                                "bm25-b": {"family": "bm25"}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(registry_file))
    study = params.check("relevance", PROFILE="mine", PROTOCOL="pool", MODELS="bm25-b,bm25", REFERENCE_MODEL="")
    assert study.reference == "bm25-b"
    with pytest.raises(KitError, match="lists no relevance models"):
        params.check("relevance", PROFILE="mine", PROTOCOL="pool", MODELS="", REFERENCE_MODEL="")
    with pytest.raises(KitError, match="first_stage.* is not set by profile mine"):
        obtain(bind(RunSettings(model="bm25", profile="mine", protocol="pooled", queries=QUERIES),
                   load_dataset("csfcube"), tmp_path))


def test_the_readme_registry_example_loads(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text().split("**Your own registry.**", 1)[1]
    path = tmp_path / "my-models.yaml"
    path.write_text(re.search(r"```yaml\n(.*?)```", text, re.S).group(1))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    assert registry.model_names("mine") == ["minilm", "my-model"]
    assert registry.spec("my-model", "mine").role == "instructed"


def test_st_models_in_a_models_list(tiny):
    study = params.check("relevance", PROFILE="offline", PROTOCOL="pool", MODELS=f"bm25,st:{tiny}",
                         REFERENCE_MODEL="bm25")
    assert study.models == ("bm25", f"st:{tiny}") and steps.labelled(study, f"st:{tiny}")["label"] == "st:tiny-st"


@pytest.mark.parametrize("argv, message", [
    (["--model", "bm25", "--query-template", "{instruction} {query}"], "--query-template applies to an st: model"),
    (["--model", "st:org/model;colour=red"], "is not KEY=VALUE"),
    (["--model", "st:./missing-folder"], "folder ./missing-folder not found"),
    (["--model", "st:org/m", "--query-template", "{instruction}"], "must contain {query}"),
    (["--model", "bm25", "--instructions", "no-such.yaml"], "--instructions no-such.yaml: no such file"),
])
def test_bad_ad_hoc_arguments_fail_in_one_line(cached_data, capsys, tmp_path, argv, message):
    _one_line_error(capsys, ["run", "--dataset", "csfcube", "--seeds", SEED, "--runs-dir", str(tmp_path), *argv],
                    message)


# --- instruction files --------------------------------------------------------------------------




def test_the_kits_own_file_gives_the_studys_variants():
    assert csfcube_variants.variants_of() == csfcube_variants.VARIANTS


def test_cli_runs_a_variant_of_a_user_instruction_file(cached_data, tiny, capsys, tmp_path):
    path = readme_instructions(tmp_path)
    assert csfcube_variants.variants_of(path) == ("base", "terse")
    argv = ["run", "--dataset", "csfcube", "--model", f"st:{tiny};query={{instruction}} {{query}}", "--seeds", SEED,
            "--instructions", str(path), "--variant", "terse", "--runs-dir", str(tmp_path / "runs")]
    assert cli.main(argv) == 0
    folder = Path(capsys.readouterr().out.strip())
    sidecar = _sidecar(folder)
    assert "--terse--instructions-" in folder.name
    assert sidecar["instructions"] == ["Same background.", "Same method."]
    assert sidecar["run_settings"]["instructions"]["file"] == "my.yaml"
    assert len(sidecar["run_settings"]["instructions"]["sha256"]) == 64
    _one_line_error(capsys, [*argv[:-2], "--variant", "generic", "--runs-dir", str(tmp_path)],
                    "--variant generic: csfcube has the variants base, terse")


def test_an_edited_instruction_file_makes_the_run_again(collection, tmp_path):
    path = readme_instructions(tmp_path)
    settings = RunSettings(model="st:org/unused;revision=1", instructions=str(path), variant="terse", queries=QUERIES)
    key, name = bind(settings, collection, None).key, settings.run_name
    path.write_text(path.read_text().replace("Same method.", "Same methods."))
    assert bind(settings, collection, None).key["run_settings"] != key["run_settings"]
    assert settings.run_name != name  # the run name carries the file's sha256


def test_the_sensitivity_table_runs_the_files_variants_and_names_it(tmp_path):
    path = readme_instructions(tmp_path)
    name = api.register_model(lambda q, docs: [len(set(q.instruction.split()) & set(d.text.split())) for d in docs],
                              "instruction-words", revision="1")
    study = params.check("sensitivity", PROFILE="offline", PROTOCOL="pool", MODELS=name, SEEDS=SEED,
                         DISCOUNT="csfcube", RUNS_DIR=str(tmp_path / "runs"), INSTRUCTIONS=str(path))
    table = run_cells("sensitivity", study)["sensitivity"]
    assert list(table.variant) == ["base", "terse"] and set(table.instructions) == {"my.yaml"}
    beside = tables.sensitivity_beside_paper(table, study.measure)
    assert list(beside.variant) == ["base", "terse"]  # no empty rows of variants the file does not have
    paper = [c for c in beside.columns if "(paper)" in c]
    assert beside.loc[0, paper].notna().all() and beside.loc[1, paper].isna().all()  # Table 3's Base beside base
    assert "instructions my.yaml (sha256" in study.describe()


@pytest.mark.parametrize("text, message", [
    ("- a\n- b\n", "must map each facet"),
    ("background: {base: x}\nmethod: {base: y}\n", "facet result is missing"),
    ("background: {base: x}\nmethod: {base: y}\nresult: {other: z}\n", "give every facet the same variants"),
    ("background: {base: ''}\nmethod: {base: y}\nresult: {base: z}\n", "non-empty text"),
    ("background: {base: x}\nmethod: {base: y}\nresult: {base: z}\nobjective: {base: w}\n", "unknown facet"),
    ("background: {paraphrases: x}\nmethod: {base: y}\nresult: {base: z}\n", "must be a list"),
    ("background: {Base Case: x}\nmethod: {base: y}\nresult: {base: z}\n", "lower-case letters"),
    ("background: [unclosed\n", "not valid YAML"),
])
def test_malformed_instruction_files_fail_in_one_line(cached_data, capsys, tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    _one_line_error(capsys, ["run", "--dataset", "csfcube", "--model", "bm25", "--seeds", SEED, "--instructions",
                             str(path), "--runs-dir", str(tmp_path / "runs")], message)
    with pytest.raises(KitError, match=re.escape(message)):
        params.check("sensitivity", PROFILE="offline", PROTOCOL="pool", INSTRUCTIONS=str(path))


def test_the_sensitivity_notebook_takes_an_st_model_and_an_instruction_file(tiny, tmp_path):
    """Through papermill as make runs it: MODELS names an st: model, INSTRUCTIONS the README's file."""
    import pandas as pd
    import papermill

    path = readme_instructions(tmp_path)
    given = {"PROFILE": "offline", "PROTOCOL": "pool", "SEEDS": SEED, "MODELS": f"st:{tiny};query={{instruction}} "
             "{query};label=Tiny ST", "OUTPUT_DIR": str(tmp_path / "build"), "FIGURES_DIR": str(tmp_path / "figures"),
             "RUNS_DIR": str(tmp_path / "runs"), "INSTRUCTIONS": str(path)}
    papermill.execute_notebook(str(ROOT / "notebooks" / "sensitivity.ipynb"), str(tmp_path / "out.ipynb"),
                               progress_bar=False, parameters=given, cwd=str(ROOT))
    table = pd.read_csv(next((tmp_path / "build" / "tables").glob("sensitivity-offline-pool-smoke-*.csv")))
    assert list(table.variant) == ["base", "terse"] and set(table.instructions) == {"my.yaml"}
    assert set(table.label) == {"Tiny ST"} and table.instructions_sha256.str.len().eq(64).all()
