"""Driver runs for the Ray executor's tests (test_ray_*.py): a BEIR folder of distinct documents,
an encoder that holds one batch until a file exists, the run of it through the API (`drive`),
the same run as a driver process of its own (`start_driver`: SIGKILLed, or run beside another),
and the index's files. The Ray workers get this module's classes by value: a module that runs
`drive` on Ray registers it (``ray.cloudpickle.register_pickle_by_value``), as `DRIVER` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
from tiny_models import WORDS

import evalkit
from evalkit.data.collection import Document
from evalkit.models.dense import BiEncoder
from evalkit.retrieval.embeddings import Encoder

BATCH = 8  # documents per index batch in these tests
SEARCH_ROWS = 16  # index rows a Ray worker searches at once in these tests (the search too in shards)


def index_bytes(cache: Path) -> dict[str, bytes]:
    folders = [p for p in (cache / "indexes").glob("dense-*") if p.is_dir() and "." not in p.name]  # not .lock
    assert len(folders) == 1
    return {p.name: p.read_bytes() for p in sorted(folders[0].iterdir())}


def distinct_documents(n: int = 48) -> list[Document]:
    """`n` documents of distinct texts, none inside another (a text is a batch's by itself)."""
    rng = np.random.default_rng(11)
    texts: list[str] = []
    while len(texts) < n:
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(5, 12))))
        if not any(text in t or t in text for t in texts):
            texts.append(text)
    return [Document(f"d{i:03d}", "", t) for i, t in zip(rng.permutation(n), texts)]


HELD = slice(16, 24)  # the third batch of 8: a worker that gets it waits until RELEASE exists


class Held:
    """A sentence-transformers model that logs the process and each text it encodes, and waits on a
    batch holding a text of `held` until the file `release` exists (in the first run: until the
    process is killed), before it encodes (or logs) any of it."""

    def __init__(self, model, log: Path, held: frozenset, release: Path):
        self.model, self.log, self.held, self.release = model, log, held, release

    def encode(self, texts, **kwargs):
        with open(self.log.with_suffix(".pids"), "a") as fh:
            fh.write(f"{os.getpid()}\n")
        if self.held & set(texts):
            (self.log.parent / "held").write_text(str(os.getpid()))
            while not self.release.exists():
                time.sleep(0.05)
        with open(self.log, "a") as fh:
            fh.write("".join(f"{t}\n" for t in texts))
        return self.model.encode(texts, **kwargs)


class HeldEncoder(Encoder):
    """`Encoder` whose model is wrapped in `Held`."""

    def __init__(self, location: str, log: Path, release: Path):
        super().__init__(location)
        self.log, self.release = log, release
        self.held = frozenset(d.text for d in distinct_documents()[HELD])

    @property
    def model(self):
        return Held(super().model, self.log, self.held, self.release)


def beir_folder(folder: Path) -> Path:
    """`distinct_documents` as a BEIR folder, with 5 queries."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d.doc_id, "title": d.title, "text": d.text}) + "\n"
                                                 for d in distinct_documents()))
    queries = {f"q{j}": " ".join(WORDS[j::7][:3]) for j in range(5)}
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" +
                                               "".join(f"{q}\td000\t1\n" for q in queries))
    return folder


def drive(tiny: str, dataset: str, runs: str, log: str, release: str, executor: str = "ray",
          workers: int | str = 2) -> Path:
    """The run of `beir_folder` by `HeldEncoder` through the API (a driver process runs this, as
    the tests' own runs do); its run-store folder."""
    scorer = BiEncoder(HeldEncoder(tiny, Path(log), Path(release)), doc_template="{abstract}")
    found = evalkit.evaluate(scorer, f"beir:{dataset}", name="held", revision="1", runs_dir=runs, executor=executor,
                             workers=int(workers) if executor == "ray" else None)
    return found.runs["base"]


DRIVER = ("import sys, ray, ray_drivers as t; from evalkit.retrieval import ray_executor, vector_index; "
          f"ray.cloudpickle.register_pickle_by_value(t); vector_index.BATCH = {BATCH}; "
          f"ray_executor.SEARCH_ROWS = {SEARCH_ROWS}; print(t.drive(*sys.argv[1:]))")


def start_driver(args: list[str], folder: Path, address: str | None, name: str = "driver") -> subprocess.Popen:
    """A process running `drive(*args)` in `folder` (its output in ``folder/NAME.out``, its last
    line the run's folder), joined to the cluster at `address`, or starting its own local one
    (None: no RAY_ADDRESS)."""
    here = Path(__file__).parent
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join(map(str, (here.parent.parent, here.parent, here)))
    if address is not None:
        env["RAY_ADDRESS"] = address
    with open(folder / f"{name}.out", "w") as out:
        return subprocess.Popen([sys.executable, "-c", DRIVER, *args], cwd=folder, env=env, stdout=out,
                                stderr=subprocess.STDOUT)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def children() -> set[int]:
    """The process ids of this process's descendants (counted by the tests, apart from the kit's own count)."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


def all_ended(before: set[int], within: float = 60) -> None:
    """Wait until no descendant of this process is left beyond `before` (a cluster shut down), at most
    `within` seconds, else fail naming what is left."""
    deadline = time.monotonic() + within
    while left := children() - before:
        assert time.monotonic() < deadline, f"processes of the cluster left: {named(left)}"
        time.sleep(0.2)


def named(pids) -> list[str]:
    """The command lines of `pids` (those still there), for a failing assertion's message."""
    found = []
    for pid in pids:
        try:
            found.append(" ".join(psutil.Process(pid).cmdline())[:80])
        except psutil.Error:
            pass
    return sorted(found)
