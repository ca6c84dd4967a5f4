"""Benchmark of queries in parallel (issue 13): PRP heapsort over many queries at once.

1. API: `--queries` queries (default 50) of heapsort (N = `--depth` 200, k = 20) against a
   loopback OpenAI-compatible server that answers every request after `--latency` seconds
   (0.05). Wall time of `rerank_many` with `--in-flight` requests (32) against the
   sequential path (queries one by one, the two orders of a comparison together; measured
   on `--sequential-queries` queries and scaled to all) and against the lower bound
   total requests x latency / in-flight. Checks that both give the same rankings.
2. transformers: comparisons per second on the tiny test LM (tests/tiny_models.py), queries
   one by one with one comparison per forward pass, against `rerank_many` batching the
   comparisons of all queries (`--hf-batch` prompts per pass).

Usage: ``python bench/bench_llm_parallel.py [--queries 50] [--latency 0.05] [--out FILE]``
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

from common import emit

from evalkit.data.runs import ranked
from evalkit.llm import LLMReranker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the loopback server and tiny LM live there
from loopback import Loopback, chat_completion


class Server(Loopback):
    """Answers every request after `latency` seconds."""

    def __init__(self, latency: float):
        super().__init__()
        self.latency = latency

    def respond(self, payload, headers):
        time.sleep(self.latency)
        a, b = (int(x) for x in re.findall(r"doc(\d+)", payload["messages"][-1]["content"]))
        p = 1 / (1 + math.exp(-max(-8.0, min(8.0, (b - a) / 300 + 0.5))))  # prefers the smaller id, biased towards "A"
        top = [(" A", math.log(p)), (" B", math.log(1 - p))]
        return 200, chat_completion("Passage", [(" A", top[0][1], top)])


def jobs(queries: int, depth: int, seed: int = 0) -> list:
    out = []
    for q in range(queries):
        docs = [f"{d:04d}" for d in random.Random(seed + q).sample(range(5000), depth)]
        out.append((f"instruction {q}", f"seed paper {q}", [(d, f"doc{d} text {d}") for d in docs],
                    {d: -i for i, d in enumerate(docs)}))
    return out


def serve(latency: float, urls) -> None:
    """The server in its own process, so that it does not share the client's interpreter lock."""
    server = Server(latency)
    urls.put(server.url)
    server.serve_forever(0.01)


def api(args) -> dict:
    import multiprocessing

    urls = multiprocessing.Queue()
    process = multiprocessing.Process(target=serve, args=(args.latency, urls), daemon=True)
    process.start()
    base = {"backend": "openai", "base_url": urls.get(timeout=30), "model": "bench",
            "k": args.k, "depth": args.depth, "timeout_s": 30}
    work = jobs(args.queries, args.depth)
    with tempfile.TemporaryDirectory() as tmp:
        many = LLMReranker(base | {"max_in_flight": args.in_flight, "parallel_queries": args.queries,
                                   "cache": Path(tmp) / "many.sqlite"})
        start = time.perf_counter()
        parallel = many.rerank_many(work)
        wall = time.perf_counter() - start
        sent = many.accounting()["prompts_sent"]
        one = LLMReranker(base | {"max_in_flight": 2, "cache": Path(tmp) / "one.sqlite"})
        part = work[:args.sequential_queries]
        start = time.perf_counter()
        sequential = [one.rerank(*job) for job in part]
        seq_wall = time.perf_counter() - start
        seq_sent = one.accounting()["prompts_sent"]
    process.terminate()
    per_prompt_seq = seq_wall / seq_sent
    seq_projected = per_prompt_seq * sent
    bound = sent * args.latency / args.in_flight
    return {"queries": args.queries, "depth": args.depth, "k": args.k, "latency_s": args.latency,
            "in_flight": args.in_flight, "requests": sent, "comparisons": many.accounting()["comparisons"],
            "parallel_wall_s": round(wall, 1), "lower_bound_s": round(bound, 1),
            "parallel_over_bound": round(wall / bound, 2),
            "sequential_measured": {"queries": len(part), "requests": seq_sent, "wall_s": round(seq_wall, 1)},
            "sequential_projected_s": round(seq_projected, 1),
            "speedup_vs_sequential": round(seq_projected / wall, 1),
            "same_rankings": parallel[:len(part)] == sequential}


def transformers(args) -> dict:
    import torch
    from tiny_models import build_tiny_lm

    if args.threads:
        torch.set_num_threads(args.threads)
    out = {"torch_threads": torch.get_num_threads()}
    with tempfile.TemporaryDirectory() as tmp:
        folder = build_tiny_lm(Path(tmp) / "lm")
        work = [(f"find the method of paper {q}", "graph neural networks for text parsing",
                 [(f"d{i}", f"a method for parsing {'graph ' * ((i * (q + 3)) % 11)} text {i}") for i in range(30)],
                 {f"d{i}": -i for i in range(30)}) for q in range(args.hf_queries)]
        settings = {"model": str(folder), "k": 5, "depth": 30, "budgets": {"seed": 32, "candidate": 24}}
        for name, extra, parallel in [("one_comparison_batches", {"batch_size": 2}, False),
                                      ("cross_query_batches", {"batch_size": args.hf_batch}, True)]:
            rr = LLMReranker(settings | extra | {"cache": Path(tmp) / f"{name}.sqlite"})
            start = time.perf_counter()
            result = rr.rerank_many(work) if parallel else [rr.rerank(*job) for job in work]
            seconds = time.perf_counter() - start
            stats = rr.accounting()
            out[name] = {"comparisons": stats["comparisons"], "prompts": stats["prompts_sent"],
                         "seconds": round(seconds, 2), "comparisons_per_s": round(stats["comparisons"] / seconds, 1)}
            out.setdefault("rankings", []).append([ranked(s)[:5] for s in result])
        out["same_rankings"] = out["rankings"][0] == out["rankings"][1]
        del out["rankings"]
        out["speedup"] = round(out["cross_query_batches"]["comparisons_per_s"]
                               / out["one_comparison_batches"]["comparisons_per_s"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--depth", type=int, default=200)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--sequential-queries", type=int, default=2)
    parser.add_argument("--hf-queries", type=int, default=16)
    parser.add_argument("--hf-batch", type=int, default=32)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--no-api", action="store_true")
    parser.add_argument("--no-model", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = {"cpus": os.cpu_count(), "load_average_1min": os.getloadavg()[0]}
    if not args.no_api:
        report["api"] = api(args)
    if not args.no_model:
        report["transformers_tiny"] = transformers(args)
    emit(report, args.out)


if __name__ == "__main__":
    main()
