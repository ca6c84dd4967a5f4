"""The stand-in `vllm` executable of the kit-started server tests (tests/fake_vllm.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

FAKE = Path(__file__).resolve().parents[1] / "fake_vllm.py"


@pytest.fixture
def vllm(tmp_path, monkeypatch):
    """A `vllm` executable on PATH that runs the stand-in; returns where it writes its argv and pid."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {str(FAKE)!r}\n"
                   f"runpy.run_path({str(FAKE)!r}, run_name='__main__')\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EVALKIT_PROGRESS", "off")
    monkeypatch.setenv("FAKE_VLLM_ARGV", str(tmp_path / "argv.json"))
    monkeypatch.setenv("FAKE_VLLM_PIDFILE", str(tmp_path / "pid"))
    monkeypatch.setattr("evalkit.llm.vllm_server.visible_gpus", lambda: 2)
    return tmp_path
