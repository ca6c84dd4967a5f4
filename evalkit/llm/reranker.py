"""LLM reranking of a first-stage ranking: pointwise P(Yes), or PRP with a sorting variant.

Settings (a dict, e.g. one model entry of the registry):
- ``backend``: ``transformers`` (default) or ``openai``; every key not listed here is
  passed to the backend (`TransformersBackend`: model, gguf_file, revision, batch_size,
  prefix_reuse, device, dtype (a name, or one per device kind such as ``{cuda: float16,
  cpu: float32}``), prefix_cache; `OpenAIBackend`: base_url, model, api_key_env, ...).
- ``method``: ``prp`` (default) or ``pw`` (pointwise).
- ``variant`` (prp): ``heapsort`` (default), ``sliding`` or ``allpairs``.
- ``k`` (prp, default 20): the top k are sorted by the LLM (sliding: k passes); ``depth`` (default 100): how
  many first-stage documents are reranked.
- ``template``: a name in config/llm_templates.yaml (default ``prp`` or ``pointwise``);
  ``budgets``: token budgets overriding the template's.
- ``disagreement``: ``incumbent`` (default, llm-rankers' rule), ``half``, ``keep`` or ``average``,
  see `evalkit.llm.judge`.
- ``cache``: the judgment cache file (default ``$EVALKIT_CACHE/llm/judgments.sqlite``);
  ``chunk`` (default 64): prompts per backend call (and cache commit) of a local model.
- ``serve: vllm`` (backend openai, no base_url): the kit starts ``vllm serve`` for the model and
  stops it when the reranking ends (`evalkit.llm.vllm_server`; ``tensor_parallel_size``,
  ``pipeline_parallel_size``, ``distributed_executor_backend``, ``vllm_executable``,
  ``vllm_args``, ``ready_timeout_s``). `LLMReranker.use_workers` serves it by several replicas
  instead, on this machine or on Ray (`evalkit.llm.replicas`): the same judgments and run.
- ``parallel_queries`` (default 64): queries reranked at once by `rerank_many` (the API
  backend's ``max_in_flight`` bounds the requests in flight, the transformers backend's
  ``batch_size`` the prompts per forward pass); results do not depend on it. The
  transformers backend keeps one prefix KV cache per query in flight (``prefix_cache``
  defaults to ``parallel_queries``; lower both where GPU memory is short).

Output order: PRP puts the variant's top k first and the other documents in
first-stage order; pointwise orders the reranked documents by P(Yes) (ties in
first-stage order); documents past `depth` follow in first-stage order. Scores are
``N - position``, strictly decreasing, so the kit's tie rule reproduces the order.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence
from pathlib import Path

from evalkit.core.errors import DataError, RequestError, unknown_settings
from evalkit.core.workspace import cache_root
from evalkit.data.runs import ranked
from evalkit.llm.backend import Backend
from evalkit.llm.cache import JudgmentCache
from evalkit.llm.judge import Judge
from evalkit.llm.openai_api import OpenAIBackend, api_numerics
from evalkit.llm.prp import STEPS, all_pairs, heapsort_top, llm_rankers_sliding_steps, replay, sliding_window
from evalkit.llm.replicas import PLACEMENTS, ReplicaSet, ReplicatedBackend, ServeCommand, local_replicas, ray_replicas
from evalkit.llm.schedule import run_tasks
from evalkit.llm.templates import load_template


def _transformers():
    from evalkit.llm.hf import TransformersBackend  # lazy: it imports torch and transformers

    return TransformersBackend


def _openai():
    return OpenAIBackend



BACKENDS = {"transformers": _transformers, "openai": _openai}
VARIANTS = {
    "heapsort": heapsort_top,
    "sliding": sliding_window,
    "allpairs": lambda docs, compare, k: all_pairs(docs, compare),
}
DEFAULT_TEMPLATES = {"prp": "prp", "pw": "pointwise"}


def expected_comparisons(method: str, variant: str, n: int, k: int) -> int:
    """Judgments (pointwise) or comparisons (PRP) one query needs over `n` documents: exact for
    pointwise, all pairs and sliding; an upper bound for heapsort (every sift-down to a leaf)."""
    if method == "pw":
        return n
    if variant == "allpairs":
        return n * (n - 1) // 2
    if variant == "sliding":
        return sum(n - 1 - top for top in range(min(k, n - 1)))

    def sift(i: int, size: int) -> int:  # at most two comparisons per level down to a leaf
        count = 0
        while 2 * i + 1 < size:
            count += 1 + (2 * i + 2 < size)
            i = 2 * i + 1
        return count

    build = sum(sift(i, n) for i in range(n // 2))
    return build + sum(sift(0, size) for size in range(n - 1, n - min(k, n), -1))


def order_scores(order: Sequence[str]) -> dict[str, float]:
    """Scores ``N - position``: strictly decreasing along the order."""
    return {doc: float(len(order) - i) for i, doc in enumerate(order)}


def build_backend(kind: str, settings: dict) -> Backend:
    if kind not in BACKENDS:
        raise DataError("model settings", f"unknown LLM backend {kind!r}; choose one of {sorted(BACKENDS)}")
    cls = BACKENDS[kind]()
    accepted = set(inspect.signature(cls).parameters)
    unknown = set(settings) - accepted
    if unknown:
        raise unknown_settings(f"the {kind} LLM backend", unknown, accepted)
    return cls(**settings)


SERVE = ("serve", "tensor_parallel_size", "pipeline_parallel_size", "distributed_executor_backend", "vllm_executable",
         "vllm_args", "ready_timeout_s")
# What `LLMReranker` itself reads of an entry; the rest goes to its backend (`build_backend`).
RERANKER_SETTINGS = ("backend", "method", "variant", "k", "depth", "template", "budgets", "cache", "disagreement",
                     "chunk", "parallel_queries")


def entry_settings(entry: dict) -> tuple[str, ...]:
    """Every key an ``llm`` entry may hold: the reranker's, the kit-started server's (`SERVE`) and
    its backend's arguments (the named ``backend``'s; unknown backends are refused when built)."""
    kind = entry.get("backend", "transformers")
    backend = tuple(inspect.signature(BACKENDS[kind]()).parameters) if kind in BACKENDS else tuple(entry)
    return (*RERANKER_SETTINGS, *SERVE, *backend)


def _server(kind: str, settings: dict) -> ServeCommand | None:
    """The vLLM server command an entry asks the kit to run (``serve: vllm``; its settings popped
    from `settings`), else None."""
    options = {key: settings.pop(key) for key in SERVE if key in settings}
    serve = options.pop("serve", None)
    if serve is None:
        if options:
            raise DataError("model settings",
                            f"{', '.join(sorted(options))} apply to a server the kit starts; add serve: vllm")
        return None
    if serve != "vllm" or kind != "openai":
        raise DataError("model settings",
                        f"serve: {serve!r} with backend {kind}: the kit starts vllm servers for backend openai "
                        "(serve: vllm)")
    if "base_url" in settings:
        raise DataError("model settings",
                        f"serve: vllm starts a local server, so base_url {settings['base_url']} is not used; "
                        "drop one of them")

    args = options.get("vllm_args", ())
    return ServeCommand(settings["model"], settings.get("revision"), options.get("tensor_parallel_size"),
                        options.get("vllm_executable", "vllm"), tuple(args) if isinstance(args, list) else args,
                        options.get("ready_timeout_s", 1800.0), options.get("pipeline_parallel_size"),
                        options.get("distributed_executor_backend"))


class LLMReranker:
    reads_instruction = True

    def __init__(self, settings: dict, backend: Backend | None = None):
        s = dict(settings)
        kind = s.pop("backend", "transformers")
        self.method = s.pop("method", "prp")
        self.variant = s.pop("variant", "heapsort")
        self.k, self.depth = int(s.pop("k", 20)), int(s.pop("depth", 100))
        if self.method not in DEFAULT_TEMPLATES:
            raise DataError("model settings",
                            f"method {self.method!r} is not one of {sorted(DEFAULT_TEMPLATES)}; fix the model settings")
        if self.variant not in VARIANTS:
            raise DataError("model settings",
                            f"variant {self.variant!r} is not one of {sorted(VARIANTS)}; fix the model settings")
        if self.k < 1 or self.depth < 1:
            raise DataError("model settings",
                            f"k={self.k} and depth={self.depth} must be positive; fix the model settings")
        template = load_template(s.pop("template", DEFAULT_TEMPLATES[self.method]), s.pop("budgets", None))
        if template.pairwise != (self.method == "prp"):
            raise DataError("model settings", f"template {template.name} does not suit method {self.method}; use a "
                            "pairwise template ({a}, {b}) for prp and a pointwise one ({candidate}) for pw")
        cache = JudgmentCache(Path(s.pop("cache", None) or cache_root() / "llm" / "judgments.sqlite"))
        disagreement, chunk = s.pop("disagreement", "incumbent"), int(s.pop("chunk", 64))
        self.parallel_queries = int(s.pop("parallel_queries", 64))
        if self.parallel_queries < 1:
            raise DataError("model settings",
                            f"parallel_queries={self.parallel_queries} must be positive; fix the model settings")
        if kind == "transformers":
            s.setdefault("prefix_cache", self.parallel_queries)
        self.command = _server(kind, s) if backend is None else None
        self.server = None if self.command is None else self.command.server()
        if self.server is not None:
            s["base_url"] = self.server.base_url
        backend = backend or build_backend(kind, s)
        if self.server is not None:
            backend.server = self.server
            backend.numerics = api_numerics(self.server.identity, backend.options)  # not its port
        self.judge = Judge(backend, template, cache, disagreement, chunk)
        self._uncounted = False  # llm-rankers' sliding count could not be replayed (`_count_as_llm_rankers`)

    def use_workers(self, workers: int, placement: str = "local") -> None:
        """Serve a kit-started model (``serve: vllm``) by `workers` replicas, on this machine
        (`placement` ``local``) or on a Ray cluster (``ray``), before reranking: the same
        judgments, cache rows and scores as one server (`evalkit.llm.replicas`). Entries without
        a kit-started server (an API, a server the user runs, a model in this process) are left
        as they are. The replicas are recorded in `describe`, not in any key."""
        if placement not in PLACEMENTS:
            raise RequestError("placement", f"is not one of {PLACEMENTS}", value=placement)
        if self.command is None or (workers == 1 and placement == "local"):
            return
        self.replicate((ray_replicas if placement == "ray" else local_replicas)(self.command, workers))

    def replicate(self, replicas: ReplicaSet) -> None:
        """Send this reranker's prompts to `replicas` (servers of its own command) instead of its one server."""
        if self.command is None:
            raise DataError("model settings", "replicas serve a model the kit starts (serve: vllm); this entry has "
                            "no such server")
        if replicas.identity != self.server.identity:
            raise DataError("replicas", f"they run another command than {self.command.model}'s server; build them from "
                           "its command")
        self.server = replicas
        self.judge.backend = ReplicatedBackend(self.judge.backend.template if isinstance(
            self.judge.backend, ReplicatedBackend) else self.judge.backend, replicas)

    def rerank(self, instruction: str, seed_text: str, candidates: Sequence[tuple[str, str]],
               first_stage: dict[str, float]) -> dict[str, float]:
        """Scores for every first-stage document; `candidates` gives (doc_id, text) of at least the top `depth`."""
        return self.rerank_many([(instruction, seed_text, candidates, first_stage)])[0]

    def rerank_many(self, jobs: Sequence[tuple[str, str, Sequence[tuple[str, str]], dict[str, float]]]
                    ) -> list[dict[str, float]]:
        """`rerank` of many queries (instruction, seed_text, candidates, first_stage) at once, with the
        results, judgments and cache contents of reranking them one after the other."""
        try:
            return self._rerank_many(jobs)
        finally:  # success, failure or interrupt: a server the kit started is stopped
            if self.server is not None:
                self.server.stop()

    def _rerank_many(self, jobs):
        start = time.perf_counter()
        tasks, orders = [], []
        for instruction, seed_text, candidates, first_stage in jobs:
            order = ranked(first_stage)
            texts = dict(candidates)
            head = order[:self.depth]
            missing = [doc for doc in head if doc not in texts]
            if missing:
                raise DataError("candidates", f"no text for candidate {missing[0]} ({len(missing)} missing); "
                                              "pass (doc_id, text) for every reranked document")
            query = self.judge.for_query(instruction, seed_text, {doc: texts[doc] for doc in head},
                                         sorting=self.variant != "allpairs")
            steps = query.pointwise(head) if self.method == "pw" else \
                query.pairwise(STEPS[self.variant](head, self.k))
            tasks.append((query, steps))
            orders.append((order, head))
        expected = sum(expected_comparisons(self.method, self.variant, len(head), self.k) for _, head in orders)
        label = f"LLM {self.method}{'' if self.method == 'pw' else ' ' + self.variant} ({self.judge.backend.model})"
        outputs = run_tasks(self.judge, tasks, self.parallel_queries, expected,
                            "judgment" if self.method == "pw" else "comparison", label)
        if self.method == "prp" and self.variant == "sliding":
            self._count_as_llm_rankers([query for query, _ in tasks], [head for _, head in orders])
        scores = []
        for (order, head), out in zip(orders, outputs):
            if self.method == "pw":
                probs = dict(zip(head, out))
                top = sorted(head, key=lambda doc: -probs[doc])
            else:
                top = out[:self.k]
            chosen = set(top)
            scores.append(order_scores(top + [doc for doc in order if doc not in chosen]))
        self.judge.tally.queries += len(jobs)
        self.judge.tally.wall_time_s += time.perf_counter() - start
        return scores

    def _count_as_llm_rankers(self, queries, heads) -> None:
        """The tally's `llm_rankers_comparisons`: llm-rankers' sliding window replayed on the judgments
        just made (it asks a subset of the kit's pairs; a pair it would ask that the kit did not
        leaves the count None)."""
        tally = self.judge.tally
        if self._uncounted:
            return
        try:
            counted = sum(replay(llm_rankers_sliding_steps(head, self.k), query.share_of)[1]
                          for query, head in zip(queries, heads))
        except KeyError:
            self._uncounted, tally.llm_rankers_comparisons = True, None
            return
        tally.llm_rankers_comparisons = (tally.llm_rankers_comparisons or 0) + counted

    def accounting(self) -> dict:
        """Counts since construction (see `evalkit.llm.tally.Tally`), for the run's JSON sidecar."""
        return self.judge.tally.as_dict()

    def describe(self) -> dict:
        """Settings that identify the output (for sidecars)."""
        j = self.judge
        described = {"family": "llm", "model": j.backend.model, "revision": j.backend.revision,
                     "numerics": j.backend.numerics,
                     "method": self.method, "variant": self.variant if self.method == "prp" else None,
                     "k": self.k, "depth": self.depth, "template": j.template.name,
                     "template_digest": j.template.digest, "budgets": j.template.budgets,
                     "disagreement": j.disagreement}
        if isinstance(self.server, ReplicaSet):  # where it ran, not what it computes: no key holds it
            described["serving"] = self.server.describe()
        return described
