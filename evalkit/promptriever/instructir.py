"""InstructIR (Oh et al., 2024, arXiv 2402.14334): MS MARCO queries, each with several user instructions.

Expected folder, the BEIR layout of the kaistAI/InstructIR release::

    corpus.jsonl      {"_id": "...", "title": "...", "text": "..."}
    queries.jsonl     {"_id": "1078446_6", "text": "<user instruction> [SEP] <query>"}
    qrels/test.tsv    one target per query instance (BEIR TSV, header optional)

Every record is one (instruction, query) instance with its own target. Instances that share
the same query text form a group, as in the official robustness script (which groups by the
text after ``[SEP]``); groups come from the text, never from the id suffix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import KitError
from evalkit.promptriever.beir import Corpus, judged_queries, read_corpus, read_queries
from evalkit.promptriever.io import Qrels, read_qrels
from evalkit.promptriever.prompts import with_prompt

SEP = "[SEP]"


@dataclass(frozen=True)
class InstructIR:
    corpus: Corpus
    queries: dict[str, str]  # instance id -> query
    instructions: dict[str, str]  # instance id -> user instruction
    qrels: Qrels
    groups: dict[str, tuple[str, ...]]  # query text -> its instance ids

    def text(self, qid: str) -> str:
        """The query with its instruction appended (`with_prompt`); the authors' order is instruction [SEP] query."""
        return with_prompt(self.queries[qid], self.instructions[qid])


def load_instructir(folder: Path, split: str = "test") -> InstructIR:
    """Read InstructIR from `folder` (layout in the module docstring)."""
    folder = Path(folder)
    corpus = read_corpus(folder / "corpus.jsonl")
    path = folder / "queries.jsonl"
    records = read_queries(path)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    qrels = read_qrels(qrels_path, f"give the {split} targets as qrels/{split}.tsv")
    judged_queries(qrels_path, qrels, records)
    queries, instructions, groups = {}, {}, {}
    for qid in qrels:
        parts = str(records[qid]["text"]).split(SEP)
        if len(parts) != 2:
            raise KitError(f"{path}: query {qid} must read '<instruction> {SEP} <query>' with one {SEP}")
        instructions[qid], queries[qid] = parts[0].strip(), parts[1].strip()
        groups.setdefault(queries[qid], []).append(qid)
    return InstructIR(corpus, queries, instructions, qrels, {q: tuple(ids) for q, ids in groups.items()})
