"""Fault injection, run store: a run is reused only when complete and matching; writes are whole.

Each case of issue 12 is reproduced here or in tests/data/test_runstore.py (named below):
- a crash between the rankings and the sidecar: a python subprocess killed (SIGKILL) mid-write;
- a disk filling up mid-write: a small tmpfs when root can mount one (skipped otherwise), and
  patched writes in test_runstore.py::test_a_crash_mid_write_leaves_no_folder_that_loads;
- two writers into one run folder: two processes writing at once end with one whole run;
- a file deleted by hand, a truncated sidecar, a registry change: test_runstore.py
  (test_a_deleted_or_edited_ranking_is_absent, test_a_truncated_or_damaged_sidecar_is_absent,
  test_obtain_reuses_a_verified_run_and_recomputes_after_a_registry_change);
- smoke runs never stand in for full runs: test_smoke_runs_get_another_folder_than_full_runs;
- run names and ids that cannot round-trip through a TREC file are refused before scoring.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evalkit.core.errors import KitError
from evalkit.data import runstore
from evalkit.data.runstore import RANKING, SIDECAR, load_verified, read_sidecar, write_run
from evalkit.datasets import load_dataset
from evalkit.pipeline import runner
from evalkit.pipeline.runner import RunSettings, bind, obtain

FULL = {f"q{i}": {f"d{j}": float(i * 100 + j) for j in range(200)} for i in range(30)}
SMOKE = {"q1": {"d1": 2.0, "d2": 1.0}}


def _python(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 60) -> None:
    end = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the writer ended early: {proc.communicate()}")
        assert time.monotonic() < end, "the writer never reached the injected point"
        time.sleep(0.02)


SLOW_WRITER = """
    import json, sys, time
    from pathlib import Path
    from evalkit.data import runstore

    folder, ready, where, run = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])

    def pause():
        ready.write_text("x")
        time.sleep(600)  # killed here

    if where == "ranking":  # half a ranking file written, then the kill
        def write_trec(path, run, tag):
            path.write_text("q0 Q0 d1 1 0.5 bm")
            pause()
        runstore.write_trec = write_trec
    elif where == "sidecar":  # run.trec complete, no sidecar yet
        real = runstore._sha256
        def sha256(path):
            digest = real(path)
            pause()
            return digest
        runstore._sha256 = sha256
    else:  # "replace": everything staged, killed just before the swap into place
        real_locked = runstore._locked
        def locked(parent):
            pause()
            return real_locked(parent)
        runstore._locked = locked
    runstore.write_run(folder, run, {"run": "bm25"})
"""


@pytest.mark.parametrize("where", ["ranking", "sidecar", "replace"])
@pytest.mark.parametrize("previous", [False, True], ids=["fresh", "over-a-previous-run"])
def test_a_killed_writer_leaves_no_loadable_partial_run(tmp_path, where, previous):
    folder = tmp_path / "runs" / "bm25"
    if previous:
        write_run(folder, SMOKE, {"run": "bm25"})
    ready = tmp_path / "ready"
    proc = _python(SLOW_WRITER, str(folder), str(ready), where, json.dumps(FULL))
    try:
        _wait_for(ready, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    if previous:  # the previous complete run is untouched
        assert load_verified(folder, {"run": "bm25"}) == SMOKE
    else:
        assert not folder.exists() and load_verified(folder, {"run": "bm25"}) is None
    # the leftover staging folder (hidden) blocks nothing: the next write gives the complete run
    assert write_run(folder, FULL, {"run": "bm25"}) == folder
    assert load_verified(folder, {"run": "bm25"}) == FULL


TWO_WRITERS = """
    import json, sys, time
    from pathlib import Path
    from evalkit.data import runstore

    folder, go, run, times = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
    while not go.exists():
        time.sleep(0.005)
    for _ in range(times):
        runstore.write_run(folder, run, {"run": "bm25"})
"""


def test_two_writers_of_one_folder_end_with_one_whole_run(tmp_path):
    """A full run and a --seeds run written into one folder at once (as before the smoke folders):
    every read sees one writer's complete run or none, and the end state is one whole verified run."""
    folder = tmp_path / "runs" / "bm25"
    go = tmp_path / "go"
    writers = [_python(TWO_WRITERS, str(folder), str(go), json.dumps(run), "25") for run in (FULL, SMOKE)]
    seen = set()
    try:
        go.write_text("x")
        while any(w.poll() is None for w in writers):
            run = load_verified(folder, {"run": "bm25"})
            assert run in (None, FULL, SMOKE)  # never a mix
            seen.add("full" if run == FULL else "smoke" if run == SMOKE else "none")
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
    for w in writers:
        assert w.wait() == 0, w.communicate()
    final = load_verified(folder, {"run": "bm25"})
    assert final in (FULL, SMOKE)
    sidecar = read_sidecar(folder)
    assert sidecar["files"][RANKING]["queries"] == len(final)
    assert sorted(p.name for p in folder.iterdir()) == [RANKING, SIDECAR]
    assert [p.name for p in folder.parent.iterdir() if p.name != "bm25"] == []  # no staging or old folders left


# --- a full disk: a small tmpfs (root only) ----------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs, when this process may mount one (root); skipped otherwise."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_mid_write_leaves_the_previous_run_or_none(small_disk):
    folder = small_disk / "runs" / "bm25"
    write_run(folder, SMOKE, {"run": "bm25"})
    with pytest.raises(OSError) as info:
        write_run(folder, FULL, {"run": "bm25"})  # about 300 KB: the disk fills mid-write
    assert info.value.errno == 28  # ENOSPC
    assert load_verified(folder, {"run": "bm25"}) == SMOKE
    assert [p.name for p in folder.parent.iterdir()] == ["bm25"]  # the staging folder is removed
    other = small_disk / "runs" / "other"
    with pytest.raises(OSError):
        write_run(other, FULL, {"run": "other"})
    assert not other.exists() and load_verified(other, {"run": "other"}) is None


def test_a_full_disk_through_the_command_is_one_line(small_disk, capsys, tmp_path, monkeypatch):
    from fixtures_datasets import write_beir

    from evalkit import cli


    spec = f"beir:{write_beir(tmp_path / 'beir')}"
    filler = small_disk / "filler"
    with open(filler, "wb") as fh:  # leave almost nothing free
        try:
            fh.write(b"x" * (64 * 1024))
        except OSError:
            pass
    runs_dir = small_disk / "runs"
    assert cli.main(["run", "--dataset", spec, "--model", "bm25", "--runs-dir", str(runs_dir)]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "scoring bm25" not in line and line]  # progress bars share stderr
    assert "Traceback" not in err and len(lines) == 1
    assert lines[0].startswith(f"evalkit: error: {runs_dir}") and "No space left" in lines[0]
    assert not (runs_dir / "offline" / load_dataset(spec).store_name / "pool" / "bm25").exists()


# --- names and ids that cannot round-trip through a TREC file ---------------------------------------------


@pytest.fixture
def spaced_registry(tmp_path, monkeypatch):
    path = tmp_path / "models.yaml"
    path.write_text(json.dumps({"profiles": {"test": {"first_stage": "bm25", "depth": 20, "models": {
        "bm25": {"family": "bm25", "label": "BM25"}, "bm 25": {"family": "bm25", "label": "BM25 spaced"}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(path))
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("name", ["bm 25", "", "a/b", "..", "tab\tname", "new\nline"])
def test_run_names_that_cannot_round_trip_are_refused(name):
    with pytest.raises(KitError, match="round-trip"):
        runstore.check_run_name(name)


def test_a_spaced_model_name_is_refused_before_scoring(spaced_registry, collection, tmp_path, monkeypatch):
    def no_scoring(*args, **kwargs):
        raise AssertionError("scored a run whose name cannot round-trip")

    monkeypatch.setattr(runner, "compute", no_scoring)
    settings = RunSettings(model="bm 25", profile="test", queries=("929877_background",))
    with pytest.raises(KitError, match="'bm 25' cannot round-trip"):
        obtain(bind(settings, collection, tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("run", [{"q 1": {"d": 1.0}}, {"q": {"d 1": 1.0}}, {"q": {"": 1.0}}])
def test_ids_that_cannot_round_trip_are_refused(tmp_path, run):
    with pytest.raises(KitError, match="round-trip"):
        write_run(tmp_path / "r", run, {"run": "r"})
    assert not (tmp_path / "r").exists()


def test_a_deeply_nested_sidecar_is_absent(tmp_path):
    folder = write_run(tmp_path / "r", SMOKE, {"run": "r"})
    (folder / SIDECAR).write_text("[" * 100_000 + "]" * 100_000)
    assert read_sidecar(folder) is None and load_verified(folder, {"run": "r"}) is None


# --- a SIGKILL at every rename of a write (strace fault injection) ------------------------------------

STRACE_WRITER = """
    import json, sys
    from pathlib import Path
    from evalkit.data import runstore

    folder, run, exchange = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
    if exchange == "off":  # the two-rename fallback of systems without renameat2
        runstore._exchange = lambda a, b: False
    runstore.write_run(folder, run, {"run": "bm25"})
"""
RENAMES = "rename,renameat,renameat2"


def _strace(*options: str, folder: Path, run: dict, exchange: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # no .pyc renames among the counted ones
    return subprocess.run(["strace", "-f", "-qq", *options, sys.executable, "-c", textwrap.dedent(STRACE_WRITER),
                           str(folder), json.dumps(run), exchange], capture_output=True, text=True, env=env)


@pytest.mark.skipif(not shutil.which("strace"), reason="strace is not installed (apt-get install strace)")
@pytest.mark.parametrize("exchange", ["on", "off"])
def test_a_kill_at_any_rename_keeps_a_complete_run(tmp_path, exchange):
    """Every rename of a write over a previous run is a kill point: after each, the folder reads as
    the previous complete run or the new one, and the next write leaves no hidden folder behind."""
    log = tmp_path / "renames.log"
    counted = _strace("-e", f"trace={RENAMES}", "-o", str(log), folder=tmp_path / "count" / "bm25",
                      run=FULL, exchange=exchange)
    assert counted.returncode == 0, counted.stderr
    write_run(tmp_path / "count2" / "bm25", SMOKE, {"run": "bm25"})
    total = len([line for line in log.read_text().splitlines() if "rename" in line])
    assert total >= 1
    for when in range(1, total + 3):  # a write over a previous run has more renames than a fresh one
        folder = tmp_path / f"kill{when}" / "bm25"
        write_run(folder, SMOKE, {"run": "bm25"})
        killed = _strace("-e", f"trace={RENAMES}", "-e", f"inject={RENAMES}:signal=SIGKILL:when={when}",
                         "-o", os.devnull, folder=folder, run=FULL, exchange=exchange)
        if killed.returncode == 0:  # fewer renames than `when`: the write completed
            assert load_verified(folder, {"run": "bm25"}) == FULL
            continue
        assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr
        assert load_verified(folder, {"run": "bm25"}) in (SMOKE, FULL), f"kill at rename {when} lost the run"
        write_run(folder, FULL, {"run": "bm25"})
        assert load_verified(folder, {"run": "bm25"}) == FULL
        assert [p.name for p in folder.parent.iterdir()] == ["bm25"], f"leftovers after a kill at rename {when}"
