"""The fingerprint of user code is the code that is loaded (`evalkit.models.identity`), not the
text on disk: a file edited without reload keeps its key, the loaded code changing changes it,
and one process's key is every fresh process's whatever its hash seed. What changes the loaded
code without changing a source line (two lambdas on one line, a patched library class, a
library module's attribute, a constant read through ``globals()``, a function attribute, a
cached helper) changes the key; what cannot be known (eval, globals() by a computed key) makes
it unknown, and the run is made again with a note saying why."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from evalkit import api
from evalkit.models import identity
from evalkit.models.identity import fingerprint

QUERY = ["929877_background"]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # a module rewritten within a second re-imports
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EVALKIT_MODELS", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))


def write_module(folder: Path, name: str, text: str, monkeypatch, reload: bool = True):
    """`text` written as module `name` in `folder`; imported (or re-imported) unless not `reload`."""
    (folder / f"{name}.py").write_text(textwrap.dedent(text))
    if not reload:
        return sys.modules[name]
    importlib.invalidate_caches()
    module = importlib.reload(sys.modules[name]) if name in sys.modules else importlib.import_module(name)
    monkeypatch.setitem(sys.modules, name, module)
    return module


def key(obj) -> str:
    found, why = fingerprint(obj)
    assert why is None, why
    return found


def fresh_process_key(folder: Path, module: str, attribute: str, seed: str = "0") -> str:
    """The fingerprint of `module.attribute` computed by a fresh Python with PYTHONHASHSEED=`seed`."""
    code = (f"import sys; sys.path[:0] = sys.argv[1:3]; import {module}; from evalkit.models.identity import "
            f"fingerprint; print(fingerprint({module}.{attribute})[0])")
    out = subprocess.run([sys.executable, "-c", code, str(REPO), str(folder)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONDONTWRITEBYTECODE": "1"}, check=True)
    return out.stdout.strip()


SCORER = '''
def score(query, documents):
    words = set(query.text.lower().split())
    return [{weight} * len(words & set(d.text.lower().split())) + len(d.text) / 1e4 for d in documents]
'''


def test_a_file_edited_without_reload_keeps_the_loaded_codes_key(tmp_path, monkeypatch):
    """The kernel's case: the module is imported, its file edited, not reloaded. The code that
    runs is the old one, so the key must stay the old code's; reloading changes it."""
    module = write_module(tmp_path, "stale_scorer", SCORER.format(weight="1.0"), monkeypatch)
    loaded = key(module.score)
    write_module(tmp_path, "stale_scorer", SCORER.format(weight="-1.0"), monkeypatch, reload=False)
    assert key(module.score) == loaded, "the file on disk is not the code that runs"
    fresh = fresh_process_key(tmp_path, "stale_scorer", "score")  # a fresh process loads the new file
    assert fresh != loaded
    reloaded = write_module(tmp_path, "stale_scorer", SCORER.format(weight="-1.0"), monkeypatch)
    assert key(reloaded.score) == fresh, "the loaded code changed: this process now has the fresh one's key"


def test_a_stored_run_of_edited_but_not_reloaded_code_keys_the_old_code(tmp_path, monkeypatch, executed):
    """Through the API: the old code's run is stored under the old code's key, so the new code,
    once loaded, is run again and gives a fresh runs folder's numbers."""
    module = write_module(tmp_path, "stale_api", SCORER.format(weight="1.0"), monkeypatch)
    runs = tmp_path / "runs"
    write_module(tmp_path, "stale_api", SCORER.format(weight="-1.0"), monkeypatch, reload=False)
    old = api.evaluate(module.score, name="mine", queries=QUERY, runs_dir=runs)  # the old code runs
    new = write_module(tmp_path, "stale_api", SCORER.format(weight="-1.0"), monkeypatch)
    changed = api.evaluate(new.score, name="mine", queries=QUERY, runs_dir=runs)
    fresh = api.evaluate(new.score, name="mine", queries=QUERY, runs_dir=tmp_path / "fresh")
    assert len(executed) == 3, "the new code must not reuse the old code's run"
    numbers = [r.per_query.select_dtypes("number").to_numpy() for r in (old, changed, fresh)]
    assert np.allclose(numbers[1], numbers[2], equal_nan=True)
    assert not np.allclose(numbers[0], numbers[1], equal_nan=True)


STABLE = '''
import pathlib

STOP = {"the", "a", "of", "and", "in", "to", "we"}
TABLE = {"alpha": 1.0, "beta": 2.0}


class Model:
    def __init__(self):
        self.path = pathlib.Path("data") / "weights.txt"
        self.seen = {self.path, ("x", 1), frozenset({"p", "q", "r"})}  # hashes the path (cached in it)
        self.words = frozenset(STOP)

    def __call__(self, query, documents):
        words = {w for w in query.text.lower().split() if w not in STOP and w not in {"x", "y", "z", "w"}}
        return [len(words & set(d.text.split())) * TABLE["alpha"] + len(str(self.path)) for d in documents]


MODEL = Model()
'''

def test_the_same_code_has_one_key_in_fresh_processes_whatever_the_hash_seed(tmp_path, monkeypatch):
    """Sets, frozensets in code, a dict and a pathlib.Path (whose hash is cached in its slots):
    two fresh processes with different PYTHONHASHSEED give this process's key."""
    module = write_module(tmp_path, "stable_model", STABLE, monkeypatch)
    here = key(module.MODEL)
    assert [fresh_process_key(tmp_path, "stable_model", "MODEL", seed) for seed in ("1", "2")] == [here, here]


def test_a_model_holding_a_path_is_reused(tmp_path, monkeypatch, executed):
    """A Path caches its text and hash when first used: the model is the same before and after."""
    module = write_module(tmp_path, "path_model", STABLE, monkeypatch)
    model = module.Model.__new__(module.Model)
    model.path = Path("data") / "weights.txt"  # not yet hashed nor printed
    runs = tmp_path / "runs"
    api.evaluate(model, name="mine", queries=QUERY, runs_dir=runs)
    api.evaluate(model, name="mine", queries=QUERY, runs_dir=runs)
    assert len(executed) == 1, "a model holding a pathlib.Path must be reused"


def test_two_lambdas_on_one_line_differ():
    first, second = (lambda q, d: [1.0] * len(d)), (lambda q, d: [-1.0] * len(d))
    assert key(first) != key(second)
    assert key(first) == key(first)


# -- library code: pinned by its version, and what is not the library's own is walked ---------

def fake_library(tmp_path, monkeypatch, scale: str = "1.0"):
    """A module `fakelib` installed in a folder the kit counts as installed libraries."""
    root = tmp_path / "site-packages"
    root.mkdir(exist_ok=True)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(identity, "_library_roots", lambda: (str(root.resolve()),))
    module = write_module(root, "fakelib", f'''
        SCALE = {scale}
        __version__ = "1.0"


        class Pool:
            def forward(self, values):
                return sum(values) / len(values)

            def largest(self, values):
                return max(values)
        ''', monkeypatch)
    assert identity.is_library_module(module)
    return module


USER_OF_LIBRARY = '''
import fakelib


class Encoder:
    def __init__(self):
        self.pool = fakelib.Pool()

    def encode(self, texts):
        return [[fakelib.SCALE * self.pool.forward([len(t), 1.0]), 1.0] for t in texts]
'''


def test_a_patched_library_class_method_changes_the_key(tmp_path, monkeypatch):
    library = fake_library(tmp_path, monkeypatch)
    user = write_module(tmp_path, "uses_fakelib", USER_OF_LIBRARY, monkeypatch)
    model = user.Encoder()
    before = key(model)
    original = library.Pool.forward
    monkeypatch.setattr(library.Pool, "forward", lambda self, values: max(values))  # patched from user code
    patched = key(model)
    monkeypatch.setattr(library.Pool, "forward", library.Pool.largest)  # the library's own code, another method
    swapped = key(model)
    monkeypatch.setattr(library.Pool, "forward", original)
    assert len({before, patched, swapped}) == 3
    assert key(model) == before


def test_a_library_modules_attribute_read_by_the_code_changes_the_key(tmp_path, monkeypatch):
    library = fake_library(tmp_path, monkeypatch)
    user = write_module(tmp_path, "uses_fakelib_scale", USER_OF_LIBRARY, monkeypatch)
    model = user.Encoder()
    before = key(model)
    monkeypatch.setattr(library, "SCALE", -1.0)
    assert key(model) != before


def test_a_patched_sentence_transformers_pooling_is_encoded_again(tmp_path, monkeypatch, executed):
    """``Pooling.forward`` patched (max instead of mean pooling): the model is run again and its
    vectors are not the cached ones (the fresh runs folder shares the embedding cache)."""
    from sentence_transformers import SentenceTransformer
    from tiny_models import build_sentence_transformer

    folder = build_sentence_transformer(tmp_path / "tiny")
    model = SentenceTransformer(str(folder), device="cpu")
    pooling = type(model[1])
    mean = pooling.forward

    def max_pooled(self, features, *args, **kwargs):
        out = mean(self, features, *args, **kwargs)
        mask = features["attention_mask"].unsqueeze(-1).bool()
        out["sentence_embedding"] = features["token_embeddings"].masked_fill(~mask, -1e4).max(1).values
        return out

    runs = tmp_path / "runs"
    first = api.evaluate(model, name="mine", queries=QUERY, runs_dir=runs)
    monkeypatch.setattr(pooling, "forward", max_pooled)
    changed = api.evaluate(model, name="mine", queries=QUERY, runs_dir=runs)
    fresh = api.evaluate(model, name="mine", queries=QUERY, runs_dir=tmp_path / "fresh")
    assert len(executed) == 3
    numbers = [r.per_query.select_dtypes("number").to_numpy() for r in (first, changed, fresh)]
    assert np.allclose(numbers[1], numbers[2], equal_nan=True)
    assert not np.allclose(numbers[0], numbers[1], equal_nan=True)


# -- names read without naming them in the code ------------------------------------------------

GLOBALS = '''
WEIGHT = {weight}


def score(query, documents):
    return [globals()["WEIGHT"] * len(d.text) for d in documents]


def score_get(query, documents):
    return [globals().get("WEIGHT", 0.0) * len(d.text) for d in documents]


def computed(query, documents, name="WEIGHT"):
    return [globals()[name] * len(d.text) for d in documents]


def evaluated(query, documents):
    return [eval("WEIGHT") * len(d.text) for d in documents]


def executed_code(query, documents):
    space = {{}}
    exec("w = 2.0", space)
    return [space["w"] * len(d.text) for d in documents]


def model_eval(query, documents, model=None):
    return model.eval() if model else [1.0] * len(documents)  # a method named eval is not eval()
'''


def test_a_constant_read_through_globals_by_its_name(tmp_path, monkeypatch):
    one = write_module(tmp_path, "reads_globals", GLOBALS.format(weight="1.0"), monkeypatch)
    keys = key(one.score), key(one.score_get)
    other = write_module(tmp_path, "reads_globals", GLOBALS.format(weight="-1.0"), monkeypatch)
    assert key(other.score) != keys[0] and key(other.score_get) != keys[1]
    assert fingerprint(other.model_eval)[1] is None


@pytest.mark.parametrize("function, what", [("computed", "reads globals() with a key computed at run time"),
                                            ("evaluated", "calls eval()"), ("executed_code", "calls exec()")])
def test_dynamic_reads_make_the_key_unknown(tmp_path, monkeypatch, function, what):
    module = write_module(tmp_path, "reads_dynamic", GLOBALS.format(weight="1.0"), monkeypatch)
    found, why = fingerprint(getattr(module, function))
    assert found is None and what in why and function in why, why


def test_a_dynamic_read_is_made_again_and_said(tmp_path, monkeypatch, executed):
    module = write_module(tmp_path, "reads_eval", GLOBALS.format(weight="1.0"), monkeypatch)
    first = api.evaluate(module.evaluated, name="mine", queries=QUERY, runs_dir=tmp_path / "runs")
    api.evaluate(module.evaluated, name="mine", queries=QUERY, runs_dir=tmp_path / "runs")
    assert len(executed) == 2 and first.settings["model_identity"] is None
    assert any("evaluated: calls eval()" in n and "never reused" in n for n in first.notes), first.notes


def test_a_function_attribute_and_a_cached_helper_are_walked(tmp_path, monkeypatch):
    def score(query, documents):
        return [score.weight * len(d.text) for d in documents]

    score.weight = 1.0
    before = key(score)
    score.weight = -1.0
    assert key(score) != before

    text = '''
    import functools


    @functools.lru_cache(maxsize=None)
    def weight(text):
        return {body}


    def score(query, documents):
        return [weight(d.text) for d in documents]
    '''
    cached = key(write_module(tmp_path, "cached_helper", text.format(body="len(text)"), monkeypatch).score)
    changed = key(write_module(tmp_path, "cached_helper", text.format(body="-len(text)"), monkeypatch).score)
    assert cached != changed


def test_an_unchanged_object_has_one_key_after_it_ran(tmp_path, monkeypatch):
    """What the walk reads is not what running changes (a Path's caches, a library's state)."""
    module = write_module(tmp_path, "ran_model", STABLE, monkeypatch)
    model = module.Model()
    before = key(model)

    class Doc:
        text = "the data model"

    class Q:
        text = "a data model"

    model(Q(), [Doc()])
    json.dumps(str(model.path))
    assert key(model) == before
