"""Shared fixtures: the verified CSFCube copy and its collection, the sample SPECTER run, writable
copies of the data, the CLI reading that collection, and the runs the runner made."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from evalkit import api, cli
from evalkit.data import runs
from evalkit.data.collection import Collection
from evalkit.datasets import csfcube, csfcube_official, load_dataset
from evalkit.pipeline import runner


def manifest_paths() -> list[str]:
    """Relative paths of every file the kit verifies."""
    return [rel for _, rel, _ in csfcube._read_manifest()]


def copy_release(source: Path, dest: Path) -> Path:
    """Copy only the manifest files of a CSFCube folder (about 10 MB) into dest."""
    for rel in manifest_paths():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, target)
    return dest


def write_manifest(path: Path, root: Path) -> Path:
    """A manifest in the kit's format whose digests match the files now under root."""
    rows = ["sha256\tpath\tupstream_path"]
    for _, rel, upstream in csfcube._read_manifest():
        rows.append(f"{hashlib.sha256((root / rel).read_bytes()).hexdigest()}\t{rel}\t{upstream}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="session")
def data() -> csfcube.CSFCube:
    return csfcube.load()


@pytest.fixture(scope="session")
def collection(data) -> Collection:
    return csfcube.to_collection(data)


@pytest.fixture(scope="session")
def sample_dir(data) -> Path:
    return data.root / "sample_ranked_pools"


@pytest.fixture(scope="session")
def specter(sample_dir) -> runs.Run:
    return csfcube_official.load_official_run(sample_dir, "specter")


@pytest.fixture
def specter_copy(specter) -> runs.Run:
    """A deep copy tests may alter."""
    return {qid: dict(scores) for qid, scores in specter.items()}


@pytest.fixture
def data_copy(data, tmp_path) -> Path:
    """A writable copy of the verified release, for damaging one file."""
    return copy_release(data.root, tmp_path / "csfcube")


@pytest.fixture
def sample_copy(sample_dir, tmp_path) -> Path:
    """A writable copy of the three official SPECTER ranking files."""
    dest = tmp_path / "runs"
    dest.mkdir()
    for path in sample_dir.glob("*.json"):
        shutil.copyfile(path, dest / path.name)
    return dest


@pytest.fixture
def rewrite_manifest(monkeypatch, tmp_path):
    """Point the kit at a manifest matching the files under a root (to get past the sha256 check)."""

    def rewrite(root: Path) -> Path:
        path = write_manifest(tmp_path / "manifest.tsv", root)
        monkeypatch.setattr(csfcube, "MANIFEST", path)
        return path

    return rewrite


@pytest.fixture(autouse=True)
def hub_reachable(monkeypatch):
    """The tests run offline: the Hugging Face hub counts as reachable unless a test says otherwise
    (`evalkit.pipeline.prerequisites._hub_unreachable`), so each row is judged on what the test sets up."""
    from evalkit.pipeline import prerequisites

    monkeypatch.setattr(prerequisites, "_hub_unreachable", lambda: False)


@pytest.fixture
def cached_data(collection, monkeypatch):
    """The CLI reads CSFCube as the session's collection: tests about output skip re-verifying and
    re-parsing the release (the CLI's first test does it for real); other datasets load as usual."""
    # each module that reads a command's --dataset (`evalkit run` and `evaluate` through the API)
    for command in (api, cli.export, cli.verify):
        monkeypatch.setattr(command, "load_dataset",
                            lambda spec: collection if spec == "csfcube" else load_dataset(spec))


@pytest.fixture
def executed(monkeypatch):
    """The run names the runner made (not answered from the store) in this test."""
    made: list[str] = []
    compute = runner.compute

    def counting(bound):
        made.append(bound.settings.run_name)
        return compute(bound)

    monkeypatch.setattr(runner, "compute", counting)
    return made


@pytest.fixture
def executions(monkeypatch):
    """The runs actually computed (not reused), counted at `runner.compute` (each a `BoundRun`)."""
    calls = []
    real = runner.compute

    def counting(bound):
        calls.append(bound)
        return real(bound)

    monkeypatch.setattr(runner, "compute", counting)
    return calls
