"""Read the BEIR file formats every folder adapter shares: JSON Lines records, TSV qrels and
the BEIR corpus and queries files, with one-line errors that name the file (and line) and the fix.

- ``corpus.jsonl``: one ``{"_id", "title", "text"}`` a line (title optional);
- ``queries.jsonl``: one ``{"_id", "text", ...}`` a line;
- ``qrels/{split}.tsv``: ``query-id<TAB>corpus-id<TAB>score``, the header line optional,
  integer grades (``1.0`` is read as 1).

It also holds `with_instruction`, the one rule by which the recipe's adapters (FollowIR,
InstructIR) turn a query and its instruction into the text a model reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from evalkit.core.errors import DataError
from evalkit.data.collection import Document, Qrels

QRELS_HEADER = ["query-id", "corpus-id", "score"]


def with_instruction(query: str, instruction: str | None) -> str:
    """The query with the instruction appended after one space (FollowIR's and Promptriever's
    rule, `evalkit.promptriever.prompts.with_prompt`); the query alone without one."""
    return f"{query} {instruction}" if instruction else query


def _lines(path: Path, fix: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DataError(path, f"file not found; {fix}") from None
    except IsADirectoryError:
        raise DataError(path, f"a folder, expected a file; {fix}") from None
    except UnicodeDecodeError as exc:
        raise DataError(path, f"not UTF-8 text ({exc.reason}); re-export it as UTF-8") from None


def read_jsonl(path: Path, fields: tuple[str, ...], fix: str) -> list[dict]:
    """The records of a JSON Lines file, each an object holding every name in `fields`."""
    records = []
    for number, line in enumerate(_lines(path, fix), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{number}", f"malformed JSON ({exc.msg}); write one JSON object a line") from None
        if not isinstance(record, dict):
            raise DataError(f"{path}:{number}", f"expected a JSON object, got {type(record).__name__}")
        missing = [name for name in fields if name not in record]
        if missing:
            raise DataError(f"{path}:{number}", f"record lacks {missing[0]!r}; every record needs {', '.join(fields)}")
        records.append(record)
    return records


def by_id(path: Path, records: list[dict], key: str = "_id") -> dict[str, dict]:
    """Records keyed by their id (as a string: a JSON string, or an integer written as its digits); a
    repeated id is an error, and so is an id that is null, true/false, a fraction, a list or an object
    (``str`` would make null the id "None"); an empty one is refused by `Collection.check` (`check_id`)."""
    out: dict[str, dict] = {}
    for number, record in enumerate(records, start=1):
        given = record[key]
        if isinstance(given, bool) or not isinstance(given, str | int):
            raise DataError(path, f"record {number} has {key} {json.dumps(given)[:40]}; give every record a "
                            "non-empty id (a string)")
        rid = str(given)
        if rid in out:
            raise DataError(path, f"duplicate {key} {rid}; give every record its own id")
        out[rid] = record
    return out


MAX_GRADE = 100  # graded judgments run 0-3 (CSFCube), 0-4 at most in TREC; far beyond is a broken file


def _grade(path: Path, number: int, text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value.is_integer():
        raise DataError(f"{path}:{number}", f"score {text!r} is not an integer grade")
    if not 0 <= value <= MAX_GRADE:
        raise DataError(f"{path}:{number}", f"grade {text!r} is outside 0-{MAX_GRADE}; write non-relevant as 0 "
                        "(map negative grades to 0)")
    return int(value)


def read_qrels(path: Path, fix: str) -> Qrels:
    """TSV qrels ``query-id corpus-id score`` (the header line is optional)."""
    qrels: Qrels = {}
    for number, line in enumerate(_lines(path, fix), start=1):
        fields = line.split("\t") if "\t" in line else line.split()
        if not fields or (number == 1 and fields == QRELS_HEADER):
            continue
        if len(fields) != 3:
            raise DataError(f"{path}:{number}", "expected 3 tab-separated fields 'query-id corpus-id score'")
        qid, doc, score = fields
        judged = qrels.setdefault(qid, {})
        if doc in judged:
            raise DataError(f"{path}:{number}", f"query {qid} judges document {doc} a second time; keep one line "
                            "per judgment")
        judged[doc] = _grade(path, number, score)
    return qrels


def text_of(path: Path, record: dict, field: str, rid: str) -> str:
    """A record's text field as a string; null or a non-string is an error (never the text "None")."""
    value = record[field]
    if not isinstance(value, str):
        raise DataError(path, f"record {rid} has {field} {json.dumps(value)[:40]}; give a string (\"\" for none)")
    return value


def read_corpus(path: Path) -> dict[str, Document]:
    """The documents of a BEIR ``corpus.jsonl`` (a missing or null title reads as "")."""
    records = read_jsonl(path, ("_id", "text"), "write corpus.jsonl with one {_id, title, text} a line")
    return {
        doc: Document(doc, str(record.get("title") or ""), text_of(path, record, "text", doc))
        for doc, record in by_id(path, records).items()
    }


def read_queries(path: Path, fields: tuple[str, ...] = ("_id", "text")) -> dict[str, dict]:
    """Query records keyed by id; each must hold `fields`."""
    records = read_jsonl(path, fields, f"write queries.jsonl with one {{{', '.join(fields)}}} a line")
    return by_id(path, records)


def judged_queries(path: Path, qids: Iterable[str], queries: dict[str, dict]) -> None:
    """Fail when the qrels at `path` judge a query that queries.jsonl lacks."""
    for qid in qids:
        if qid not in queries:
            raise DataError(path, f"query {qid} is judged but missing from queries.jsonl; add it or drop its qrels")
