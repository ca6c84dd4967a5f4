"""The BM25 corpus index on disk: every file it needs is checked (a file pruned from
``checksums.json``, an unlisted one, a missing one), an index of other settings is never used
(copied or symlinked into place), a symlink out of the cache is refused, and two builds in
processes with different string hashing (PYTHONHASHSEED) write byte-identical files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_retrieval import bm25_collection

import evalkit
from evalkit.core.errors import KitError
from evalkit.models.bm25 import BM25
from evalkit.retrieval.corpus import Corpus


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EVALKIT_PROGRESS", "off")
    return tmp_path / "cache"


@pytest.fixture
def corpus() -> Corpus:
    return Corpus.of_documents(list(bm25_collection(docs=60).documents.values()))


def queries():
    return list(bm25_collection(docs=60).queries.values())


def folders(cache: Path) -> set[Path]:
    return {p for p in (cache / "indexes").glob("bm25-*") if not p.name.endswith(".lock")}


def built(model: BM25, corpus: Corpus, cache: Path) -> Path:
    """The folder of `model`'s index of `corpus` (built now)."""
    before = folders(cache)
    model.corpus_index(corpus)
    return next(iter(folders(cache) - before))


def listing(recorded: dict) -> dict:
    """The file -> sha256 part of a ``checksums.json``."""
    return recorded["files"] if "files" in recorded else recorded


def flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # a low mantissa bit of the last float32 score: still a plausible index
    path.write_bytes(bytes(data))


def test_a_file_pruned_from_checksums_json_is_still_checked(corpus, cache):
    folder = built(BM25(), corpus, cache)
    recorded = json.loads((folder / "checksums.json").read_text())
    del listing(recorded)["data.csc.index.npy"]
    (folder / "checksums.json").write_text(json.dumps(recorded))
    flip_last_byte(folder / "data.csc.index.npy")
    with pytest.raises(KitError, match=r"the BM25 index is damaged: checksums\.json does not list exactly the "
                                       r"index's files .*; delete the folder to rebuild it"):
        BM25().search(queries(), corpus, 10)


def test_an_unlisted_file_in_the_index_is_damage(corpus, cache):
    folder = built(BM25(), corpus, cache)
    (folder / "corpus.jsonl").write_text("{}\n")
    with pytest.raises(KitError, match=r"corpus\.jsonl is not a file of a BM25 index"):
        BM25().search(queries(), corpus, 10)


def test_a_missing_file_and_its_entry_is_damage(corpus, cache):
    folder = built(BM25(), corpus, cache)
    recorded = json.loads((folder / "checksums.json").read_text())
    del listing(recorded)["vocab.index.json"]
    (folder / "checksums.json").write_text(json.dumps(recorded))
    (folder / "vocab.index.json").unlink()
    with pytest.raises(KitError, match=r"vocab\.index\.json is missing; delete the folder"):
        BM25().search(queries(), corpus, 10)


@pytest.mark.parametrize("how", ["symlink", "copy"])
def test_an_index_of_other_settings_is_never_used(corpus, cache, how):
    """An index built with k1 = 1.2 put in the place of the k1 = 1.5 one (each file consistent with
    its own checksums) is refused: a symlinked folder as a link, a copied one by its settings."""
    wanted = built(BM25(), corpus, cache)
    expected = BM25().search(queries(), corpus, 10)
    other = built(BM25(k1=1.2), corpus, cache)
    assert BM25(k1=1.2).search(queries(), corpus, 10) != expected  # the settings change the ranking
    shutil.rmtree(wanted)
    if how == "symlink":
        wanted.symlink_to(other, target_is_directory=True)
        message = r"the BM25 index folder is a symbolic link \(to .*\), which the kit never writes; delete the link"
    else:
        shutil.copytree(other, wanted)
        message = r"checksums\.json records other settings than this index's"
    with pytest.raises(KitError, match=message):
        BM25().search(queries(), corpus, 10)
    if how == "symlink":
        wanted.unlink()
    else:
        shutil.rmtree(wanted)
    assert BM25().search(queries(), corpus, 10) == expected  # the fix the message names


def test_a_file_symlinked_out_of_the_cache_is_refused(corpus, cache, tmp_path):
    folder = built(BM25(), corpus, cache)
    outside = tmp_path / "elsewhere" / "ids.json"
    outside.parent.mkdir()
    shutil.move(folder / "ids.json", outside)
    (folder / "ids.json").symlink_to(outside)  # same bytes: its checksum matches
    with pytest.raises(KitError, match=r"ids\.json is a symbolic link \(to .*elsewhere/ids\.json\), which the kit "
                                       r"never writes; delete the folder"):
        BM25().search(queries(), corpus, 10)


BUILD = """
import sys
from evalkit.data.collection import Document
from evalkit.models.bm25 import BM25
from evalkit.retrieval.corpus import Corpus
words = [f"term{i}" for i in range(80)]
docs = [Document(f"d{i:03d}", "", " ".join(words[(i * 7 + j * 13) % 80] for j in range(3 + i % 9)))
        for i in range(120)]
BM25().corpus_index(Corpus.of_documents(docs))
"""


def test_two_builds_under_different_string_hashing_are_byte_identical(tmp_path):
    root = Path(evalkit.__file__).resolve().parents[1]
    contents = []
    for seed in ("1", "2"):
        cache = tmp_path / f"cache-{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed, "EVALKIT_CACHE": str(cache), "EVALKIT_PROGRESS": "off",
               "PYTHONPATH": str(root)}
        subprocess.run([sys.executable, "-c", BUILD], env=env, check=True, timeout=120)
        (folder,) = folders(cache)
        contents.append((folder.name, {p.name: p.read_bytes() for p in sorted(folder.iterdir())}))
    (name_1, files_1), (name_2, files_2) = contents
    assert name_1 == name_2 and sorted(files_1) == sorted(files_2)
    assert [n for n in files_1 if files_1[n] != files_2[n]] == []
