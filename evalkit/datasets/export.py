"""Export CSFCube for other tools (`evalkit export --dataset csfcube --format beir|followir|trec OUT`).

Every format reads back (through the kit's own adapters; ``trec`` through ir_measures' TREC
qrels reader) and gives the kit's numbers on a run (tests/datasets/test_export.py). The judgments are
the ones the kit scores against (`Collection.judged`: a query's excluded seed neither in its
pool nor in its qrels):

- ``beir``: one BEIR folder per facet, ``OUT/{background,method,result}/``: ``corpus.jsonl``
  (every paper: ``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id`` = the kit's query id
  ``SEED_FACET``; ``text`` = the seed's title and abstract with the facet's instruction
  appended after one space, the rule FollowIR and the kit's recipe adapters read; also
  ``query``, ``instruction``, ``seed``, ``facet``), ``qrels/test.tsv`` with CSFCube's graded
  judgments 0-3 (nDCG@20 with trec's discount is the kit's ``nDCG@20``; CSFCube counts grade
  >= 2 as relevant, BEIR readers >= 1, so binary measures differ), and ``top_ranked.jsonl``, the
  judged pool each query reranks (BEIR readers ignore it: they rank the corpus);
- ``followir``: one FollowIR folder (`evalkit.datasets.followir` layout): for each seed annotated
  for two facets and each direction, a topic ``SEED_FACET`` whose original instruction is that
  facet's and whose changed instruction is the other facet's; ``qrels_og``/``qrels_changed`` hold
  each facet's judgments with grades shifted down by one (3->2, 2->1, 1 and 0->0) so that FollowIR's
  relevance threshold 1 is CSFCube's 2, and ``top_ranked.jsonl`` each instance's judged pool
  (``TOPIC-og``, ``TOPIC-changed``); p-MRR per original instance is the kit's p-MRR of that query;
- ``trec``: ``qrels.txt`` (``qid 0 doc grade``, every query), ``pairs.tsv`` (query -> the seed's
  other facet, the p-MRR pairs), ``pools.txt`` (``qid doc``, each query's judged pool: what a run
  ranks), and the texts a run is made from: ``queries.jsonl`` (``qid``; ``query`` the seed's title
  and abstract; ``instruction`` the facet's; ``text`` the two joined as the ``beir`` export's
  ``text``; ``seed``, ``facet``) and ``corpus.jsonl`` (every paper: ``docno``, ``title``, ``text``
  the abstract).

`FORMATS` holds each format's one-line description, which ``evalkit export --help`` prints.
"""

from __future__ import annotations

import json
from pathlib import Path

from evalkit.core.errors import DataError, RequestError
from evalkit.data.collection import Collection, Qrels
from evalkit.data.runs import Run, write_atomic
from evalkit.datasets.io import with_instruction

FORMATS = {
    "beir": "OUT/FACET/{corpus,queries}.jsonl, qrels/test.tsv, top_ranked.jsonl (one BEIR folder per facet)",
    "followir": "corpus.jsonl, queries.jsonl (original and changed instruction per paired query), "
                "qrels_og/, qrels_changed/, top_ranked.jsonl",
    "trec": "qrels.txt, pairs.tsv, pools.txt, and the texts: queries.jsonl (query, instruction), "
            "corpus.jsonl (title, abstract)",
}


def _jsonl(records) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _tsv_qrels(qrels: Qrels, header: bool = True) -> str:
    lines = ["query-id\tcorpus-id\tscore"] if header else []
    lines += [f"{qid}\t{doc}\t{grade}" for qid, grades in qrels.items() for doc, grade in grades.items()]
    return "\n".join(lines) + "\n"


def _corpus(collection: Collection) -> str:
    return _jsonl({"_id": d.doc_id, "title": d.title, "text": d.text} for d in collection.documents.values())


def _facets(collection: Collection) -> list[str]:
    facets = list(dict.fromkeys(q.facet for q in collection.queries.values()))
    if not facets or None in facets:
        raise DataError(collection.name, "export needs a query-by-document collection with facets (csfcube)")
    return facets


def export_beir(collection: Collection, out: Path) -> list[Path]:
    """One BEIR folder per facet under `out` (module docstring); returns the folders."""
    corpus = _corpus(collection)
    folders = []
    for facet in _facets(collection):
        folder = Path(out) / facet
        qids = [q for q, query in collection.queries.items() if query.facet == facet]
        queries = [collection.queries[q] for q in qids]
        write_atomic(folder / "corpus.jsonl", corpus)
        write_atomic(folder / "queries.jsonl", _jsonl(
            {"_id": q.qid, "text": with_instruction(q.text, q.instruction), "query": q.text,
             "instruction": q.instruction, "seed": q.seed.doc_id if q.seed else None, "facet": q.facet}
            for q in queries))
        write_atomic(folder / "qrels" / "test.tsv", _tsv_qrels({q: dict(collection.judged[q]) for q in qids}))
        if collection.candidates is not None:
            write_atomic(folder / "top_ranked.jsonl", _jsonl(
                {"qid": q, "pid": [d for d in collection.candidates[q] if d != collection.exclude.get(q)]}
                for q in qids))
        folders.append(folder)
    return folders


def shifted(grades, relevance_level: int) -> dict[str, int]:
    """Grades moved so that `relevance_level` becomes 1 (FollowIR's threshold); below it, 0."""
    return {doc: max(0, int(g) - relevance_level + 1) for doc, g in grades.items()}


def export_followir(collection: Collection, out: Path) -> Path:
    """One FollowIR folder at `out` (module docstring): a topic per query that has a p-MRR pair."""
    if not collection.pairs:
        raise DataError(collection.name, "no instruction pairs to export as FollowIR; use beir or trec")
    out = Path(out)
    topics, pools, og, changed = [], [], {}, {}
    for qid, other in collection.pairs.items():
        query, partner = collection.query(qid), collection.query(other)
        topics.append({"_id": qid, "text": query.text, "instruction_og": query.instruction,
                       "instruction_changed": partner.instruction})
        for suffix, source in (("og", qid), ("changed", other)):
            pool = [d.doc_id for d in collection.candidates_of(source)]
            pools.append({"qid": f"{qid}-{suffix}", "pid": pool})
        og[f"{qid}-og"] = shifted(collection.judged[qid], collection.relevance_level)
        changed[f"{qid}-changed"] = shifted(collection.judged[other], collection.relevance_level)
    write_atomic(out / "corpus.jsonl", _corpus(collection))
    write_atomic(out / "queries.jsonl", _jsonl(topics))
    write_atomic(out / "top_ranked.jsonl", _jsonl(pools))
    write_atomic(out / "qrels_og" / "test.tsv", _tsv_qrels(og))
    write_atomic(out / "qrels_changed" / "test.tsv", _tsv_qrels(changed))
    return out


def export_trec(collection: Collection, out: Path) -> list[Path]:
    """TREC qrels, the p-MRR pairs, the judged pools and the query and paper texts under `out`
    (module docstring)."""
    out = Path(out)
    paths = [out / "qrels.txt", out / "pairs.tsv", out / "pools.txt", out / "queries.jsonl", out / "corpus.jsonl"]
    write_atomic(paths[0], "".join(f"{qid} 0 {doc} {grade}\n" for qid, grades in collection.judged.items()
                                   for doc, grade in grades.items()))
    write_atomic(paths[1], "".join(f"{a}\t{b}\n" for a, b in collection.pairs.items()))
    write_atomic(paths[2], "".join(f"{qid} {d.doc_id}\n" for qid in collection.queries
                                   for d in collection.candidates_of(qid)))
    write_atomic(paths[3], _jsonl({"qid": q.qid, "query": q.text, "instruction": q.instruction,
                                   "text": with_instruction(q.text, q.instruction),
                                   "seed": q.seed.doc_id if q.seed else None, "facet": q.facet}
                                  for q in collection.queries.values()))
    write_atomic(paths[4], _jsonl({"docno": d.doc_id, "title": d.title, "text": d.text}
                                  for d in collection.documents.values()))
    return paths


def export(collection: Collection, fmt: str, out: Path) -> Path:
    """Write `collection` in format `fmt` under the folder `out` (new or empty)."""
    if fmt not in FORMATS:
        raise RequestError("format", f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DataError(out, "is a file; give a new or empty folder to export into")
    if out.is_dir() and any(out.iterdir()):
        raise DataError(out, "folder is not empty; give a new or empty folder to export into")
    {"beir": export_beir, "followir": export_followir, "trec": export_trec}[fmt](collection, out)
    return out


# --- reading back --------------------------------------------------------------------------------


def read_pairs(path: Path) -> dict[str, str]:
    """The trec export's ``pairs.tsv``: query -> its paired query."""
    return dict(line.split("\t") for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip())


def followir_run(run: Run, collection: Collection) -> Run:
    """A run of `collection` re-keyed to the FollowIR export's instances (``Q-og``: Q's ranking,
    ``Q-changed``: the ranking of Q's pair)."""
    rekeyed: Run = {}
    for qid, other in collection.pairs.items():
        if qid in run and other in run:
            rekeyed[f"{qid}-og"], rekeyed[f"{qid}-changed"] = dict(run[qid]), dict(run[other])
    return rekeyed
