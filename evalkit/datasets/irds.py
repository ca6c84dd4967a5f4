"""A collection from ``ir_datasets`` (MacAvaney et al., 2021) as a `Collection`.

The in-domain half of the Promptriever recipe (MS MARCO dev, TREC DL 2019/2020) and any BEIR
collection ``ir_datasets`` serves (``beir/scifact/test``...) are read through the library,
which downloads and caches the data itself; it is imported only here (``pip install
'evalkit[recipe]'``). `IR_DATASETS` gives short names for the recipe's ids.

As in the BEIR folder adapter: the queries are those the qrels judge, documents are
``Document(doc_id, title, text)`` (title "" where the dataset has none), models rank the
whole corpus, grade >= 1 is relevant. The headline measure is RR@10 on MS MARCO dev and
nDCG@10 elsewhere. The checksum is a sha256 over the records read, so a changed upstream
copy shows in run sidecars.
"""

from __future__ import annotations

import hashlib
import importlib

from evalkit.core.errors import DataError, MissingPrerequisite, RequestError
from evalkit.data.collection import Collection, Document, Qrels, Query
from evalkit.datasets.scheme import NAME, Scheme

# Short names for the ir_datasets ids of the Promptriever in-domain evaluation.
IR_DATASETS = {
    "msmarco-dev": "msmarco-passage/dev/small",
    "dl19": "msmarco-passage/trec-dl-2019/judged",
    "dl20": "msmarco-passage/trec-dl-2020/judged",
}
MEASURES = {
    "msmarco-passage/dev/small": ("RR@10",),
    "msmarco-passage/dev": ("RR@10",),
}
INSTALL = "pip install 'evalkit[recipe]'"


def _text(record, what: str, dataset: str) -> str:
    """A record's text field, else its ``default_text()`` (datasets whose records have no text)."""
    text = getattr(record, "text", None)
    if text is None and hasattr(record, "default_text"):
        text = record.default_text()
    if text is None:
        raise DataError(f"ir_datasets {dataset}", f"{what} records have no text; give a BEIR folder instead")
    return str(text)


def load_irds(dataset_id: str) -> Collection:
    """The judged queries of an ``ir_datasets`` id (or a short name in `IR_DATASETS`) as a Collection."""
    try:
        ir_datasets = importlib.import_module("ir_datasets")
    except ImportError:
        raise MissingPrerequisite(f"irds:{dataset_id} needs the ir_datasets package", INSTALL) from None
    name = IR_DATASETS.get(dataset_id, dataset_id)
    try:
        dataset = ir_datasets.load(name)
    except KeyError:
        known = ", ".join(IR_DATASETS)
        raise RequestError("dataset", f"unknown ir_datasets id {name!r}; give an id listed by "
                                      f"ir_datasets, one of {known}, or beir:FOLDER",
                           value=f"irds:{dataset_id}") from None
    digest = hashlib.sha256(f"ir_datasets:{name}\n".encode())
    qrels: Qrels = {}
    for qrel in dataset.qrels_iter():
        qrels.setdefault(str(qrel.query_id), {})[str(qrel.doc_id)] = int(qrel.relevance)
        digest.update(f"{qrel.query_id}\t{qrel.doc_id}\t{int(qrel.relevance)}\n".encode())
    queries: dict[str, Query] = {}
    for record in dataset.queries_iter():
        qid = str(record.query_id)
        if qid in qrels:
            queries[qid] = Query(qid, _text(record, "query", name))
            digest.update(f"{qid}\t{queries[qid].text}\n".encode())
    unjudged = next((qid for qid in qrels if qid not in queries), None)
    if unjudged is not None:
        raise DataError(f"ir_datasets {name}", f"query {unjudged} is judged but has no query record; "
                        "report it upstream or give a BEIR folder")
    documents: dict[str, Document] = {}
    for record in dataset.docs_iter():
        doc = Document(str(record.doc_id), str(getattr(record, "title", "") or ""), _text(record, "document", name))
        documents[doc.doc_id] = doc
        digest.update(f"{doc.doc_id}\t{doc.title}\t{doc.text}\n".encode())
    return Collection(
        name=dataset_id,
        documents=documents,
        queries={qid: queries[qid] for qid in qrels},
        qrels=qrels,
        relevance_level=1,
        checksum=digest.hexdigest(),
        measures=MEASURES.get(name, ("nDCG@10",)),
    ).checked()


SCHEME = Scheme(
    "irds", NAME, load_irds, argument="ID",
    help="an ir_datasets id (beir/scifact/test...) or msmarco-dev, dl19, dl20\n"
         "(needs pip install 'evalkit[recipe]')",
)
