"""Every benchmark under bench/ still starts: its imports resolve and `--help` exits 0.

Benchmarks run by hand, so nothing else notices when a refactor moves a function they
import (bench_llm.py imported a removed `evalkit.data.runs.load_run` unnoticed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = sorted((Path(__file__).resolve().parents[2] / "bench").glob("bench_*.py"))


def test_there_are_benchmarks():
    assert len(BENCH) >= 4


@pytest.mark.parametrize("script", BENCH, ids=[p.name for p in BENCH])
def test_benchmark_starts(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120,
                          cwd=script.parents[1])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
