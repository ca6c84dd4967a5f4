"""A BEIR folder as a `Collection` (full-corpus retrieval, nDCG@10).

BEIR (Thakur et al., 2021) is the out-of-domain half of the Promptriever recipe. A folder is
the layout of the BEIR release::

    corpus.jsonl        {"_id": "d1", "title": "...", "text": "..."}   (title optional)
    queries.jsonl       {"_id": "q1", "text": "..."}
    qrels/test.tsv      ``query-id<TAB>corpus-id<TAB>score`` (header optional), one judgment a line
    qrels/dev.tsv       optional; else qrels/train.tsv, optional

The collection's queries are those the test split judges, plus a dev half for prompt
selection (Promptriever's "Selected" column chooses a prompt on dev queries, reports on test):

- with ``qrels/dev.tsv``: `DEV_SAMPLE` (10) dev queries drawn with `DEV_SAMPLE_SEED`, folds
  ``{"dev/test": Fold(dev, test)}``;
- else with ``qrels/train.tsv``: 10 train queries drawn the same way (Promptriever samples 10
  queries from the validation split, or from train where there is none, as its prompt
  tuning set; the seed makes the draw repeatable; fewer than 10: all of them);
- else no folds: the recipe reports Best (the oracle on test) and leaves Selected blank, as
  the paper's Table 4 does for datasets without dev/train data.

A query judged in two of the splits read is an error: prompt selection would see test data.
Models rank the whole corpus (no candidate lists); grade >= 1 is relevant.
"""

from __future__ import annotations

import random
from pathlib import Path

from evalkit.core.errors import DataError
from evalkit.core.hashing import files_sha256
from evalkit.data.collection import Collection, Fold, Qrels, Query
from evalkit.datasets.io import judged_queries, read_corpus, read_qrels, read_queries, text_of
from evalkit.datasets.scheme import FOLDER, Scheme

DEV_SAMPLE = 10  # prompt-selection queries drawn from the dev split, else from train
DEV_SAMPLE_SEED = 0
FOLD = "dev/test"


def sample_dev(qids: list[str], size: int = DEV_SAMPLE, seed: int = DEV_SAMPLE_SEED) -> list[str]:
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
        raise DataError(folder, "folder not found; give a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
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
                raise DataError(folder / 'qrels', f"query {both} is judged in both test.tsv and {split}.tsv; "
                                "a query belongs to one split")
            keep = sample_dev(list(judged))
            dev = {qid: judged[qid] for qid in keep}
            break
    qrels = {**test, **dev}
    return Collection(
        name=folder.resolve().name,
        documents=documents,
        queries={qid: Query(qid, text_of(folder / "queries.jsonl", records[qid], "text", qid)) for qid in qrels},
        qrels=qrels,
        relevance_level=1,
        checksum=files_sha256([folder / rel for rel in read], read),
        folds={FOLD: Fold(dev=tuple(dev), test=tuple(test))} if dev else {},
        measures=("nDCG@10",),
    ).checked()


SCHEME = Scheme(
    "beir", FOLDER, load_beir, argument="FOLDER",
    help="a BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv\n"
         "(qrels/dev.tsv, or else 10 seeded qrels/train.tsv queries, as the dev fold)",
    hint="give a BEIR folder holding corpus.jsonl, queries.jsonl and qrels/test.tsv",
)
