"""The environment variables the kit reads, each by one reader: a bad value is one line naming the
variable and the fix. ``EVALKIT_PARAM_TAG`` (make never sets it) cannot rename a study's outputs,
``EVALKIT_LOCK_WAIT_S`` must be a positive number of seconds, ``EVALKIT_CACHE`` must be a folder."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from evalkit.core.errors import KitError
from evalkit.make import launch


def _echo(root: Path) -> Path:
    """notebooks/echo.ipynb declaring OUTPUT_DIR and TAG, as the study notebooks do."""
    cell = nbformat.v4.new_code_cell('OUTPUT_DIR = "build"\nTAG = ""')
    cell.metadata["tags"] = ["parameters"]
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [cell]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = root / "notebooks" / "echo.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(notebook, path)
    return path


@pytest.mark.parametrize("given_tag", ["evil-tag", "x/../..", "../../outside", "offline-pool-"])
def test_a_tag_from_the_environment_never_names_the_outputs(tmp_path, monkeypatch, given_tag):
    import papermill

    _echo(tmp_path)
    seen = {}

    def fake_execute(source, out, parameters, **kwargs):
        seen.update(parameters)
        Path(out).write_text("{}")

    monkeypatch.setattr(papermill, "execute_notebook", fake_execute)
    monkeypatch.setenv("EVALKIT_PARAM_TAG", given_tag)
    monkeypatch.setenv("EVALKIT_PARAM_OUTPUT_DIR", str(tmp_path / "build"))
    monkeypatch.setenv("EVALKIT_PARAM_PROFILE", "offline")
    with pytest.raises(KitError) as raised:
        launch.run("echo", launch.environment_parameters(), root=tmp_path)
    line = str(raised.value)
    assert "\n" not in line and line.startswith("EVALKIT_PARAM_TAG=") and "unset EVALKIT_PARAM_TAG" in line
    assert not seen and not list(tmp_path.rglob("*.ipynb*"))[1:]  # nothing ran; only the source notebook
    monkeypatch.setenv("EVALKIT_PARAM_TAG", "offline-pool")  # the parameters' own tag: as if not given
    out = launch.run("echo", launch.environment_parameters(), root=tmp_path)
    assert out.name == "echo-offline-pool.ipynb" and seen["TAG"] == "offline-pool"


@pytest.mark.parametrize("value", ["abc", "0", "-5", "nan", "inf", "1e400", " "])
def test_the_lock_wait_must_be_a_positive_number_of_seconds(tmp_path, monkeypatch, value):
    from evalkit.core import locks

    monkeypatch.setenv("EVALKIT_LOCK_WAIT_S", value)
    if not value.strip():  # blank: the default
        assert locks.lock_wait_s() == locks.LOCK_WAIT_S
        return
    for use in (lambda: locks.waiting(tmp_path / "x.sqlite", lambda: 1),  # no other process holds anything
                lambda: locks.exclusive(tmp_path / "x.lock", "index").__enter__()):
        with pytest.raises(KitError) as raised:
            use()
        assert str(raised.value).startswith(f"EVALKIT_LOCK_WAIT_S={value.strip()!r}: is not a positive number")


def test_a_good_lock_wait_is_read(monkeypatch):
    from evalkit.core import locks

    monkeypatch.setenv("EVALKIT_LOCK_WAIT_S", "2.5")
    assert locks.lock_wait_s() == 2.5 and locks.waiting(Path("x"), lambda: 7) == 7


@pytest.mark.parametrize("target", ["/dev/null", "file"])
def test_a_cache_that_is_not_a_folder_is_one_line_not_damage(tmp_path, monkeypatch, target):
    from evalkit.core.workspace import cache_root
    from evalkit.datasets import csfcube
    from evalkit.retrieval.embeddings import CachedVectors

    if target == "file":
        target = tmp_path / "cache-file"
        target.write_text("not a folder")
    monkeypatch.setenv("EVALKIT_CACHE", str(target))
    expected = f"EVALKIT_CACHE={target}: is not a directory; point it at a folder"
    for use in (cache_root, csfcube.cache_dir, lambda: CachedVectors({"model": "fake"})):
        with pytest.raises(KitError) as raised:
            use()
        assert str(raised.value).startswith(expected) and "damaged" not in str(raised.value)


def test_the_cache_variable_has_one_reader():
    """Only evalkit/core/workspace.py reads EVALKIT_CACHE (the CSFCube copy's cache folder too)."""
    root = Path(__file__).resolve().parents[2] / "evalkit"
    readers = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                     if "environ" in (text := p.read_text()) and ('"EVALKIT_CACHE"' in text or "CACHE_ENV" in text))
    assert readers == ["core/workspace.py"]
    lock_readers = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if "LOCK_WAIT_ENV" in p.read_text()
                          or '"EVALKIT_LOCK_WAIT_S"' in p.read_text())
    assert lock_readers == ["core/locks.py"]


def test_ctrl_c_during_a_notebook_is_one_line_and_status_130(tmp_path, monkeypatch, capsys):
    import papermill

    _echo(tmp_path)

    def interrupted(source, out, parameters, **kwargs):
        Path(out).write_text("{}")  # half-executed
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", interrupted)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVALKIT_PARAM_OUTPUT_DIR", str(tmp_path / "build"))
    monkeypatch.setenv("EVALKIT_PROGRESS", "off")  # no "running echo" line
    assert launch.main(["echo"]) == 130
    err = capsys.readouterr().err
    assert err == ("evalkit: error: notebooks/echo.ipynb interrupted; its temporary notebook was removed, nothing "
                   "complete was written\n")
    assert not list((tmp_path / "build").rglob("*.ipynb"))


@pytest.mark.parametrize("given_tag", ["x/../..", "a/b", "..", "a\\\\b", "evil tag"])
def test_a_notebooks_tag_parameter_must_be_a_plain_name_part(given_tag):
    """A notebook run by hand (JupyterLab, papermill) with TAG given: the one naming rule
    (`evalkit.core.names.is_plain`)."""
    from evalkit.study import params

    with pytest.raises(KitError) as raised:
        params.check("hybrid", PROFILE="offline", PROTOCOL="pool", TAG=given_tag)
    assert str(raised.value).startswith(f"TAG={given_tag!r}: is not a plain file-name part")


def test_make_s_executor_and_workers_reach_every_run_of_a_notebook(monkeypatch):
    """``make ... EXECUTOR=ray WORKERS=2`` (EVALKIT_EXECUTOR, EVALKIT_WORKERS): the runs' settings
    carry them; not the build tag (the numbers do not depend on them); a wrong value is one line
    naming the parameter as make spells it."""
    from evalkit.data.collection import Collection
    from evalkit.study import params

    monkeypatch.setenv("EVALKIT_EXECUTOR", "ray")
    monkeypatch.setenv("EVALKIT_WORKERS", "2")
    study = params.check("hybrid", PROFILE="offline", PROTOCOL="pool")
    settings = study.settings("bm25", Collection(name="c", documents={}, queries={}, qrels={}))
    assert (settings.executor, settings.workers) == ("ray", 2)
    monkeypatch.delenv("EVALKIT_EXECUTOR")
    monkeypatch.delenv("EVALKIT_WORKERS")
    assert study.tag == params.check("hybrid", PROFILE="offline", PROTOCOL="pool").tag
    for name, value, spelled in (("EVALKIT_EXECUTOR", "spark", "EXECUTOR=spark"), ("EVALKIT_WORKERS", "two",
                                                                                  "WORKERS=two")):
        monkeypatch.setenv("EVALKIT_EXECUTOR", "ray")
        monkeypatch.setenv(name, value)
        with pytest.raises(KitError) as raised:
            params.check("hybrid", PROFILE="offline", PROTOCOL="pool")
        assert str(raised.value).startswith(spelled) and "\n" not in str(raised.value)
