"""`evalkit run`'s standard output is the run's folder alone (issue 48 item 10): what anything prints
while the run is made (Ray's ``(raylet)`` lines after a worker died, which Ray writes to stdout)
goes to standard error, so ``$(evalkit run ...)`` reads the path."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from fixtures_datasets import write_beir

from evalkit import cli
from evalkit.pipeline import runner


def test_what_is_printed_while_the_run_is_made_goes_to_stderr(tmp_path, monkeypatch):
    obtain = runner.obtain

    def noisy(*args, **kwargs):
        print("(raylet) A worker died or was killed while executing a task by an unexpected system error.")
        return obtain(*args, **kwargs)

    monkeypatch.setattr(runner, "obtain", noisy)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert cli.main(["run", "--dataset", f"beir:{write_beir(tmp_path / 'scifix')}", "--model", "bm25",
                         "--runs-dir", str(tmp_path / "runs")]) == 0
    assert out.getvalue().splitlines() == [str(tmp_path / "runs" / "offline" / "scifix" / "pool" / "bm25")]
    assert Path(out.getvalue().strip()).is_dir() and "(raylet) A worker died" in err.getvalue()
