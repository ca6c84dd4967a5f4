"""The dev/test selector: choices read dev rows only, reported rows are each fold's test rows under
its own choice; `best_mean` and the facet hybrid's `alpha_chooser` rules."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from evalkit.core.errors import KitError
from evalkit.data.collection import Fold
from evalkit.evaluation import selection
from evalkit.evaluation.evaluate import PMRR
from evalkit.study import hybrid_curve as hybrid

NDCG = "nDCG_csfcube@20"
# two folds over four queries: each fold's dev half is the other's test half (as CSFCube's)
FOLDS = {"fold1": Fold(dev=("d1", "d2"), test=("t1", "t2")), "fold2": Fold(dev=("t1", "t2"), test=("d1", "d2"))}


def tables(values: dict, columns=(NDCG, PMRR)) -> dict:
    """{setting: {qid: tuple of column values}} -> {setting: per-query table indexed by qid}."""
    return {s: pd.DataFrame.from_dict(rows, orient="index", columns=list(columns)) for s, rows in values.items()}


def test_chooser_sees_copies_of_the_dev_rows_only():
    seen = []

    def spy(dev):
        seen.append(sorted(set().union(*(set(t.index) for t in dev.values()))))
        for t in dev.values():
            t[NDCG] = 99.0  # a chooser writing into its rows changes nothing reported
        return "a"

    data = tables({"a": {q: (0.5, 0.0) for q in ("d1", "d2", "t1", "t2")},
                   "b": {q: (0.4, 0.1) for q in ("d1", "d2", "t1", "t2")}})
    table, chosen = selection.cross_validate(data, FOLDS, spy)
    assert seen == [["d1", "d2"], ["t1", "t2"]]
    assert chosen == {"fold1": "a", "fold2": "a"}
    assert (table[NDCG] == 0.5).all() and (data["a"][NDCG] == 0.5).all()


def test_poisoned_test_rows_do_not_change_the_choice():
    clean = {"a": {"d1": (0.6, 0.0), "d2": (0.6, 0.0), "t1": (0.2, 0.0), "t2": (0.2, 0.0)},
             "b": {"d1": (0.5, 0.0), "d2": (0.5, 0.0), "t1": (0.3, 0.0), "t2": (0.3, 0.0)}}
    # one fold only, so that t1 and t2 are never dev rows: any change they cause is a leak
    one = {"fold1": FOLDS["fold1"]}
    _, chosen = selection.cross_validate(tables(clean), one, selection.best_mean(NDCG))
    assert chosen == {"fold1": "a"}
    for huge in (1e9, math.inf, -1e9):
        poisoned = {s: dict(rows) for s, rows in clean.items()}
        poisoned["b"]["t1"] = poisoned["b"]["t2"] = (huge, huge)
        table, chosen_poisoned = selection.cross_validate(tables(poisoned), one, selection.best_mean(NDCG))
        assert chosen_poisoned == chosen
        assert list(table[NDCG]) == [0.2, 0.2]  # a's test rows, whatever b's hold


def test_reported_rows_are_each_folds_test_rows_under_its_own_choice():
    data = tables({
        "a": {"d1": (0.9, 0.0), "d2": (0.9, 0.0), "t1": (0.1, 0.0), "t2": (0.2, 0.0)},
        "b": {"d1": (0.3, 0.0), "d2": (0.4, 0.0), "t1": (0.7, 0.0), "t2": (0.8, 0.0)},
    })
    table, chosen = selection.cross_validate(data, FOLDS, selection.best_mean(NDCG))
    # fold1 chooses on d1, d2 (a wins) and reports t1, t2 under a; fold2 the other way round
    assert chosen == {"fold1": "a", "fold2": "b"}
    assert table[NDCG].to_dict() == {"d1": 0.3, "d2": 0.4, "t1": 0.1, "t2": 0.2}
    assert list(table.index) == sorted(table.index)


def test_a_fold_with_an_empty_half_is_left_out_as_in_a_smoke_run():
    data = tables({"a": {"d1": (0.5, 0.0), "d2": (0.7, 0.0)}, "b": {"d1": (0.6, 0.0), "d2": (0.1, 0.0)}})
    # fold1's test half and fold2's dev half were not run: neither can select, nothing is reported
    table, chosen = selection.cross_validate(data, FOLDS, selection.best_mean(NDCG))
    assert chosen == {} and table.empty and list(table.columns) == [NDCG, PMRR]
    # a fold whose halves both hold run queries still selects (on d1: b) and reports (d2 under b)
    folds = {**FOLDS, "fold3": Fold(dev=("d1",), test=("d2",))}
    table, chosen = selection.cross_validate(data, folds, selection.best_mean(NDCG))
    assert chosen == {"fold3": "b"} and table[NDCG].to_dict() == {"d2": 0.1}
    with pytest.raises(KitError, match="defines none"):
        selection.cross_validate(data, {}, selection.best_mean(NDCG))


def test_best_mean_ties_go_to_the_first_listed():
    rows = {"d1": (0.5, 0.0), "d2": (0.7, 0.0)}
    assert selection.best_mean(NDCG)(tables({"x": rows, "y": rows, "z": rows})) == "x"
    assert selection.best_mean(NDCG)(tables({"z": rows, "y": rows, "x": rows})) == "z"
    better = {"d1": (0.6, 0.0), "d2": (0.7, 0.0)}
    assert selection.best_mean(NDCG)(tables({"x": rows, "y": better, "z": better})) == "y"


def test_best_mean_skips_settings_without_values():
    nan = float("nan")
    dev = tables({"x": {"d1": (nan, 0.0)}, "y": {"d1": (0.1, 0.0)}})
    assert selection.best_mean(NDCG)(dev) == "y"
    with pytest.raises(KitError, match="no dev values"):
        selection.best_mean(NDCG)(tables({"x": {"d1": (nan, 0.0)}}))


# --- the facet hybrid's rule ----------------------------------------------------------------


def test_alpha_chooser_keeps_ndcg_and_maximises_p_mrr():
    dev = tables({1.0: {"q": (0.5, 0.0)}, 0.5: {"q": (0.5, 0.2)}, 0.0: {"q": (0.3, 0.9)}})
    assert hybrid.alpha_chooser(NDCG)(dev) == 0.5  # 0.0 has the best p-MRR but loses nDCG


def test_alpha_chooser_ties_go_to_the_larger_weight_and_missing_p_mrr_never_wins():
    dev = tables({0.2: {"q": (0.5, 0.3)}, 1.0: {"q": (0.5, 0.0)}, 0.6: {"q": (0.6, 0.3)}})
    assert hybrid.alpha_chooser(NDCG)(dev) == 0.6
    dev = tables({1.0: {"q": (0.5, 0.0)}, 0.5: {"q": (0.9, float("nan"))}})
    assert hybrid.alpha_chooser(NDCG)(dev) == 1.0  # no p-MRR: ranked below any value


def test_hybrid_weight_is_chosen_on_dev_and_reported_on_test():
    # fold1's dev half allows 0.5 (same nDCG as a = 1, better p-MRR); its test half would prefer 0.0
    base = {1.0: {"d1": (0.5, 0.0), "d2": (0.5, 0.0), "t1": (0.5, 0.0), "t2": (0.5, 0.0)},
            0.5: {"d1": (0.5, 0.3), "d2": (0.5, 0.3), "t1": (0.4, 0.1), "t2": (0.4, 0.1)},
            0.0: {"d1": (0.2, 0.9), "d2": (0.2, 0.9), "t1": (0.9, 0.9), "t2": (0.9, 0.9)}}
    table, chosen = selection.cross_validate(tables(base), FOLDS, hybrid.alpha_chooser(NDCG))
    assert chosen == {"fold1": 0.5, "fold2": 0.0}
    assert table.loc["t1", PMRR] == 0.1 and table.loc["d1", PMRR] == 0.9
    skewed = {a: dict(rows) for a, rows in base.items()}
    skewed[1.0]["t1"] = (0.5, 5.0)  # a test-half value of fold1 that would change a test-peeking choice
    _, chosen_skewed = selection.cross_validate(tables(skewed), {"fold1": FOLDS["fold1"]}, hybrid.alpha_chooser(NDCG))
    assert chosen_skewed == {"fold1": 0.5}
