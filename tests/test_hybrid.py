"""Facet hybrid: the end points reproduce their rankings; fold-wise selection never reads test values."""

from __future__ import annotations

import pandas as pd
import pytest

from evalkit import csfcube, hybrid
from evalkit.embeddings import Encoder
from evalkit.errors import KitError
from evalkit.evaluation import per_query
from evalkit.instructions import make_request
from evalkit.models.dense import BiEncoder
from evalkit.protocols import pool_candidates
from evalkit.runs import ranked
from tiny_models import build_sentence_transformer

SEEDS = ("929877", "3264891")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    data = csfcube.load()
    folder = tmp_path_factory.mktemp("hybrid")
    model = BiEncoder(Encoder(str(build_sentence_transformer(folder)), cache_dir=folder / "cache"))
    candidates = {qid: pool_candidates(data, q) for qid, q in data.queries.items() if q.seed in SEEDS}
    whole, facet = hybrid.components(hybrid.FacetHybrid(model, 1.0), data, candidates)
    return data, model, candidates, whole, facet


@pytest.mark.parametrize("alpha, variant", [(1.0, "base"), (0.0, "aspect-subset")])
def test_end_points_reproduce_the_whole_abstract_and_aspect_subset_rankings(setup, alpha, variant):
    data, model, candidates, whole, facet = setup
    combined = hybrid.combine(whole, facet, alpha)
    for qid, cands in candidates.items():
        q = data.queries[qid]
        expected = model.score(make_request(data.papers[q.seed], q.facet, variant), cands)
        assert ranked(combined[qid]) == ranked(expected)


def test_a_equal_one_has_p_mrr_exactly_zero(setup):
    data, _, _, whole, facet = setup
    assert (per_query(data, hybrid.combine(whole, facet, 1.0))["p-mrr"] == 0.0).all()


def test_intermediate_weight_is_the_weighted_sum(setup):
    _, _, _, whole, facet = setup
    qid = next(iter(whole))
    doc = next(iter(whole[qid]))
    assert hybrid.combine(whole, facet, 0.3)[qid][doc] == pytest.approx(0.3 * whole[qid][doc] + 0.7 * facet[qid][doc])


def test_scorer_with_a_weight_matches_the_arithmetic_and_checks_its_range(setup):
    data, model, candidates, whole, facet = setup
    qid = next(iter(candidates))
    q = data.queries[qid]
    request = make_request(data.papers[q.seed], q.facet, "base")
    scored = hybrid.FacetHybrid(model, 0.4).score(request, candidates[qid])
    assert scored == pytest.approx(hybrid.combine(whole, facet, 0.4)[qid])
    with pytest.raises(KitError, match="must lie in"):
        hybrid.FacetHybrid(model, 1.5)


def test_candidate_facet_variant_scores_candidates_facet_sentences(setup):
    data, model, candidates, whole, facet = setup
    qid = next(iter(candidates))
    q = data.queries[qid]
    request = make_request(data.papers[q.seed], q.facet, "base")
    same_whole, facet_only = hybrid.FacetHybrid(model, 0.0, candidate_facet=True).components(request, candidates[qid])
    assert same_whole == whole[qid] and facet_only != facet[qid]
    paper = candidates[qid][0]
    text = " ".join(paper.facet_sentences(q.facet)) or paper.text
    subset = make_request(data.papers[q.seed], q.facet, "aspect-subset")
    expected = float(model.encoder.encode([text])[0] @ model.encoder.encode([model.query_string(subset)])[0])
    assert facet_only[paper.pid] == pytest.approx(expected, abs=1e-6)


def _tables(values_by_alpha: dict[float, dict[str, tuple[float, float]]]) -> dict[float, pd.DataFrame]:
    return {a: pd.DataFrame({q: {"ndcg@20": n, "p-mrr": p} for q, (n, p) in rows.items()}).T
            for a, rows in values_by_alpha.items()}


def test_choose_alpha_keeps_ndcg_and_maximises_p_mrr():
    dev = _tables({1.0: {"q": (0.5, 0.0)}, 0.5: {"q": (0.5, 0.2)}, 0.0: {"q": (0.3, 0.9)}})
    assert hybrid.choose_alpha(dev) == 0.5  # 0.0 has the best p-MRR but loses NDCG


def test_fold_wise_selection_never_reads_test_half_values(monkeypatch):
    folds = {"fold1_dev": ["d1"], "fold1_test": ["t1"], "fold2_dev": ["t1"], "fold2_test": ["d1"]}
    base = {1.0: {"d1": (0.5, 0.0), "t1": (0.5, 0.0)}, 0.5: {"d1": (0.5, 0.3), "t1": (0.5, 0.1)}}
    seen = []
    real_choose = hybrid.choose_alpha

    def spy(dev):
        seen.append(sorted(set().union(*(set(t.index) for t in dev.values()))))
        return real_choose(dev)

    monkeypatch.setattr(hybrid, "choose_alpha", spy)
    table, chosen = hybrid.cross_validate(_tables(base), folds)
    assert seen == [["d1"], ["t1"]]  # each choice saw only its fold's dev half
    skewed = {a: dict(rows) for a, rows in base.items()}
    skewed[1.0]["t1"] = (0.5, 5.0)  # test-half value of fold 1 that would change a test-peeking choice
    folds_one = {"fold1_dev": ["d1"], "fold1_test": ["t1"], "fold2_dev": ["d1"], "fold2_test": ["t1"]}
    seen.clear()
    _, chosen_skewed = hybrid.cross_validate(_tables(skewed), folds_one)
    assert chosen_skewed == {"fold1": 0.5, "fold2": 0.5}
