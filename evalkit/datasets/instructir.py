"""InstructIR (Oh et al., 2024, arXiv 2402.14334) as a `Collection`: MS MARCO queries, each
issued by several users with their own instruction and target.

A folder is the BEIR layout of the kaistAI/InstructIR release::

    corpus.jsonl      {"_id": "...", "title": "...", "text": "..."}
    queries.jsonl     {"_id": "1078446_6", "text": "<user instruction> [SEP] <query>"}
    qrels/test.tsv    one target per query instance (BEIR TSV, header optional)

Every judged record is one (instruction, query) instance and one `Query`: a model reads the
query with the instruction appended after one space (`with_instruction`, the recipe's rule for
every dataset), so `Query.text` holds that whole text and `Query.instruction` is "".
Instances sharing the same query text form a group (`groups`: query text -> instance ids),
as in the official robustness script, which groups by the text after ``[SEP]``; groups come
from the text, never from the id suffix. Models rank the whole corpus; the measures are
nDCG@10 and robustness@10 (the per-group minimum nDCG@10, averaged over groups).
"""

from __future__ import annotations

from pathlib import Path

from evalkit.core.errors import DataError
from evalkit.core.hashing import files_sha256
from evalkit.data.collection import Collection, Query
from evalkit.datasets.io import judged_queries, read_corpus, read_qrels, read_queries, text_of, with_instruction
from evalkit.datasets.scheme import FOLDER, Scheme

SEP = "[SEP]"


def load_instructir(folder: Path, split: str = "test") -> Collection:
    """InstructIR from `folder` (layout in the module docstring)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, f"folder not found; give the InstructIR folder (corpus.jsonl, queries.jsonl, "
                        f"qrels/{split}.tsv)")
    documents = read_corpus(folder / "corpus.jsonl")
    path = folder / "queries.jsonl"
    records = read_queries(path)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    qrels = read_qrels(qrels_path, f"give the {split} targets as qrels/{split}.tsv")
    judged_queries(qrels_path, qrels, records)
    queries: dict[str, Query] = {}
    groups: dict[str, list[str]] = {}
    for qid in qrels:
        parts = text_of(path, records[qid], "text", qid).split(SEP)
        if len(parts) != 2:
            raise DataError(path, f"query {qid} must read '<instruction> {SEP} <query>' with one {SEP}")
        instruction, query = parts[0].strip(), parts[1].strip()
        queries[qid] = Query(qid, with_instruction(query, instruction))
        groups.setdefault(query, []).append(qid)
    files = ["corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"]
    return Collection(
        name="instructir",
        documents=documents,
        queries=queries,
        qrels=qrels,
        relevance_level=1,
        checksum=files_sha256([folder / rel for rel in files], files),
        groups={q: tuple(ids) for q, ids in groups.items()},
        measures=("nDCG@10", "robustness@10"),
    ).checked()


SCHEME = Scheme(
    "instructir", FOLDER, load_instructir, argument="FOLDER",
    help="the InstructIR folder (BEIR layout, queries '<instruction> [SEP] <query>')",
    hint="give the InstructIR folder holding corpus.jsonl, queries.jsonl and qrels/test.tsv",
)
