"""CSFCube adapter: locate the release, verify it against the sha256 manifest, load it as a
`Collection` (and as raw records, with each annotator's grades, for the Human reference).

Source of the files, first match wins:
1. the folder named by the environment variable ``CSFCUBE_DIR``;
2. ``shared/data/csfcube`` beside the checkout or one of its parent folders, if it exists;
3. a user cache folder (``$EVALKIT_CACHE`` or ``~/.cache/evalkit``) filled by
   downloading the release from GitHub at the pinned commit.

Every file the kit reads is checked against ``manifests/csfcube.tsv``, whatever the source.

The scheme ``csfcube`` (`SCHEME`: ``--dataset csfcube``) loads it as a `Collection` (with the
paper's default table, `TABLE`, and the reader of the release's ranked files), exports it in
every format of `evalkit.datasets.export`, and loads its annotators' grades for the Human
reference (`load_annotated`). The release's
official ranking-file format (`read_official`, `load_official_run`, `write_official`,
`official_path`) is `evalkit.datasets.csfcube_official`.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import tempfile
import urllib.request
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.core.hashing import file_sha256
from evalkit.core.workspace import cache_env
from evalkit.data.collection import Collection, DefaultTable, Document, Fold, Sentence
from evalkit.data.collection import Query as CollectionQuery
from evalkit.datasets.csfcube_corpus import iter_corpus
from evalkit.datasets.csfcube_facets import FACETS, LABEL_TO_FACET
from evalkit.datasets.csfcube_official import load_official_run
from evalkit.datasets.csfcube_variants import VARIANTS, from_file, make_variant
from evalkit.datasets.export import FORMATS
from evalkit.datasets.scheme import NOTHING, FullCorpus, Scheme

COMMIT = "7ffe012c1d92c470f185fc086086caf5b8e05ef3"
UPSTREAM = f"https://raw.githubusercontent.com/iesl/CSFCube/{COMMIT}/"
MAX_FILE = 64 << 20  # bytes read at most for one file of the release (the largest is 0.5 MB)
MANIFEST = Path(__file__).resolve().parents[1] / "manifests" / "csfcube.tsv"
NEARBY_COPY = Path("shared") / "data" / "csfcube"  # looked for beside the checkout and its parents
RELEVANT_GRADE = 2  # binary relevance threshold of the official script
# The table `evalkit evaluate` prints without --measures (the paper's): nDCG@k with the release's
# discount by default, AP, RR, P@k, R@k and p-MRR; the headline measures follow it.
TABLE = DefaultTable(("{ndcg}@{k}", "AP", "RR", "P@{k}", "R@{k}", "p-MRR"), k=20, discount="csfcube")


@dataclass(frozen=True)
class Query:
    """One seed paper with one facet: the judged pool and its grades."""

    seed: str
    facet: str
    pool: tuple[str, ...]
    grades: dict[str, int]  # adjudicated grade 0-3 per pool candidate
    annotators: dict[str, dict[str, int]]  # e.g. {"ann2": {cand: grade}}, keys sorted

    @property
    def qid(self) -> str:
        return f"{self.seed}_{self.facet}"

    @cached_property
    def relevant(self) -> frozenset[str]:
        return frozenset(c for c, g in self.grades.items() if g >= RELEVANT_GRADE)


@dataclass(frozen=True)
class CSFCube:
    root: Path
    queries: dict[str, Query]  # by qid "{seed}_{facet}", in release order
    papers: dict[str, Document]
    folds: dict[str, dict[str, tuple[str, ...]]]  # facet or "all" -> fold name -> qids

    @cached_property
    def paired_seeds(self) -> dict[str, tuple[str, str]]:
        """Seeds annotated for two facets (the instruction-following pairs), facets in FACETS order."""
        by_seed: dict[str, list[str]] = {}
        for q in self.queries.values():
            by_seed.setdefault(q.seed, []).append(q.facet)
        return {s: tuple(sorted(f, key=FACETS.index)) for s, f in by_seed.items() if len(f) == 2}

    def qrels(self) -> dict[str, dict[str, int]]:
        return {qid: dict(q.grades) for qid, q in self.queries.items()}

    def fold_of(self, qid: str) -> str:
        """The official test fold ("fold1_test" or "fold2_test") holding a query."""
        for fold, qids in self.folds["all"].items():
            if fold.endswith("_test") and qid in qids:
                return fold
        raise DataError(f"query {qid}", "is in no test fold of evaluation_splits.json; check the data copy")


def _read_manifest() -> list[tuple[str, str, str]]:
    with open(MANIFEST, newline="") as fh:
        return [(r["sha256"], r["path"], r["upstream_path"]) for r in csv.DictReader(fh, delimiter="\t")]


def cache_dir() -> Path:
    base = cache_env() or Path.home() / ".cache" / "evalkit"  # EVALKIT_CACHE's one reader
    return base / f"csfcube-{COMMIT[:12]}"


def locate() -> Path:
    """The folder the data is read from (it may not be filled yet: see `fetch`)."""
    env = os.environ.get("CSFCUBE_DIR")
    if env:
        path = Path(env)
        if not path.is_dir():
            raise DataError(f"CSFCUBE_DIR={env}", "is not a directory; point it at a CSFCube copy or unset it")
        return path
    for folder in Path(__file__).resolve().parents[2:]:
        if (folder.parent / NEARBY_COPY).is_dir():
            return folder.parent / NEARBY_COPY
    return cache_dir()


def verify(root: Path) -> None:
    """Check every manifest file under root (present, with the pinned sha256) and every folder the
    kit reads by listing (readable_annotations/): a file there that the manifest does not list is an
    error, not a silent change of the paper texts."""
    if not root.is_dir():
        raise MissingPrerequisite(f"CSFCube data directory {root} does not exist",
                                  "run `evalkit data` (or `make data`)")
    manifest = _read_manifest()
    for digest, rel, _ in manifest:
        path = root / rel
        if not path.is_file():
            raise MissingPrerequisite(f"{path}: missing CSFCube file", "run `evalkit data` or fix CSFCUBE_DIR")
        if file_sha256(path) != digest:
            raise DataError(path, "sha256 mismatch with the pinned release; replace the file (`evalkit data`)")
    listed = {rel for _, rel, _ in manifest}
    for folder in sorted({str(Path(rel).parent) for rel in listed} - {"."}):
        extra = sorted(p for p in (root / folder).iterdir() if f"{folder}/{p.name}" not in listed)
        if extra:
            raise DataError(extra[0], f"not a file of the pinned CSFCube release ({len(extra)} unlisted in "
                            f"{root / folder}); remove it or use a clean copy (`evalkit data`)")


def fetch(root: Path | None = None) -> Path:
    """Make sure the data is present and verified; download missing files only into the cache folder."""
    root = root or locate()
    if root == cache_dir():
        for digest, rel, upstream in _read_manifest():
            target = root / rel
            if target.is_file() and file_sha256(target) == digest:
                continue
            _download(UPSTREAM + upstream, target, digest)
    verify(root)
    return root


def _download(url: str, target: Path, digest: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            body = resp.read(MAX_FILE + 1)  # a file of the release is at most a few MB
        if len(body) > MAX_FILE:
            raise OSError(f"more than {MAX_FILE} bytes")
    except OSError as exc:
        raise MissingPrerequisite(f"cannot download {url} ({exc})", "set CSFCUBE_DIR to a local copy") from None
    if hashlib.sha256(body).hexdigest() != digest:
        raise DataError(url, "downloaded bytes fail the sha256 check; retry or set CSFCUBE_DIR")
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
        tmp.write(body)
    os.replace(tmp.name, target)


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataError(path, f"malformed JSON ({exc.msg} at line {exc.lineno})") from None


def _load_queries(root: Path) -> dict[str, Query]:
    queries = {}
    for facet in FACETS:
        path = root / f"test-pid2anns-csfcube-{facet}.json"
        for seed, entry in _read_json(path).items():
            pool = tuple(entry["cands"])
            annotators = {
                key.removeprefix("relevance_"): dict(zip(pool, entry[key]))
                for key in sorted(entry)
                if re.fullmatch(r"relevance_ann\d+", key)
            }
            q = Query(seed, facet, pool, dict(zip(pool, entry["relevance_adju"])), annotators)
            queries[q.qid] = q
    return queries


_PAPER_HEAD = re.compile(r"paper_id: (\S+); YEAR: (\d+|None)")
_LABELLED = re.compile(r"(background|objective|method|result|other)_label: (.*)")


def _parse_readable(path: Path) -> list[Document]:
    """Papers of one readable_annotations file: blocks separated by lines of '='."""
    papers = []
    blocks = re.split(r"^=+\n", path.read_text(encoding="utf-8"), flags=re.M)
    for block in blocks:
        head = _PAPER_HEAD.search(block)
        if not head:
            continue
        title, sentences = None, []
        for line in block.splitlines():
            if line.startswith("TITLE: "):
                title = line[len("TITLE: "):].strip()
            line = line.removeprefix("ABSTRACT: ")
            match = _LABELLED.fullmatch(line)
            if match:
                sentences.append(Sentence(match.group(2).strip(), LABEL_TO_FACET[match.group(1)]))
        if title is None:
            raise DataError(path, f"paper {head.group(1)} has no TITLE line; the file is damaged")
        papers.append(Document(head.group(1), title, " ".join(s.text for s in sentences), tuple(sentences)))
    return papers


def _load_papers(root: Path) -> dict[str, Document]:
    """Papers of the manifest's readable_annotations files (never of other files in the folder)."""
    papers: dict[str, Document] = {}
    listed = sorted(rel for _, rel, _ in _read_manifest() if rel.startswith("readable_annotations/"))
    for path in (root / rel for rel in listed):
        for paper in _parse_readable(path):
            papers.setdefault(paper.doc_id, paper)
    return dict(sorted(papers.items(), key=lambda kv: int(kv[0])))


def load(root: Path | None = None) -> CSFCube:
    """Load and verify CSFCube from `root` (default: `locate()`)."""
    root = root or locate()
    verify(root)
    splits = _read_json(root / "evaluation_splits.json")
    folds = {facet: {name: tuple(qids) for name, qids in fs.items()} for facet, fs in splits.items()}
    return CSFCube(root, _load_queries(root), _load_papers(root), folds)


def checksum() -> str:
    """Identifies the data in run sidecars: the sha256 of the manifest every file is verified against."""
    return hashlib.sha256(MANIFEST.read_bytes()).hexdigest()


def to_collection(data: CSFCube) -> Collection:
    """CSFCube as a `Collection`: each query reranks its judged pool (seed excluded, and so not
    judged: `Collection.judged`), reports the study's and the release's official measures, is paired
    with its seed's other annotated facet for p-MRR (both ways), belongs to its facet's
    stratum, and the official two folds split the queries into dev and test halves; its default
    table is the paper's (`TABLE`) and a folder of the release's ranked files is read as a run
    (`csfcube_official.load_official_run`)."""

    queries = {qid: make_variant(CollectionQuery(qid, data.papers[q.seed].full_text, "", data.papers[q.seed], q.facet),
                                 "base")
               for qid, q in data.queries.items()}
    pairs = {}
    for seed, facets in data.paired_seeds.items():
        a, b = (f"{seed}_{f}" for f in facets)
        pairs[a], pairs[b] = b, a
    folds = {name: Fold(data.folds["all"][f"{name}_dev"], data.folds["all"][f"{name}_test"])
             for name in ("fold1", "fold2")}
    return Collection(
        name="csfcube",
        documents=data.papers,
        queries=queries,
        qrels=data.qrels(),
        relevance_level=RELEVANT_GRADE,
        checksum=checksum(),
        candidates={qid: q.pool for qid, q in data.queries.items()},
        pairs=pairs,
        folds=folds,
        strata={qid: q.facet for qid, q in data.queries.items()},
        exclude={qid: q.seed for qid, q in data.queries.items()},
        variants=VARIANTS,
        make_variant=make_variant,
        measures=("nDCG_csfcube@20", "p-MRR", "MAP_csfcube", "nDCG_csfcube%20"),
        table=TABLE,
        read_runs=load_official_run,
        instructions_from=from_file,
        read_corpus=iter_corpus,
        named_by_kit=True,  # the run store's folder csfcube (the study's stored runs)
    )


def load_collection(root: Path | None = None) -> Collection:
    """Load, verify and adapt CSFCube (`locate()` finds the folder unless `root` is given)."""
    return load_annotated(root)[0]


def annotators(data: CSFCube) -> dict[str, tuple[dict[str, int], ...]]:
    """Each query's annotators' grades over its pool, in annotator order (ann1, ann2): what the
    Human reference ranks by (`evalkit.study.human`)."""
    return {qid: tuple(q.annotators.values()) for qid, q in data.queries.items()}


def load_annotated(root: Path | None = None) -> tuple[Collection, dict[str, tuple[dict[str, int], ...]]]:
    """`load_collection` and the queries' `annotators` from one load (the scheme's `human`)."""
    data = load(root)
    collection = to_collection(data)
    collection.check()
    return collection, annotators(data)


def _downloaded_corpus() -> Path | None:
    """abstracts-preds.zip once `evalkit data --corpus` downloaded it, else None."""
    # lazy: the downloader (urllib, the figshare client) loads only when the full protocol asks for its file
    from evalkit.datasets import csfcube_download

    return csfcube_download.downloaded()


FULL_CORPUS = FullCorpus("abstracts-preds.zip", "figshare 14796339", "evalkit data --corpus", "make corpus",
                         _downloaded_corpus)

SCHEME = Scheme("csfcube", NOTHING, load_collection,
                help="CSFCube (Mysore et al., 2021), fetched and verified by the kit",
                hint="the kit fetches and verifies it", locate=locate, exports=tuple(FORMATS), human=load_annotated,
                full_corpus=FULL_CORPUS)
