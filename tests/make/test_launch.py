"""The launcher (evalkit.make.launch) keeps the kernel's machinery off the terminal (issue 38): the
TCP warning, "KeyboardInterrupt caught in kernel" after a run that succeeded and Jupyter's start-up
warnings are dropped; every other line the kernel writes (a real error) still reaches standard
error, and standard output holds only the executed notebook's path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from notebook_run import write_notebook

from evalkit.make import launch

ROOT = Path(__file__).resolve().parents[2]
CHATTER = ("[IPKernelApp] WARNING | Kernel is running over TCP without encryption. All communication (including "
           "code and outputs) is sent in plain text and is susceptible to eavesdropping.\n"
           "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel\n"
           "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.\n"
           "/venv/jupyter_client/connect.py:22: DeprecationWarning: Jupyter is migrating its paths to use standard "
           "platformdirs\n"
           "  from jupyter_core.paths import jupyter_data_dir, jupyter_runtime_dir, secure_write\n")
REAL = ("[IPKernelApp] ERROR | Exception in message handler:\n"
        "Traceback (most recent call last):\n"
        "zmq.error.ZMQError: Address already in use\n"
        "UserWarning: a real warning the researcher must see\n")


def test_the_filter_drops_the_kernels_chatter_and_passes_every_other_line(capfd):
    with launch.quiet_kernel():
        os.write(2, CHATTER.encode())
        os.write(2, REAL.encode())
        os.write(1, b"KeyboardInterrupt caught in kernel\n")
        os.write(2, b"no newline at the end")
    out, err = capfd.readouterr()
    assert out == "" and err == REAL + "no newline at the end"




def test_a_notebook_run_shows_no_kernel_chatter_and_keeps_real_errors(tmp_path):
    """A real kernel (it prints the TCP warning as it starts): its chatter is gone, the lines the
    notebook's kernel wrote to its standard error that are not chatter are there, and standard
    output is the executed notebook's path alone (make reads it)."""
    body = f"import os\nos.write(2, {CHATTER.encode()!r})\nos.write(2, {REAL.encode()!r})"
    write_notebook(tmp_path, "chatty", body)
    env = {**os.environ, "EVALKIT_PARAM_OUTPUT_DIR": str(tmp_path / "build"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", "import sys; from evalkit.make import launch; "
                           "sys.exit(launch.main(['chatty']))"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "TCP" not in done.stderr and "KeyboardInterrupt" not in done.stderr and "platformdirs" not in done.stderr
    assert REAL in done.stderr
    assert done.stdout.strip() == str(tmp_path / "build" / "notebooks" / "chatty-offline-pool.ipynb")


def test_a_full_disk_while_the_notebook_is_written_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys):
    import errno

    import papermill

    write_notebook(tmp_path, "full", "")
    written = tmp_path / "build" / "notebooks" / "full-offline-pool.tmp.ipynb"

    def full(source, out, **kwargs):
        Path(out).write_text("{")  # half a notebook
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out))

    monkeypatch.setattr(papermill, "execute_notebook", full)
    monkeypatch.setenv("EVALKIT_PARAM_OUTPUT_DIR", str(tmp_path / "build"))
    monkeypatch.chdir(tmp_path)
    assert launch.main(["full"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert errors == [f"evalkit: error: notebooks/full.ipynb: {written}: No space left on device; nothing complete "
                      "was written (free disk space or make OUTPUT_DIR writable)"]
    assert list(written.parent.iterdir()) == []
