"""Tiny dataset folders written into a test's tmp_path, in each adapter's format.

Hand-checkable content shared by the BEIR, FollowIR and InstructIR fixtures: six documents
(d2 without a title) on three topics, ozone (d1, d2), organised crime (d3, d4) and food
(d5, d6).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CORPUS = [
    {"_id": "d1", "title": "Ozone hole", "text": "CFCs thin the ozone layer over Antarctica."},
    {"_id": "d2", "text": "The Montreal Protocol phased out CFCs in 1989."},
    {"_id": "d3", "title": "Mafia money", "text": "Crime groups launder money through shell companies."},
    {"_id": "d4", "title": "Bank fraud", "text": "Bank fraud rose in the 1990s."},
    {"_id": "d5", "title": "Umami", "text": "Umami is the savoury taste of glutamate."},
    {"_id": "d6", "title": "Fever", "text": "A fever is a temperature above 38 degrees."},
]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_qrels(path: Path, rows: list[tuple], header: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["query-id\tcorpus-id\tscore"] if header else []
    path.write_text("\n".join(lines + ["\t".join(map(str, r)) for r in rows]) + "\n", encoding="utf-8")
    return path


def write_beir(folder: Path, with_dev: bool = True, train_queries: int = 0) -> Path:
    """A BEIR folder: test queries q1 (ozone), q2 (crime), q3 (umami); with_dev adds dev query
    q4 (fever) in a header-less qrels/dev.tsv; train_queries adds t1..tN in qrels/train.tsv,
    each judging d{(i-1) % 6 + 1} relevant."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "corpus.jsonl", CORPUS)
    queries = [{"_id": "q1", "text": "ozone layer"}, {"_id": "q2", "text": "organised crime"},
               {"_id": "q3", "text": "what is umami"}, {"_id": "q4", "text": "what is a fever"}]
    queries += [{"_id": f"t{i}", "text": f"train query {i}"} for i in range(1, train_queries + 1)]
    write_jsonl(folder / "queries.jsonl", queries)
    write_qrels(folder / "qrels" / "test.tsv", [("q1", "d1", 2), ("q1", "d2", 1), ("q2", "d3", 1),
                                                 ("q2", "d4", 0), ("q3", "d5", 1)])
    if with_dev:
        write_qrels(folder / "qrels" / "dev.tsv", [("q4", "d6", 1)], header=False)
    if train_queries:
        write_qrels(folder / "qrels" / "train.tsv",
                    [(f"t{i}", f"d{(i - 1) % 6 + 1}", 1) for i in range(1, train_queries + 1)])
    return folder


def write_followir(folder: Path) -> Path:
    """A FollowIR folder (name it robust04/news21/core17 to get that collection's measures):
    topics 301 (crime: og any crime, changed only fraud), 302 (ozone: og any ozone, changed
    only the 1989 protocol), 303 (food); top_ranked mixes one-pid lines and a pid list; the
    changed qrels carry the hub's "-changed" suffix. Changed documents (relevant under og,
    not under changed): d3 for 301, d1 for 302, none for 303."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "corpus.jsonl", CORPUS)
    write_jsonl(folder / "queries.jsonl", [
        {"_id": "301", "text": "crime", "instruction_og": "any crime", "instruction_changed": "only fraud"},
        {"_id": "302", "text": "ozone", "instruction_og": "any ozone", "instruction_changed": "only the protocol"},
        {"_id": "303", "text": "food", "instruction_og": "any food", "instruction_changed": "any taste"},
    ])
    write_jsonl(folder / "top_ranked.jsonl", [
        {"qid": "301", "pid": "d3"}, {"qid": "301", "pid": "d4"}, {"qid": "301", "pid": "d1"},
        {"qid": "302", "pid": ["d1", "d2", "d5"]},
        {"qid": "303", "pid": ["d5", "d6"]},
    ])
    write_qrels(folder / "qrels_og" / "test.tsv",
                [("301", "d3", 1), ("301", "d4", 1), ("302", "d1", 1), ("302", "d2", 2), ("303", "d5", 1)])
    write_qrels(folder / "qrels_changed" / "test.tsv",
                [("301-changed", "d3", 0), ("301-changed", "d4", 1), ("302-changed", "d1", 0),
                 ("302-changed", "d2", 1), ("303-changed", "d5", 1)])
    return folder


def write_instructir(folder: Path) -> Path:
    """An InstructIR folder: instances 7_1, 7_2 (query "what is umami", targets d5, d6) and 8_1
    ("what is a fever", target d6)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "corpus.jsonl", CORPUS)
    write_jsonl(folder / "queries.jsonl", [
        {"_id": "7_1", "text": "I am a chef. [SEP] what is umami"},
        {"_id": "7_2", "text": "I am a student. [SEP] what is umami"},
        {"_id": "8_1", "text": "I am a nurse. [SEP] what is a fever"},
    ])
    write_qrels(folder / "qrels" / "test.tsv", [("7_1", "d5", 1), ("7_2", "d6", 1), ("8_1", "d6", 1)])
    return folder


def readme_instructions(tmp_path: Path) -> Path:
    text = (ROOT / "README.md").read_text().split("**Your own instructions.**", 1)[1]
    path = tmp_path / "my.yaml"
    path.write_text(re.search(r"```yaml\n(.*?)```", text, re.S).group(1))
    return path
