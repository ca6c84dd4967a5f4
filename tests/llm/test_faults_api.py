"""Faults of the LLM API path, each reproduced against a loopback server: poisoned answers,
bodies of the wrong type, broken cache files and folders, and a server that trickles."""

from __future__ import annotations

import json
import socket
import sqlite3
import struct
import time

import pytest
from fake_llm import CANDIDATES, FIRST, FaultServer, settings
from loopback import Loopback, chat_completion

from evalkit.core.errors import KitError
from evalkit.data.runs import ranked
from evalkit.llm import LLMReranker
from evalkit.llm.cache import JudgmentCache, Key


@pytest.fixture
def server():
    with FaultServer() as srv:
        yield srv


def rerank(config):
    return LLMReranker(config).rerank("find the method", "seed", CANDIDATES, FIRST)


def logprob_body(logprob) -> bytes:
    """Answer "Passage A" whose label token has the given log-probability (any JSON value)."""
    steps = [("Passage", -0.1, []), (" A", logprob, [(" A", logprob), (" B", -2.0)])]
    return json.dumps(chat_completion("Passage A", steps)).encode()


POISON = {
    "nan": b'{"choices": [{"message": {"content": "Passage A"}, "logprobs": {"content": [{"token": " A", '
           b'"logprob": NaN, "top_logprobs": [{"token": " A", "logprob": NaN}]}]}}]}',
    "null": logprob_body(None),
    "missing": json.dumps({"choices": [{"message": {"content": "Passage A"}, "logprobs": {"content": [
        {"token": " A", "top_logprobs": [{"token": " A"}]}]}}]}).encode(),
    "out_of_range": logprob_body(3.5),
    "string": logprob_body("-0.2"),
    "token_not_string": json.dumps({"choices": [{"message": {"content": "Passage A"}, "logprobs": {"content": [
        {"token": 7, "logprob": -0.1}]}}]}).encode(),
    "logprobs_wrong_type": json.dumps({"choices": [{"message": {"content": "Passage A"},
                                                    "logprobs": {"content": "A"}}]}).encode(),
    "no_label": json.dumps({"choices": [{"message": {"content": "I cannot tell."}}]}).encode(),
}


@pytest.mark.parametrize("fault", POISON)
def test_a_poisoned_answer_is_never_cached_and_fails_in_one_line(server, tmp_path, fault):
    server.faults = [POISON[fault]] * 3  # every attempt of the first prompt: 1 + max_retries
    with pytest.raises(KitError) as failure:  # a generous timeout: a slow answer is not an attempt lost to it
        rerank(settings(server, tmp_path, timeout_s=60.0))
    assert "3 attempts" in str(failure.value) and "unparsed answer" in str(failure.value)
    assert "\n" not in str(failure.value)
    rows = sqlite3.connect(tmp_path / "judgments.sqlite").execute("SELECT p FROM judgments").fetchall()
    # nothing poisoned is stored; the first comparison's other order, asked after the three poisoned
    # attempts, may have got a healthy answer (stored as it should be) before the failure ended the run
    assert len(rows) <= 1 and all(isinstance(p, float) and 0.0 <= p <= 1.0 for (p,) in rows)
    healthy = LLMReranker(settings(server, tmp_path))  # the next run, against a healthy server, works
    assert ranked(healthy.rerank("find the method", "seed", CANDIDATES, FIRST))[:2] == ["01", "04"]


@pytest.mark.parametrize("fault", ["nan", "no_label"])
def test_a_poisoned_answer_is_retried_and_counted(server, tmp_path, fault):
    server.faults = [POISON[fault]] * 2
    reranker = LLMReranker(settings(server, tmp_path, timeout_s=60.0))
    reranker.rerank("find the method", "seed", CANDIDATES, FIRST)
    stats = reranker.accounting()
    assert stats["unparsed"] == 2 and stats["retries"] == 2
    assert stats["prompts_sent"] + stats["cache_hits"] == stats["judgments"]


def test_a_poisoned_row_of_an_older_cache_is_asked_again(server, tmp_path):
    clean = rerank(settings(server, tmp_path / "clean"))
    rerank(settings(server, tmp_path))
    db = sqlite3.connect(tmp_path / "judgments.sqlite")
    with db:
        db.execute("UPDATE judgments SET p = NULL WHERE rowid IN (SELECT rowid FROM judgments LIMIT 3)")
    sent = server.requests
    reranker = LLMReranker(settings(server, tmp_path))
    assert reranker.rerank("find the method", "seed", CANDIDATES, FIRST) == clean
    assert server.requests - sent == 3 and reranker.accounting()["prompts_sent"] == 3
    assert db.execute("SELECT count(*) FROM judgments WHERE p IS NULL").fetchone()[0] == 0


def _flip_exponent_bit(p: float) -> float:
    """p with the lowest bit of its float64 exponent flipped (p * 2 or p / 2: still a probability
    for p < 0.5, so only a checksum tells it from a stored answer)."""
    (bits,) = struct.unpack("<Q", struct.pack("<d", p))
    return struct.unpack("<d", struct.pack("<Q", bits ^ (1 << 52)))[0]


@pytest.mark.parametrize("damage", ["exponent-bit", "swapped", "null-checksum"])
def test_a_changed_judgment_row_is_asked_again(server, tmp_path, damage, capsys):
    """Each row's checksum is bound to its key and p: one flipped exponent bit, two rows' (p,
    checksum) exchanged or a NULL checksum fail closed."""
    clean = rerank(settings(server, tmp_path / "clean"))
    rerank(settings(server, tmp_path))
    db = sqlite3.connect(tmp_path / "judgments.sqlite")
    rows = db.execute("SELECT key, p FROM judgments ORDER BY key").fetchall()
    with db:
        if damage == "exponent-bit":
            changed = [(key, _flip_exponent_bit(p)) for key, p in rows if 0 < p < 0.5][:2]
            db.executemany("UPDATE judgments SET p = ? WHERE key = ?", [(p, key) for key, p in changed])
        elif damage == "swapped":
            rows = db.execute("SELECT key, p, checksum FROM judgments ORDER BY key").fetchall()
            (a, pa, ca), (b, pb, cb) = next((x, y) for x in rows for y in rows if x[1] != y[1])
            db.executemany("UPDATE judgments SET p = ?, checksum = ? WHERE key = ?", [(pb, cb, a), (pa, ca, b)])
            changed = [a, b]
        else:
            changed = [rows[0][0]]
            db.execute("UPDATE judgments SET checksum = NULL WHERE key = ?", changed)
    db.close()
    assert changed
    capsys.readouterr()
    sent = server.requests
    reranker = LLMReranker(settings(server, tmp_path))
    assert reranker.rerank("find the method", "seed", CANDIDATES, FIRST) == clean
    assert server.requests - sent == len(changed) == reranker.accounting()["prompts_sent"]
    assert capsys.readouterr().err.count("stored judgments fail their checksum") == 1
    again = LLMReranker(settings(server, tmp_path))
    assert again.rerank("find the method", "seed", CANDIDATES, FIRST) == clean  # rewritten with checksums
    assert again.accounting()["prompts_sent"] == 0


def test_a_judgments_table_without_checksums_is_one_line(tmp_path):
    """No release wrote a judgments table without the checksum column: refused, never migrated."""
    path = tmp_path / "j.sqlite"
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE judgments (key TEXT PRIMARY KEY, p REAL)")
    db.close()
    with pytest.raises(KitError) as info:
        JudgmentCache(path)
    assert str(info.value) == (f"{path}: not a judgment cache of this kit (its judgments table has no model "
                               "column); delete j.sqlite to rebuild it (the judgments are then asked again)")


def test_every_stored_probability_reads_back_under_its_checksum(tmp_path, capsys):
    """0, 1 (whole values SQLite may store as integers) and -0.0 (read back as 0.0) check on read."""
    cache = JudgmentCache(tmp_path / "j.sqlite")
    probabilities = [0, 1, 1.0, -0.0, 0.5, 1e-300]
    values = {Key("m", "r", "", "t", "s", "i", f"d{i}", "", "x"): p for i, p in enumerate(probabilities)}
    cache.put(values)
    assert JudgmentCache(tmp_path / "j.sqlite").get(list(values)) == values
    assert "fail their checksum" not in capsys.readouterr().err


def test_the_judgment_checksum_covers_the_key(tmp_path):
    cache = JudgmentCache(tmp_path / "j.sqlite")
    one, other = Key("m", "r", "", "t", "s", "i", "a", "b", "x"), Key("m", "r", "", "t", "s", "i", "b", "a", "x")
    cache.put({one: 0.25, other: 0.75})
    with cache.db:  # other's key column now names one's row: p and checksum are one's
        cache.db.execute("DELETE FROM judgments WHERE key = ?", (other.digest,))
        cache.db.execute("UPDATE judgments SET key = ? WHERE key = ?", (other.digest, one.digest))
    assert cache.get([one, other]) == {}


@pytest.mark.parametrize("body", [
    b'{"choices": "Passage A"}',
    b'{"choices": [{"message": {"content": 5}}]}',
    b'{"choices": [{"message": "Passage A"}]}',
    b'[1, 2]',
    b'{"choices": [{"message": {"content": "Passage A"}}], "usage": {"prompt_tokens": "many"}}',
])
def test_bodies_with_fields_of_the_wrong_type(server, tmp_path, body):
    server.faults = [body] * 3
    if b"usage" in body:  # a label in the text, tokens not a number: judged, tokens estimated
        reranker = LLMReranker(settings(server, tmp_path))
        reranker.rerank("find the method", "seed", CANDIDATES, FIRST)
        assert reranker.accounting()["prompt_tokens"] > 0
        return
    with pytest.raises(KitError, match=r"no judgment after 3 attempts \(last: malformed body") as failure:
        rerank(settings(server, tmp_path))
    assert "\n" not in str(failure.value)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupted_cache_file_names_the_file_and_the_fix(server, tmp_path, damage):
    config = settings(server, tmp_path, k=3, depth=5)
    rerank(config)
    cache = JudgmentCache(tmp_path / "judgments.sqlite")
    with cache.db:
        cache.db.executemany("INSERT INTO judgments VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                             [(f"pad{i}", *("x" * 200,) * 9, 0.5, "x") for i in range(2000)])
    cache.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cache.close()
    path = tmp_path / "judgments.sqlite"
    data = path.read_bytes()
    path.write_bytes(b"not a database " * 500 if damage == "garbage" else data[:len(data) // 2])
    with pytest.raises(KitError, match=r"judgments\.sqlite: judgment cache unusable .*delete it") as failure:
        rerank(config)
    assert "\n" not in str(failure.value)
    for leftover in tmp_path.glob("judgments.sqlite*"):
        leftover.unlink()
    rerank(config)  # rebuilt as the message says


def test_a_read_only_cache_fails_in_one_line(server, tmp_path):
    config = settings(server, tmp_path)
    reranker = LLMReranker(config)
    path = tmp_path / "judgments.sqlite"
    reranker.judge.cache.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    with pytest.raises(KitError, match=r"judgments\.sqlite: judgment cache unusable \(attempt to write a readonly "
                                       r"database\); make the folder writable"):
        reranker.rerank("find the method", "seed", CANDIDATES, FIRST)


def test_a_full_disk_fails_in_one_line(server, tmp_path):
    reranker = LLMReranker(settings(server, tmp_path, k=4, depth=5))
    db = reranker.judge.cache.db
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count = {pages}")  # no room for one more page
    with pytest.raises(KitError, match=r"judgment cache unusable \(database or disk is full\); free disk space"):
        reranker.rerank_many([("find the method", f"seed {'long ' * 500}{i}", CANDIDATES, FIRST) for i in range(30)])


def test_an_unopenable_cache_folder_fails_in_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(KitError, match=r"judgment cache unusable"):
        JudgmentCache(blocker / "judgments.sqlite")  # its folder is a file


def test_timeout_bounds_the_whole_request_against_a_trickling_server(server, tmp_path):
    server.faults = ["trickle"]
    config = settings(server, tmp_path, timeout_s=0.5, max_retries=0)
    start = time.perf_counter()
    with pytest.raises(KitError, match=r"no judgment after 1 attempts \(last: no answer within timeout_s=0\.5 s\)"):
        rerank(config)
    assert time.perf_counter() - start < 1.5  # the body alone would take over 20 s


def test_a_trickled_answer_is_retried_within_the_budget(server, tmp_path):
    server.faults = ["trickle"]
    reranker = LLMReranker(settings(server, tmp_path, timeout_s=0.5, max_retries=1))
    start = time.perf_counter()
    reranker.rerank("find the method", "seed", CANDIDATES, FIRST)
    assert time.perf_counter() - start < 3 and reranker.accounting()["retries"] == 1


def test_a_refused_connection_is_transient(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once closed
    config = {"backend": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "max_retries": 1,
              "backoff_s": 0.0, "cache": tmp_path / "j.sqlite"}
    with pytest.raises(KitError, match=r"2 attempts \(last: no answer \(ConnectionRefusedError"):
        rerank(config)


def test_the_cache_refuses_invalid_probabilities(tmp_path):
    cache = JudgmentCache(tmp_path / "j.sqlite")
    key = Key("m", "r", "", "t", "s", "i", "a", "b", "x")
    for bad in (float("nan"), None, 1.5, -0.1, "0.5", True):
        with pytest.raises(KitError, match="refusing to cache"):
            cache.put({key: bad})
    assert cache.get([key]) == {}


# --- bounded reads: a body without end, a huge Content-Length ------------------------------------------


class Unbounded(Loopback):
    """`endless`: a 200 answer whose body never ends; else a Content-Length of 6 GB and a short body."""

    def __init__(self, endless: bool):
        super().__init__()
        self.endless = endless

    def respond(self, payload, headers):
        if self.endless:
            def body():
                while True:
                    yield b" " * (1 << 16)
            return 200, body()
        return 200, [b"{}"], {"Content-Length": str(6 << 30)}


@pytest.mark.parametrize("endless", [True, False], ids=["body-without-end", "6GB-content-length"])
def test_an_unbounded_answer_is_one_line_not_a_memory_error(tmp_path, endless):
    import resource

    with Unbounded(endless) as srv:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.monotonic()
        with pytest.raises(KitError, match="bytes") as caught:
            rerank(settings(srv, tmp_path, timeout_s=30.0, max_retries=0))
        assert time.monotonic() - started < 20 and "\n" not in str(caught.value) and srv.url in str(caught.value)
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # kB: far below 6 GB
