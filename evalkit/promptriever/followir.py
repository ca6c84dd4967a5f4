"""FollowIR (Weller et al., 2024, arXiv 2403.15246): Robust04, News21, Core17 with instruction pairs.

Expected folder, one per collection, mirroring the jhu-clsp/{robust04,news21,core17}-instructions
datasets on the Hugging Face hub (configs corpus, queries, top_ranked, qrels_og, qrels_changed)::

    corpus.jsonl        {"_id": "FBIS3-10082", "title": "...", "text": "..."}
    queries.jsonl       {"_id": "301", "text": "International Organized Crime",
                         "instruction_og": "...", "instruction_changed": "..."}
    top_ranked.jsonl    {"qid": "301", "pid": "FBIS3-10082"}   one candidate a line
                        ("pid" may also be a list of candidate ids)
    qrels_og/test.tsv   judgments under the original instruction (BEIR TSV, header optional;
                        query ids are topics, or topics suffixed "-og" as in the hub's files)
    qrels_changed/test.tsv   judgments under the changed instruction ("-changed")

`fetch_followir(name)` downloads a collection (robust04, news21, core17) from the hub when
it is reachable.

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
        path = folder / f"qrels_{name}" / "test.tsv"
        raw = read_qrels(path, f"give the {name} instruction's judgments as qrels_{name}/test.tsv")
        judged[name] = {qid.removesuffix(f"-{name}"): grades for qid, grades in raw.items()}
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


HUB = {"robust04": "jhu-clsp/robust04-instructions", "news21": "jhu-clsp/news21-instructions",
       "core17": "jhu-clsp/core17-instructions"}


def collection_name(source: str) -> str:
    """robust04, news21 or core17, from a collection name or a folder named after one."""
    name = Path(source).name.lower()
    for known in HUB:
        if name.startswith(known):
            return known
    raise KitError(f"{source}: name the FollowIR folder after its collection ({', '.join(HUB)})")


def fetch_followir(name: str) -> Path:
    """The hub copy of a FollowIR collection (huggingface_hub's cache), when the hub is reachable."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(HUB[name], repo_type="dataset"))
    except Exception as exc:  # offline, gated or missing: the user passes a local folder instead
        raise KitError(f"cannot fetch {HUB[name]} from the Hugging Face hub ({type(exc).__name__}); "
                       "download it and pass its folder") from None
