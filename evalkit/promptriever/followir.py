"""FollowIR (Weller et al., 2024, arXiv 2403.15246): Robust04, News21, Core17 with instruction pairs.

Expected folder, one per collection, mirroring the jhu-clsp/{robust04,news21,core17}-instructions
datasets on the Hugging Face hub (configs corpus, queries, top_ranked, qrels_og, qrels_changed)::

    corpus.jsonl        {"_id": "FBIS3-10082", "title": "...", "text": "..."}
    queries.jsonl       {"_id": "301", "text": "International Organized Crime",
                         "instruction_og": "...", "instruction_changed": "..."}
    top_ranked.jsonl    {"qid": "301", "pid": "FBIS3-10082"}   one candidate a line
                        ("pid" may also be a list of candidate ids)
    qrels/og.tsv        judgments under the original instruction (BEIR TSV, header optional)
    qrels/changed.tsv   judgments under the changed instruction

Each topic becomes two query instances, ``{topic}-og`` and ``{topic}-changed``, with the same
query text and candidates and their own instruction and qrels. `FollowIR.pairs` maps the
original instance to the changed one; it is built from the topic record itself, and every
consumer (p-MRR) reads it rather than parsing ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalkit.errors import KitError
from evalkit.promptriever.beir import Corpus, judged_queries, read_corpus, read_queries
from evalkit.promptriever.io import Qrels, read_jsonl, read_qrels
from evalkit.promptriever.prompts import with_prompt

QUERY_FIELDS = ("_id", "text", "instruction_og", "instruction_changed")


@dataclass(frozen=True)
class FollowIR:
    corpus: Corpus
    queries: dict[str, str]  # instance id -> query text (the TREC title)
    instructions: dict[str, str]  # instance id -> its instruction (the narrative)
    qrels: Qrels  # instance id -> grades: og qrels for original instances, changed for changed
    candidates: dict[str, tuple[str, ...]]  # instance id -> the documents to rerank
    pairs: dict[str, str]  # original instance id -> changed instance id

    def text(self, qid: str) -> str:
        """What the model reads: the query with its instruction appended (`with_prompt`)."""
        return with_prompt(self.queries[qid], self.instructions[qid])


def _candidates(path: Path) -> dict[str, list[str]]:
    pools: dict[str, list[str]] = {}
    for record in read_jsonl(path, ("qid", "pid"), "write top_ranked.jsonl with one {qid, pid} a line"):
        pids = record["pid"] if isinstance(record["pid"], list) else [record["pid"]]
        pools.setdefault(str(record["qid"]), []).extend(str(pid) for pid in pids)
    return pools


def load_followir(folder: Path) -> FollowIR:
    """Read one FollowIR collection from `folder` (layout in the module docstring)."""
    folder = Path(folder)
    corpus = read_corpus(folder / "corpus.jsonl")
    topics = read_queries(folder / "queries.jsonl", QUERY_FIELDS)
    pools = _candidates(folder / "top_ranked.jsonl")
    judged = {}
    for name in ("og", "changed"):
        path = folder / "qrels" / f"{name}.tsv"
        judged[name] = read_qrels(path, f"give the {name} instruction's judgments as qrels/{name}.tsv")
        judged_queries(path, judged[name], topics)
    queries, instructions, qrels, candidates, pairs = {}, {}, {}, {}, {}
    for topic, record in topics.items():
        if topic not in pools:
            raise KitError(f"{folder / 'top_ranked.jsonl'}: no candidates for query {topic}; list its pool")
        og, changed = f"{topic}-og", f"{topic}-changed"
        pairs[og] = changed
        for qid, name in ((og, "og"), (changed, "changed")):
            queries[qid] = str(record["text"])
            instructions[qid] = str(record[f"instruction_{name}"])
            qrels[qid] = judged[name].get(topic, {})
            candidates[qid] = tuple(pools[topic])
    return FollowIR(corpus, queries, instructions, qrels, candidates, pairs)
