"""The paper's Tables 1-3 in `evalkit/config/published_mysore.csv`: every row, every facet, the
significance marks, and the one inconsistency of the source, checked by hand against its text."""

import pandas as pd
import pytest

from evalkit.core.errors import KitError
from evalkit.study import published as paper_file
from evalkit.study import tables

MODELS = ["Human", "SciNCL", "Specter2", "otAspire", "GritLM-7B", "gpt-3.5-turbo (pw)", "gpt-4o (pw)",
          "Mistral-7B (prp)", "Llama-3-8B (prp)", "Llama-3-70B (prp)", "gpt-3.5-turbo (prp)", "gpt-4o (prp)"]
VARIANTS = ["Base", "Generic", "Definition", "Paraphrases", "Aspect subset"]
QUERIES = {"background": 16, "method": 17, "result": 17}  # CSFCube's queries per facet


@pytest.fixture(scope="module")
def published():
    return paper_file.load_published()


def row(published, table, model, metric, variant="Base"):
    found = published[(published.table == table) & (published.model == model) & (published.metric == metric)
                      & (published.variant == variant)]
    assert len(found) == 1
    return found.iloc[0]


def test_every_row_of_tables_1_to_3_with_every_facet(published):
    assert list(published.columns) == paper_file.PUBLISHED_COLUMNS
    assert list(published[published.table == "Table 1"].model) == MODELS
    assert list(published[published.table == "Table 2"].model) == MODELS
    table3 = published[published.table == "Table 3"]
    assert list(table3.variant) == VARIANTS * 2 and set(table3.model) == {"GritLM-7B"}
    assert list(table3.metric) == ["ndcg@20"] * 5 + ["p-mrr"] * 5
    assert published[paper_file.COLUMNS].notna().all().all() and len(published) == 34


def test_values_spot_checked_against_the_seed_text(published):
    def values(table, model, metric, variant="Base"):
        return [row(published, table, model, metric, variant)[c] for c in ("all", "background", "method", "result")]

    assert values("Table 1", "Human", "ndcg@20") == [77.91, 82.75, 70.38, 81.00]
    assert values("Table 1", "gpt-3.5-turbo (pw)", "ndcg@20") == [20.40, 32.16, 9.73, 20.20]
    assert values("Table 1", "Llama-3-8B (prp)", "ndcg@20") == [24.40, 18.51, 20.94, 33.48]
    assert values("Table 2", "Human", "p-mrr") == [25.3, 29.8, 22.2, 24.0]
    assert values("Table 2", "Mistral-7B (prp)", "p-mrr") == [-1.10, 3.29, -8.67, 2.07]
    assert values("Table 2", "gpt-4o (prp)", "p-mrr") == [0.97, 3.79, 1.50, -2.39]
    assert values("Table 3", "GritLM-7B", "ndcg@20", "Aspect subset") == [38.21, 47.70, 25.48, 42.07]
    assert values("Table 3", "GritLM-7B", "p-mrr", "Generic") == [0.18, 0.26, 0.20, 0.09]
    # Table 3's Base rows repeat GritLM-7B of Tables 1 and 2
    for metric, table in (("ndcg@20", "Table 1"), ("p-mrr", "Table 2")):
        assert values("Table 3", "GritLM-7B", metric) == values(table, "GritLM-7B", metric)


def test_table_1_significance_marks(published):
    marks = dict(zip(published[published.table == "Table 1"].model, published[published.table == "Table 1"]
                     .not_significant))
    assert marks["GritLM-7B"] == "reference"
    assert marks["SciNCL"] == marks["Specter2"] == "method;result"
    assert marks["otAspire"] == marks["Llama-3-70B (prp)"] == "method"
    assert marks["gpt-4o (prp)"] == "background;method;result;all"
    assert sum(bool(m) for m in marks.values()) == 6
    assert (published[published.table != "Table 1"].not_significant == "").all()
    shown = tables.with_marks(published[published.table == "Table 1"]).set_index("model")
    assert shown.loc["SciNCL", "method"] == "26.19\u00d7" and shown.loc["SciNCL", "background"] == "45.22"
    assert shown.loc["gpt-4o (prp)", "all"] == "41.07\u00d7"


def test_aggregates_agree_with_facets_except_gpt4o_pointwise_which_the_file_notes(published):
    for r in published.itertuples():
        if r.metric == "p-mrr":  # the mean of the facet means
            expected = (r.background + r.method + r.result) / 3
        else:  # about the query-weighted mean (the official fold mean differs a little)
            expected = sum(getattr(r, f) * n for f, n in QUERIES.items()) / sum(QUERIES.values())
        off = abs(expected - r.all) > 0.3
        assert off == (r.model == "gpt-4o (pw)" and r.metric == "ndcg@20"), r
    note = row(published, "Table 1", "gpt-4o (pw)", "ndcg@20").note
    assert "inconsistent" in note and "23.71" in note and "33.20" in note


def test_published_rows_feed_the_kits_tables():
    relevance = paper_file.published_rows("relevance")
    assert len(relevance) == 12 and relevance[1]["not_significant"] == "method;result"
    assert len(paper_file.published_rows("p-MRR")) == 12
    paper = tables.published_sensitivity()
    assert list(paper.variant) == list(tables.SENSITIVITY_GROUPS)
    assert paper.set_index("variant").loc["Paraphrases (mean of 3)", "NDCG@20"] == 42.03
    kit = pd.DataFrame({"model": "m", "label": "M", "role": "aware", "variant": list(tables.SENSITIVITY_GROUPS),
                        "nDCG@20": [1.0, 2, 3, 4, 5], "p-MRR": [0.0, 1, 2, 3, 4]})
    beside = tables.sensitivity_beside_paper(kit, "nDCG@20")
    assert list(beside.columns) == ["variant", "M nDCG@20", "M p-MRR", "GritLM-7B (paper) NDCG@20",
                                    "GritLM-7B (paper) p-MRR"]
    assert beside.iloc[-1].tolist() == ["Aspect subset", 5.0, 4.0, 38.21, 5.89]


def test_bad_published_file(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("model,all\nx,1\n")
    with pytest.raises(KitError, match="columns must be"):
        paper_file.load_published(path)
    header = ",".join(paper_file.PUBLISHED_COLUMNS)
    path.write_text(f"{header}\nTable 1,x,Base,ndcg@20,1,2,high,4,,full,s,\n")
    with pytest.raises(KitError, match=r"p\.csv:2: result must be a number"):
        paper_file.load_published(path)
    path.write_text(f"{header}\nTable 1,x,Base,ndcg@20,1,2,3,4,methods,full,s,\n")
    with pytest.raises(KitError, match=r"p\.csv:2: not_significant"):
        paper_file.load_published(path)
