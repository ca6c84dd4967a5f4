"""The command line under signals and a closed stderr: a Ctrl-C at any moment of start-up is one
line and status 130 (the console script catches it before the commands' modules load), and a run
whose stderr is closed (``2>&-``) finishes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What the console script `evalkit` runs (``from evalkit.cli import main; sys.exit(main())``). The
# Ctrl-C (SIGINT) comes from outside, as a terminal sends it, `delay` seconds after the interpreter
# reaches the script (it says so on stdout; earlier, Python's own start-up is interrupted, not the kit's).
# (A timer inside the process would not do: its SIGALRM handler is reset to the default at the
# interpreter's finalization, so a late alarm kills the process with -14, which no user sees.)
CONSOLE = """
import sys
print("started", flush=True)
from evalkit.cli import main
sys.argv = ["evalkit", *sys.argv[1:]]
sys.exit(main())
"""


def _console(delay: float, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALKIT_PROGRESS": "off"}
    args = [sys.executable, "-c", CONSOLE, *argv]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stdout.readline() == "started\n"
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)  # (does nothing when the process has already ended)
        out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def test_ctrl_c_during_start_up_is_one_line_and_status_130(tmp_path):
    run = tmp_path / "run.trec"
    run.write_text("q 0 d 1 1 x\n")
    interrupted = 0
    for delay in (0.05, 0.1, 0.2, 0.3, 0.4, 0.6):  # while the commands' modules (pandas, ...) load
        done = _console(delay, "evaluate", "--dataset", "csfcube", "--runs", str(run))
        assert "Traceback" not in done.stderr, (delay, done.stderr)
        if done.returncode == 130:  # (an interrupt just as the command printed its own line: both lines)
            assert done.stderr.endswith("evalkit: interrupted\n") and len(done.stderr.splitlines()) <= 2, \
                (delay, done.stderr)
            interrupted += 1
        else:  # finished before the interrupt came: its own one line
            assert done.returncode == 2 and done.stderr.startswith("evalkit: error: "), (delay, done.stderr)
    assert interrupted >= 3  # the start-up takes longer than the first delays


def test_a_run_with_stderr_closed_finishes_and_keeps_stdout_clean(tmp_path):
    """``evalkit run ... 2>&-`` with progress bars on: the run is written, nothing lands on stdout
    but the command's own output, and a bad input is still status 2."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVALKIT_PROGRESS": "terminal", "EVALKIT_CACHE": str(tmp_path)}
    argv = [sys.executable, "-m", "evalkit.cli", "run", "--model", "bm25", "--dataset", "csfcube", "--seeds",
            "929877", "--runs-dir", str(tmp_path / "runs")]
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, timeout=300, text=True,
                          preexec_fn=lambda: os.close(2))
    assert done.returncode == 0, done.stdout
    assert list((tmp_path / "runs").rglob("ranking.trec")) or list((tmp_path / "runs").rglob("*.trec"))
    bad = subprocess.run([*argv[:3], "evaluate", "--dataset", "csfcube", "--runs", str(tmp_path / "missing")],
                         stdout=subprocess.PIPE, env=env, timeout=300, text=True, preexec_fn=lambda: os.close(2))
    assert bad.returncode == 2 and bad.stdout == ""
