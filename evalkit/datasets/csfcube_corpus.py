"""The full-corpus protocol: the ~800k abstracts of ``abstracts-preds.zip`` (figshare 14796339).

This module only reads the file (`iter_corpus`, the CSFCube collection's ``read_corpus``);
the runner streams it through the kit's one whole-corpus path (`evalkit.retrieval.corpus`): a
first pass encodes every paper with the first-stage embedding model into a resumable
on-disk vector index, each query retrieves its top ``depth`` (the seed excluded), and a
second pass reads only the retrieved papers' text for the reranker.

Format (that of the release's ``abstracts-csfcube-preds.jsonl``; check your copy):
a ``.zip`` holding one ``.jsonl`` file, or a ``.jsonl`` file, one paper per line with
``paper_id``, ``title``, ``abstract`` (a list of sentences, or a string) and,
optionally, ``pred_labels`` (one ``<facet>_label`` per sentence).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.data.collection import Document, Sentence
from evalkit.datasets.csfcube_facets import LABEL_TO_FACET


@contextmanager
def _lines(path: Path) -> Iterator[Iterable[bytes]]:
    path = Path(path)
    if not path.is_file():
        raise MissingPrerequisite(f"{path}: corpus file not found", "download abstracts-preds.zip (figshare 14796339)")
    if path.suffix == ".zip":
        try:
            archive = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise DataError(path, f"not a readable zip file ({exc}); download abstracts-preds.zip again") from None
        with archive:
            members = [n for n in archive.namelist() if n.endswith(".jsonl")]
            if len(members) != 1:
                raise DataError(path, f"expected one .jsonl file inside the zip, found {len(members)}")
            with archive.open(members[0]) as raw:
                yield io.BufferedReader(raw)
    else:
        with open(path, "rb") as fh:  # bytes: each line decoded alone, so a bad byte is located exactly
            yield fh


def _paper(record: dict) -> Document:
    if not isinstance(record, dict):
        raise ValueError(f"a JSON {type(record).__name__}, not an object")
    if not isinstance(record.get("paper_id"), (str, int)) or isinstance(record.get("paper_id"), bool) \
            or len(str(record["paper_id"]).split()) != 1:
        raise ValueError(f"paper_id {record.get('paper_id')!r} is not an id")
    abstract = record.get("abstract") or []
    sentences = [abstract] if isinstance(abstract, str) else list(abstract)
    labels = record.get("pred_labels") or ["other_label"] * len(sentences)
    if len(labels) != len(sentences):
        raise ValueError(f"{len(labels)} pred_labels for {len(sentences)} sentences")
    facets = [LABEL_TO_FACET.get(str(label).removesuffix("_label"), "other") for label in labels]
    return Document(str(record["paper_id"]), record.get("title") or "", " ".join(sentences),
                    tuple(Sentence(s, f) for s, f in zip(sentences, facets)))


def iter_corpus(path: Path) -> Iterator[Document]:
    """Papers of the corpus file, in file order; a paper_id listed twice is an error."""
    seen: set[str] = set()
    with _lines(path) as lines:
        numbered = enumerate(lines, start=1)
        number = 0
        while True:
            try:
                number, raw = next(numbered)
            except StopIteration:
                return
            except (zipfile.BadZipFile, EOFError, OSError) as exc:  # a damaged zip member
                raise DataError(path, f"cannot read the corpus ({exc}); download it again") from None
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}:{number}", f"not UTF-8 text ({exc.reason} at byte {exc.start}); "
                                "the corpus must be UTF-8 JSON lines") from None
            if not line.strip():
                continue
            try:
                paper = _paper(json.loads(line))
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
                raise DataError(f"{path}:{number}", f"malformed corpus record ({type(exc).__name__}: {exc}); "
                                "expected an object with paper_id, title, abstract") from None
            if paper.doc_id in seen:
                raise DataError(f"{path}:{number}", f"paper_id {paper.doc_id} appears twice; each paper must be "
                                "listed once (use the release file unchanged)")
            seen.add(paper.doc_id)
            yield paper


def check_corpus(path: Path) -> None:
    """A one-line `KitError` unless `path` reads as the corpus (its first paper parses), so a
    command that only plans (`evalkit plan --corpus`) refuses a wrong file as a run would."""
    papers = iter_corpus(Path(path))
    try:
        next(papers)
    except StopIteration:
        raise DataError(path, "the corpus holds no papers; give abstracts-preds.zip (figshare 14796339)") from None
    finally:
        papers.close()
