"""A researcher's edits touch only the notebook: each edit below is applied to a copy of a study
notebook as a researcher would make it (a changed or an added cell), run under papermill on the
smoke seeds beside the smoke study (its stored runs reused), and its output checked. An edited
notebook is a different study: its outputs carry ``-edited-HASH`` and say so, and the kit's
outputs of the same parameters are left as they were; make's tag says so too."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from notebook_run import ROOT, TAG, execute

from evalkit.make import launch
from evalkit.study import edited

MEASURE = "nDCG_csfcube@20"


def edit(name: str, folder: Path, change) -> Path:
    """A copy of notebooks/NAME.ipynb under `folder` with `change(cells)` applied to its cell list."""
    notebook = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    change(notebook.cells)
    path = folder / "notebooks" / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def cell_with(cells, text: str) -> int:
    return next(i for i, c in enumerate(cells) if c.cell_type == "code" and text in c.source)


def tables_now(workspace: Path) -> set[Path]:
    return set((workspace / "build" / "tables").glob("*.csv"))


def edited_table(workspace: Path, stem: str, before: set[Path]) -> tuple[pd.DataFrame, str]:
    """The one table `stem`-TAG-edited-*.csv the edited run wrote (not among `before`), and its tag."""
    found = sorted(p for p in tables_now(workspace) - before if p.name.startswith(f"{stem}-{TAG}{edited.MARK}"))
    assert len(found) == 1, found
    return pd.read_csv(found[0]), found[0].stem[len(stem) + 1:]


@pytest.fixture
def kit_outputs(workspace):
    """The bytes of the kit's smoke outputs, checked unchanged after each edited run."""
    paths = sorted(p for p in (workspace / "build" / "tables").iterdir() if edited.MARK not in p.name)
    before = {p: p.read_bytes() for p in paths}
    yield
    assert {p: p.read_bytes() for p in paths} == before


def test_a_map_column_in_the_relevance_table(workspace, tmp_path, kit_outputs):
    def change(cells):
        i = cell_with(cells, "steps.per_query(runs")
        cells[i].source = cells[i].source.replace("[study.measure]", '[study.measure, "MAP_csfcube"]')
        j = cell_with(cells, "tables.relevance_table(")
        cells[j].source = cells[j].source.replace(
            "figures.save_table(", 'maps = aggregated.query("measure == \'MAP_csfcube\'").set_index("label")["all"]\n'
            'relevance["MAP"] = relevance.label.map(maps)\nfigures.save_table(', 1)

    before = tables_now(workspace)
    execute("relevance", workspace, out="edit-map", source=edit("relevance", tmp_path, change))
    table, tag = edited_table(workspace, "relevance", before)
    kit = table[table.source == "kit"].set_index("model")
    assert kit["MAP"].notna().all() and (kit["MAP"] > 0).all()
    original = pd.read_csv(workspace / "build" / "tables" / f"relevance-{TAG}.csv").set_index("label")
    assert (table.set_index("label").loc[original.index, "all"].dropna()
            == original["all"].dropna()).all()  # the edit adds a column, nothing else moves
    # the provenance says so: the figures' captions (named by the code run up to them, each edit included)
    captions = [p.read_text() for p in (workspace / "figures").glob(f"relevance-{TAG}{edited.MARK}*.caption.txt")]
    assert captions and all("an edited study" in c and edited.MARK in c for c in captions)
    assert tag.startswith(f"{TAG}{edited.MARK}")


def test_the_method_facet_alone(workspace, tmp_path, kit_outputs):
    def change(cells):
        i = cell_with(cells, "steps.per_query(runs")
        cells.insert(i + 1, nbformat.v4.new_code_cell('values = values[values.facet == "method"]\nvalues.head()'))

    before = tables_now(workspace)
    execute("relevance", workspace, out="edit-method", source=edit("relevance", tmp_path, change))
    table, _ = edited_table(workspace, "relevance", before)
    original = pd.read_csv(workspace / "build" / "tables" / f"relevance-{TAG}.csv")
    kit, before = (t[t.source == "kit"].set_index("label") for t in (table, original))
    assert kit["background"].isna().all() and kit["result"].isna().all()
    assert (kit["method"] == before["method"]).all()


def test_a_per_query_difference_plot_shows_in_the_notebook(workspace, tmp_path, kit_outputs):
    def change(cells):
        cells.append(nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\n"
            'wide = values.pivot_table(index="qid", columns="model", values=study.measure)\n'
            "fig, ax = plt.subplots()\n"
            'ax.scatter(wide["bm25"], wide["minilm"] - wide["bm25"])\n'
            'ax.set_title("minilm - bm25, per query")\n'
            "plt.show()"))

    out = execute("relevance", workspace, out="edit-scatter", source=edit("relevance", tmp_path, change))
    last = nbformat.read(out, as_version=4).cells[-1]
    assert any("image/png" in o.get("data", {}) for o in last.outputs)  # inline, not swallowed by a backend


def test_an_instruction_variant_of_ones_own_beside_the_kits(workspace, tmp_path, kit_outputs):
    import yaml

    kit = yaml.safe_load((ROOT / "evalkit" / "config" / "instructions.yaml").read_text())
    for facet in kit:
        kit[facet]["terse"] = f"Papers with the same {facet}."
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(kit, sort_keys=False))
    tag = launch.tag_of({"PROFILE": "offline", "PROTOCOL": "pool", "SEEDS": "929877,3264891,1936997,11844559",
                         "INSTRUCTIONS": str(path)})
    execute("sensitivity", workspace, out="edit-variant", INSTRUCTIONS=str(path), TAG=tag)
    table = pd.read_csv(workspace / "build" / "tables" / f"sensitivity-{tag}.csv")
    assert list(table.variant)[-1] == "terse" and {"base", "generic", "aspect-subset"} <= set(table.variant)
    assert table["nDCG_csfcube@20"].notna().all()
    # the kit's variants (the same texts) are the kit's runs, reused: only terse ran under the file
    made = [p.name for p in (workspace / "runs" / "offline" / "csfcube" / "pool").iterdir() if "instructions" in p.name]
    assert made and all("terse" in name for name in made), made
    kit = pd.read_csv(workspace / "build" / "tables" / f"sensitivity-{TAG}.csv").set_index("variant")
    assert table.set_index("variant").loc["base", "nDCG_csfcube@20"] == kit.loc["Base", "nDCG_csfcube@20"]


def test_a_model_added_by_models_and_by_an_edited_cell(workspace, tmp_path, kit_outputs):
    def change(cells):
        i = cell_with(cells, "params.check(")
        cells.insert(i + 1, nbformat.v4.new_code_cell(
            "from evalkit import api\n\n"
            "def words(query, documents):\n"
            "    seen = set(query.text.lower().split())\n"
            "    return [len(seen & set(d.text.lower().split())) for d in documents]\n\n"
            'study = study.with_models([*study.models, api.register_model(words, "my-words", revision="1")])'))

    before = tables_now(workspace)
    execute("relevance", workspace, out="edit-model", source=edit("relevance", tmp_path, change), MODELS="bm25,minilm")
    table, _ = edited_table(workspace, "relevance", before)
    kit = table[table.source == "kit"].set_index("model")
    assert {"bm25", "minilm", "my-words", "human"} == set(kit.index) and kit.loc["my-words", "status"] == "ran"


def test_make_names_an_edited_study_apart(tmp_path):
    """make's tag (`python3 -m evalkit.study.tag`, the launcher's `tag_of`) from the notebook files:
    the kit's are plain, one edited adds -edited-HASH for every notebook of the build."""
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    argv = [sys.executable, "-m", "evalkit.study.tag", "PROFILE=offline", "PROTOCOL=pool"]

    def tag() -> str:
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=True,
                              env={"PYTHONPATH": str(ROOT)}).stdout.strip()

    assert tag() == "offline-pool" == launch.tag_of({}, tmp_path)
    path = tmp_path / "notebooks" / "summary.ipynb"
    notebook = json.loads(path.read_text())
    notebook["cells"][-1]["source"] = ["print('my own summary')"]
    path.write_text(json.dumps(notebook))
    assert tag().startswith("offline-pool-edited-") and tag() == launch.tag_of({}, tmp_path)
    assert edited.edited_notebooks(tmp_path / "notebooks").keys() == {"summary"}


def test_the_record_of_the_kits_notebooks_is_current():
    """`python3 -m evalkit.study.edited --record` after changing a kit notebook."""
    assert edited.edited_notebooks(ROOT / "notebooks") == {}
    assert set(edited.recorded()) == {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}


def test_parameters_cells_are_not_code_and_a_cell_run_twice_is_an_edit():
    assert edited.is_parameters('# Parameters\nPROFILE = "offline"\nK = 10\n')
    assert not edited.is_parameters("PROFILE = make()") and not edited.is_parameters("x = 1")
    kit = [c for c in edited.notebook_code(ROOT / "notebooks" / "relevance.ipynb")]
    assert edited.history_part("relevance", ["", 'PROFILE = "paper"', *kit[:2]]) == ""
    assert edited.history_part("relevance", ["", *kit[:2], kit[1]]).startswith(edited.MARK)
    assert edited.history_part("relevance", ["", kit[0] + "\nprint(1)"]).startswith(edited.MARK)
