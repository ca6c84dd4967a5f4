"""A BEIR folder as a `Collection` (full-corpus retrieval, nDCG@10).

BEIR (Thakur et al., 2021) is the out-of-domain half of the Promptriever recipe. A folder is
the layout of the BEIR release::

    corpus.jsonl        {"_id": "d1", "title": "...", "text": "..."}   (title optional)
    queries.jsonl       {"_id": "q1", "text": "..."}
    qrels/test.tsv      ``query-id<TAB>corpus-id<TAB>score`` (header optional), one judgment a line
    qrels/dev.tsv       optional; else qrels/train.tsv, optional

The collection's queries are those the test split judges, plus a dev half for prompt
selection (Promptriever's "Selected" column chooses a prompt on dev queries, reports on test):

- with ``qrels/dev.tsv``: every dev query, folds ``{"dev/test": Fold(dev, test)}``;
- else with ``qrels/train.tsv``: `TRAIN_SAMPLE` train queries drawn with `TRAIN_SAMPLE_SEED`
  (Promptriever selects prompts on 10 sampled queries; the seed makes the draw repeatable);
- else no folds.

A query judged in two of the splits read is an error: prompt selection would see test data.
Models rank the whole corpus (no candidate lists); grade >= 1 is relevant.
"""

from __future__ import annotations

import random
from pathlib import Path

from evalkit.collection import Collection, Fold, Qrels, Query
from evalkit.datasets.io import judged_queries, read_corpus, read_qrels, read_queries
from evalkit.errors import KitError
from evalkit.hashing import files_sha256

TRAIN_SAMPLE = 10  # dev queries drawn from the train split when there is no dev split
TRAIN_SAMPLE_SEED = 0
FOLD = "dev/test"


def sample_train(qids: list[str], size: int = TRAIN_SAMPLE, seed: int = TRAIN_SAMPLE_SEED) -> list[str]:
    """`size` of `qids` drawn with `seed` (all of them when fewer), in their file order."""
    if len(qids) <= size:
        return list(qids)
    chosen = set(random.Random(seed).sample(qids, size))
    return [q for q in qids if q in chosen]


def _split(folder: Path, split: str, records: dict[str, dict]) -> Qrels:
    path = folder / "qrels" / f"{split}.tsv"
    qrels = read_qrels(path, f"give the {split} split's judgments as qrels/{split}.tsv")
    judged_queries(path, qrels, records)
    return qrels


def load_beir(folder: Path) -> Collection:
    """The test queries of a BEIR folder, with a dev half when the folder has one (module docstring)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise KitError(f"{folder}: folder not found; give a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    documents = read_corpus(folder / "corpus.jsonl")
    records = read_queries(folder / "queries.jsonl")
    read = ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"]
    test = _split(folder, "test", records)
    dev: Qrels = {}
    for split in ("dev", "train"):
        if (folder / "qrels" / f"{split}.tsv").is_file():
            judged = _split(folder, split, records)
            read.append(f"qrels/{split}.tsv")
            both = next((qid for qid in judged if qid in test), None)
            if both is not None:
                raise KitError(f"{folder / 'qrels'}: query {both} is judged in both test.tsv and {split}.tsv; "
                               "a query belongs to one split")
            keep = list(judged) if split == "dev" else sample_train(list(judged))
            dev = {qid: judged[qid] for qid in keep}
            break
    qrels = {**test, **dev}
    collection = Collection(
        name=folder.resolve().name,
        documents=documents,
        queries={qid: Query(qid, str(records[qid]["text"])) for qid in qrels},
        qrels=qrels,
        relevance_level=1,
        checksum=files_sha256([folder / rel for rel in read], read),
        folds={FOLD: Fold(dev=tuple(dev), test=tuple(test))} if dev else {},
        measures=("nDCG@10",),
    )
    collection.check()
    return collection
