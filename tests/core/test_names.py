"""The kit's one naming rule (`evalkit.core.names`): properties, not pinned names."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.core.names import is_plain, labelled, name_part, run_part
from evalkit.data.runstore import check_path_part
from evalkit.study import tag

ROOT = Path(__file__).resolve().parents[2]
PLAIN = ["csfcube", "offline", "pool", "pooled", "full", "bm25", "minilm", "scifact", "robust04", "a.b", "x+y",
         "_x", "offline-pool", "st-all-MiniLM-L6-v2-0123abc", "x-0123abcdef", "x-0123ABCD"]
DERIVED_LOOKING = ["caf-850f7dc4", "st-all-MiniLM-L6-v2-0123abcd", "x-00000000"]  # plain, but `labelled`'s form
TRICKY = ["beir:/data/scifact", "beir:/data/scifact/", "beir:/data//scifact", "beir_/data/scifact",
          "beir__data_scifact", "irds:beir/scifact/test", "irds:beir/scifact:test", "msmarco-passage/dev",
          "msmarco-passage_dev", "a b", "a  b", "a_b", "a-b", "a/b", "a\\b", "a:b", "../x", "..", ".", "", " ",
          "-x", ".x", "+x", "données", "donn-es", "x" * 60, "x" * 61, "st:/m/a", "st:/m/a/", "é", "e",
          "a\nb", "a\tb", "$(x)", "a;b", "a=b", "a,b", "a@b", "café", *DERIVED_LOOKING, *PLAIN]


@pytest.mark.parametrize("text", PLAIN)
def test_a_plain_text_names_itself(text):
    assert is_plain(text) and name_part(text) == text


@pytest.mark.parametrize("text", DERIVED_LOOKING)
def test_a_plain_text_of_the_derived_form_never_names_itself(text):
    """``café`` derives ``caf-850f7dc4`` (hand-checked: sha256('café') starts 850f7dc4); the plain text
    ``caf-850f7dc4`` must not name the same folder, so it is derived again."""
    assert is_plain(text) and name_part(text) != text and name_part(text).startswith(text + "-")
    assert name_part("café") == "caf-850f7dc4"


@pytest.mark.parametrize(("text", "part"), [("bm25", "bm25"), ("bm25--generic", "bm25-generic-d53f160e"),
                                            ("a -b", "a-b-e7874e64"), ("index-float16", "index-float16-f1714a85"),
                                            ("caf-850f7dc4", "caf-850f7dc4-3de81c24")])
def test_a_run_name_part_never_holds_the_separator(text, part):
    assert run_part(text, reserved=("index-",)) == part and "--" not in part
    assert part == text or part.endswith("-" + hashlib.sha256(text.encode()).hexdigest()[:8])


def test_different_texts_never_share_a_part_and_every_part_is_a_folder_name():
    parts = {}
    for text in TRICKY:
        part = name_part(text)
        assert check_path_part("dataset", part) == part and is_plain(part)
        assert parts.setdefault(part, text) == text, (text, parts[part])
    runs = {}
    for text in TRICKY:
        part = run_part(text)
        assert check_path_part("run", part) == part and "--" not in part
        assert runs.setdefault(part, text) == text, (text, runs[part])



def test_the_tag_module_as_make_runs_it_equals_the_library():
    """The Makefile runs ``python3 -m evalkit.study.tag`` from the repository root before the kit is
    installed: without site-packages (-S) and without PYTHONPATH it prints the library's tag."""
    given = {"PROFILE": "offline", "PROTOCOL": "a b/c", "SEEDS": "2,1", "MODELS": "bm25"}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-S", "-m", "evalkit.study.tag", *(f"{k}={v}" for k, v in given.items())],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == tag.build_tag("offline", "a b/c", "2,1", MODELS="bm25")
    assert tag.build_tag("offline", "pool") == "offline-pool"


def test_a_non_plain_text_keeps_a_readable_slug():
    part = name_part("beir:/data/scifact")
    assert part.startswith("beir-data-scifact-") and part == labelled("beir:/data/scifact", "beir:/data/scifact")
