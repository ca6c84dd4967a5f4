"""A collection's traits come from its own declaration, never from its name: the default table
shaped by a discount and k (`Collection.table`), a reader of its own ranked files
(`Collection.read_runs`), the export formats and the annotators' grades of the Human reference
(`Scheme.exports`, `Scheme.human`). A collection of a user's declares all four in its one module
and every command reads them as it reads CSFCube's; every registered scheme is checked by what
it declares."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

import evalkit.datasets as datasets
from evalkit import cli
from evalkit.core.errors import CLI, DeclarationError, KitError, RequestError
from evalkit.data.collection import Collection, DefaultTable, Document, Query
from evalkit.datasets import register
from evalkit.datasets.export import FORMATS
from evalkit.datasets.scheme import FOLDER, FullCorpus, Scheme
from evalkit.evaluation import evaluate as evaluation
from evalkit.evaluation.evaluate import DISCOUNTS, default_measures, default_shape
from evalkit.pipeline.run_input import load_any_run

ROOT = Path(__file__).resolve().parents[2]
GRADES = {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d1": 0, "d2": 1, "d3": 0}}
ANNOTATORS = {"q1": ({"d1": 2, "d2": 1, "d3": 0}, {"d1": 1, "d2": 0, "d3": 2}),
              "q2": ({"d1": 0, "d2": 2, "d3": 1}, {"d1": 1, "d2": 1, "d3": 0})}
TABLE = DefaultTable(("{ndcg}@{k}", "P@{k}", "AP"), k=2, discount="trec")


def read_ranked(folder: Path, name: str) -> dict:
    """The toy format's own ranked files: NAME.json holding {qid: [doc, ...]} best first."""
    ranked = json.loads((folder / f"{name}.json").read_text())
    return {qid: {doc: -float(rank) for rank, doc in enumerate(docs, start=1)} for qid, docs in ranked.items()}


def load_ranked(folder: Path) -> Collection:
    collection = Collection("ranked", {d: Document(d, "", d) for d in ("d1", "d2", "d3")},
                            {q: Query(q, f"text of {q}", "an instruction") for q in GRADES}, GRADES,
                            candidates={q: ("d1", "d2", "d3") for q in GRADES}, measures=("nDCG@10",),
                            table=TABLE, read_runs=read_ranked)
    collection.check()
    return collection


def load_annotated(folder: Path) -> tuple[Collection, dict]:
    return load_ranked(folder), ANNOTATORS


SCHEME = Scheme("ranked", FOLDER, load_ranked, argument="FOLDER", help="a folder of the traits test",
                hint="give any folder", exports=("trec",), human=load_annotated)


@pytest.fixture
def ranked(monkeypatch, tmp_path):
    """The toy scheme registered (the registry restored afterwards) and a folder for it."""
    monkeypatch.setattr(datasets.DECLARED, "items", datasets.DECLARED.items)
    register(SCHEME)
    folder = tmp_path / "ranked"
    folder.mkdir()
    (folder / "mine.json").write_text(json.dumps({"q1": ["d3", "d1", "d2"], "q2": ["d2", "d1", "d3"]}))
    return folder


def test_a_declared_default_table_is_shaped_by_discount_and_k(ranked):
    collection = load_ranked(ranked)
    assert default_measures(collection) == ["nDCG@2", "P@2", "AP", "nDCG@10"]
    assert default_measures(collection, "csfcube", 5) == ["nDCG_csfcube@5", "P@5", "AP", "nDCG@10"]
    assert default_shape(collection) == {"discount": "trec", "k": 2}
    with pytest.raises(RequestError, match="discount='log': choose csfcube or trec"):
        default_measures(collection, "log")


def test_without_a_table_discount_and_k_are_refused(ranked):
    plain = Collection("plain", {"d": Document("d", "", "x")}, {"q": Query("q", "x")}, {"q": {"d": 1}},
                       measures=("AP",))
    assert default_measures(plain) == ["AP"] and default_shape(plain) is None
    with pytest.raises(RequestError, match="k= shapes a default table; plain declares none"):
        default_measures(plain, k=10)


def test_the_cli_prints_a_declared_table_with_its_shape(ranked, tmp_path, capsys):
    trec = tmp_path / "run.trec"
    trec.write_text("q1 Q0 d1 1 2 x\nq1 Q0 d3 2 1 x\nq2 Q0 d2 1 2 x\n")
    assert cli.main(["evaluate", "--dataset", f"ranked:{ranked}", "--runs", str(trec), "--json", "--k", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [m for m in summary if m not in ("queries", "settings")] == ["nDCG@1", "P@1", "AP", "nDCG@10"]
    assert summary["settings"]["discount"] == "trec" and summary["settings"]["k"] == 1


def test_a_folder_of_the_collections_own_ranked_files_is_read_by_its_reader(ranked):
    collection = load_ranked(ranked)
    run, protocol = load_any_run(ranked, "mine", collection)
    assert run == read_ranked(ranked, "mine") and protocol is None
    plain = Collection("plain", collection.documents, collection.queries, collection.qrels)
    with pytest.raises(KitError, match="a folder without run.trec; give a TREC run file or a run-store folder"):
        load_any_run(ranked, "mine", plain)


def test_export_writes_a_scheme_that_declares_formats_and_only_those(ranked, tmp_path, capsys):
    assert cli.main(["export", "--dataset", f"ranked:{ranked}", "--format", "trec", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "qrels.txt").read_text().splitlines()[0] == "q1 0 d1 2"
    capsys.readouterr()
    assert cli.main(["export", "--dataset", f"ranked:{ranked}", "--format", "beir", str(tmp_path / "b")]) == 2
    assert "export writes ranked as trec, not beir" in capsys.readouterr().err


def test_the_human_reference_of_a_scheme_that_declares_annotators(ranked, capsys):
    assert cli.main(["human", "--dataset", f"ranked:{ranked}", "--json", "--measures", "RR"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # q1: annotator 1 ranks d1 (grade 2) first -> 1, annotator 2 ranks d3 (grade 1) first -> 1
    # q2: annotator 1 ranks d2 (grade 1) first -> 1; annotator 2 ties d1, d2 -> d1 (grade 0), d2 -> 1/2
    assert summary["RR"]["all"] == pytest.approx((1 + 0.75) / 2)


@pytest.mark.parametrize("scheme", datasets.schemes(), ids=lambda s: s.name)
def test_every_scheme_is_exported_and_annotated_as_it_declares(scheme, tmp_path, capsys):
    """The export help lists exactly the schemes declaring formats, the Human reference's refusal
    names exactly those declaring annotators; nothing lists a scheme by name."""
    assert set(scheme.exports) <= set(FORMATS)
    with pytest.raises(SystemExit):
        cli.main(["export", "--help"])
    listed = capsys.readouterr().out.split("datasets (--dataset SPEC):", 1)[1]
    assert (f"  {scheme.spec} " in listed) == bool(scheme.exports)
    having = [s.name for s in datasets.schemes() if s.human is not None]
    if scheme.human is None:
        with pytest.raises(RequestError, match=f"exists only for {' or '.join(having)} "):
            datasets.load_annotated(f"{scheme.name}:{tmp_path}")


@pytest.mark.parametrize("fields, problem", [
    (dict(measures=()), "give its measures"),
    (dict(k=0), "k 0 must be a positive whole number"),
    (dict(discount=""), "give its default discount"),
    (dict(measures=("nDCG@{cut}",)), "may hold only {k} and {ndcg}"),
])
def test_a_default_table_checks_its_declaration(fields, problem):
    with pytest.raises(DeclarationError, match=problem):
        DefaultTable(**{"measures": ("AP",), "k": 10, "discount": "trec", **fields})


def test_a_scheme_checks_its_traits():
    with pytest.raises(DeclarationError, match="exports"):
        Scheme("toy", FOLDER, load_ranked, argument="FOLDER", help="toy", exports=("csv",))
    with pytest.raises(DeclarationError, match="human 1 is not callable"):
        Scheme("toy", FOLDER, load_ranked, argument="FOLDER", help="toy", human=1)
    with pytest.raises(DeclarationError, match="full_corpus 'corpus.zip': give a FullCorpus"):
        Scheme("toy", FOLDER, load_ranked, argument="FOLDER", help="toy", full_corpus="corpus.zip")


@pytest.mark.parametrize("scheme", datasets.schemes(), ids=lambda s: s.name)
def test_every_scheme_s_full_corpus_is_found_or_refused_as_it_declares(scheme, monkeypatch, tmp_path):
    """The full protocol's corpus file by the one rule (`datasets.full_corpus`): a given file is
    taken as given; else the file the scheme declares once downloaded; else the one line of its
    declaration (what to download, how), or for a scheme that declares none, that a file is needed."""
    spec = scheme.name if not scheme.argument else f"{scheme.name}:{tmp_path}"
    assert datasets.full_corpus(spec, "given.zip") == "given.zip"
    declared = scheme.full_corpus
    if declared is not None:
        def downloaded(found):
            corpus = dataclasses.replace(declared, downloaded=lambda: found)
            changed = dataclasses.replace(scheme, full_corpus=corpus)
            monkeypatch.setattr(datasets.DECLARED, "items", {**datasets.DECLARED.items, scheme.name: changed})

        downloaded(tmp_path / "f.zip")
        assert datasets.full_corpus(spec) == str(tmp_path / "f.zip")
        downloaded(None)
    with pytest.raises(RequestError) as raised:
        datasets.full_corpus(spec)
    line = str(raised.value.for_front_end(CLI))
    assert line.startswith("--protocol full: needs --corpus, ") and "\n" not in line
    if declared is not None:
        assert declared.file in line and f"`{declared.command}`" in line and declared.target in line


def test_a_users_scheme_declares_its_full_corpus(ranked, tmp_path):
    """A collection added by the guide declares its corpus file, and the CLI's rule reads it, naming no scheme."""
    corpus = FullCorpus("docs.jsonl", "our lab's server", "fetch-docs", "make docs-corpus", lambda: None)
    register(dataclasses.replace(SCHEME, name="ranked2", full_corpus=corpus))  # `ranked` restores the registry
    with pytest.raises(RequestError, match=r"needs corpus=, docs.jsonl from our lab's server: download it with "
                                           r"`fetch-docs` \(make docs-corpus\)"):
        datasets.full_corpus(f"ranked2:{tmp_path}")


def test_the_kits_tables_parse_against_their_collections(collection):
    """A registered collection's declared table names measures that exist, under each discount."""
    for discount in DISCOUNTS:
        evaluation.check_measures(default_measures(collection, discount), collection)


@pytest.mark.parametrize("module", ["evalkit/evaluation/evaluate.py", "evalkit/cli/printing.py",
                                    "evalkit/pipeline/run_input.py", "evalkit/cli/export.py",
                                    "evalkit/cli/human.py", "evalkit/study/human.py", "evalkit/cli/options.py",
                                    "evalkit/pipeline/plan.py", "evalkit/pipeline/runner.py"])
def test_the_readers_of_the_traits_name_no_scheme(module):
    """These modules read a collection's traits from its declaration, never by its scheme's name
    (the discount names of `DISCOUNTS` are nDCG's, not collections'; the export formats, named
    as the formats' schemes, are not checked here)."""
    tree = ast.parse((ROOT / module).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["DISCOUNTS"]:
            node.value = ast.Constant(None)
    names = {s.name for s in datasets.schemes()}
    literals = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in names}
    assert not literals, f"{module} names schemes {sorted(literals)}"
