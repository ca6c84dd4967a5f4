"""Dataset schemes declare themselves (evalkit.datasets.scheme): a scheme written in one new module
plus its registration loads through `load_dataset`, is listed in the help and the usage line, and
the kit's own five are read from the same registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

import evalkit.datasets as datasets
from evalkit.core.errors import DeclarationError, KitError
from evalkit.data.collection import Document, Query
from evalkit.datasets import csfcube, load_dataset, register
from evalkit.datasets.scheme import FOLDER, NAME, NOTHING, Scheme

ROOT = Path(__file__).resolve().parents[2]

# A collection of a user's: one module declaring its format's loader and scheme, registering itself.
TOY_MODULE = '''
"""A toy collection: a folder holding toy.json {"docs": {id: text}, "queries": {id: text},
"qrels": {qid: {doc: grade}}}."""

import json
from pathlib import Path

from evalkit.data.collection import Collection, Document, Query
from evalkit.datasets import register
from evalkit.datasets.scheme import FOLDER, Scheme


def load_toy(folder: Path) -> Collection:
    data = json.loads((folder / "toy.json").read_text())
    collection = Collection("toy", {d: Document(d, "", t) for d, t in data["docs"].items()},
                            {q: Query(q, t) for q, t in data["queries"].items()}, data["qrels"],
                            relevance_level=1, measures=("nDCG@10",))
    collection.check()
    return collection


SCHEME = register(Scheme("toy", FOLDER, load_toy, argument="FOLDER",
                         help="a toy folder: toy.json with docs, queries and qrels\\n(the registration test's)",
                         hint="give a toy folder holding toy.json"))
'''


@pytest.fixture
def registry(monkeypatch):
    """The registry as it is, restored after the test (a registered scheme stays in this test)."""
    monkeypatch.setattr(datasets.DECLARED, "items", datasets.DECLARED.items)


@pytest.fixture
def toy_module(tmp_path, monkeypatch, registry):
    (tmp_path / "toy_collection.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_collection", raising=False)
    __import__("toy_collection")
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "toy.json").write_text(json.dumps({"docs": {"d1": "graph networks", "d2": "parsing"},
                                                 "queries": {"q1": "graphs"}, "qrels": {"q1": {"d1": 1}}}))
    return folder


def test_a_scheme_declared_in_a_new_module_loads_and_is_listed(toy_module):
    toy = load_dataset(f"toy:{toy_module}")
    assert toy.name == "toy" and toy.documents["d2"] == Document("d2", "", "parsing")
    assert toy.queries == {"q1": Query("q1", "graphs")} and toy.qrels == {"q1": {"d1": 1}}
    assert datasets.SCHEMES == (*(s.name for s in datasets.KIT_SCHEMES), "toy")  # listed last
    assert datasets.DATASET_HELP.endswith(
        "\n  toy:FOLDER               a toy folder: toy.json with docs, queries and qrels"
        "\n                           (the registration test's)")
    assert datasets.usage().endswith(f"{datasets.KIT_SCHEMES[-1].spec} or toy:FOLDER")
    with pytest.raises(KitError, match=r"^`toy:/nowhere/x`: folder not found; give a toy folder holding toy.json$"):
        load_dataset("toy:/nowhere/x")
    with pytest.raises(KitError, match=r"unknown dataset scheme 'toys'; use .* or toy:FOLDER$"):
        load_dataset("toys:x")


def test_the_help_lists_the_kits_schemes_from_their_declarations():
    """Every scheme of the registration list, in its order, each with its declared help lines."""
    assert datasets.SCHEMES[:5] == ("csfcube", "beir", "followir", "instructir", "irds")  # the kit's first five
    assert datasets.SCHEMES == tuple(s.name for s in datasets.KIT_SCHEMES)
    assert [s.name for s in datasets.schemes()] == list(datasets.SCHEMES)
    lines = datasets.DATASET_HELP.splitlines()
    assert lines == ["datasets (--dataset SPEC):", *(line for s in datasets.KIT_SCHEMES for line in s.help_lines())]
    assert [line.split()[0] for line in lines[1:] if not line.startswith(" " * 3)] == \
        [s.spec for s in datasets.KIT_SCHEMES]
    for scheme in datasets.KIT_SCHEMES:  # the spec in its column, then each line of the declared help beside it
        first, *rest = scheme.help_lines()
        assert first.split(maxsplit=1) == [scheme.spec, scheme.help.splitlines()[0]]
        assert len(rest) == len(scheme.help.splitlines()) - 1


def test_load_dataset_calls_the_registered_loader(registry):
    sentinel = object()
    datasets.DECLARED.items = {**datasets.DECLARED.items, "csfcube": replace(csfcube.SCHEME, load=lambda: sentinel)}
    assert load_dataset("csfcube") is sentinel


def test_a_bare_scheme_and_a_named_one(registry):
    seen = []
    register(Scheme("tiny", NOTHING, lambda: "tiny collection", help="a collection the kit holds",
                    hint="the kit holds it"))
    register(Scheme("hub", NAME, lambda text: seen.append(text) or "hub collection", argument="ID",
                    help="a collection by id"))
    assert load_dataset(" tiny ") == "tiny collection"
    with pytest.raises(KitError, match=r"^dataset='tiny:x': tiny takes no folder \(the kit holds it\); write tiny$"):
        load_dataset("tiny:x")
    assert load_dataset("hub:a/b:c") == "hub collection" and seen == ["a/b:c"]  # the text after the first colon
    with pytest.raises(KitError, match=r"^dataset='hub:': nothing after 'hub:'; use csfcube, .*, tiny or hub:ID$"):
        load_dataset("hub:")


def test_a_registered_name_is_never_replaced(registry):
    register(csfcube.SCHEME)  # the same scheme again: nothing changes
    assert datasets.SCHEMES.count("csfcube") == 1
    other = Scheme("beir", FOLDER, lambda folder: None, argument="FOLDER", help="another BEIR")
    with pytest.raises(DeclarationError, match="scheme 'beir': another scheme is registered under this name"):
        register(other)
    assert datasets.schemes()[1] is not other


@pytest.mark.parametrize("fields, problem", [
    (dict(name="Toy"), "lower-case identifier"),
    (dict(name="to y"), "lower-case identifier"),
    (dict(takes="files"), "is not one of nothing, folder, name"),
    (dict(argument=""), "give an argument word"),
    (dict(help=" "), "give a help line"),
    (dict(names=("a",)), "names need a FOLDER scheme and load_name"),
])
def test_a_scheme_checks_its_declaration(fields, problem):
    declared = dict(name="toy", takes=FOLDER, load=lambda folder: None, help="a toy", argument="FOLDER")
    with pytest.raises(DeclarationError, match=problem):
        Scheme(**{**declared, **fields})


def test_csfcube_loads_no_optional_library():
    """Every adapter declares its scheme at import, yet loading CSFCube imports neither ir_datasets nor
    huggingface_hub (each imported only inside its scheme's loader); a fresh interpreter, so nothing
    another test imported counts."""
    probe = textwrap.dedent("""
        import json, sys
        from evalkit.datasets import load_dataset
        assert load_dataset("csfcube").name == "csfcube"
        print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "evalkit" in modules and modules & {"ir_datasets", "huggingface_hub", "torch", "datasets"} == set()


@pytest.mark.parametrize("scheme", datasets.schemes(), ids=lambda s: s.name)
def test_every_scheme_says_which_folder_a_spec_reads(scheme, tmp_path):
    """The folder an output may not overwrite comes from the scheme's declaration (no list of
    scheme names): a FOLDER scheme's existing folder, a NOTHING scheme's `locate`, else None."""
    if scheme.takes == FOLDER:
        assert datasets.input_folder(f"{scheme.name}:{tmp_path}") == tmp_path
        assert datasets.input_folder(f"{scheme.name}:{tmp_path / 'absent'}") is None
    elif scheme.locate is None:
        assert datasets.input_folder(scheme.spec) is None


def test_a_registered_folder_scheme_has_its_folder_guarded_too(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.DECLARED, "items", datasets.DECLARED.items)
    register(Scheme("twofiles", FOLDER, lambda folder: None, argument="FOLDER", help="two files"))
    assert datasets.input_folder(f"twofiles:{tmp_path}") == tmp_path
    assert datasets.input_folder(f"nosuch:{tmp_path}") is None
    with pytest.raises(DeclarationError, match="locate is for a scheme that takes nothing"):
        Scheme("toy", FOLDER, lambda folder: None, argument="FOLDER", help="toy", locate=lambda: tmp_path)
