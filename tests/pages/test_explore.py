"""The explore page (evalkit.pages.explore; its data and views: evalkit.pages.explore_views): the seed
with its facet sentences, the top k with each annotator's grade, the documents p-MRR scores with
their per-document terms (they average to the kit's p-MRR), per-query values beside the
collection's; static HTML headless, a picker in JupyterLab."""

from __future__ import annotations

import html
import math

import hostile_pages
import pytest

from evalkit.core.errors import EXPLORE, KitError, RequestError
from evalkit.evaluation.evaluate import PMRR, per_query, summarize
from evalkit.pages import explore, explore_views

SEED = "929877"  # annotated for background and method


@pytest.fixture(scope="module")
def explorer(data, collection):
    # two runs without a model: one facet-blind, one whose order depends on the facet (p-MRR != 0)
    blind = {q: {d.doc_id: float(int(d.doc_id) % 101) for d in collection.candidates_of(q)} for q in collection.queries}
    moving = {q: {d.doc_id: float((int(d.doc_id) * (1 + len(collection.queries[q].facet))) % 997)
                  for d in collection.candidates_of(q)} for q in collection.queries}
    return explore_views.Explorer(data, collection, {"blind": blind, "moving": moving}, {"blind": "Blind"})


def test_seed_view_highlights_sentences_by_facet(explorer, data):
    shown = explore.seed_view(explorer, SEED)
    assert data.papers[SEED].title.split()[0] in shown and "background, method" in shown
    assert shown.count("<span title=") == len(data.papers[SEED].sentences)


def test_top_k_has_titles_and_every_annotators_grade(explorer, data):
    qid = f"{SEED}_method"
    frame = explore_views.top_k(explorer, "moving", qid, k=7)
    assert list(frame["rank"]) == list(range(1, 8)) and frame.score.is_monotonic_decreasing
    assert set(data.queries[qid].annotators) <= set(frame.columns)
    first = frame.iloc[0]
    assert first.grade == data.queries[qid].grades[first.doc] and first.title == data.papers[first.doc].title


def test_movement_lists_the_documents_p_mrr_scores_and_averages_to_it(explorer, collection):
    for model in ("blind", "moving"):
        table = per_query(collection, explorer.runs[model], [])
        for qid in (f"{SEED}_background", f"{SEED}_method"):
            moved = explore_views.movement(explorer, model, qid)
            assert (moved.grade >= 2).all() and not (moved.grade_other >= 2).any()
            assert moved["p-MRR"].mean() == pytest.approx(100 * table.loc[qid, PMRR])  # x100 on the whole page
    assert explore_views.movement(explorer, "moving", f"{SEED}_background")["p-MRR"].abs().sum() > 0
    unpaired = next(q for q in collection.queries if q not in collection.pairs)
    assert explore_views.movement(explorer, "moving", unpaired).empty


def test_query_scores_sit_beside_the_collection_values(explorer, collection):
    scores = explore_views.query_scores(explorer, SEED)
    assert list(scores.facet) == ["background", "method"] * 2 and list(scores.model[:1]) == ["Blind"]
    summary = summarize(collection, per_query(collection, explorer.runs["moving"], ["nDCG_csfcube@20"]))
    row = scores.iloc[2]
    assert row["nDCG_csfcube@20 (all)"] == pytest.approx(100 * summary["nDCG_csfcube@20"]["all"])
    assert row["p-MRR (facet)"] == pytest.approx(100 * summary[PMRR]["background"])
    assert not math.isnan(row["p-MRR (query)"])


def test_render_is_static_and_identical_on_rerun(explorer, monkeypatch):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    page = explore.render(explorer, SEED, ["moving"], k=3)
    assert page == explore.render(explorer, SEED, ["moving"], k=3) and page.count("<table") == 1 + 2 + 2
    shown = explore.explore(explorer, SEED, k=3)
    assert not explore.interactive() and isinstance(shown, explore.Page)
    bundle = shown._repr_mimebundle_()
    assert bundle["text/html"] == explore.render(explorer, SEED, k=3)
    assert bundle[explore.SCOPE] == {"every_query": ["Blind", "moving"], "seed_only": []}


def test_picker_in_jupyterlab(explorer, monkeypatch):
    pytest.importorskip("ipywidgets")
    monkeypatch.setenv("JPY_SESSION_NAME", "explore.ipynb")
    assert explore.interactive()
    box = explore.explore(explorer, SEED, ["blind"], k=3)
    seeds, models, depth = box.children[0].children
    first = box.children[1].value
    seeds.value = next(s for s in explorer.seeds if s != SEED)
    assert box.children[1].value != first and seeds.value in box.children[1].value
    depth.value = 4
    assert box.children[1].value.count("<table") > 1


@pytest.mark.parametrize("seed,k,match", [("123", 5, "SEED: csfcube has no seed paper 123; .*its 34 seeds: "),
                                          (SEED, 0, "K=0: give a positive whole number"),
                                          (SEED, "x", "K=x: give a whole number")])
def test_bad_seed_or_k_is_one_line(explorer, seed, k, match):
    with pytest.raises(KitError, match=match):
        explore.render(explorer, seed, k=k)


def test_an_unknown_model_is_the_pages_one_line_spelled_as_its_parameter(explorer):
    """The unknown model is refused by the page's rule (`check_models`), worded by the page's
    wrapper as every other refusal of the page (MODELS, the explore front end's spelling)."""
    with pytest.raises(RequestError) as raised:
        explore.render(explorer, SEED, ["moving", "nosuch"], k=3)
    assert str(raised.value).startswith("MODELS: nosuch has no run here; choose among ")
    assert raised.value.front_end == EXPLORE and "\n" not in str(raised.value)


def test_an_unknown_seed_lists_every_valid_seed_in_one_line(explorer, data):
    with pytest.raises(KitError) as raised:
        explore.render(explorer, "123")
    message = str(raised.value)
    assert "\n" not in message and all(seed in message for seed in {q.seed for q in data.queries.values()})


def test_models_sit_side_by_side_with_aligned_rows(explorer):
    page = explore.render(explorer, SEED, ["blind", "moving"], k=4)
    top = explore.side_by_side(explorer, ["blind", "moving"], f"{SEED}_method", 4)
    assert top.count("<tr>") == 2 + 4 and top.count('colspan=') == 3  # one line per rank, a group per model
    assert '<th class="m" colspan=' in top and "Blind" in top and "moving" in top
    assert all(row.count('class="t') == 2 for row in top.split("<tr>")[3:])  # both models' titles on each line
    moved = explore.moved_side_by_side(explorer, ["blind", "moving"], f"{SEED}_background")
    assert moved.count("<tr>") == 2 + len(explore_views.movement(explorer, "blind", f"{SEED}_background"))
    assert page.count("<table") == 1 + 2 + 2 and "p-MRR (x100; the query's p-MRR: Blind 0.00" in page


def test_check_rejects_bad_parameters_before_loading():
    with pytest.raises(KitError, match="PROTOCOL=nope: choose one of"):
        explore.check(PROFILE="offline", PROTOCOL="nope", SEED=SEED, MODELS="bm25")
    with pytest.raises(KitError, match="one seed paper id"):
        explore.check(PROFILE="offline", PROTOCOL="pool", SEED="1,2", MODELS="bm25")
    chosen = explore.check(PROFILE="offline", PROTOCOL="pool", SEED=SEED, MODELS="bm25,minilm", K=5)
    assert chosen.models == ("bm25", "minilm") and chosen.k == 5 and chosen.measure == "nDCG_csfcube@20"


def test_the_explore_page_takes_your_instruction_file(tmp_path, monkeypatch):
    """INSTRUCTIONS reaches the explore page's runs (their names and sidecars carry the file) and
    its file name (the file's hash), as it reaches the sensitivity notebook and the API."""
    from fixtures_datasets import readme_instructions

    from evalkit.make import launch

    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    path = readme_instructions(tmp_path)
    chosen = explore.check(PROFILE="offline", PROTOCOL="pool", SEED="929877", MODELS="bm25",
                           RUNS_DIR=str(tmp_path / "runs"), INSTRUCTIONS=str(path))
    assert chosen.instructions == str(path) and "instructions" in chosen.describe()
    explorer = explore.load_checked(chosen)
    assert set(explorer.runs) == {"bm25"}
    folders = [p.parent.name for p in (tmp_path / "runs").rglob("run.trec")]
    assert folders and all("--instructions-" in name for name in folders)
    given = {"SEED": "929877", "MODELS": "bm25", "K": "10", "PROFILE": "offline", "PROTOCOL": "pool"}
    named = launch.explore_stem({**given, "INSTRUCTIONS": str(path)})
    assert named.startswith("explore-929877-bm25-k10-instructions-") and named != launch.explore_stem(given)


def test_one_seeds_page_reuses_stored_full_runs_and_marks_collection_values_it_lacks(
        tmp_path, monkeypatch, collection):
    """The static page (`every_query=False`) runs only the seed's queries of a model without a stored
    run over every query, leaves its collection columns empty and says `make relevance`; once the
    full run is stored it is reused, collection values included. The seed's per-query values are
    the full run's either way."""
    from evalkit.pipeline.runner import RunSettings, bind, obtain

    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    runs_dir = tmp_path / "runs"
    cold = explore_views.load(["bm25"], runs_dir=runs_dir, seed=SEED, every_query=False)
    assert cold.seed_only == ("bm25",) and set(cold.runs["bm25"]) == {f"{SEED}_background", f"{SEED}_method"}
    assert [p.parent.name for p in runs_dir.rglob("run.trec")] == [next(runs_dir.rglob("run.trec")).parent.name]
    assert "@subset-" in next(runs_dir.rglob("run.trec")).parent.name  # the full run was not made
    scores = explore_views.query_scores(cold, SEED)
    assert scores.filter(like="(facet)").isna().all().all() and scores.filter(like="(all)").isna().all().all()
    assert not scores.filter(like="(query)").isna().any().any()
    page = explore.render(cold, SEED)
    assert "collection figures: run <code>make relevance</code> first" in page

    # what make relevance stores
    full = obtain(bind(RunSettings(model="bm25", dataset=collection.name), collection, runs_dir)).run
    warm = explore_views.load(["bm25"], runs_dir=runs_dir, seed=SEED, every_query=False)
    assert warm.seed_only == () and warm.runs["bm25"] == full
    summary = summarize(collection, per_query(collection, full, ["nDCG_csfcube@20"]))
    warm_scores = explore_views.query_scores(warm, SEED)
    assert list(warm_scores["nDCG_csfcube@20 (all)"]) == [100 * summary["nDCG_csfcube@20"]["all"]] * 2
    assert list(warm_scores["p-MRR (facet)"]) == [100 * summary[PMRR][f] for f in ("background", "method")]
    assert list(warm_scores["nDCG_csfcube@20 (query)"]) == list(scores["nDCG_csfcube@20 (query)"])
    assert list(warm_scores["p-MRR (query)"]) == list(scores["p-MRR (query)"])
    assert "make relevance" not in explore.render(warm, SEED)
    with pytest.raises(KitError, match="seed= is needed when every_query is False"):
        explore_views.load(["bm25"], runs_dir=runs_dir, every_query=False)


def test_a_hostile_model_label_is_text_on_the_page(data, collection, explorer):
    """A label from a user's models file holding a style sheet and an onerror script: escaped in every
    place the page shows it (the per-query table, the table heads, the p-MRR headings, the runs line)."""
    label = hostile_pages.label("http://127.0.0.1:9")
    hostile = explore_views.Explorer(data, collection, dict(explorer.runs), {"blind": label})
    page = explore.render(hostile, SEED, k=3)
    assert "<style>@" not in page and "<img" not in page and label not in page
    assert page.count(html.escape(label)) >= 3


def test_the_page_and_the_reports_provenance_say_the_same_runs(data, collection, explorer, tmp_path):
    """Both sentences come from the page's one `scope`: a model run on the seed's queries only is
    said to be so in the page's body and in the report's provenance block (never "every query")."""
    import nbformat

    from evalkit.pages import report

    cold = explore_views.Explorer(data, collection, dict(explorer.runs), {"blind": "Blind"}, seed_only=("moving",))
    ran = explore.scope(cold)
    said = explore.scope_sentence(ran)
    assert ran == {"every_query": ["Blind"], "seed_only": ["moving"]}
    assert said == "Blind: over every query; moving: the seed's queries only (no collection figures)"
    page = explore.show(cold, SEED, k=3)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["papermill"] = {"input_path": "notebooks/explore.ipynb",
                                      "parameters": {"SEED": SEED, "PROFILE": "offline", "PROTOCOL": "pool"}}
    cell = nbformat.v4.new_code_cell("explore.explore(explorer, chosen.seed)")
    cell.outputs = [nbformat.v4.new_output("execute_result", data={**page._repr_mimebundle_(),
                                                                   "text/plain": repr(page)}, execution_count=1)]
    notebook.cells.append(cell)
    path = tmp_path / "explore-929877.ipynb"
    nbformat.write(notebook, str(path))
    built = report.html_report([path], tmp_path / "explore-929877.html").read_text()
    body, provenance = built.split('<section id="provenance">')
    assert html.escape(said) in body and f"explored: {SEED} (runs: {html.escape(said)})" in provenance
    assert "every query" not in provenance.replace("Blind: over every query", "")
    assert "make relevance" in body


def test_the_grades_of_the_p_mrr_documents_are_shaded(explorer):
    """Their grades come as numpy integers (int64 from the DataFrame); each is shaded as on the top-k table."""
    moved = explore.moved_side_by_side(explorer, ["blind"], f"{SEED}_background")
    assert f'style="background-color: {explore.GRADE_COLOURS[2]}">2' in moved
