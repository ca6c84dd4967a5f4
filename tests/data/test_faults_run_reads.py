"""Fault injection, run store and run files (issue 37, items 3 and 5).

- item 3: the store refuses at write what it refuses at read, by one rule (`runstore.check_run`):
  a query ranking nothing, a run of no query; `is_verified` and `load_verified` agree on every
  folder, so `evalkit run` never reuses a stored run that evaluation refuses;
- item 5: every read of a run folder (sidecar.json, run.trec, anything a sidecar lists) and of a
  TREC run file takes regular files only: a FIFO, /dev/zero, a link to it is refused at once
  (no hang, no MemoryError); a TREC run is parsed as it streams, memory bounded by the run.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import pytest

from evalkit.core.errors import KitError
from evalkit.data import runs, runstore
from evalkit.data.runstore import RANKING, SIDECAR, is_verified, load_verified, read_sidecar, write_run
from evalkit.pipeline.run_input import load_any_run

RUN = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 0.5}}


class Blocked(BaseException):
    """Raised by `deadline`; not an OSError (which the readers catch), so a hang ends the test."""


@contextmanager
def deadline(seconds: float):
    """`Blocked` in the main thread after `seconds` (a blocking open of a FIFO is interrupted)."""
    def expire(*_):
        raise Blocked(f"still blocked after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def forged(folder: Path, text: str, queries: int, **extra_files) -> Path:
    """A run folder as some writer left it: `text` as run.trec, a sidecar recording its true
    sha256 and `queries` (what the kit before issue 37 wrote for a query ranking nothing)."""
    folder.mkdir(parents=True)
    (folder / RANKING).write_text(text)
    files = {RANKING: {"sha256": hashlib.sha256(text.encode()).hexdigest(), "queries": queries}}
    files.update(extra_files)
    (folder / SIDECAR).write_text(json.dumps({"run": "bm25", "dataset": "d", "files": files}))
    return folder


# --- item 3: one rule at write and at read -----------------------------------------------------------


@pytest.mark.parametrize("run, fragment", [
    ({"q1": {"d1": 1.0}, "q2": {}}, "query q2: the model ranked no document"),
    ({}, "the run ranks no query"),
])
def test_a_run_ranking_nothing_is_refused_at_write(tmp_path, run, fragment):
    # old code: written; is_verified said yes, load_verified no (the empty query leaves no line)
    with pytest.raises(KitError, match=fragment) as err:
        write_run(tmp_path / "runs" / "bm25", run, {"run": "bm25"})
    assert "\n" not in str(err.value)
    assert not (tmp_path / "runs" / "bm25").exists()


@pytest.mark.parametrize("text, queries", [
    ("q1 Q0 d1 1 1.0 bm25\n", 2),  # the old writer's file for {"q1": {...}, "q2": {}}
    ("\n", 0),  # a run of no query
    ("q1 Q0 d1 1 nan bm25\n", 1),  # a non-finite score
    ("q1 Q0 d1 1 1.0 bm25\nq1 Q0 d1 2 0.5 bm25\n", 1),  # a candidate listed twice
    ("q1 Q0 d1 1 1.0\n", 1),  # five fields
], ids=["empty-query", "no-query", "nan", "duplicate", "five-fields"])
def test_is_verified_and_load_verified_agree_on_what_the_old_writer_left(tmp_path, text, queries):
    folder = forged(tmp_path / "bm25", text, queries)
    expected = {"run": "bm25", "dataset": "d"}
    assert load_verified(folder, expected) is None
    assert not is_verified(folder, expected)  # old code: True (sha256 only), so `evalkit run` reused it


def test_a_good_forged_folder_is_verified_by_both(tmp_path):
    folder = forged(tmp_path / "bm25", "q1 Q0 d1 1 1.0 bm25\n", 1)
    assert is_verified(folder, {"run": "bm25"}) and load_verified(folder, {"run": "bm25"}) == {"q1": {"d1": 1.0}}


# --- item 5: regular files only, bounded ---------------------------------------------------------------


@pytest.fixture
def stored(tmp_path) -> Path:
    return write_run(tmp_path / "runs" / "bm25", RUN, {"run": "bm25", "dataset": "d"})


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


@pytest.mark.parametrize("name", [SIDECAR, RANKING])
def test_a_fifo_in_a_run_folder_is_refused_at_once(stored, name):
    # old code: open() of the FIFO waits for a writer forever (evaluate and run hang)
    if name == RANKING:
        recorded = json.loads((stored / SIDECAR).read_text())["files"][RANKING]
        assert recorded["queries"] == 2
    _fifo(stored / name)
    with deadline(10):
        assert load_verified(stored, {"run": "bm25"}) is None
        assert not is_verified(stored, {"run": "bm25"})


def test_a_fifo_sidecar_is_one_line_from_evaluate(stored, collection):
    _fifo(stored / SIDECAR)
    with deadline(10), pytest.raises(KitError, match="sidecar.json is missing or damaged") as err:
        load_any_run(stored, None, collection)
    assert "\n" not in str(err.value)


def test_a_fifo_trec_file_is_one_line(tmp_path):
    _fifo(tmp_path / "run.trec")
    with deadline(10), pytest.raises(KitError, match="run.trec: cannot read the run file .*not a regular file"):
        runs.read_trec(tmp_path / "run.trec")


# A sidecar that lists /dev/zero (by path, or by a link to it): the old code read it whole, a
# MemoryError; run in a child with its memory capped, so the old code fails fast, not the machine.
DEV_ZERO_CHILD = """
    import json, resource, sys
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    from evalkit.data.runstore import is_verified, load_verified
    folder = Path(sys.argv[1])
    print(json.dumps([load_verified(folder, {"run": "bm25"}) is None, is_verified(folder, {"run": "bm25"})]))
"""


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("how", ["listed", "ranking-link", "listed-link"])
def test_a_sidecar_pointing_at_dev_zero_is_refused(stored, how):
    sidecar = json.loads((stored / SIDECAR).read_text())
    zero = {"sha256": "0" * 64}
    if how == "listed":
        sidecar["files"]["/dev/zero"] = zero
    elif how == "ranking-link":
        (stored / RANKING).unlink()
        (stored / RANKING).symlink_to("/dev/zero")
    else:
        (stored / "extra").symlink_to("/dev/zero")
        sidecar["files"]["extra"] = zero
    (stored / SIDECAR).write_text(json.dumps(sidecar))
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(DEV_ZERO_CHILD), str(stored)],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(Path(runstore.__file__).parents[2])})
    assert child.returncode == 0, child.stderr[-400:]
    assert json.loads(child.stdout) == [True, False]


def test_a_sidecar_too_large_or_linked_reads_as_absent(stored, monkeypatch):
    assert read_sidecar(stored) is not None
    monkeypatch.setattr(runstore, "SIDECAR_LIMIT", 16)
    assert read_sidecar(stored) is None
    monkeypatch.undo()
    (stored / "real.json").write_bytes((stored / SIDECAR).read_bytes())
    (stored / SIDECAR).unlink()
    (stored / SIDECAR).symlink_to("real.json")
    assert read_sidecar(stored) is None  # the kit writes no links: one is not its sidecar


# --- item 5: the TREC reader streams -------------------------------------------------------------------


def _big_run(path: Path, lines: int) -> None:
    with open(path, "w") as fh:
        for i in range(lines):
            fh.write(f"q{i % 50} Q0 doc{i:09d} {i // 50 + 1} {1.0 / (i + 1)!r} bm25\n")


def test_reading_a_trec_run_holds_the_run_not_the_file(tmp_path):
    # old code: the file's bytes, its text and a list of every line's fields at once (13.7x the
    # file at 10M lines); now one block at a time beside the run being built
    path = tmp_path / "big.trec"
    _big_run(path, 200_000)
    tracemalloc.start()
    try:
        run = runs.read_trec(path)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(map(len, run.values())) == 200_000
    assert peak - held < 12 * runs.BLOCK, (peak, held, path.stat().st_size)


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
def test_the_streamed_run_does_not_depend_on_where_blocks_are_cut(tmp_path, monkeypatch, block):
    text = ("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.5 t\n\nq2\tQ0\tc\t1\t3 t\nq2 Q0 d 2 -1e-3 t\r\n"
            "q1 Q0 c 3 0.25 t\nq3 Q0 é 1 1 t")
    monkeypatch.setattr(runs, "BLOCK", block)
    path = tmp_path / "x.trec"
    path.write_text(text, encoding="utf-8")
    expected = runs._parse_lines(text, path)
    for got in (runs.read_trec(path), runs.parse_trec(text.encode(), path)):
        assert got == expected and [list(d) for d in got.values()] == [list(d) for d in expected.values()]
        assert {q: runs.ranked(d) for q, d in got.items()} == {q: runs.ranked(d) for q, d in expected.items()}


@pytest.mark.parametrize("block", [7, 1 << 20])
@pytest.mark.parametrize("text, message", [
    ("q Q0 a 1 0.5 t\nq Q0 b 2 0.4 t\nq Q0 a 3 0.3 t\n", "x.trec: duplicate candidate a for query q"),
    ("q Q0 a 1 0.5 t\nq Q0 b 2 0.4 t\nq Q0 c 3 inf t\n", "x.trec: line 3 has an infinite score"),
    ("q Q0 a 1 0.5 t\n\nq Q0 b 2 0.4 t\nq Q0 c 3 x t\n", "x.trec:4: non-numeric score 'x'"),
])
def test_faults_across_blocks_are_named_by_their_line(tmp_path, monkeypatch, block, text, message):
    monkeypatch.setattr(runs, "BLOCK", block)
    with pytest.raises(KitError, match=message):
        runs.parse_trec(text.encode(), tmp_path / "x.trec")


def test_a_fifo_a_sidecar_lists_is_one_line_naming_it_from_evaluate(tmp_path, collection):
    folder = write_run(tmp_path / "runs" / "bm25", RUN, {"run": "bm25", "dataset": collection.name,
                                                          "data_sha256": collection.identity})
    os.mkfifo(folder / "extra")
    sidecar = json.loads((folder / SIDECAR).read_text())
    sidecar["files"]["extra"] = {"sha256": "0" * 64}
    (folder / SIDECAR).write_text(json.dumps(sidecar))
    with deadline(10), pytest.raises(KitError) as err:
        load_any_run(folder, None, collection)
    message = str(err.value)
    assert "\n" not in message and str(folder / "extra") in message and "not a regular file" in message, message
