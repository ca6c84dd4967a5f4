"""Fault injection, command-line input: every bad input is one line `evalkit: error: ...` and status 2,
never a traceback, and is caught before any scoring or writing.

More cases live in tests/cli/test_cli.py (BAD_INPUTS, BAD_RUNS, ARGPARSE_ERRORS: --depth of 0 or less,
--per-query pointing at an input file, malformed runs, argument errors ...); this module holds the
cases of issue 12 that were missing there.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import zipfile
from pathlib import Path

import pytest
from fixtures_datasets import write_beir

from evalkit import cli
from evalkit.cli.printing import null_nan
from evalkit.core.errors import KitError
from evalkit.datasets import csfcube, csfcube_official
from evalkit.datasets.csfcube_corpus import iter_corpus


def _one_line(capsys, argv, *fragments) -> str:
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("evalkit: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _official(folder: Path, facet: str, text: str) -> Path:
    path = csfcube_official.official_path(folder, "specter", facet)
    path.write_text(text)
    return path


def _evaluate(runs, *extra, name="specter"):
    return ["evaluate", "--dataset", "csfcube", "--runs", str(runs), *(["--name", name] if name else []), *extra]


# --- official JSON runs ----------------------------------------------------------------------------------


def test_a_seed_listed_twice_is_an_error_not_last_one_wins(cached_data, capsys, sample_copy):
    path = csfcube_official.official_path(sample_copy, "specter", "method")
    text = path.read_text()
    seed = next(iter(json.loads(text)))
    doubled = text.rstrip().rstrip("}") + f', "{seed}": [["1", 0.5]]}}'
    path.write_text(doubled)
    _one_line(capsys, _evaluate(sample_copy), str(path), f"key {seed} appears twice")


@pytest.mark.parametrize("number", ["1e400", "-1e999", "1" + "0" * 400, "9" * 5000, "Infinity", "-Infinity"])
def test_json_numbers_too_large_for_a_float(cached_data, capsys, sample_copy, number):
    path = _official(sample_copy, "method", f'{{"5052952": [["123", {number}]]}}')
    line = _one_line(capsys, _evaluate(sample_copy), str(path))
    assert "too large for a float" in line or "not a finite number" in line


@pytest.mark.parametrize("nesting", ["[" * 100_000, '{"a": ' * 100_000])
def test_deeply_nested_json(cached_data, capsys, sample_copy, nesting):
    path = _official(sample_copy, "method", nesting)
    _one_line(capsys, _evaluate(sample_copy), str(path), "malformed JSON")


def test_an_absurd_cut_off(capsys, sample_copy):
    _one_line(capsys, _evaluate(sample_copy, "--k", "1" + "0" * 30), "--k", "absurdly large")


def test_json_prints_null_for_any_non_finite_value():
    assert null_nan({"a": float("inf"), "b": [float("-inf"), float("nan"), 1.0]}) == \
        {"a": None, "b": [None, None, 1.0]}


# --- run-store folders: a damaged or missing sidecar is refused, not evaluated unverified -----------------


@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_a_run_folder_without_a_readable_sidecar_is_refused(capsys, tmp_path, damage):
    spec = f"beir:{write_beir(tmp_path / 'beir')}"
    assert cli.main(["run", "--dataset", spec, "--model", "bm25", "--runs-dir", str(tmp_path / "runs")]) == 0
    folder = Path(capsys.readouterr().out.strip())
    sidecar = folder / "sidecar.json"
    if damage == "truncate":
        sidecar.write_text(sidecar.read_text()[:40])
    else:
        sidecar.unlink()
    _one_line(capsys, ["evaluate", "--dataset", spec, "--runs", str(folder)], str(folder), "sidecar.json")


# --- the data check covers the folders the kit reads ----------------------------------------------------


def test_an_extra_paper_in_readable_annotations_is_an_error(capsys, data_copy, monkeypatch, sample_copy):
    extra = data_copy / "readable_annotations" / "99999-method-adju.txt"
    shutil.copyfile(data_copy / "readable_annotations" / "1587-result-adju.txt", extra)
    monkeypatch.setenv("CSFCUBE_DIR", str(data_copy))
    _one_line(capsys, _evaluate(sample_copy), str(extra), "not a file of the pinned CSFCube release")
    with pytest.raises(KitError, match="99999-method-adju.txt"):
        csfcube.load(data_copy)
    extra.unlink()
    (data_copy / "readable_annotations" / "notes.md").write_text("x")  # any unlisted file, not only *.txt
    with pytest.raises(KitError, match="notes.md"):
        csfcube.verify(data_copy)


def test_a_facet_file_deleted_by_hand_is_an_error(capsys, data_copy, monkeypatch, sample_copy):
    path = data_copy / "test-pid2anns-csfcube-method.json"
    path.unlink()
    monkeypatch.setenv("CSFCUBE_DIR", str(data_copy))
    _one_line(capsys, _evaluate(sample_copy), str(path), "missing CSFCube file")


def test_papers_come_only_from_listed_files(data, data_copy, rewrite_manifest):
    """Even past the folder check (here: a manifest rewritten without one file), only listed files are read."""
    assert set(csfcube._load_papers(data_copy)) == set(data.papers)


# --- the full-protocol corpus -----------------------------------------------------------------------------


def _corpus(tmp_path, lines: list[bytes], zipped: bool = False) -> Path:
    body = b"\n".join(lines) + b"\n"
    if not zipped:
        path = tmp_path / "corpus.jsonl"
        path.write_bytes(body)
        return path
    path = tmp_path / "corpus.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("abstracts.jsonl", body)
    return path


GOOD = json.dumps({"paper_id": "1", "title": "t", "abstract": ["a."], "pred_labels": ["method_label"]}).encode()
CORPUS_FAULTS = {
    "duplicate_paper_id": ([GOOD, GOOD], ":2:", "paper_id 1 appears twice"),
    "a_list_not_an_object": ([GOOD, b"[1, 2]"], ":2:", "not an object"),
    "a_string_not_an_object": ([b'"paper"'], ":1:", "not an object"),
    "not_utf8": ([GOOD, b'{"paper_id": "2", "title": "\xff\xfe"}'], ":2:", "not UTF-8"),
    "no_paper_id": ([b'{"title": "t"}'], ":1:", "paper_id"),
    "spaced_paper_id": ([b'{"paper_id": "a b"}'], ":1:", "not an id"),
    "deep_nesting": ([b"[" * 100_000], ":1:", "malformed corpus record"),
}


@pytest.mark.parametrize("zipped", [False, True], ids=["jsonl", "zip"])
@pytest.mark.parametrize("case", list(CORPUS_FAULTS))
def test_corpus_faults_are_one_line(tmp_path, case, zipped):
    lines, where, fragment = CORPUS_FAULTS[case]
    path = _corpus(tmp_path, lines, zipped)
    with pytest.raises(KitError) as info:
        list(iter_corpus(path))
    message = str(info.value)
    assert message.startswith(f"{path}{where}") and fragment in message and "\n" not in message


def test_a_damaged_zip_is_one_line(tmp_path, capsys, monkeypatch):
    path = tmp_path / "corpus.zip"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(KitError, match="not a readable zip file"):
        list(iter_corpus(path))
    # through the command: the corpus is read inside the run (first stage), still one line
    monkeypatch.setattr("evalkit.pipeline.runner.compute", lambda bound: list(iter_corpus(path)))
    # (csfcube: the full protocol needs a collection with a corpus file reader; BEIR has none)
    _one_line(capsys, ["run", "--dataset", "csfcube", "--model", "bm25", "--protocol", "full", "--corpus", str(path),
                       "--runs-dir", str(tmp_path / "runs")], str(path), "zip")


# --- report ---------------------------------------------------------------------------------------------------


def _notebook(path: Path, seeds: str | None = None) -> Path:
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_markdown_cell("# a table"))
    if seeds is not None:
        notebook.metadata["papermill"] = {"parameters": {"SEEDS": seeds, "PROFILE": "offline"}}
    nbformat.write(notebook, str(path))
    return path


@pytest.fixture
def no_html(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the report was built")

    monkeypatch.setattr("evalkit.pages.report.page", refuse)


REPORT_FAULTS = {
    "missing": (lambda t: t / "nope.ipynb", "no such notebook"),
    "folder": (lambda t: t, "is a folder"),
    "garbage": (lambda t: (t / "g.ipynb").write_bytes(b"\x89PNG\xff\xfe garbage") and t / "g.ipynb",
                "not a readable .ipynb"),
    "json_not_a_notebook": (lambda t: (t / "j.ipynb").write_text("[1, 2]") and t / "j.ipynb", "not a readable"),
    "empty": (lambda t: (t / "e.ipynb").write_text("") or t / "e.ipynb", "not a readable"),
    "deep_nesting": (lambda t: (t / "d.ipynb").write_text("[" * 100_000) and t / "d.ipynb", "not a readable"),
}


@pytest.mark.parametrize("case", list(REPORT_FAULTS))
def test_report_on_a_bad_notebook_is_one_line(tmp_path, capsys, no_html, case):
    make, fragment = REPORT_FAULTS[case]
    (tmp_path / "nb").mkdir()
    notebook = make(tmp_path / "nb")
    _one_line(capsys, ["report", str(notebook), "--out", str(tmp_path / "r.html")], str(notebook), fragment)
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("how", ["parameters", "file-name"])
def test_report_refuses_smoke_notebooks_unless_asked(tmp_path, capsys, how):
    full = _notebook(tmp_path / "relevance-offline-pool.ipynb", seeds="")
    smoke = _notebook(tmp_path / "relevance-offline-pool-smoke-1a2b3c4d.ipynb", seeds=None) if how == "file-name" \
        else _notebook(tmp_path / "relevance-x.ipynb", seeds="929877, 10014168")
    out = tmp_path / "r.html"
    _one_line(capsys, ["report", str(full), str(smoke), "--out", str(out)], str(smoke), "smoke", "--smoke")
    assert not out.exists()
    assert cli.main(["report", str(full), str(smoke), "--out", str(out), "--smoke"]) == 0
    assert cli.main(["report", str(full), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip().endswith("r.html")
    assert stat.S_IMODE(out.stat().st_mode) == 0o644  # readable by others, not 0600


def test_report_out_checked_before_any_work(tmp_path, capsys, monkeypatch, no_html):
    notebook = _notebook(tmp_path / "n.ipynb")
    _one_line(capsys, ["report", str(notebook), "--out", str(tmp_path)], "--out", "is a folder")
    _one_line(capsys, ["report", str(notebook), "--out", str(tmp_path / "no" / "r.html")], "does not exist")
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # root writes through chmod
    _one_line(capsys, ["report", str(notebook), "--out", str(tmp_path / "r.html")], "not writable")


def test_report_out_is_a_regular_file_devices_refused_symlinks_written_through(tmp_path, capsys, no_html):
    notebook = _notebook(tmp_path / "n.ipynb")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _one_line(capsys, ["report", str(notebook), "--out", str(fifo)], "--out", "is not a regular file")
    _one_line(capsys, ["report", str(notebook), "--out", "/dev/null"], "/dev/null", "is not a regular file")
    assert stat.S_ISFIFO(fifo.stat().st_mode) and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    link = tmp_path / "link.html"
    link.symlink_to("/dev/null")
    _one_line(capsys, ["report", str(notebook), "--out", str(link)], "/dev/null", "is not a regular file")


def test_report_out_through_a_symlink_writes_the_file_it_points_at(tmp_path, capsys):
    notebook = _notebook(tmp_path / "n.ipynb")
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "r.html"
    target.write_text("old")
    link = tmp_path / "r.html"
    link.symlink_to(target)
    assert cli.main(["report", str(notebook), "--out", str(link)]) == 0
    assert link.is_symlink() and link.resolve() == target and "<html" in target.read_text().lower()
    dangling = tmp_path / "new.html"
    dangling.symlink_to(tmp_path / "real" / "new.html")
    assert cli.main(["report", str(notebook), "--out", str(dangling)]) == 0
    assert dangling.is_symlink() and (tmp_path / "real" / "new.html").is_file()


def test_per_query_not_writable_is_checked_before_scoring(cached_data, capsys, sample_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("evalkit.api.score_runs", lambda *a, **k: pytest.fail("scored"))
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    _one_line(capsys, _evaluate(sample_dir, "--per-query", str(tmp_path / "pq.csv")), "--per-query", "not writable")


def test_official_files_are_written_0644(specter, tmp_path):
    path = tmp_path / "x.json"
    csfcube_official.write_official(path, specter, "method")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
