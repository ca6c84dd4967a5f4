"""Progress bars: to the original stderr under EVALKIT_PROGRESS=terminal, off, or tqdm's default."""

from __future__ import annotations

import io
import os
import sys

import pytest

from evalkit.core import progress


def streams(monkeypatch) -> tuple[io.StringIO, io.StringIO]:
    """(terminal, notebook) installed as sys.__stderr__ and sys.stderr, as a papermill kernel has them
    (inside the test: pytest's capture sets sys.stderr again after fixtures are set up)."""
    terminal, notebook = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "__stderr__", terminal)
    monkeypatch.setattr(sys, "stderr", notebook)
    return terminal, notebook


def test_terminal_mode_writes_to_the_original_stderr_only(monkeypatch):
    terminal, notebook = streams(monkeypatch)
    monkeypatch.setenv(progress.ENV, "terminal")
    for _ in progress.bar(range(5), desc="encoding documents", unit="text"):
        pass
    progress.announce("running relevance (profile offline, protocol pool, models minilm)")
    assert "encoding documents" in terminal.getvalue() and "5/5" in terminal.getvalue()
    assert "running relevance" in terminal.getvalue()
    assert notebook.getvalue() == ""


def test_off_and_small_totals(monkeypatch):
    terminal, notebook = streams(monkeypatch)
    monkeypatch.setenv(progress.ENV, "off")
    with progress.bar(total=100, desc="x") as bar:
        bar.update(100)
    progress.announce("nothing")
    monkeypatch.setenv(progress.ENV, "terminal")
    with progress.bar(total=10, desc="tiny", min_total=64) as bar:
        bar.update(10)
    with progress.bar(total=10, desc="disabled", disable=True) as bar:
        bar.update(10)
    assert terminal.getvalue() == notebook.getvalue() == ""


def test_auto_mode_uses_current_stderr(monkeypatch):
    terminal, notebook = streams(monkeypatch)
    monkeypatch.delenv(progress.ENV, raising=False)
    assert progress.mode() == "auto"
    for _ in progress.bar([1, 2, 3], desc="scoring"):
        pass
    assert "scoring" in notebook.getvalue() and terminal.getvalue() == ""


def test_start_line_names_the_study_models(monkeypatch):
    terminal, _ = streams(monkeypatch)
    monkeypatch.setenv(progress.ENV, "terminal")
    progress.announce_notebook("hybrid", "offline", "pooled", "")
    progress.announce_notebook("relevance", "offline", "pool", "bm25,minilm")
    lines = terminal.getvalue().splitlines()
    assert lines[0] == "running hybrid (profile offline, protocol pooled, models minilm)"
    assert lines[1] == "running relevance (profile offline, protocol pool, models bm25,minilm)"


def test_encoding_bar_counts_texts(monkeypatch, tmp_path):
    import numpy as np

    from evalkit.retrieval.embeddings import CachedVectors

    terminal, notebook = streams(monkeypatch)
    monkeypatch.setenv(progress.ENV, "terminal")
    vectors = CachedVectors({"model": "fake"}, tmp_path)
    texts = [f"text {i}" for i in range(100)]
    vectors.stack(texts, str, lambda chunk: np.ones((len(chunk), 4), dtype=np.float32), "encoding documents")
    assert "encoding documents" in terminal.getvalue() and "100/100" in terminal.getvalue()
    assert notebook.getvalue() == ""


def test_llm_comparisons_bar_has_expected_total(monkeypatch):
    from evalkit.llm.prp import sliding_window
    from evalkit.llm.reranker import expected_comparisons

    assert expected_comparisons("prp", "sliding", 10, 1) == 9
    assert expected_comparisons("prp", "allpairs", 10, 3) == 45
    assert expected_comparisons("pw", "heapsort", 10, 3) == 10
    for n, k in [(10, 3), (50, 10), (200, 20)]:
        asked = []

        def judge(pairs, asked=asked):
            asked.extend(pairs)
            return [0.0] * len(pairs)

        sliding_window([str(i) for i in range(n)], judge, k)
        assert len(asked) == expected_comparisons("prp", "sliding", n, k)


@pytest.mark.parametrize("mode", ["terminal", "auto"])
def test_ipykernel_terminal_copy(monkeypatch, mode):
    """In an ipykernel, fd 2 is forwarded into the notebook: bars go to the kernel's copy of the terminal,
    under make (``terminal``) and under papermill run directly (unset: ``auto``) alike."""
    import os

    read, write = os.pipe()

    class KernelStream(io.StringIO):
        _original_stdstream_copy = write

    notebook = KernelStream()
    monkeypatch.setattr(sys, "stderr", notebook)
    monkeypatch.setenv(progress.ENV, mode)
    for _ in progress.bar(range(3), desc="encoding sentences", unit="text"):
        pass
    progress._fd_stream(write).close()  # the kit's dup of the terminal copy
    progress._fd_stream.cache_clear()
    os.close(write)
    seen = b""
    while chunk := os.read(read, 4096):
        seen += chunk
    os.close(read)
    assert b"encoding sentences" in seen and b"3/3" in seen and notebook.getvalue() == ""


def test_progress_off_silences_the_hugging_face_loading_bars():
    import subprocess

    code = ("import evalkit, transformers.utils.logging as t, huggingface_hub.utils as h; "
            "print(t.is_progress_bar_enabled(), h.are_progress_bars_disabled())")
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    off = subprocess.run([sys.executable, "-c", code], env={**env, "EVALKIT_PROGRESS": "off"}, capture_output=True,
                         text=True, check=True)
    on = subprocess.run([sys.executable, "-c", code], env={**env, "EVALKIT_PROGRESS": "auto"}, capture_output=True,
                        text=True, check=True)
    assert off.stdout.split() == ["False", "True"] and on.stdout.split() == ["True", "False"]


class Failing:
    """A stderr whose every write fails, as a closed descriptor or a vanished reader does."""

    def write(self, text):
        raise OSError(9, "Bad file descriptor")

    def flush(self):
        raise ValueError("I/O operation on closed file")

    def isatty(self):
        return False


def test_a_failing_stderr_never_ends_the_work(monkeypatch, capsys):
    for current in ("terminal", "auto"):
        monkeypatch.setenv(progress.ENV, current)
        monkeypatch.setattr(sys, "__stderr__", Failing())
        monkeypatch.setattr(sys, "stderr", Failing())
        assert sum(progress.bar(range(100), desc="scoring", mininterval=0)) == 4950
        progress.announce("running relevance")
    assert capsys.readouterr().out == ""


def test_no_stderr_at_all_drops_progress_and_writes_nothing_to_stdout(monkeypatch, capsys):
    """``2>&-``: Python starts without sys.stderr; a bar or line must go nowhere (not to stdout)."""
    for current in ("terminal", "auto"):
        monkeypatch.setenv(progress.ENV, current)
        monkeypatch.setattr(sys, "__stderr__", None)
        monkeypatch.setattr(sys, "stderr", None)
        assert sum(progress.bar(range(100), desc="scoring", mininterval=0)) == 4950
        progress.announce("running relevance")
    assert capsys.readouterr().out == ""


def test_a_log_gets_a_whole_line_at_least_every_30_s_however_rarely_the_loop_advances(monkeypatch):
    """46.7: a stage that updates its bar once, at its end (40 minutes of encoding), printed nothing to a
    log until it ended. On a stream that is not a terminal, a heartbeat redraws the bar every
    `HEARTBEAT_S` (30 s) of a fake clock, each redraw a whole line; many quick updates stay few lines."""
    import threading
    import time

    log, _ = streams(monkeypatch)  # a StringIO: not a terminal
    monkeypatch.setenv(progress.ENV, "terminal")
    waited: list[float] = []

    def fake_clock(stop: threading.Event, seconds: float) -> bool:
        """Each call lets `seconds` pass at once, four times (two minutes of a stalled stage), then waits for
        the bar to close."""
        waited.append(seconds)
        return stop.wait() if len(waited) > 4 else False

    monkeypatch.setattr(progress, "_wait", fake_clock)
    with progress.bar(total=3, desc="encoding documents", unit="text") as stalled:
        deadline = time.monotonic() + 30
        while len(waited) <= 4 and time.monotonic() < deadline:  # the loop does not advance meanwhile
            time.sleep(0.01)
        lines_while_stalled = log.getvalue().count("\n")
        stalled.update(3)
    assert waited[:4] == [30.0] * 4 == [progress.HEARTBEAT_S] * 4
    assert lines_while_stalled >= 1 + 4  # the opening line and one per 30 s of the fake clock
    assert all(line.startswith("encoding documents") for line in log.getvalue().splitlines())
    assert "\r" not in log.getvalue() and "3/3" in log.getvalue().splitlines()[-1]
    monkeypatch.setattr(progress, "_wait", lambda stop, seconds: stop.wait())  # no heartbeat within this loop
    busy, _ = streams(monkeypatch)
    for _ in progress.bar(range(10_000), desc="scoring"):
        pass
    assert 1 <= busy.getvalue().count("\n") <= 3  # at most a line per 30 s: the first, the last
