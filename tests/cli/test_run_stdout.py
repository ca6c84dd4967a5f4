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
    printed = out.getvalue().splitlines()  # the folder alone (a BEIR collection's folder: its name and a digest)
    assert len(printed) == 1 and Path(printed[0]).is_dir() and Path(printed[0]).parts[-4:-2] != ("offline", "")
    assert Path(printed[0]).relative_to(tmp_path / "runs").parts[0] == "offline" and printed[0].endswith("/pool/bm25")
    assert Path(out.getvalue().strip()).is_dir() and "(raylet) A worker died" in err.getvalue()
