"""Issue 48, items 1, 2 and 7: a run-store folder is a function of what identifies the run, two runs
never share one, a folder holding another run is never replaced, the stored-run key holds the full
protocol's corpus by content, and a run name no folder can hold is refused before any work."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from fixtures_datasets import write_beir

from evalkit import cli
from evalkit.core.errors import DataError, KitError
from evalkit.core.hashing import files_sha256
from evalkit.data import runstore
from evalkit.data.runstore import SIDECAR, is_verified, load_verified, read_sidecar, write_run
from evalkit.datasets import load_dataset
from evalkit.pipeline import runner
from evalkit.pipeline.runner import RunSettings, bind, obtain, sidecar_key

QUERY = ("929877_background",)


def _run(spec: str, runs_dir: Path, capsys) -> Path:
    assert cli.main(["run", "--dataset", spec, "--model", "bm25", "--runs-dir", str(runs_dir)]) == 0
    return Path(capsys.readouterr().out.strip())


def test_two_beir_folders_of_one_name_keep_their_own_runs(tmp_path, capsys):
    """``beir:a/toy`` and ``beir:b/toy`` (one document differs): two folders, each holding its own
    collection's run; on main both were runs/offline/toy/pool/bm25 and b's replaced a's."""
    a, b = write_beir(tmp_path / "a" / "toy"), write_beir(tmp_path / "b" / "toy")
    lines = (b / "corpus.jsonl").read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), "text": "an entirely different first document"})
    (b / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    runs = tmp_path / "runs"
    first, second = _run(f"beir:{a}", runs, capsys), _run(f"beir:{b}", runs, capsys)
    assert first != second and first.parent.parent.name.startswith("toy-")
    for folder, spec in ((first, f"beir:{a}"), (second, f"beir:{b}")):
        assert read_sidecar(folder)["data_sha256"] == load_dataset(spec).identity
    assert _run(f"beir:{a}", runs, capsys) == first  # a's stored run found again where it was
    # the same files under the same name, read from another folder: the same run, reused
    assert _run(f"beir:{write_beir(tmp_path / 'c' / 'toy')}", runs, capsys) == first


def test_a_plain_name_never_meets_another_names_derived_form(tmp_path, capsys):
    """``café`` derives ``caf-850f7dc4``; a BEIR folder named ``caf-850f7dc4`` gets another folder."""
    runs = tmp_path / "runs"
    one = _run(f"beir:{write_beir(tmp_path / 'café')}", runs, capsys)
    two = _run(f"beir:{write_beir(tmp_path / 'caf-850f7dc4')}", runs, capsys)
    assert one.parent.parent != two.parent.parent
    assert is_verified(one, {"dataset": "café"}) and is_verified(two, {"dataset": "caf-850f7dc4"})


def test_the_kits_own_collection_keeps_its_plain_folder(collection, tmp_path):
    """The study's stored runs stay valid: CSFCube's runs live in runs/offline/csfcube/pool/bm25."""
    assert collection.store_name == "csfcube"
    assert bind(RunSettings(model="bm25"), collection, tmp_path).folder == tmp_path / "offline/csfcube/pool/bm25"
    assert bind(RunSettings(model="bm25", variant="generic"), collection, tmp_path).folder.name == "bm25--generic"


@pytest.fixture
def registry_file(tmp_path, monkeypatch):
    """A registry with bm25 and a model of the user's named ``bm25--generic`` (another k1), and one
    whose name is about 230 characters."""
    path = tmp_path / "models.yaml"
    path.write_text(json.dumps({"profiles": {"test": {"first_stage": "bm25", "depth": 20, "models": {
        "bm25": {"family": "bm25", "label": "BM25"},
        "bm25--generic": {"family": "bm25", "label": "mine", "k1": 0.5},
        "m" * 230: {"family": "bm25", "label": "long"}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


def test_a_model_named_like_a_variant_never_takes_the_variants_folder(registry_file, collection, tmp_path):
    """On main a model named ``bm25--generic`` and bm25 under the generic variant shared
    runs/test/csfcube/pool/bm25--generic, and the later replaced the earlier."""
    runs = tmp_path / "runs"
    mine = bind(RunSettings(model="bm25--generic", profile="test", queries=QUERY), collection, runs)
    kits = bind(RunSettings(model="bm25", variant="generic", profile="test", queries=QUERY), collection, runs)
    assert mine.folder != kits.folder and "--" not in mine.settings.run_name
    assert mine.settings.run_name == "bm25-generic-" + hashlib.sha256(b"bm25--generic").hexdigest()[:8]
    made = [obtain(bound).run for bound in (kits, mine)]
    assert made[0] != made[1]  # k1 0.5 ranks otherwise
    assert load_verified(kits.folder, kits.key) == made[0] and load_verified(mine.folder, mine.key) == made[1]


def _sidecar(model: str) -> dict:
    return {"run": "bm25", "dataset": "toy", "run_settings": {"model": model, "variant": "base", "profile": "offline",
                                                              "protocol": "pool", "queries": None}}


def test_a_folder_holding_another_run_is_never_replaced(tmp_path):
    folder = tmp_path / "offline" / "toy" / "pool" / "bm25"
    theirs = {"q1": {"d1": 2.0, "d2": 1.0}}
    write_run(folder, theirs, _sidecar("bm25"))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    write_run(folder, {"q1": {"d1": 1.0}}, {**_sidecar("bm25"), "kit_version": "next"})  # the same run made again
    with pytest.raises(DataError) as raised:
        write_run(folder, {"q1": {"d2": 3.0}}, _sidecar("other"))
    line = str(raised.value)
    assert "\n" not in line and line.startswith(str(folder)) and "holds another run (its model differ" in line
    assert read_sidecar(folder)["run_settings"]["model"] == "bm25" and (folder / SIDECAR).read_bytes() != b""
    assert sorted(before) == sorted(p.name for p in folder.iterdir())
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_an_older_sidecar_lacking_a_setting_is_the_same_run(tmp_path):
    """A sidecar of an older kit records no index_dtype: the run made again replaces it (the study's
    stored runs are never refused as another run's)."""
    folder = tmp_path / "offline" / "csfcube" / "pool" / "bm25"
    write_run(folder, {"q1": {"d1": 1.0}}, _sidecar("bm25"))
    newer = {**_sidecar("bm25"), "run_settings": {**_sidecar("bm25")["run_settings"], "index_dtype": "float32"}}
    write_run(folder, {"q1": {"d1": 2.0}}, newer)
    assert read_sidecar(folder)["run_settings"]["index_dtype"] == "float32"


def test_the_runner_refuses_another_runs_folder_before_any_work(registry_file, collection, tmp_path, monkeypatch):
    bound = bind(RunSettings(model="bm25", profile="test", queries=QUERY), collection, tmp_path / "runs")
    write_run(bound.folder, {"q": {"d": 1.0}}, {**bound.key, "run_settings": {**bound.key["run_settings"],
                                                                              "variant": "elsewhere"}})

    def no_work(*args, **kwargs):
        raise AssertionError("scored a run whose folder holds another run")

    monkeypatch.setattr(runner, "compute", no_work)
    with pytest.raises(KitError, match="holds another run"):
        obtain(bound)


def test_a_run_name_no_folder_can_hold_is_refused_before_any_work(registry_file, collection, tmp_path,
                                                                   monkeypatch):
    """About 230 characters: on main, ``OSError: File name too long`` once scoring had begun."""
    monkeypatch.setattr(runner, "compute", lambda *a, **k: pytest.fail("scored a run it cannot store"))
    with pytest.raises(KitError) as raised:
        bind(RunSettings(model="m" * 230, profile="test", queries=QUERY), collection, tmp_path / "runs")
    assert "is 230 characters; the run store takes at most 200" in str(raised.value)
    assert runstore.check_run_name("m" * 200) == "m" * 200


def test_the_stored_run_key_holds_the_corpus_content_not_its_path(collection, tmp_path):
    """`evalkit run --protocol full --corpus FILE`, FILE edited: on main the key held the path, so the
    stored run was answered for the new text."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"paper_id": "1", "title": "a", "abstract": ["one"]}\n')
    settings = RunSettings(model="bm25", protocol="full", first_stage="minilm", corpus=str(corpus))
    key = sidecar_key(settings, bind(RunSettings(model="bm25"), collection, None).model, collection)
    assert key["run_settings"]["corpus"] == {"file": "corpus.jsonl",
                                             "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()}
    moved = tmp_path / "elsewhere" / "corpus.jsonl"
    moved.parent.mkdir()
    moved.write_bytes(corpus.read_bytes())  # the same content elsewhere: the same key
    assert sidecar_key(RunSettings(**{**settings.__dict__, "corpus": str(moved)}),
                       bind(RunSettings(model="bm25"), collection, None).model, collection) == key


def test_a_file_edited_to_the_same_size_with_its_mtime_restored_is_read_again(tmp_path):
    """In one process: on main the digest cache keyed by path, size and mtime answered the old digest."""
    path = tmp_path / "corpus.jsonl"
    path.write_text("abstract one\n")
    before, stat = files_sha256([path]), path.stat()
    path.write_text("abstract two\n")  # the same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_mtime_ns == stat.st_mtime_ns and path.stat().st_size == stat.st_size
    assert files_sha256([path]) == hashlib.sha256(b"abstract two\n").hexdigest() != before
