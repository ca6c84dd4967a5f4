"""Golden p-MRR values from mteb's own implementation, for tests/evaluation/test_measures.py.

The fixtures below are in FollowIR's format (query ids ``N-og`` / ``N-changed``, grade >= 1
relevant). This script feeds them to mteb's ``calculate_pmrr`` (``mteb._evaluators.
retrieval_metrics``, the function ``evaluate_p_mrr_change`` calls for Robust04, News21 and
Core17) and prints the values; the test pins them and checks that `evalkit.evaluation.measures.p_mrr`
gives the same numbers. The test imports `FIXTURE` and `TIES` from this file, so the
inputs have one source.

mteb receives the changed documents as a list per query (``changed_qrels``); FollowIR's
definition, written here independently of the kit: relevant (grade >= 1) under the
original instruction and not relevant (grade < 1 or unjudged) under the changed one.

Run it in a throwaway venv, never the kit's (mteb pulls torch and transformers):

    python -m venv ../mteb-venv
    ../mteb-venv/bin/pip install torch==2.13.0   # first, exactly this version
    ../mteb-venv/bin/pip install mteb            # produced the pinned values: mteb 2.26.24
    ../mteb-venv/bin/python scripts/mteb_pmrr_golden.py

The script imports nothing from the kit.
"""

from __future__ import annotations

import json
import random

LEVEL = 1


def _generated(seed: int, n_docs: int) -> tuple[dict, dict, dict, dict]:
    """A larger pair: seeded grades and two rankings with distinct scores, a few documents
    left out of each run (so the missing-document rule is exercised)."""
    rng = random.Random(seed)
    docs = [f"g{i:02d}" for i in range(n_docs)]
    og = {d: rng.choice([0, 0, 1, 2]) for d in docs}
    changed = {d: (0 if g >= 1 and rng.random() < 0.5 else g) for d, g in og.items()}
    scores_og = rng.sample(range(1000), n_docs)
    scores_changed = rng.sample(range(1000), n_docs)
    run_og = {d: s / 1000 for d, s in zip(docs, scores_og) if d not in docs[:3]}
    run_changed = {d: s / 1000 for d, s in zip(docs, scores_changed) if d not in docs[2:6]}
    return og, changed, run_og, run_changed


_G_OG, _G_CHANGED, _G_RUN_OG, _G_RUN_CHANGED = _generated(seed=7, n_docs=40)

# No tied scores anywhere: mteb and the kit break ties differently (see TIES).
FIXTURE = {
    "qrels": {
        # changed documents: d2, d3 and d5 (d5 unjudged under the changed instruction)
        "301-og": {"d1": 1, "d2": 2, "d3": 1, "d4": 0, "d5": 1},
        "301-changed": {"d1": 1, "d2": 0, "d3": 0, "d4": 0},
        # changed document e1, absent from the original run
        "302-og": {"e1": 1, "e2": 1, "e3": 0},
        "302-changed": {"e1": 0, "e2": 1, "e3": 0},
        # no changed document: mteb skips the query, the kit gives NaN
        "303-og": {"f1": 1, "f2": 0},
        "303-changed": {"f1": 1, "f2": 0},
        "304-og": _G_OG,
        "304-changed": _G_CHANGED,
    },
    "run": {
        "301-og": {"d1": 0.9, "d4": 0.8, "d3": 0.7, "d6": 0.6, "d2": 0.5, "d5": 0.4},
        "301-changed": {"d2": 0.95, "d1": 0.85, "d6": 0.75, "d3": 0.65, "d4": 0.55},  # d5 missing
        "302-og": {"e2": 3.0, "e3": 2.0},  # e1 missing: rank 3
        "302-changed": {"e3": 3.0, "e1": 2.0, "e2": 1.0},
        "303-og": {"f1": 2.0, "f2": 1.0},
        "303-changed": {"f2": 2.0, "f1": 1.0},
        "304-og": _G_RUN_OG,
        "304-changed": _G_RUN_CHANGED,
    },
    "pairs": {f"{n}-og": f"{n}-changed" for n in (301, 302, 303, 304)},
}

# Ties in the original run: the changed documents are t2 (tied with t1 and t3: rank 4
# under either rule, the middle of the three) and u1 (tied with u2 at the top). The kit
# ranks tied documents by id ascending (u1 first: rank 1); mteb >= 2.19.5 by id descending
# (u2 first: u1 at rank 2); older mteb by insertion order. In the changed run u1 ranks 1,
# t2 ranks 3. Kit: (0 + (3/4 - 1)) / 2 = -0.125; mteb: ((1/2 - 1) + (3/4 - 1)) / 2 = -0.375.
TIES = {
    "qrels": {
        "401-og": {"t1": 0, "t2": 1, "t3": 0, "u1": 1, "u2": 0},
        "401-changed": {"t1": 0, "t2": 0, "t3": 0, "u1": 0, "u2": 0},
    },
    "run": {
        "401-og": {"u2": 9.0, "u1": 9.0, "t3": 5.0, "t2": 5.0, "t1": 5.0},
        "401-changed": {"u1": 1.0, "t1": 0.9, "t2": 0.8, "u2": 0.7, "t3": 0.6},
    },
    "pairs": {"401-og": "401-changed"},
}


def changed_qrels(fixture: dict) -> dict[str, list[str]]:
    """FollowIR's changed documents per query number, as mteb receives them."""
    out = {}
    for og, changed in fixture["pairs"].items():
        before, after = fixture["qrels"][og], fixture["qrels"][changed]
        docs = sorted(d for d, g in before.items() if g >= LEVEL and after.get(d, 0) < LEVEL)
        if docs:
            out[og.removesuffix("-og")] = docs
    return out


def mteb_values(fixture: dict) -> dict[str, float]:
    """mteb's p-MRR per pair (one call per query number) and its aggregate ("all")."""
    import mteb  # noqa: F401  (the version is printed below)
    from mteb._evaluators.retrieval_metrics import calculate_pmrr

    original = {q: s for q, s in fixture["run"].items() if q.endswith("-og")}
    new = {q: s for q, s in fixture["run"].items() if not q.endswith("-og")}
    changed = changed_qrels(fixture)
    values = {f"{n}-og": float(calculate_pmrr(original, new, {n: docs})) for n, docs in changed.items()}
    values["all"] = float(calculate_pmrr(original, new, changed))
    return values


def main() -> None:
    import mteb

    print(f"# mteb {mteb.__version__}")
    print("MTEB_GOLDEN =", json.dumps(mteb_values(FIXTURE), indent=4))
    print("MTEB_TIES =", json.dumps(mteb_values(TIES), indent=4))


if __name__ == "__main__":
    main()
