"""Document vectors of a user's model object are keyed by what makes them (the object's
fingerprint, the document template, the text), never by the name it is evaluated under: a
renamed model, or the same encoder under other query templates, encodes no document again."""

from __future__ import annotations

import threading

import pytest

from evalkit import api
from evalkit.models import objects

ONE = ["929877"]  # one seed, its two facets


pytestmark = pytest.mark.usefixtures("fresh_cache")  # tests/api/conftest.py


@pytest.fixture
def encoded(monkeypatch):
    """Texts sent to user encoders, by kind (query, document)."""
    counts = {objects.QUERY: 0, objects.DOCUMENT: 0}
    call = objects.ObjectEncoder._call

    def counted(self, texts, kind):
        counts[kind] += len(texts)
        return call(self, texts, kind)

    monkeypatch.setattr(objects.ObjectEncoder, "_call", counted)
    return counts


def test_the_same_object_under_a_new_name_encodes_nothing_again(tiny_model, encoded, tmp_path):
    first = api.evaluate(tiny_model, "csfcube", name="minilm-a", seeds=ONE, runs_dir=tmp_path)
    assert encoded[objects.DOCUMENT] > 0 and encoded[objects.QUERY] > 0
    before = dict(encoded)
    renamed = api.evaluate(tiny_model, "csfcube", name="minilm-b", seeds=ONE, runs_dir=tmp_path)
    assert encoded == before  # old code: every document and query encoded again under the new name
    assert renamed.per_query.equals(first.per_query)


def test_another_spec_sharing_the_encoder_encodes_only_its_new_queries(tiny_model, encoded, tmp_path):
    api.evaluate(tiny_model, "csfcube", name="plain", seeds=ONE, runs_dir=tmp_path)
    documents = encoded[objects.DOCUMENT]
    queries = encoded[objects.QUERY]
    api.evaluate(tiny_model, "csfcube", name="prompted", query_template="query: {query}", seeds=ONE, runs_dir=tmp_path)
    assert encoded[objects.DOCUMENT] == documents  # the documents' vectors are the same: none encoded
    assert encoded[objects.QUERY] > queries  # other query texts are new inputs
    api.evaluate(tiny_model, "csfcube", name="titled", doc_template="passage: {text}", seeds=ONE, runs_dir=tmp_path)
    assert encoded[objects.DOCUMENT] > documents  # another document template makes other vectors


class Opaque:
    """A user encoder the kit's walk cannot read (a lock), pinned by revision= alone."""

    def __init__(self, model):
        self.model = model
        self.lock = threading.Lock()

    def encode(self, texts):
        return self.model.encode(list(texts), convert_to_numpy=True)


def test_a_revision_alone_keeps_the_name_in_the_vectors_key(tiny_model):
    """revision= states what the model of that name is, not what encodes: another name with the same
    revision may be another model, so its vectors are its own; no identity: no cache at all."""
    model = Opaque(tiny_model)
    a = objects.ObjectEncoder(model, "a", {"object": "Opaque", "revision": "r1"})
    b = objects.ObjectEncoder(model, "b", {"object": "Opaque", "revision": "r1"})
    assert a.fingerprint != b.fingerprint
    assert objects.ObjectEncoder(model, "a", None).fingerprint is None
    keyed = {"object": "SentenceTransformer", "fingerprint_sha256": "0" * 64}
    assert objects.ObjectEncoder(model, "a", keyed).fingerprint == objects.ObjectEncoder(model, "b", keyed).fingerprint


def test_registry_entries_and_st_specs_over_one_encoder_share_its_document_vectors(tmp_path):
    """Two entries of one folder under other names and query templates, and an st: spec of it, key
    their document vectors and corpus index alike (the folder's content, not the entry's name)."""
    from evalkit.models import registry
    from evalkit.models.families import dense

    folder = tmp_path / "encoder"
    folder.mkdir()
    (folder / "config.json").write_text("{}")  # never loaded: building the encoder reads no weights
    plain = dense.build({"model": str(folder)}, "offline", None, None, None)
    probe = dense.build({"model": str(folder), "query_template": "{instruction} {query}"}, "offline", None, None,
                        None)
    spec = registry.spec(f"st:{folder};label=mine", "offline")
    assert plain.document_side() == probe.document_side() == registry.build(spec, None).document_side()
    (folder / "config.json").write_text('{"changed": true}')
    assert dense.build({"model": str(folder)}, "offline", None, None, None).document_side() != plain.document_side()
