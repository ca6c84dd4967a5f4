"""`evalkit plan`: before any work, what each row of a study needs and what it will cost.

Per row (a model of the profile): what it needs (hub ids and revisions, GPU dtype and an
estimate of GPU memory, API key variable, server URL), how much work it is (texts to
encode; LLM comparisons from the heapsort bound or the variant's exact count, prompts,
prompt tokens counted from the actual CSFCube texts put into the row's template), the
cost at the per-token prices of `config/costs.yaml` (dated, with their source) and a
time estimate from the rates there. What a row counts is its family's declaration
(`Family.work` of `evalkit.models.family`: texts to encode, LLM prompts, or nothing). On the
pooled and full protocols the first stage's encoding of the corpus is its own row (shared by
every reranking row). Missing prerequisites (`evalkit.pipeline.prerequisites`) are listed together, each with its fix.

Prompt tokens: a tokenizer of the model when it is already on this machine (the hub cache),
else ``tokens_per_word`` of costs.yaml times whitespace-separated words (stated in the
row). On the pool protocol the candidates are each query's judged pool; on pooled and full
the reranked candidates are not known before the first stage runs, so each query's
judged pool stands in for their lengths (stated).

Workers (`plan(..., workers=N)`: a run on the Ray executor with N workers). What the executor
spreads divides across them, plus Ray's fixed start per run (``cluster.ray_start_s`` of
costs.yaml): the first stage's encoding of the corpus, ``texts / (rate x N)``, and the
judgments of a model the kit serves (``serve: vllm``), ``prompts / (server rate x N)`` over N
replicas. Everything else runs on the driver as in one process (an encoder's reranked
candidates, a model in the driver's process, an API: its rate limits, not the workers, bound
it), stated in the row. The rates are per device (an encoding rate `bench/bench_gpu_check.py`
measured on a GPU, costs.yaml's ``measured``, over the estimate: `encode_rate`, which the row
says) and the work is assumed to split evenly (no straggler, no shard left over); model
loading is not counted, for one process or N.
GPU-hours: every GPU a row holds for its whole time (N x the GPUs of a worker or replica x
the row's time, Ray's start included); 0 on CPU and for APIs. `device` plans for GPU or CPU
workers from any machine (default: this machine's, from the visible GPUs).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from evalkit.core.errors import DataError, RequestError
from evalkit.core.workers import check_workers
from evalkit.data.collection import Collection, Query
from evalkit.data.protocols import POOL_PROTOCOLS
from evalkit.datasets import declared_corpus
from evalkit.llm.reranker import DEFAULT_TEMPLATES, expected_comparisons
from evalkit.llm.templates import SEPARATOR, load_template
from evalkit.models import registry
from evalkit.models.family import ENCODING, PROMPTS
from evalkit.models.registry import ModelSpec
from evalkit.pipeline import prerequisites
from evalkit.pipeline.prerequisites import Missing, costs

STUDY_KEYS = ("relevance", "sensitivity", "hybrid", "promptriever")


@dataclass
class RowPlan:
    model: str
    label: str
    family: str
    hub: list[str] = field(default_factory=list)  # "id@revision"
    gpu_dtype: str | None = None
    gpu_memory_gb: float | None = None
    api_key_env: str | None = None
    server: str | None = None
    texts: int = 0  # texts this row encodes (queries and candidates)
    comparisons: int = 0  # LLM judgments (pointwise) or comparisons (PRP), an upper bound for heapsort
    prompts: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    tokens_by: str = ""
    cost_usd: float = 0.0
    hours: float = 0.0
    gpu_hours: float = 0.0  # every GPU the row holds, for its whole time
    workers: int = 1  # over which its work is spread (1: it runs in the driver's process)
    notes: list[str] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)


def study_models(profile: str) -> list[str]:
    """Every model the profile's study notebooks run by default, in order."""
    study = registry.profile_settings(profile).get("study", {})
    names: list[str] = []
    for key in STUDY_KEYS:
        value = study.get(key) or []
        names += [value] if isinstance(value, str) else list(value)
    return list(dict.fromkeys(names))


DEVICES = ("gpu", "cpu")


def device_of(device: str | None) -> str:
    """The device kind whose rates a plan uses: `device`, else this machine's (a GPU visible or not)."""
    if device is None:
        return "gpu" if prerequisites.gpu_count() else "cpu"
    if device not in DEVICES:
        raise RequestError("device", f"is not one of {DEVICES}", value=device)
    return device


def spread(row: RowPlan, work_s: float, workers: int | None, gpus_each: int, device: str, what: str) -> None:
    """`work_s` of one worker's time divided across `workers` (plus Ray's start), or as one process
    (`workers` None); GPU-hours for `gpus_each` GPUs a worker."""
    start_s = 0.0
    if workers is not None:
        start_s = costs()["cluster"]["ray_start_s"]
        row.workers = workers
        row.notes.append(f"{what} spread over {workers} worker(s): {work_s:,.0f} s / {workers} + Ray's start "
                         f"({start_s:g} s; cluster.ray_start_s in costs.yaml)")
    row.hours += (start_s + work_s / (workers or 1)) / 3600
    if device == "gpu":
        row.gpu_hours += (workers or 1) * gpus_each * (start_s + work_s / (workers or 1)) / 3600


def in_driver(row: RowPlan, hours: float, workers: int | None, device: str, on_gpu: bool) -> None:
    """Work that runs in the driver's process whatever the workers (one GPU where it runs on one)."""
    row.hours += hours
    if device == "gpu" and on_gpu:
        row.gpu_hours += hours
    if workers is not None and hours:
        row.notes.append("runs on the driver: the workers do not shorten it")


def _size_class(spec: ModelSpec) -> str:
    size = prerequisites.parameters_b(spec)
    return "large" if size is not None and size >= costs()["gpu_required_from_b"] else "small"


def encode_rate(kind: str, spec: ModelSpec) -> tuple[float, str]:
    """(texts a second one `kind` device encodes for `spec`'s size class, where the figure comes
    from): the rate `record_measured_rate` wrote (``measured`` in costs.yaml: the card, the date),
    else the estimate of ``rates.encode_per_s``."""
    size = _size_class(spec)
    found = ((costs().get("measured") or {}).get("encode_per_s") or {}).get(kind, {}).get(size)
    if found:
        return float(found["texts_per_s"]), f"measured on {found['card']} on {found['date']} ({found['by']})"
    return costs()["rates"]["encode_per_s"][kind][size], "assumed (rates.encode_per_s in costs.yaml), not measured here"


MEASURED_LINE = re.compile(r"^measured: .*$", re.MULTILINE)  # costs.yaml's one line of measured rates


def record_measured_rate(kind: str, size: str, texts_per_s: float, card: str, date: str, by: str,
                         path: Path | None = None) -> dict:
    """Write a measured encoding rate (texts a second of one `kind` device, size class `size`)
    into the ``measured`` line of costs.yaml (`path`, default the plan's own), with the card that
    gave it, the date and the check that measured it; the file's other lines are kept as they are.
    Returns the line's new value."""
    path = path or prerequisites.COSTS_FILE
    text = path.read_text(encoding="utf-8")
    if len(MEASURED_LINE.findall(text)) != 1:
        raise DataError(path, "has no single `measured: {...}` line for the measured rates; restore the file")
    if size not in ("small", "large") or not texts_per_s > 0:
        raise DataError("measured rate", f"{texts_per_s!r} texts a second for size {size!r}: a positive rate of "
                        "size small or large")
    measured = yaml.safe_load(MEASURED_LINE.search(text).group(0))["measured"] or {}
    measured.setdefault("encode_per_s", {}).setdefault(kind, {})[size] = {
        "texts_per_s": round(float(texts_per_s), 1), "card": card, "date": date, "by": by}
    path.write_text(MEASURED_LINE.sub(lambda _: f"measured: {json.dumps(measured, sort_keys=True)}", text),
                    encoding="utf-8")
    costs.cache_clear()  # this process's plans read the new rate
    return measured


def _word_counter() -> tuple[Callable[[str, int], int], str]:
    per_word = costs()["tokens_per_word"]
    return (lambda text, budget: round(min(len(text.split()), budget) * per_word),
            f"approximation: {per_word} tokens per word (no tokenizer on this machine)")


def token_counter(spec: ModelSpec) -> tuple[Callable[[str, int], int], str]:
    """(count(text, budget) -> tokens of the text cut to `budget`, how it counts): the model's
    tokenizer if it is in the local hub cache, else the per-word approximation."""
    if not prerequisites.is_api(spec):
        hub = prerequisites.hub_ids(spec)
        if hub:
            try:
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(hub[0][0], revision=hub[0][1], local_files_only=True)
            except Exception:  # not downloaded (or no transformers): fall back to the stated approximation
                return _word_counter()

            def count(text: str, budget: int) -> int:
                return min(len(tokenizer(text, add_special_tokens=False)["input_ids"]), budget)

            return count, f"tokenizer of {hub[0][0]}"
    return _word_counter()  # API models: the backend cuts text by words, as this counts


def _candidates(collection: Collection, query: Query) -> list[str]:
    return [d.full_text for d in collection.candidates_of(query.qid)]


def _llm_work(row: RowPlan, spec: ModelSpec, queries: Sequence[Query], collection: Collection,
              protocol: str, workers: int | None = None, device: str | None = None) -> None:
    s = spec.settings
    method, variant = s.get("method", "prp"), s.get("variant", "heapsort")
    k, depth = int(s.get("k", 20)), int(s.get("depth", 100))
    template = load_template(s.get("template", DEFAULT_TEMPLATES[method]), s.get("budgets"))
    count, row.tokens_by = token_counter(spec)
    budgets = template.budgets
    shown = 2 if template.pairwise else 1
    frame = template.prefix.format(instruction="", seed="") + SEPARATOR + \
        template.suffix.format(**({"a": "", "b": ""} if template.pairwise else {"candidate": ""}))
    fixed = count(frame + (template.system or ""), 1 << 20)  # the template's own words
    for query in queries:
        texts = _candidates(collection, query)
        n = min(depth, len(texts)) if protocol in POOL_PROTOCOLS else depth
        comparisons = expected_comparisons(method, variant, n, k)
        prompts = comparisons * (2 if method == "prp" else 1)  # PRP asks both orders
        head = count(query.instruction, budgets["instruction"]) + count(query.text, budgets["seed"])
        candidate = statistics.fmean(count(t, budgets["candidate"]) for t in texts) if texts else 0.0
        per_prompt = head + fixed + shown * candidate
        row.comparisons += comparisons
        row.prompts += prompts
        row.prompt_tokens += round(prompts * per_prompt)
    if protocol not in POOL_PROTOCOLS:
        row.notes.append("candidate lengths from each query's judged pool (the reranked list is known only after "
                         "the first stage)")
    if variant == "heapsort" and method == "prp":
        row.notes.append(f"comparisons: heapsort bound for the top {k} of {depth} (every sift-down to a leaf)")
    if prerequisites.is_api(spec):
        row.output_tokens = row.prompts * int(s.get("max_tokens", 5))
        prices = costs()["prices"]["per_million_tokens"].get(s.get("model"))
        local = s.get("serve") or (row.server and prerequisites.is_local_url(row.server))
        if prices is None and not local:
            row.notes.append(f"no price for {s.get('model')} in costs.yaml: cost not estimated")
        elif prices is not None:
            row.cost_usd = (row.prompt_tokens * prices["input"] + row.output_tokens * prices["output"]) / 1e6
        rate = costs()["rates"]["prompts_per_s"]["api"]
        if local:
            rate = costs()["rates"]["prompts_per_s"]["gpu"]["server"]
        if s.get("serve"):  # a server the kit starts: replicas over the workers
            spread(row, row.prompts / rate, workers, _server_gpus(s, workers), device_of(device), "judgments")
            if workers and not s.get("tensor_parallel_size"):
                row.notes.append("no tensor_parallel_size in the entry: 1 GPU a replica counted; set it to the GPUs "
                                 "one server of the model needs")
        else:  # an API, or a server the user runs: its own rate, on no GPU of the run
            in_driver(row, row.prompts / rate / 3600, workers, device_of(device), on_gpu=False)
    else:
        rate = costs()["rates"]["prompts_per_s"][device_of(device)][_size_class(spec)]
        in_driver(row, row.prompts / rate / 3600, workers, device_of(device), on_gpu=True)


def _server_gpus(settings: dict, workers: int | None) -> int:
    """GPUs of one vLLM server of an entry: tensor x pipeline parallel size; tensor, where unset, the
    visible GPUs for one server here (`evalkit.llm.vllm_server`), 1 for a replica."""
    tensor = settings.get("tensor_parallel_size") or (1 if workers else max(prerequisites.gpu_count(), 1))
    return int(tensor) * int(settings.get("pipeline_parallel_size") or 1)


def _encoding_work(row: RowPlan, spec: ModelSpec, queries: Sequence[Query], collection: Collection,
                   protocol: str, depth: int, workers: int | None = None, device: str | None = None) -> None:
    if protocol in POOL_PROTOCOLS:
        row.texts = len({d.doc_id for q in queries for d in collection.candidates_of(q.qid)}) + len(queries)
    else:
        row.texts = min(len(queries) * depth, collection_size(collection, protocol)) + len(queries)
        row.notes.append(f"at most {depth} reranked candidates a query")
    kind = device_of(device)
    in_driver(row, row.texts / encode_rate(kind, spec)[0] / 3600, workers, kind, on_gpu=True)


def collection_size(collection: Collection, protocol: str) -> int:
    return costs()["corpus_papers"] if protocol == "full" else len(collection.documents)


def row_plan(spec: ModelSpec, queries: Sequence[Query], collection: Collection, protocol: str,
             workers: int | None = None, device: str | None = None) -> RowPlan:
    s = spec.settings
    row = RowPlan(spec.name, spec.label, spec.family,
                  hub=[f"{hub_id}@{revision}" for hub_id, revision in prerequisites.hub_ids(spec)],
                  api_key_env=s.get("api_key_env"), server=prerequisites.server_url(spec))
    if s.get("serve"):
        row.server = f"{s['serve']} started by the kit on a free local port"
        size = prerequisites.parameters_b(spec)
        if size is not None:  # the weights the kit's server loads on its GPUs, in vLLM's default 16-bit dtype
            row.gpu_dtype = s["dtype"] if isinstance(s.get("dtype"), str) else "bfloat16"
            row.gpu_memory_gb = size * prerequisites.BYTES.get(row.gpu_dtype, 2) * costs()["parameters_b"]["overhead"]
    if not prerequisites.is_api(spec) and row.hub:
        row.gpu_dtype = prerequisites.gpu_dtype(spec)
        row.gpu_memory_gb = prerequisites.gpu_memory_gb(spec)
    work = registry.family_of(spec).work  # what the family declares a row costs (`Family.work`)
    if work == PROMPTS:
        _llm_work(row, spec, queries, collection, protocol, workers, device)
    elif work == ENCODING:
        depth = int(s.get("depth") or registry.profile_settings(spec.profile)["depth"])
        _encoding_work(row, spec, queries, collection, protocol, depth, workers, device)
    row.missing = prerequisites.missing(spec) + too_big(row, spec, workers, device)
    return row


def too_big(row: RowPlan, spec: ModelSpec, workers: int | None, device: str | None) -> list[Missing]:
    """A local model whose estimated GPU memory exceeds the GPUs one copy of it gets (a replica's
    ``tensor_parallel_size`` x ``pipeline_parallel_size`` for a server the kit starts, else one), at
    ``gpu_memory_gb`` of costs.yaml each: the row cannot run as planned."""
    if row.gpu_memory_gb is None or device_of(device) != "gpu":
        return []
    each = costs()["gpu_memory_gb"]
    gpus = _server_gpus(spec.settings, workers) if spec.settings.get("serve") else 1
    if row.gpu_memory_gb <= gpus * each:
        return []
    need = math.ceil(row.gpu_memory_gb / each)
    return [Missing(spec.name, f"~{row.gpu_memory_gb:.0f} GB ({row.gpu_dtype}) does not fit {gpus} GPU(s) of "
                               f"{each:g} GB (gpu_memory_gb in costs.yaml)",
                    f"set tensor_parallel_size to at least {need} in its entry (the GPUs one copy spans)"
                    if spec.settings.get("serve") else f"it needs at least {need} GPUs of {each:g} GB")]


def first_stage_plan(profile: str, protocol: str, queries: Sequence[Query], collection: Collection,
                     workers: int | None = None, device: str | None = None) -> RowPlan:
    """The profile's first stage encoding the whole corpus (pooled: CSFCube's papers; full: the ~800k),
    spread over `workers` (one GPU each on GPU workers)."""
    name = registry.profile_settings(profile)["first_stage"]
    spec = registry.spec(name, profile)
    row = row_plan(spec, [], collection, "pool")
    row.model, row.label = f"first stage: {name}", f"{spec.label} encoding the {protocol} corpus"
    row.texts = collection_size(collection, protocol) + len(queries)
    row.hours = row.gpu_hours = 0.0
    row.notes = []
    kind = device_of(device)
    rate, said = encode_rate(kind, spec)
    work_s = row.texts / rate
    if registry.family_of(spec).work == ENCODING:  # the executor's corpus encoding: one GPU a worker
        driver = costs()["cluster"]["driver_docs_per_s"]
        if workers is not None and rate * workers > driver:  # the driver commits every batch: it sets the pace
            work_s = row.texts / driver * workers
            row.notes.append(f"bound by the driver: it commits at most {driver:,} documents a second (measured "
                             f"here at 4,096 dimensions, cluster.driver_docs_per_s in costs.yaml), below the "
                             f"{workers} workers' {rate * workers:,g} a second")
        spread(row, work_s, workers, 1, kind, "encoding")
        row.notes.append(f"per-{kind.upper()} rate {rate:g} texts a second: {said}; Ray's start: measured")
    else:  # a lexical first stage indexes in the driver
        in_driver(row, work_s / 3600, workers, kind, on_gpu=False)
    if protocol == "full":
        row.notes.append(f"about {costs()['corpus_papers']:,} papers (iesl/CSFCube README: roughly 800k)")
    return row


def plan(profile: str, protocol: str, collection: Collection, models: Sequence[str] | None = None,
         queries: Sequence[str] | None = None, corpus: str | None = None, workers: int | None = None,
         device: str | None = None) -> dict:
    """The plan of a study: rows, totals and every missing prerequisite; with `workers`, as runs on
    the Ray executor with that many workers; `device` (``gpu``/``cpu``): whose rates (default: this
    machine's)."""
    check_workers(workers)
    kind = device_of(device)
    names = list(models) if models else study_models(profile)
    chosen = [collection.query(q) for q in (queries if queries is not None else collection.queries)]
    rows = []
    if protocol not in POOL_PROTOCOLS:  # the pooled and full protocols: a first stage over the corpus
        rows.append(first_stage_plan(profile, protocol, chosen, collection, workers, kind))
    rows += [row_plan(registry.spec(name, profile), chosen, collection, protocol, workers, kind) for name in names]
    missing = [m for row in rows for m in row.missing]
    declared = declared_corpus(collection.name) if protocol == "full" and not corpus else None
    if protocol == "full" and not corpus and (declared is None or declared.downloaded() is None):
        missing.insert(0, Missing("(corpus)", "no corpus file for the full protocol" if declared is None else
                                  f"the full corpus {declared.file} is not downloaded",
                                  "give --corpus PATH" if declared is None else declared.fix))
    seen, unique = set(), []
    for item in missing:  # a first stage shared by many rows is listed once per reason
        if (item.reason, item.fix) not in seen:
            seen.add((item.reason, item.fix))
            unique.append(item)
    prices = costs()["prices"]
    return {"profile": profile, "protocol": protocol, "queries": len(chosen), "gpus": prerequisites.gpu_count(),
            "workers": workers, "device": kind,
            "rows": [asdict(r) for r in rows], "missing": [asdict(m) for m in unique],
            "total": {"prompts": sum(r.prompts for r in rows), "prompt_tokens": sum(r.prompt_tokens for r in rows),
                      "cost_usd": round(sum(r.cost_usd for r in rows), 2), "hours": sum(r.hours for r in rows),
                      "gpu_hours": sum(r.gpu_hours for r in rows)},
            "prices": {"as_of": prices["as_of"], "source": prices["source"]},
            "rates": costs()["rates"]["source"]}


def render(result: dict) -> str:
    """The plan as text: one block per row, the totals, then the missing prerequisites with fixes."""
    lines = [f"plan: profile {result['profile']}, protocol {result['protocol']}, {result['queries']} queries, "
             f"{result['gpus']} GPU(s) visible"
             + (f"; {result['workers']} Ray worker(s), {result['device']} rates" if result.get("workers") else "")]
    for row in result["rows"]:
        lines.append(f"\n{row['model']}  ({row['label']}; {row['family']})")
        needs = []
        if row["hub"]:
            needs.append("hub " + ", ".join(row["hub"]))
        if row["gpu_memory_gb"] is not None:
            needs.append(f"GPU {row['gpu_dtype']} ~{row['gpu_memory_gb']:.1f} GB")
        if row["api_key_env"]:
            needs.append(f"key ${row['api_key_env']}")
        if row["server"]:
            needs.append(f"server {row['server']}")
        lines.append("  needs: " + ("; ".join(needs) or "nothing beyond the kit"))
        work = [f"{row['texts']:,} texts to encode"] if row["texts"] else []
        if row["prompts"]:
            work.append(f"{row['comparisons']:,} comparisons, {row['prompts']:,} prompts, "
                        f"{row['prompt_tokens']:,} prompt tokens ({row['tokens_by']})")
        lines.append("  work:  " + ("; ".join(work) or "scoring only"))
        lines.append(f"  cost:  ${row['cost_usd']:,.2f}; time ~{_duration(row['hours'])}"
                     + (f"; {row['gpu_hours']:,.2f} GPU-hours" if row["gpu_hours"] else ""))
        lines += [f"  note:  {note}" for note in row["notes"]]
        status = "ready" if not row["missing"] else prerequisites_text(row["missing"])
        lines.append(f"  status: {status}")
    total = result["total"]
    lines.append(f"\ntotal: {total['prompts']:,} prompts, {total['prompt_tokens']:,} prompt tokens, "
                 f"${total['cost_usd']:,.2f}, ~{_duration(total['hours'])}, {total['gpu_hours']:,.2f} GPU-hours "
                 f"(prices of {result['prices']['as_of']}, {result['prices']['source']}; rates: {result['rates']})")
    if result["missing"]:
        lines.append(f"\nmissing prerequisites ({len(result['missing'])}):")
        lines += [f"  - {m['model']}: {m['reason']}; fix: {m['fix']}" for m in result["missing"]]
    else:
        lines.append("\nmissing prerequisites: none")
    return "\n".join(lines)


def prerequisites_text(missing: list[dict]) -> str:
    return "not run: " + "; ".join(dict.fromkeys(m["reason"] for m in missing))


def _duration(hours: float) -> str:
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.1f} h"
