"""Facet hybrid: the end points reproduce their rankings, weights are arithmetic, the scorer agrees.

Choosing the weight on each fold's dev half (`hybrid.alpha_chooser` with
`selection.cross_validate`) is tested in test_selection.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from tiny_models import build_sentence_transformer

from evalkit.core.errors import KitError
from evalkit.data.runs import ranked
from evalkit.evaluation.evaluate import PMRR, per_query
from evalkit.models.dense import BiEncoder
from evalkit.retrieval.embeddings import Encoder
from evalkit.study import hybrid_curve as hybrid

SEEDS = ("929877", "3264891")


@pytest.fixture(scope="module")
def setup(collection, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hybrid")
    model = BiEncoder(Encoder(str(build_sentence_transformer(folder)), cache_dir=folder / "cache"))
    candidates = {qid: collection.candidates_of(qid) for qid, q in collection.queries.items()
                  if q.seed.doc_id in SEEDS}
    whole, facet = hybrid.components(hybrid.FacetHybrid(model, 1.0), collection, candidates)
    return collection, model, candidates, whole, facet


@pytest.mark.parametrize("alpha, variant", [(1.0, "base"), (0.0, "aspect-subset")])
def test_end_points_reproduce_the_whole_abstract_and_aspect_subset_rankings(setup, alpha, variant):
    collection, model, candidates, whole, facet = setup
    combined = hybrid.combine(whole, facet, alpha)
    assert set(combined) == set(candidates) and len(candidates) == 4
    for qid, cands in candidates.items():
        expected = model.score(collection.query(qid, variant), cands)
        assert ranked(combined[qid]) == ranked(expected)


def test_a_equal_one_has_p_mrr_exactly_zero(setup):
    collection, _, _, whole, facet = setup
    pmrr = per_query(collection, hybrid.combine(whole, facet, 1.0))[PMRR]
    assert len(pmrr.dropna()) == 4 and (pmrr == 0.0).all()


def test_intermediate_weight_is_the_weighted_sum(setup):
    _, _, _, whole, facet = setup
    qid = next(iter(whole))
    doc = next(iter(whole[qid]))
    assert hybrid.combine(whole, facet, 0.3)[qid][doc] == pytest.approx(0.3 * whole[qid][doc] + 0.7 * facet[qid][doc])


def test_curve_has_one_table_per_weight(setup):
    collection, _, _, whole, facet = setup
    tables = hybrid.curve(collection, whole, facet, "nDCG_csfcube@20", grid=(0.0, 0.5, 1.0))
    assert list(tables) == [0.0, 0.5, 1.0]
    assert all({"nDCG_csfcube@20", PMRR} <= set(t.columns) and len(t) == 4 for t in tables.values())


def test_scorer_with_a_weight_matches_the_arithmetic_and_checks_its_range(setup):
    collection, model, candidates, whole, facet = setup
    qid = next(iter(candidates))
    scorer = hybrid.FacetHybrid(model, 0.4)
    assert not scorer.reads_instruction and scorer.describe()["hybrid_alpha"] == 0.4
    scored = scorer.score(collection.query(qid), candidates[qid])
    assert scored == pytest.approx(hybrid.combine(whole, facet, 0.4)[qid])
    with pytest.raises(KitError, match="must lie in"):
        hybrid.FacetHybrid(model, 1.5)


def test_candidate_facet_variant_scores_candidates_facet_sentences(setup):
    collection, model, candidates, whole, facet = setup
    qid = next(iter(candidates))
    query = collection.query(qid)
    same_whole, facet_only = hybrid.FacetHybrid(model, 0.0, candidate_facet=True).components(query, candidates[qid])
    assert same_whole == whole[qid] and facet_only != facet[qid]
    paper = candidates[qid][0]
    text = " ".join(paper.labelled(query.facet)) or paper.full_text
    subset = replace(query, text=query.facet_text)
    assert subset.text == collection.query(qid, "aspect-subset").text
    expected = float(model.encoder.encode([text])[0] @ model.encoder.encode([model.query_string(subset)])[0])
    assert facet_only[paper.doc_id] == pytest.approx(expected, abs=1e-6)
