"""FollowIR (Weller et al., 2024, arXiv 2403.15246) as a `Collection`: Robust04, News21, Core17
topics, each under its original and its changed instruction, reranking given candidate lists.

A folder, one per collection, mirrors the jhu-clsp/{robust04,news21,core17}-instructions
datasets on the Hugging Face hub (configs corpus, queries, top_ranked, qrels_og, qrels_changed)::

    corpus.jsonl        {"_id": "FBIS3-10082", "title": "...", "text": "..."}
    queries.jsonl       {"_id": "301", "text": "International Organized Crime",
                         "instruction_og": "...", "instruction_changed": "..."}
    top_ranked.jsonl    {"qid": "301", "pid": "FBIS3-10082"}   one candidate a line
                        ("pid" may also be a list of candidate ids; "qid" a topic, or an
                        instance "301-og" / "301-changed" when the two lists differ)
    qrels_og/test.tsv   judgments under the original instruction (BEIR TSV, header optional;
                        query ids are topics, or topics suffixed "-og" as in the hub's files)
    qrels_changed/test.tsv   judgments under the changed instruction ("-changed")

Each topic becomes two queries, ``{topic}-og`` and ``{topic}-changed``, with the topic's
candidates and their own qrels. A model reads the query with its instruction appended after
one space (`with_instruction`), as FollowIR and mteb feed every model; so `Query.text` holds that
whole text and `Query.instruction` is "". `pairs` maps the original query to the changed one
(p-MRR), built from the topic record rather than parsed from ids; `strata` labels each query
"original" or "changed".

The collection is named after its folder (robust04, news21, core17; "followir" otherwise),
which fixes its measures, those of the FollowIR tables: AP@1000 and p-MRR on Robust04 and
Core17, nDCG@5 and p-MRR on News21. `fetch_followir(name)` downloads a collection from the hub
when it is reachable.
"""

from __future__ import annotations

from pathlib import Path

from evalkit.core.errors import DataError, MissingPrerequisite, RequestError
from evalkit.core.hashing import files_sha256
from evalkit.data.collection import Collection, Query
from evalkit.datasets.io import (
    judged_queries,
    read_corpus,
    read_jsonl,
    read_qrels,
    read_queries,
    text_of,
    with_instruction,
)
from evalkit.datasets.scheme import FOLDER, Scheme

QUERY_FIELDS = ("_id", "text", "instruction_og", "instruction_changed")
HUB = {"robust04": "jhu-clsp/robust04-instructions", "news21": "jhu-clsp/news21-instructions",
       "core17": "jhu-clsp/core17-instructions"}
MEASURES = {"robust04": ("AP@1000", "p-MRR"), "core17": ("AP@1000", "p-MRR"), "news21": ("nDCG@5", "p-MRR")}
DEFAULT = "followir"  # the name of a folder named after none of HUB; measured like Robust04
INSTANCES = (("og", "original"), ("changed", "changed"))  # id suffix, stratum
FILES = ("corpus.jsonl", "queries.jsonl", "top_ranked.jsonl", "qrels_og/test.tsv", "qrels_changed/test.tsv")


def collection_name(source: str | Path) -> str:
    """robust04, news21 or core17 from a collection name or a folder named after one, else "followir"."""
    name = Path(source).name.lower()
    return next((known for known in HUB if name.startswith(known)), DEFAULT)


def _candidates(path: Path) -> dict[str, list[str]]:
    pools: dict[str, list[str]] = {}
    for record in read_jsonl(path, ("qid", "pid"), "write top_ranked.jsonl with one {qid, pid} a line"):
        pids = record["pid"] if isinstance(record["pid"], list) else [record["pid"]]
        pools.setdefault(str(record["qid"]), []).extend(str(pid) for pid in pids)
    return pools


def load_followir(folder: Path, name: str | None = None) -> Collection:
    """One FollowIR collection from `folder` (layout in the module docstring); `name` overrides
    the name taken from the folder (a hub snapshot's folder is a commit hash)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, f"folder not found; give a FollowIR folder or one of {', '.join(HUB)}")
    name = name or collection_name(folder.resolve())
    documents = read_corpus(folder / "corpus.jsonl")
    topics = read_queries(folder / "queries.jsonl", QUERY_FIELDS)
    pools = _candidates(folder / "top_ranked.jsonl")
    judged = {}
    for suffix, _ in INSTANCES:
        path = folder / f"qrels_{suffix}" / "test.tsv"
        raw = read_qrels(path, f"give the {suffix} instruction's judgments as qrels_{suffix}/test.tsv")
        judged[suffix] = {qid.removesuffix(f"-{suffix}"): grades for qid, grades in raw.items()}
        judged_queries(path, judged[suffix], topics)
    queries, qrels, candidates, pairs, strata = {}, {}, {}, {}, {}
    for topic, record in topics.items():
        pairs[f"{topic}-og"] = f"{topic}-changed"
        for suffix, stratum in INSTANCES:
            qid = f"{topic}-{suffix}"
            pool = pools.get(qid) or pools.get(topic)
            if not pool:
                raise DataError(folder / 'top_ranked.jsonl', f"no candidates for query {topic}; list its pool")
            source = folder / "queries.jsonl"
            queries[qid] = Query(qid, with_instruction(text_of(source, record, "text", topic),
                                                       text_of(source, record, f"instruction_{suffix}", topic)))
            qrels[qid] = judged[suffix].get(topic, {})
            candidates[qid] = tuple(pool)
            strata[qid] = stratum
    return Collection(
        name=name,
        documents=documents,
        queries=queries,
        qrels=qrels,
        relevance_level=1,
        checksum=files_sha256([folder / rel for rel in FILES], FILES),
        candidates=candidates,
        pairs=pairs,
        strata=strata,
        measures=MEASURES.get(name, MEASURES["robust04"]),
    ).checked()


def fetch_followir(name: str) -> Path:
    """The hub copy of a FollowIR collection (huggingface_hub's cache), when the hub is reachable."""
    if name not in HUB:
        raise RequestError("dataset",
                           f"unknown FollowIR collection {name!r}; choose one of {', '.join(HUB)} or give a folder")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise MissingPrerequisite(f"fetching {HUB[name]} needs huggingface_hub",
                                  "pip install 'evalkit[recipe]'") from None
    try:
        return Path(snapshot_download(HUB[name], repo_type="dataset"))
    except Exception as exc:  # offline, gated or missing: the user passes a local folder instead
        raise MissingPrerequisite(f"cannot fetch {HUB[name]} from the Hugging Face hub ({type(exc).__name__})",
                                  "download it and pass its folder") from None


def load_named(name: str) -> Collection:
    """One of the `HUB` collections by name, fetched from the hub (`fetch_followir`)."""
    return load_followir(fetch_followir(name), name=name)


SCHEME = Scheme(
    "followir", FOLDER, load_followir, argument="FOLDER_OR_NAME",
    help="a FollowIR folder (robust04, news21 or core17 in its name), or one\n"
         "of robust04, news21, core17 fetched from the Hugging Face hub",
    hint=f"give a FollowIR folder or one of {', '.join(HUB)}",
    names=tuple(HUB), load_name=load_named,
)
