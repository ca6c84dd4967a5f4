"""Read the BEIR file formats: JSON Lines records and TSV qrels, with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path

from evalkit.errors import KitError

Qrels = dict[str, dict[str, int]]
QRELS_HEADER = ["query-id", "corpus-id", "score"]


def _lines(path: Path, fix: str) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise KitError(f"{path}: file not found; {fix}") from None
    except UnicodeDecodeError as exc:
        raise KitError(f"{path}: not UTF-8 text ({exc}); re-export it as UTF-8") from None


def read_jsonl(path: Path, fields: tuple[str, ...], fix: str) -> list[dict]:
    """The records of a JSON Lines file, each an object holding every name in `fields`."""
    records = []
    for number, line in enumerate(_lines(path, fix), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise KitError(f"{path}:{number}: malformed JSON ({exc.msg}); write one JSON object a line") from None
        if not isinstance(record, dict):
            raise KitError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
        missing = [name for name in fields if name not in record]
        if missing:
            raise KitError(f"{path}:{number}: record lacks {missing[0]!r}; every record needs {', '.join(fields)}")
        records.append(record)
    return records


def by_id(path: Path, records: list[dict], key: str = "_id") -> dict[str, dict]:
    """Records keyed by their id (as a string); a repeated id is an error."""
    out: dict[str, dict] = {}
    for record in records:
        rid = str(record[key])
        if rid in out:
            raise KitError(f"{path}: duplicate {key} {rid}; give every record its own id")
        out[rid] = record
    return out


def _grade(path: Path, number: int, text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value.is_integer():
        raise KitError(f"{path}:{number}: score {text!r} is not an integer grade")
    return int(value)


def read_qrels(path: Path, fix: str) -> Qrels:
    """TSV qrels ``query-id corpus-id score`` (the header line is optional)."""
    qrels: Qrels = {}
    for number, line in enumerate(_lines(path, fix), start=1):
        fields = line.split("\t") if "\t" in line else line.split()
        if not fields or (number == 1 and fields == QRELS_HEADER):
            continue
        if len(fields) != 3:
            raise KitError(f"{path}:{number}: expected 3 tab-separated fields 'query-id corpus-id score'")
        qid, doc, score = fields
        qrels.setdefault(qid, {})[doc] = _grade(path, number, score)
    return qrels
