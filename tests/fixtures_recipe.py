"""Recipe fixtures on which BM25's rankings are obvious (tests/promptriever/test_recipe.py).

Every document is "<Word> <word> notes here." for one distinctive word, so BM25 gives a
document a positive score exactly when the query holds its word, and every other
document 0; documents of equal score rank by id (the kit's tie rule). Query texts use
words no document holds except where a ranking should move.
"""

from __future__ import annotations

from pathlib import Path

from fixtures_datasets import write_jsonl, write_qrels

WORDS = {"c1": "volcano", "c2": "glacier", "c3": "desert", "c4": "river", "c5": "forest", "c6": "canyon"}
CORPUS = [{"_id": doc, "title": word.title(), "text": f"{word} notes here."} for doc, word in WORDS.items()]


def write_beir_recipe(folder: Path) -> Path:
    """BEIR folder: test q1 "lava" (c3 relevant), q3 "ember" (c1 grade 2, c5 grade 1); dev q2
    "rain" (c2 relevant). No query word is in a document: only a prompt word moves a document."""
    folder = Path(folder)
    write_jsonl(folder / "corpus.jsonl", CORPUS)
    write_jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "lava"}, {"_id": "q2", "text": "rain"},
                                           {"_id": "q3", "text": "ember"}])
    write_qrels(folder / "qrels" / "test.tsv", [("q1", "c3", 1), ("q3", "c1", 2), ("q3", "c5", 1)])
    write_qrels(folder / "qrels" / "dev.tsv", [("q2", "c2", 1)])
    return folder


def write_followir_recipe(folder: Path) -> Path:
    """FollowIR folder (name it robust04: AP@1000 and p-MRR). Topic words match no document;
    instructions do:

    - 401 "mountain", og "volcano", changed "glacier"; candidates c1 c2 c3 c4; relevant under og
      c1, c4, under changed c4 (c1 judged 0): the changed document is c1;
    - 402 "mountain", og "tundra" (in no document), changed "desert"; candidates c1 c2 c3 c4;
      relevant under og c1, c3, under changed c1 (c3 judged 0): the changed document is c3.
    """
    folder = Path(folder)
    write_jsonl(folder / "corpus.jsonl", CORPUS)
    write_jsonl(folder / "queries.jsonl", [
        {"_id": "401", "text": "mountain", "instruction_og": "volcano", "instruction_changed": "glacier"},
        {"_id": "402", "text": "mountain", "instruction_og": "tundra", "instruction_changed": "desert"},
    ])
    write_jsonl(folder / "top_ranked.jsonl", [{"qid": "401", "pid": ["c1", "c2", "c3", "c4"]},
                                              {"qid": "402", "pid": ["c1", "c2", "c3", "c4"]}])
    write_qrels(folder / "qrels_og" / "test.tsv", [("401", "c1", 1), ("401", "c4", 1), ("402", "c1", 1),
                                                   ("402", "c3", 1)])
    write_qrels(folder / "qrels_changed" / "test.tsv", [("401-changed", "c1", 0), ("401-changed", "c4", 1),
                                                        ("402-changed", "c1", 1), ("402-changed", "c3", 0)])
    return folder
