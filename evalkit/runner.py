"""`evalkit run`: score every CSFCube query with one model, variant and protocol; write the run.

Outputs in the run folder, for run name NAME (the model name, or ``MODEL--VARIANT``
for a variant other than base):
- ``test-pid2pool-csfcube-NAME-FACET-ranked.json`` per facet (official format),
- ``csfcube-NAME.trec`` (all queries, full-precision scores),
- ``csfcube-NAME.json``, the sidecar: model, revision, templates, instruction texts,
  protocol, data checksum, kit version, seed. It is written after the rankings, so a
  run without its sidecar is incomplete. These files are deterministic: the same run
  twice gives byte-identical files.
- ``csfcube-NAME.accounting.json`` for LLM rerankers: comparisons, prompts, prompt
  tokens, cache hits, wall time and position bias of this execution (it varies
  between executions, e.g. a resumed run hits the judgment cache, so it is kept
  apart from the deterministic sidecar).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm.auto import tqdm

from evalkit import __version__, csfcube
from evalkit.csfcube import FACETS, CSFCube, Paper
from evalkit.errors import KitError
from evalkit.instructions import check_variant, instruction_text, make_request
from evalkit.models import registry
from evalkit.models.base import Scorer
from evalkit.protocols import check_protocol, pool_candidates, top_candidates
from evalkit.runs import Run, write_atomic, official_path, trec_path, write_official, write_trec

RANDOM_SEED = 0  # nothing in a run is random today; recorded so that any future sampling is pinned


@dataclass(frozen=True)
class RunSettings:
    model: str
    profile: str = "offline"
    protocol: str = "pool"
    variant: str = "base"
    first_stage: str | None = None  # pooled protocol; default: the profile's
    depth: int | None = None  # pooled protocol; default: the profile's
    seeds: tuple[str, ...] | None = None  # smoke runs: only these seed papers
    corpus: str | None = None  # full protocol: abstracts-preds.zip (or a .jsonl in its format)

    @property
    def run_name(self) -> str:
        return self.model if self.variant == "base" else f"{self.model}--{self.variant}"


def sidecar_path(out: Path, name: str) -> Path:
    return Path(out) / f"csfcube-{name}.json"


def selected_queries(data: CSFCube, seeds: tuple[str, ...] | None) -> list[str]:
    """The queries of the chosen seeds (all seeds when None), in release order."""
    known = {q.seed for q in data.queries.values()}
    unknown = sorted(set(seeds or ()) - known)
    if unknown:
        raise KitError(f"unknown seed {unknown[0]}; CSFCube seeds are listed in queries-release.csv")
    return [qid for qid, q in data.queries.items() if seeds is None or q.seed in seeds]


def data_checksum() -> str:
    return hashlib.sha256(csfcube.MANIFEST.read_bytes()).hexdigest()


def candidates_for(settings: RunSettings, data: CSFCube, qids: list[str]) -> tuple[dict[str, list[Paper]], dict]:
    """Candidates per query under the protocol, and the protocol's description for the sidecar."""
    if settings.protocol == "pool":
        return {qid: pool_candidates(data, data.queries[qid]) for qid in qids}, {"protocol": "pool"}
    profile = registry.profile_settings(settings.profile)
    name = settings.first_stage or profile["first_stage"]
    depth = settings.depth or profile["depth"]
    first = registry.build(registry.spec(name, settings.profile))
    requests = {qid: make_request(data.papers[data.queries[qid].seed], data.queries[qid].facet, settings.variant)
                for qid in qids}
    described = {"protocol": settings.protocol, "first_stage": name, "first_stage_model": first.describe(),
                 "depth": depth}
    if settings.protocol == "pooled":
        corpus = list(data.papers.values())
        first.prepare(corpus)
        chosen = {qid: top_candidates(first, requests[qid], corpus, depth)
                  for qid in tqdm(qids, desc=f"first stage {name}", unit="query")}
        return chosen, {**described, "corpus_size": len(corpus)}
    return _full_candidates(settings, first, requests, depth, described)


def _full_candidates(settings: RunSettings, first, requests: dict, depth: int, described: dict):
    from evalkit.corpus import CorpusIndex
    from evalkit.hashing import files_sha256
    from evalkit.models.dense import BiEncoder

    if not settings.corpus:
        raise KitError("the full protocol needs --corpus PATH (abstracts-preds.zip from figshare 14796339)")
    if not isinstance(first, BiEncoder):
        raise KitError(f"the full protocol's first stage must be an embedding model; {described['first_stage']} is not")
    index = CorpusIndex(Path(settings.corpus), first)
    ids = {qid: index.search(request, depth) for qid, request in tqdm(requests.items(), desc="search", unit="query")}
    texts = index.papers({pid for found in ids.values() for pid in found})
    chosen = {qid: [texts[pid] for pid in found] for qid, found in ids.items()}
    return chosen, {**described, "corpus": Path(settings.corpus).name,
                    "corpus_sha256": files_sha256([Path(settings.corpus)]), "corpus_size": len(index.pids)}


def prepare(settings: RunSettings, data: CSFCube) -> tuple[Scorer, dict[str, list[Paper]], dict]:
    """The model, each selected query's candidates under the protocol (in release order) and
    the protocol's description; every candidate prepared (e.g. encoded) once."""
    check_protocol(settings.protocol)
    check_variant(settings.variant)
    model_spec = registry.spec(settings.model, settings.profile)
    candidates, protocol = candidates_for(settings, data, selected_queries(data, settings.seeds))
    scorer = registry.build(model_spec)
    scorer.prepare(list({p.pid: p for cands in candidates.values() for p in cands}.values()))
    return scorer, candidates, protocol


def execute(settings: RunSettings, out: Path, data: CSFCube | None = None) -> Path:
    """Run one model over the queries; returns the sidecar path."""
    data = data or csfcube.load()
    scorer, candidates, protocol = prepare(settings, data)
    run: Run = {}
    for qid in tqdm(list(candidates), desc=f"scoring {settings.run_name}", unit="query"):
        query = data.queries[qid]
        request = make_request(data.papers[query.seed], query.facet, settings.variant)
        run[qid] = scorer.score(request, candidates[qid])
    accounting = getattr(scorer, "accounting", None)
    if accounting:  # LLM rerankers: comparisons, prompts, tokens, wall time, position bias
        name = f"csfcube-{settings.run_name}.accounting.json"
        write_atomic(Path(out) / name, json.dumps(accounting(), indent=1, sort_keys=True) + "\n")
        protocol = {**protocol, "accounting_file": name}
    return write_run(out, settings, run, registry.spec(settings.model, settings.profile), scorer.describe(),
                     protocol)


def write_run(out: Path, settings: RunSettings, run: Run, model_spec, model_description: dict,
              details: dict) -> Path:
    """The facet files, the TREC run, then the sidecar (with `details`: protocol and extras)."""
    name = settings.run_name
    for facet in FACETS:
        write_official(official_path(out, name, facet), run, facet)
    write_trec(trec_path(out, name), run, name)
    sidecar = {
        "run": name,
        "model": model_spec.name,
        "label": model_spec.label,
        "role": model_spec.role,
        "family": model_spec.family,
        "settings": model_description,
        "variant": settings.variant,
        "instructions": {f: instruction_text(f, settings.variant) for f in FACETS},
        **details,
        "run_settings": asdict(settings),
        "queries": len(run),
        "data_sha256": data_checksum(),
        "kit_version": __version__,
        "random_seed": RANDOM_SEED,
    }
    path = sidecar_path(out, name)
    write_atomic(path, json.dumps(sidecar, indent=1, sort_keys=True) + "\n")
    return path
