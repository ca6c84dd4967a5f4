"""The verified run store: folders written whole or not at all, reused only when complete and matching."""

from __future__ import annotations

import hashlib
import json
import stat

import pytest

from evalkit.data import runstore
from evalkit.data.runs import read_trec
from evalkit.data.runstore import RANKING, SIDECAR, is_verified, load_verified, run_folder, write_run
from evalkit.pipeline.runner import Reuse, RunSettings, bind, obtain

QIDS = ("929877_background", "929877_method")


def write_registry(path, k1: float):
    path.write_text(json.dumps({"profiles": {"test": {"first_stage": "bm25", "depth": 20, "models": {
        "bm25": {"family": "bm25", "k1": k1, "label": "BM25"}}}}}))
    return path


@pytest.fixture(autouse=True)
def registry_file(tmp_path, monkeypatch):
    path = write_registry(tmp_path / "models.yaml", 1.5)
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    return path


@pytest.fixture
def settings():
    return RunSettings(model="bm25", profile="test", queries=QIDS)


def leftovers(parent):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


# --- atomic writes -----------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["ranking", "digest", "sidecar"])
def test_a_crash_mid_write_leaves_no_folder_that_loads(collection, settings, tmp_path, monkeypatch, where):
    folder = run_folder(tmp_path / "runs", settings, collection.name)
    key = bind(settings, collection, None).key

    def half_written_ranking(path, run, tag):
        path.write_text("929877_background Q0 1 1 0.5 bm")  # a partial first line, then the crash
        raise OSError("disk full")

    def crash(*args, **kwargs):
        raise OSError("disk full")

    if where == "ranking":
        monkeypatch.setattr(runstore, "write_trec", half_written_ranking)
    elif where == "digest":  # run.trec complete, no sidecar yet
        monkeypatch.setattr(runstore, "_sha256", crash)
    else:
        real_dumps = runstore.json.dumps

        def dumps(obj, **kwargs):  # the sidecar (the one object holding "files") fails
            return crash() if "files" in obj else real_dumps(obj, **kwargs)

        monkeypatch.setattr(runstore.json, "dumps", dumps)
    with pytest.raises(OSError, match="disk full"):
        obtain(bind(settings, collection, tmp_path / "runs"), Reuse.NEVER)
    assert not folder.exists()
    assert load_verified(folder, key) is None
    assert leftovers(folder.parent) == []  # the staging folder is removed too


def test_a_crash_while_replacing_keeps_the_previous_complete_run(collection, settings, tmp_path, monkeypatch):
    folder = obtain(bind(settings, collection, tmp_path / "runs"), Reuse.NEVER).folder
    key = bind(settings, collection, None).key
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    real_sha256 = runstore._sha256

    def crash(path):
        raise OSError("disk full")

    monkeypatch.setattr(runstore, "_sha256", crash)
    with pytest.raises(OSError):
        write_run(folder, {"x": {"a": 1.0}}, {"run": "bm25"})
    monkeypatch.setattr(runstore, "_sha256", real_sha256)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert load_verified(folder, key) is not None
    assert leftovers(folder.parent) == []


def test_rewriting_a_folder_replaces_it_whole(tmp_path):
    folder = tmp_path / "r"
    write_run(folder, {"q": {"a": 1.0}}, {"run": "r"}, {"prompts_sent": 3})
    write_run(folder, {"q": {"b": 2.0}}, {"run": "r"})
    assert sorted(p.name for p in folder.iterdir()) == [RANKING, SIDECAR]  # the old accounting is gone
    assert load_verified(folder, {"run": "r"}) == {"q": {"b": 2.0}}
    assert leftovers(tmp_path) == []


# --- verification ------------------------------------------------------------------------------


def test_a_complete_matching_run_loads(collection, settings, tmp_path):
    folder = obtain(bind(settings, collection, tmp_path / "runs"), Reuse.NEVER).folder
    run = load_verified(folder, bind(settings, collection, None).key)
    assert run == read_trec(folder / RANKING) and set(run) == set(QIDS)


@pytest.mark.parametrize("change", [{"data_sha256": "0" * 64}, {"kit_version": "0.0.0"}, {"run": "other"},
                                    {"dataset": "beir"}, {"brand_new_key": 1}])
def test_a_sidecar_whose_key_differs_is_absent(collection, settings, tmp_path, change):
    folder = obtain(bind(settings, collection, tmp_path / "runs"), Reuse.NEVER).folder
    key = bind(settings, collection, None).key
    assert load_verified(folder, {**key, **change}) is None
    other = RunSettings(model="bm25", profile="test", queries=QIDS, variant="definition")
    assert load_verified(folder, bind(other, collection, None).key) is None  # other settings


def test_a_deleted_or_edited_ranking_is_absent(collection, settings, tmp_path, executions):
    key = bind(settings, collection, None).key
    folder = obtain(bind(settings, collection, tmp_path / "runs"), Reuse.NEVER).folder
    text = (folder / RANKING).read_text()
    (folder / RANKING).unlink()
    assert load_verified(folder, key) is None
    first, rest = text.split("\n", 1)
    fields = first.split()
    fields[4] = repr(float(fields[4]) + 1.0)  # one score edited: still a valid TREC file
    (folder / RANKING).write_text(" ".join(fields) + "\n" + rest)
    assert read_trec(folder / RANKING)
    assert load_verified(folder, key) is None
    (folder / RANKING).write_text(text.split("\n929877_method", 1)[0] + "\n")  # a query dropped
    assert load_verified(folder, key) is None
    run = obtain(bind(settings, collection, tmp_path / "runs")).run  # absent, so made again
    assert len(executions) == 2 and (folder / RANKING).read_text() == text  # written, then made again
    assert run == read_trec(folder / RANKING)


@pytest.mark.parametrize("damage", ["truncate", "empty", "delete", "not-an-object", "no-files"])
def test_a_truncated_or_damaged_sidecar_is_absent(collection, settings, tmp_path, damage):
    folder = obtain(bind(settings, collection, tmp_path / "runs"), Reuse.NEVER).folder
    key = bind(settings, collection, None).key
    path = folder / SIDECAR
    body = path.read_text()
    if damage == "truncate":
        path.write_text(body[: len(body) // 2])
    elif damage == "empty":
        path.write_text("")
    elif damage == "delete":
        path.unlink()
    elif damage == "not-an-object":
        path.write_text("[1, 2]\n")
    else:
        sidecar = json.loads(body)
        del sidecar["files"]
        path.write_text(json.dumps(sidecar))
    assert load_verified(folder, key) is None


def test_a_query_count_differing_from_the_sidecar_is_absent(collection, settings, tmp_path):
    folder = obtain(bind(settings, collection, tmp_path / "runs"), Reuse.NEVER).folder
    sidecar = json.loads((folder / SIDECAR).read_text())
    sidecar["files"][RANKING]["queries"] = 3
    (folder / SIDECAR).write_text(json.dumps(sidecar))
    assert load_verified(folder, bind(settings, collection, None).key) is None


# --- obtain --------------------------------------------------------------------------------------


def test_obtain_reuses_a_verified_run_and_recomputes_after_a_registry_change(
        collection, settings, tmp_path, monkeypatch, executions):
    runs_dir = tmp_path / "runs"
    first = obtain(bind(settings, collection, runs_dir)).run
    assert len(executions) == 1
    assert obtain(bind(settings, collection, runs_dir)).run == first
    assert len(executions) == 1  # reused, not recomputed
    folder = run_folder(runs_dir, settings, collection.name)
    assert json.loads((folder / SIDECAR).read_text())["model_entry"]["settings"]["k1"] == 1.5

    monkeypatch.setenv("EVALKIT_MODELS", str(write_registry(tmp_path / "models-k1.yaml", 0.9)))
    changed = obtain(bind(settings, collection, runs_dir)).run
    assert len(executions) == 2  # the model's registry entry changed: the stored run does not match
    assert changed != first and set(changed) == set(first)
    sidecar = json.loads((folder / SIDECAR).read_text())
    assert sidecar["model_entry"]["settings"]["k1"] == 0.9 and sidecar["model_settings"]["k1"] == 0.9
    assert obtain(bind(settings, collection, runs_dir)).run == changed and len(executions) == 2


def test_obtain_folder_only_reuses_a_verified_run_and_remakes_one_whose_files_differ(
        collection, settings, tmp_path, executions):
    # `evalkit run` needs the folder only: a stored run that passes the store's one check is reused
    # (not run again); one whose ranking no longer matches its sidecar is refused and made again
    runs_dir = tmp_path / "runs"
    folder = obtain(bind(settings, collection, runs_dir), read=False).folder
    text = (folder / RANKING).read_text()
    assert len(executions) == 1 and is_verified(folder, bind(settings, collection, None).key)
    assert obtain(bind(settings, collection, runs_dir), read=False).folder == folder
    assert len(executions) == 1  # reused
    first, rest = text.split("\n", 1)
    fields = first.split()
    fields[4] = repr(float(fields[4]) + 1.0)  # one score edited: a valid file, not the one recorded
    (folder / RANKING).write_text(" ".join(fields) + "\n" + rest)
    assert not is_verified(folder, bind(settings, collection, None).key)
    assert obtain(bind(settings, collection, runs_dir), read=False).folder == folder
    assert len(executions) == 2 and (folder / RANKING).read_text() == text


def test_a_stored_run_with_a_query_ranking_nothing_is_made_again(collection, settings, tmp_path, executions):
    # issue 37: the old writer stored a query ranking nothing (no line in run.trec, counted in the
    # sidecar); is_verified said yes, so `evalkit run` exited 0 on it while evaluation refused it
    runs_dir = tmp_path / "runs"
    folder = obtain(bind(settings, collection, runs_dir), read=False).folder
    text = (folder / RANKING).read_text()
    kept = "".join(line + "\n" for line in text.splitlines() if not line.startswith(QIDS[1] + " "))
    (folder / RANKING).write_text(kept)
    sidecar = json.loads((folder / SIDECAR).read_text())
    sidecar["files"][RANKING]["sha256"] = hashlib.sha256(kept.encode()).hexdigest()  # as the old writer left it
    (folder / SIDECAR).write_text(json.dumps(sidecar, indent=1, sort_keys=True) + "\n")
    assert not is_verified(folder, bind(settings, collection, None).key)
    assert obtain(bind(settings, collection, runs_dir), read=False).folder == folder
    assert len(executions) == 2 and (folder / RANKING).read_text() == text


def test_smoke_runs_get_another_folder_than_full_runs(collection, tmp_path):
    full = RunSettings(model="bm25", profile="test")
    smoke = RunSettings(model="bm25", profile="test", queries=QIDS)
    assert run_folder(tmp_path, full, "csfcube") == tmp_path / "test" / "csfcube" / "pool" / "bm25"
    assert run_folder(tmp_path, smoke, "csfcube").name.startswith("bm25@subset-")
    assert run_folder(tmp_path, smoke, "csfcube").parent == run_folder(tmp_path, full, "csfcube").parent
    reordered = RunSettings(model="bm25", profile="test", queries=QIDS[::-1])
    assert run_folder(tmp_path, reordered, "csfcube") == run_folder(tmp_path, smoke, "csfcube")
    other = RunSettings(model="bm25", profile="test", queries=QIDS[:1])
    assert run_folder(tmp_path, other, "csfcube") != run_folder(tmp_path, smoke, "csfcube")
    # a stored smoke run never stands in for the full run, even when placed in its folder
    folder = obtain(bind(smoke, collection, tmp_path / "runs"), Reuse.NEVER).folder
    assert load_verified(folder, bind(full, collection, None).key) is None


# --- determinism and permissions -----------------------------------------------------------------


def test_same_run_twice_gives_byte_identical_files(collection, settings, tmp_path):
    a = obtain(bind(settings, collection, tmp_path / "a"), Reuse.NEVER).folder
    b = obtain(bind(settings, collection, tmp_path / "b"), Reuse.NEVER).folder
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir()) == [RANKING, SIDECAR]
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_files_are_0644_and_the_folder_0755(collection, settings, tmp_path):
    folder = obtain(bind(settings, collection, tmp_path / "runs"), Reuse.NEVER).folder
    write_run(tmp_path / "llm", {"q": {"a": 1.0}}, {"run": "llm"}, {"prompts_sent": 0})
    for path in [*folder.iterdir(), *(tmp_path / "llm").iterdir()]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
