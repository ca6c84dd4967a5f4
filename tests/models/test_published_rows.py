"""The registry rows that reproduce published CSFCube rows as their authors' code computed them,
each on a tiny random model of the same architecture against a reference written here from the
authors' repository (allenai/aspire at 3010cd4):

- ``specter`` (paper profile): src/pre_process/pre_proc_buildreps.py ``BertMLM`` (the text
  ``title + '[SEP]' + ' '.join(abstract sentences)`` of ``get_gorc_specter``,
  ``tokenizer.tokenize`` cut to 500 tokens, [CLS] and [SEP] added, token types 0, the [CLS]
  final hidden state) and pp_gen_nearest.py ``rank_pool`` (Euclidean nearest neighbours);
- ``mpnet-sbmpnet1b`` (offline profile): pre_proc_buildreps.py ``build_sentbert_reps``
  (``SentenceTransformer.encode`` of each abstract sentence) and pp_gen_nearest.py
  ``rank_pool_sentfaceted`` with score type ``cosine`` (the seed's facet sentences, objective as
  background, against every candidate sentence; a candidate's score the maximum).

otAspire's row (its per-batch diameter) is tested in test_encoder_aspire.py.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from tiny_models import WORDS, build_sentence_transformer, build_tiny_bert

from evalkit.data.collection import Document
from evalkit.data.runs import ranked
from evalkit.models import registry

QID = "10010426_method"
LONG = Document("long", "a long paper", " ".join(list(WORDS) * 60))  # far past 500 tokens


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))


def _candidates(collection, n=12):
    return [*collection.candidates_of(QID)[:n], LONG]


# --- SPECTER ---------------------------------------------------------------------------------------


def authors_specter_vectors(folder, texts):
    """pre_proc_buildreps.BertMLM._prepare_batch + predict (one padded batch), [CLS] rows."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    batch = []
    for text in texts:
        tokens = tokenizer.tokenize(text)[:500]
        batch.append([tokenizer.cls_token_id, *tokenizer.convert_tokens_to_ids(tokens), tokenizer.sep_token_id])
    width = max(len(ids) for ids in batch)
    ids = torch.tensor([row + [tokenizer.pad_token_id] * (width - len(row)) for row in batch])
    mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in batch])
    with torch.no_grad():
        out = model(ids, token_type_ids=torch.zeros_like(ids), attention_mask=mask)
    return out.last_hidden_state[:, 0, :].numpy()


def authors_specter_text(doc: Document) -> str:
    """get_gorc_specter: title + '[SEP]' + the abstract sentences joined by spaces."""
    return doc.title + "[SEP]" + " ".join(s.text for s in doc.sentences) if doc.sentences else \
        doc.title + "[SEP]" + doc.text


def test_specter_row_ranks_the_pool_as_the_authors_code(collection, tmp_path):
    from evalkit.models.paper import build_paper_cls

    folder = build_tiny_bert(tmp_path / "bert")
    entry = registry.spec("specter", "paper")
    assert (entry.settings["doc_template"], entry.settings["max_length"], entry.settings["metric"]) == \
        ("{title}{sep}{abstract}", 502, "l2")
    scorer = build_paper_cls({**entry.settings, "model": str(folder), "device": "cpu"})
    query, candidates = collection.query(QID), _candidates(collection)
    scores = scorer.score(query, candidates)
    vectors = authors_specter_vectors(folder, [authors_specter_text(d) for d in [query.seed, *candidates]])
    distances = np.linalg.norm(vectors[1:] - vectors[0], axis=1)  # rank_pool: Euclidean NearestNeighbors
    expected = [candidates[i].doc_id for i in np.argsort(distances, kind="stable")]
    assert ranked(scores) == expected
    np.testing.assert_allclose([-scores[d.doc_id] for d in candidates], distances, atol=1e-4, rtol=0)
    assert len(scorer.reference.tokenizer.tokenize(authors_specter_text(LONG))) > 600  # truncation is exercised


# --- all-mpnet-base-v2 as sbmpnet1B ------------------------------------------------------------------


def test_sbmpnet1b_row_scores_the_best_facet_sentence_cosine(collection, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sklearn.metrics.pairwise import cosine_similarity

    folder = build_sentence_transformer(tmp_path / "st")
    entry = registry.spec("mpnet-sbmpnet1b", "offline")
    assert (entry.family, entry.settings["matching"]) == ("multivector", "max")
    scorer = registry.build(replace(entry, settings={**entry.settings, "model": str(folder)}), collection)
    query, candidates = collection.query(QID), _candidates(collection)[:-1]
    scores = scorer.score(query, candidates)
    model = SentenceTransformer(str(folder), device="cpu")
    facet = [s.text for s in query.seed.sentences if s.label == "method"]  # objective already read as background
    assert facet and len(facet) < len(query.seed.sentences)
    reps = model.encode(facet)
    expected = {d.doc_id: float(np.max(cosine_similarity(reps, model.encode([s.text for s in d.sentences]))))
                for d in candidates}
    np.testing.assert_allclose([scores[d] for d in expected], list(expected.values()), atol=1e-5, rtol=0)
    assert ranked(scores) == ranked(expected)
