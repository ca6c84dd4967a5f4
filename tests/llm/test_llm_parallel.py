"""Queries in parallel give what queries one by one give: judgments, rankings, cache contents;
and PRP heapsort as llm-rankers runs it."""

from __future__ import annotations

import hashlib
import math
import random
import re
import sqlite3

import pytest
from fake_llm import FakeBackend
from loopback import Loopback, chat_completion

from evalkit.core.errors import KitError
from evalkit.llm import LLMReranker
from evalkit.llm.cache import Key
from evalkit.llm.prp import heapsort_top


def p_first(a: str, b: str) -> float:
    """A deterministic, often position-biased and inconsistent P("A") for doc a shown first."""
    noise = int(hashlib.sha256(f"{a}|{b}".encode()).hexdigest()[:8], 16) / 2 ** 32
    return 1 / (1 + math.exp(-(int(b) - int(a)) / 7 - 3 * (noise - 0.3)))


class Server(Loopback):
    """Answers with p_first's log-probabilities, or HTTP 400 once past `fail_after` requests."""

    def __init__(self):
        super().__init__()
        self.fail_after = None  # answer HTTP 400 from this request on
        self.count = 0

    def respond(self, payload, headers):
        with self.lock:
            self.count += 1
            broken = self.fail_after is not None and self.count > self.fail_after
        if broken:
            return 400, b'{"error": "gone"}'
        a, b = re.findall(r"doc(\d+)", payload["messages"][-1]["content"])
        p = p_first(a, b)
        top = [(" A", math.log(p)), (" B", math.log(1 - p))]
        return 200, chat_completion("Passage A" if p > 0.5 else "Passage B", [(top[p <= 0.5][0], -0.1, top)])


@pytest.fixture
def server():
    with Server() as srv:
        yield srv


def jobs(n: int = 10, depth: int = 24):
    out = []
    for q in range(n):
        docs = [f"{d:03d}" for d in random.Random(q).sample(range(200), depth + 3)]
        out.append((f"instruction {q % 3}", f"seed {q}", [(d, f"doc{d} text") for d in docs],
                   {d: -i for i, d in enumerate(docs)}))
    return out


def rows(path) -> list:
    """Every stored judgment, p last (the row checksum, which follows p, is left out)."""
    columns = ", ".join(("key", *Key._fields, "p"))
    return sorted(sqlite3.connect(path).execute(f"SELECT {columns} FROM judgments").fetchall())


def same_tally(a: dict, b: dict) -> bool:
    differ = {k: (a[k], b[k]) for k in a if k != "wall_time_s" and a[k] != b[k]}
    assert not differ
    return True


@pytest.mark.parametrize("variant,rule", [("heapsort", "incumbent"), ("heapsort", "half"), ("sliding", "average"),
                                          ("allpairs", "incumbent")])
def test_api_queries_in_parallel_equal_queries_one_by_one(server, tmp_path, variant, rule):
    base = {"backend": "openai", "base_url": server.url, "model": "m",
            "variant": variant, "disagreement": rule, "k": 5, "depth": 20 if variant != "allpairs" else 8}
    work = jobs()
    one = LLMReranker(base | {"max_in_flight": 1, "cache": tmp_path / "one.sqlite"})
    sequential = [one.rerank(*job) for job in work]
    many = LLMReranker(base | {"max_in_flight": 16, "parallel_queries": 7, "cache": tmp_path / "many.sqlite"})
    assert many.rerank_many(work) == sequential
    assert rows(tmp_path / "one.sqlite") == rows(tmp_path / "many.sqlite")
    assert same_tally(one.accounting(), many.accounting())
    assert one.accounting()["disagreements"] > 0


@pytest.mark.parametrize("variant", ["heapsort", "sliding", "allpairs"])
def test_batched_backend_queries_in_parallel_equal_queries_one_by_one(tmp_path, variant):
    settings = {"variant": variant, "k": 4, "depth": 12, "chunk": 5}
    one = LLMReranker(settings | {"cache": tmp_path / "one.sqlite"}, backend=FakeBackend(p_first))
    sequential = [one.rerank(*job) for job in jobs(8, 12)]
    fake = FakeBackend(p_first)
    many = LLMReranker(settings | {"cache": tmp_path / "many.sqlite"}, backend=fake)
    assert many.rerank_many(jobs(8, 12)) == sequential
    assert rows(tmp_path / "one.sqlite") == rows(tmp_path / "many.sqlite")
    assert same_tally(one.accounting(), many.accounting())


def test_a_killed_parallel_run_resumes_from_the_cache(server, tmp_path):
    base = {"backend": "openai", "base_url": server.url, "model": "m",
            "max_retries": 0, "max_in_flight": 8, "k": 5, "depth": 20}
    clean = LLMReranker(base | {"cache": tmp_path / "clean.sqlite"}).rerank_many(jobs())
    server.fail_after = server.count + 300
    with pytest.raises(KitError, match="HTTP 400"):
        LLMReranker(base | {"cache": tmp_path / "j.sqlite"}).rerank_many(jobs())
    kept = len(rows(tmp_path / "j.sqlite"))
    assert 250 <= kept <= 300
    server.fail_after = None
    resumed = LLMReranker(base | {"cache": tmp_path / "j.sqlite"})
    assert resumed.rerank_many(jobs()) == clean
    assert resumed.accounting()["prompts_sent"] == len(rows(tmp_path / "clean.sqlite")) - kept
    assert rows(tmp_path / "j.sqlite") == rows(tmp_path / "clean.sqlite")


def llm_rankers_heapsort(docs, greater, k):
    """ielab/llm-rankers' PairwiseLlmRanker.heapSort/heapify, restated: top k of docs."""
    arr = list(docs)

    def heapify(n, i):
        largest, left, right = i, 2 * i + 1, 2 * i + 2
        if left < n and greater(arr[left], arr[i]):
            largest = left
        if right < n and greater(arr[right], arr[largest]):
            largest = right
        if largest != i:
            arr[i], arr[largest] = arr[largest], arr[i]
            heapify(n, largest)

    n = len(arr)
    for i in range(n // 2, -1, -1):
        heapify(n, i)
    ranked = 0
    for i in range(n - 1, 0, -1):
        arr[i], arr[0] = arr[0], arr[i]
        ranked += 1
        if ranked == k:
            break
        heapify(i, 0)
    return list(reversed(arr))[:k]


@pytest.mark.parametrize("seed", range(4))
def test_heapsort_with_the_incumbent_rule_is_llm_rankers_heapsort(tmp_path, seed):
    docs = [f"{d:03d}" for d in random.Random(seed).sample(range(200), 60)]

    def greater(x, y):  # llm-rankers' __gt__: both orders agree that x wins
        return p_first(x, y) > 0.5 and p_first(y, x) < 0.5

    rr = LLMReranker({"cache": tmp_path / "j.sqlite", "k": 10, "depth": 60}, backend=FakeBackend(p_first))
    judge = rr.judge.for_query("i", "s", {d: f"doc{d}" for d in docs})
    assert heapsort_top(docs, judge.compare, 10)[:10] == llm_rankers_heapsort(docs, greater, 10)
    assert rr.judge.tally.disagreements > 0


def test_transformers_backend_batches_queries_together(tmp_path):
    from tiny_models import build_tiny_lm

    folder = build_tiny_lm(tmp_path / "lm")
    settings = {"model": str(folder), "k": 3, "depth": 6, "batch_size": 16,
                "budgets": {"seed": 16, "candidate": 8}}
    work = [(f"find the method {q}", "graph neural networks for text",
             [(f"d{i}", f"a method for parsing {'graph ' * ((i * (q + 2)) % 7)}") for i in range(8)],
             {f"d{i}": -i for i in range(8)}) for q in range(5)]
    one = LLMReranker(settings | {"cache": tmp_path / "one.sqlite"})
    sequential = [one.rerank(*job) for job in work]
    many = LLMReranker(settings | {"cache": tmp_path / "many.sqlite"})
    assert many.rerank_many(work) == sequential
    a, b = rows(tmp_path / "one.sqlite"), rows(tmp_path / "many.sqlite")
    assert [r[:-1] for r in a] == [r[:-1] for r in b]
    assert max(abs(x[-1] - y[-1]) for x, y in zip(a, b)) < 1e-5


class CountingLM:
    """A causal LM that counts the forward passes without an attention mask (prefix passes)."""

    def __init__(self, lm):
        self.lm, self.prefix_passes = lm, 0

    def __call__(self, **kwargs):
        self.prefix_passes += "attention_mask" not in kwargs
        return self.lm(**kwargs)

    def __getattr__(self, name):
        return getattr(self.lm, name)


@pytest.mark.parametrize("parallel,prefix_cache,passes", [(6, None, 6), (6, 3, 17), (3, None, 6)])
def test_each_query_prefix_runs_once_when_queries_run_in_parallel(tmp_path, parallel, prefix_cache, passes):
    """The prefix cache holds one prefix per query in flight (default: parallel_queries), so sliding
    windows of 1 to 5 steps over 6 queries run 6 prefixes, also when finished queries make room for
    new ones (3 in flight). A cache of 3 for 6 queries in flight (the slowdown this guards against)
    misses every prefix while more than 3 queries are open: 6 + 5 + 4 in the first three rounds,
    then 2 of the 3 left in the fourth (least recently used order), none in the fifth: 17."""
    from tiny_models import build_tiny_lm

    settings = {"model": str(build_tiny_lm(tmp_path / "lm")), "variant": "sliding", "k": 1, "depth": 6,
                "budgets": {"seed": 16, "candidate": 8}, "cache": tmp_path / "j.sqlite"}
    if prefix_cache:
        settings["prefix_cache"] = prefix_cache
    rr = LLMReranker(settings | {"parallel_queries": parallel})
    backend = rr.judge.backend
    assert backend.prefix_cache == (prefix_cache or parallel)
    backend.lm = CountingLM(backend.lm)
    in_flight, many = [], backend.first_label_probs_many
    backend.first_label_probs_many = lambda groups: in_flight.append(len(groups)) or many(groups)
    sizes = [6, 2, 5, 3, 4, 6]  # candidates per query: size - 1 comparisons each
    work = [(f"find the method {q}", f"seed paper {q}", [(f"d{i}", f"a method {i}") for i in range(n)],
             {f"d{i}": -i for i in range(n)}) for q, n in enumerate(sizes)]
    rr.rerank_many(work)
    assert rr.judge.tally.prompts_sent == 2 * sum(n - 1 for n in sizes)
    assert max(in_flight) == parallel  # never more queries at once than asked for
    assert backend.lm.prefix_passes == passes
