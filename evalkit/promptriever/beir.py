"""BEIR-format collections from a folder, or MS MARCO / TREC DL through ``ir_datasets``.

A BEIR folder holds::

    corpus.jsonl        {"_id": "d1", "title": "...", "text": "..."}   (title optional)
    queries.jsonl       {"_id": "q1", "text": "..."}
    qrels/{split}.tsv   header ``query-id<TAB>corpus-id<TAB>score``, then one judgment a line

All three loaders return plain dicts, BEIR style: corpus ``{doc: {"title", "text"}}``,
queries ``{qid: text}`` (only the queries judged in the split) and qrels ``{qid: {doc: grade}}``.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from evalkit.errors import KitError
from evalkit.promptriever.io import Qrels, by_id, read_jsonl, read_qrels

Corpus = dict[str, dict[str, str]]
Collection = tuple[Corpus, dict[str, str], Qrels]
# Short names for the ir_datasets ids of the Promptriever in-domain evaluation.
IR_DATASETS = {
    "msmarco-dev": "msmarco-passage/dev/small",
    "dl19": "msmarco-passage/trec-dl-2019/judged",
    "dl20": "msmarco-passage/trec-dl-2020/judged",
}


def read_corpus(path: Path) -> Corpus:
    records = read_jsonl(path, ("_id", "text"), "write corpus.jsonl with one {_id, title, text} a line")
    return {
        doc: {"title": str(record.get("title") or ""), "text": str(record["text"])}
        for doc, record in by_id(path, records).items()
    }


def read_queries(path: Path, fields: tuple[str, ...] = ("_id", "text")) -> dict[str, dict]:
    """Query records keyed by id; each must hold `fields`."""
    records = read_jsonl(path, fields, f"write queries.jsonl with one {{{', '.join(fields)}}} a line")
    return by_id(path, records)


def judged_queries(path: Path, qrels: Qrels, queries: dict[str, dict]) -> None:
    """Fail when the qrels judge a query that queries.jsonl lacks."""
    for qid in qrels:
        if qid not in queries:
            raise KitError(f"{path}: query {qid} is judged but missing from queries.jsonl; add it or drop its qrels")


def load_beir(folder: Path, split: str = "test") -> Collection:
    """Corpus, the split's judged queries and its qrels from a BEIR folder."""
    folder = Path(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    corpus = read_corpus(folder / "corpus.jsonl")
    records = read_queries(folder / "queries.jsonl")
    qrels = read_qrels(qrels_path, f"give the {split} split's judgments as qrels/{split}.tsv")
    judged_queries(qrels_path, qrels, records)
    queries = {qid: str(records[qid]["text"]) for qid in qrels}
    return corpus, queries, qrels


def load_ir_datasets(dataset_id: str) -> Collection:
    """A collection from ``ir_datasets`` (imported only here); `dataset_id` may be a short name in IR_DATASETS."""
    try:
        ir_datasets = importlib.import_module("ir_datasets")
    except ImportError:
        raise KitError(f"{dataset_id} needs ir_datasets: pip install ir_datasets (or give a BEIR folder)") from None
    name = IR_DATASETS.get(dataset_id, dataset_id)
    try:
        dataset = ir_datasets.load(name)
    except KeyError:
        known = ", ".join(IR_DATASETS)
        raise KitError(f"unknown ir_datasets id {name!r}; give a BEIR folder, an id or one of {known}") from None
    qrels: Qrels = {}
    for qrel in dataset.qrels_iter():
        qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = int(qrel.relevance)
    queries = {q.query_id: q.text for q in dataset.queries_iter() if q.query_id in qrels}
    corpus = {
        doc.doc_id: {"title": getattr(doc, "title", "") or "", "text": doc.text} for doc in dataset.docs_iter()
    }
    return corpus, queries, qrels


def load_collection(source: str | Path, split: str = "test") -> Collection:
    """A BEIR folder if `source` is a directory, else an ``ir_datasets`` id or short name."""
    if Path(source).is_dir():
        return load_beir(Path(source), split)
    return load_ir_datasets(str(source))
