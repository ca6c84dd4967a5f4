"""Run the recipe: a kit embedding model on each dataset given, with and without prompts.

One row per (dataset, model): the dataset's metrics (`DATASET_METRICS`) with no prompt,
and for BEIR-format folders that have a ``dev`` split, "Best" (oracle best prompt on
test) and "Selected" (best on dev, reported on test) nDCG@10. Values x100.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evalkit.errors import KitError
from evalkit.models import registry
from evalkit.models.dense import BiEncoder
from evalkit.promptriever.beir import load_collection
from evalkit.promptriever.followir import collection_name, fetch_followir, load_followir
from evalkit.promptriever.instructir import load_instructir
from evalkit.promptriever.metrics import per_query, score
from evalkit.promptriever.prompts import load_prompts, select_prompt
from evalkit.promptriever.retrieval import rerank, retrieve


def embedding_model(name: str, profile: str) -> BiEncoder:
    model = registry.build(registry.spec(name, profile))
    if not isinstance(model, BiEncoder):
        raise KitError(f"the Promptriever recipe runs embedding models (family dense); {name} is not one")
    return model


def _beir_row(model: BiEncoder, source: str) -> dict:
    corpus, queries, qrels = load_collection(source, "test")
    row = {f"{m} (none)": 100 * v for m, v in score("beir", qrels, retrieve(model, corpus, queries)).items()}
    if Path(source).is_dir() and (Path(source) / "qrels" / "dev.tsv").is_file():
        splits = {split: load_collection(source, split) for split in ("dev", "test")}

        def evaluate(prompt, split):
            corpus, queries, qrels = splits[split]
            return per_query(qrels, retrieve(model, corpus, queries, prompt), ["ndcg@10"])["ndcg@10"]

        chosen = select_prompt(evaluate, load_prompts())
        row.update({"ndcg@10 (Best)": 100 * chosen.best, "ndcg@10 (Selected)": 100 * chosen.selected,
                    "best prompt": chosen.best_prompt, "selected prompt": chosen.selected_prompts.get("dev", "")})
    return row


def _followir_row(model: BiEncoder, source: str) -> dict:
    """A FollowIR folder named after its collection, or a collection name fetched from the hub."""
    name = collection_name(source)
    data = load_followir(Path(source) if Path(source).is_dir() else fetch_followir(name))
    queries = {qid: data.text(qid) for qid in data.queries}
    run = rerank(model, data.corpus, queries, data.candidates)
    return {m: 100 * v for m, v in score(name, data.qrels, run, pairs=data.pairs).items()}


def _instructir_row(model: BiEncoder, folder: str) -> dict:
    data = load_instructir(Path(folder))
    run = retrieve(model, data.corpus, {qid: data.text(qid) for qid in data.queries})
    return {m: 100 * v for m, v in score("instructir", data.qrels, run, groups=data.groups).items()}


def recipe_table(profile: str, models: list[str], beir: list[str], followir: list[str],
                 instructir: list[str]) -> pd.DataFrame:
    """Rows for every model on every dataset given (folders or ir_datasets ids for `beir`)."""
    rows = []
    for name in models:
        model = embedding_model(name, profile)
        for kind, sources, build in (("beir", beir, _beir_row), ("followir", followir, _followir_row),
                                     ("instructir", instructir, _instructir_row)):
            for source in sources:
                rows.append({"model": name, "dataset": Path(source).name or source, "kind": kind,
                             **build(model, source)})
    return pd.DataFrame(rows)
