"""CSFCube adapter: pinned counts, first/last records, folds, the Collection it makes, bad data, and the
offline fetch path."""

from __future__ import annotations

import hashlib
import io
from collections import Counter

import pytest

from evalkit.core.errors import KitError
from evalkit.datasets import csfcube

# --- counts -------------------------------------------------------------------------------


def test_query_facet_pairs_per_facet(data):
    assert len(data.queries) == 50
    assert Counter(q.facet for q in data.queries.values()) == {"background": 16, "method": 17, "result": 17}
    assert all(qid == f"{q.seed}_{q.facet}" for qid, q in data.queries.items())


def test_seeds_and_paired_seeds(data):
    seeds = {q.seed for q in data.queries.values()}
    assert len(seeds) == 34
    # 50 pairs over 34 seeds: 34 - 16 = 18 seeds with one facet, 16 with two: 18 + 2*16 = 50
    assert len(data.paired_seeds) == 16
    assert all(len(facets) == 2 and facets[0] != facets[1] for facets in data.paired_seeds.values())
    # facets come in FACETS order, and each named pair really exists
    for seed, (first, second) in data.paired_seeds.items():
        assert csfcube.FACETS.index(first) < csfcube.FACETS.index(second)
        assert f"{seed}_{first}" in data.queries and f"{seed}_{second}" in data.queries
    assert data.paired_seeds["929877"] == ("background", "method")
    assert data.paired_seeds["1198964"] == ("method", "result")
    assert data.paired_seeds["1587"] == ("background", "result")
    assert Counter(data.paired_seeds.values()) == {
        ("background", "method"): 5,
        ("background", "result"): 5,
        ("method", "result"): 6,
    }


def test_paper_count_and_every_seed_and_candidate_has_text(data):
    assert len(data.papers) == 4205
    assert all(q.seed in data.papers for q in data.queries.values())
    assert all(c in data.papers for q in data.queries.values() for c in q.pool)


def test_pool_sizes_and_grades(data):
    sizes = [len(q.pool) for q in data.queries.values()]
    assert (min(sizes), max(sizes), sum(sizes)) == (88, 253, 6244)
    grades = Counter(g for q in data.queries.values() for g in q.grades.values())
    assert grades == {0: 4400, 1: 1348, 2: 412, 3: 84}  # 4400+1348+412+84 = 6244
    # relevant = grade >= 2: 412 + 84 = 496
    assert sum(len(q.relevant) for q in data.queries.values()) == 496
    assert all(set(q.grades) == set(q.pool) for q in data.queries.values())


# --- first and last records ----------------------------------------------------------------


def test_first_query_in_release_order(data):
    qid, query = next(iter(data.queries.items()))
    assert qid == "10014168_background"
    assert len(query.pool) == 237
    assert query.pool[0] == "13926706"
    assert query.grades["13926706"] == 0
    assert list(query.annotators) == ["ann1", "ann2"]
    assert query.annotators["ann1"]["13926706"] == 0
    assert query.annotators["ann2"]["13926706"] == 1
    assert len(query.relevant) == 15
    assert list(data.queries)[:3] == ["10014168_background", "10695055_background", "5764728_background"]


def test_last_query_in_release_order(data):
    qid, query = list(data.queries.items())[-1]
    assert qid == "8781666_result"
    assert len(query.pool) == 101
    assert (query.pool[0], query.grades[query.pool[0]]) == ("9772678", 0)
    assert (query.pool[-1], query.grades[query.pool[-1]]) == ("13976617", 0)


def test_first_paper_by_pid(data):
    pid, paper = next(iter(data.papers.items()))
    assert pid == paper.doc_id == "388"
    assert paper.title == (
        "A Sentimental Education: Sentiment Analysis Using Subjectivity Summarization Based on Minimum Cuts"
    )
    assert [s.label for s in paper.sentences] == ["background", "method", "method"]
    assert paper.sentences[0].text.startswith("Sentiment analysis seeks to identify the viewpoint(s)")
    assert paper.full_text == paper.title + " " + paper.text
    assert paper.text == " ".join(s.text for s in paper.sentences)
    assert len(paper.labelled("method")) == 2
    assert paper.labelled("result") == ()


def test_last_paper_by_pid(data):
    pid, paper = list(data.papers.items())[-1]
    assert pid == "202676751"
    assert paper.title == "Low Diameter Graph Decompositions by Approximate Distance Computation"
    assert len(paper.sentences) == 12
    assert Counter(s.label for s in paper.sentences) == {"background": 7, "method": 3, "result": 2}
    # pids are ordered as numbers, not strings ("388" < "202676751" although "3" > "2")
    assert list(map(int, data.papers)) == sorted(map(int, data.papers))


def test_objective_label_counts_as_background(data):
    paper = data.papers["154639895"]
    # raw labels: background, background, objective, method, result
    assert [s.label for s in paper.sentences] == ["background", "background", "background", "method", "result"]
    assert paper.labelled("background")[2].startswith("We evaluate whether a MP")
    assert {s.label for p in data.papers.values() for s in p.sentences} == {
        "background", "method", "result", "other"
    }


def test_papers_whose_year_is_none_still_load(data):
    # their header reads "YEAR: None"; the year itself is no longer kept
    assert {"199460105", "52952241"} <= set(data.papers)
    assert data.papers["52952241"].title == "Learning with Structured Representations for Negation Scope Extraction"
    assert data.papers["199460105"].title == "Detecting Online Hate Speech Using Context Aware Models"


# --- folds ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "facet, fold1, fold2", [("background", 8, 8), ("method", 9, 8), ("result", 9, 8), ("all", 26, 24)]
)
def test_test_fold_sizes(data, facet, fold1, fold2):
    folds = data.folds[facet]
    assert (len(folds["fold1_test"]), len(folds["fold2_test"])) == (fold1, fold2)
    # each fold's dev half is the other fold's test half
    assert set(folds["fold1_dev"]) == set(folds["fold2_test"])
    assert set(folds["fold2_dev"]) == set(folds["fold1_test"])


def test_every_query_in_exactly_one_test_fold(data):
    all_folds = data.folds["all"]
    assert not set(all_folds["fold1_test"]) & set(all_folds["fold2_test"])
    assert set(all_folds["fold1_test"]) | set(all_folds["fold2_test"]) == set(data.queries)
    for facet in csfcube.FACETS:
        for fold in ("fold1_test", "fold2_test"):
            assert set(data.folds[facet][fold]) <= set(all_folds[fold])
            assert all(data.fold_of(qid) == fold for qid in data.folds[facet][fold])
    assert data.fold_of("5764728_background") == "fold1_test"
    assert data.fold_of("3264891_background") == "fold2_test"
    with pytest.raises(KitError, match="no test fold"):
        data.fold_of("1_background")


def test_qrels_is_a_copy(data):
    qrels = data.qrels()
    assert set(qrels) == set(data.queries)
    qrels["10014168_background"]["13926706"] = 3
    assert data.queries["10014168_background"].grades["13926706"] == 0


# --- the Collection ------------------------------------------------------------------------


def test_collection_mirrors_the_release(data, collection):
    assert collection.name == "csfcube" and collection.relevance_level == csfcube.RELEVANT_GRADE == 2
    assert list(collection.queries) == list(data.queries)  # release order kept
    assert collection.documents is data.papers and len(collection.documents) == 4205
    assert collection.qrels == data.qrels()
    assert {qid: len(r) for qid, r in collection.relevant.items()} == {qid: len(q.relevant)
                                                                       for qid, q in data.queries.items()}
    assert collection.checksum == csfcube.checksum() and len(collection.checksum) == 64
    assert collection.measures == ("nDCG_csfcube@20", "p-MRR", "MAP_csfcube", "nDCG_csfcube%20")
    assert collection.strata == {qid: q.facet for qid, q in data.queries.items()}
    collection.check()  # every judged and pooled document is in the corpus


def test_collection_queries_carry_seed_facet_and_base_instruction(data, collection):
    query = collection.queries["929877_method"]
    seed = data.papers["929877"]
    assert (query.qid, query.seed, query.facet, query.text) == ("929877_method", seed, "method", seed.full_text)
    assert query.instruction == "Retrieve scientific papers that use a similar method to this paper."
    assert collection.query("929877_method") == query
    subset = collection.query("929877_method", "aspect-subset")
    assert subset.text == " ".join(seed.labelled("method")) and subset.instruction != query.instruction
    assert collection.query("929877_method", "definition").text == seed.full_text


def test_pairs_link_the_two_facets_of_a_seed_both_ways(data, collection):
    assert len(collection.pairs) == 2 * len(data.paired_seeds) == 32
    assert collection.pairs["929877_background"] == "929877_method"
    assert collection.pairs["929877_method"] == "929877_background"
    assert all(collection.pairs[b] == a for a, b in collection.pairs.items())


def test_candidates_are_the_pool_without_the_seed(data, collection):
    assert collection.candidates == {qid: q.pool for qid, q in data.queries.items()}
    assert collection.exclude == {qid: q.seed for qid, q in data.queries.items()}
    # the release lists seed 8781666 in its own pools (adjudicated grade 3): never a candidate
    assert "8781666" in data.queries["8781666_result"].pool
    for qid, query in data.queries.items():
        ids = [d.doc_id for d in collection.candidates_of(qid)]
        assert ids == [c for c in query.pool if c != query.seed]
    assert len(collection.candidates_of("8781666_result")) == 100


def test_collection_folds_are_the_official_splits(data, collection):
    assert set(collection.folds) == {"fold1", "fold2"}
    for name, fold in collection.folds.items():
        assert fold.dev == data.folds["all"][f"{name}_dev"] and fold.test == data.folds["all"][f"{name}_test"]
    assert (len(collection.folds["fold1"].test), len(collection.folds["fold2"].test)) == (26, 24)
    assert all(collection.test_fold_of(qid) == data.fold_of(qid).removesuffix("_test") for qid in data.queries)
    assert collection.test_fold_of("1_background") is None


def test_load_collection_reads_the_verified_copy(data_copy, collection):
    copy = csfcube.load_collection(data_copy)
    assert copy.queries == collection.queries and copy.qrels == collection.qrels


# --- locating the data ---------------------------------------------------------------------


def test_csfcube_dir_selects_the_copy(data, monkeypatch, tmp_path):
    monkeypatch.setenv("CSFCUBE_DIR", str(tmp_path))
    assert csfcube.locate() == tmp_path
    monkeypatch.delenv("CSFCUBE_DIR")
    monkeypatch.setattr(csfcube, "NEARBY_COPY", tmp_path)  # absolute: found from any parent folder
    assert csfcube.locate() == tmp_path
    monkeypatch.setattr(csfcube, "NEARBY_COPY", tmp_path / "absent")
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    assert csfcube.locate() == tmp_path / "cache" / f"csfcube-{csfcube.COMMIT[:12]}"


def test_a_shared_copy_beside_the_checkout_or_a_parent_is_found(monkeypatch, tmp_path):
    monkeypatch.delenv("CSFCUBE_DIR", raising=False)
    checkout = tmp_path / "work" / "main"
    monkeypatch.setattr(csfcube, "__file__", str(checkout / "evalkit" / "datasets" / "csfcube.py"))
    beside_parent = tmp_path / "shared" / "data" / "csfcube"
    beside_parent.mkdir(parents=True)
    assert csfcube.locate() == beside_parent
    beside = tmp_path / "work" / "shared" / "data" / "csfcube"
    beside.mkdir(parents=True)
    assert csfcube.locate() == beside  # the nearest wins


def test_missing_data_dir_from_env(monkeypatch, tmp_path):
    missing = tmp_path / "no-such-dir"
    monkeypatch.setenv("CSFCUBE_DIR", str(missing))
    with pytest.raises(KitError, match="CSFCUBE_DIR") as err:
        csfcube.load()
    assert str(missing) in str(err.value)


def test_missing_data_dir_given_directly(tmp_path):
    with pytest.raises(KitError, match="does not exist") as err:
        csfcube.load(tmp_path / "nowhere")
    assert str(tmp_path / "nowhere") in str(err.value)


def test_missing_file(data_copy, monkeypatch):
    (data_copy / "readable_annotations" / "1587-result-adju.txt").unlink()
    monkeypatch.setenv("CSFCUBE_DIR", str(data_copy))
    with pytest.raises(KitError, match="missing CSFCube file") as err:
        csfcube.load()
    assert "1587-result-adju.txt" in str(err.value)


def test_copy_loads_like_the_original(data_copy, data):
    copy = csfcube.load(data_copy)
    assert copy.queries == data.queries
    assert copy.papers == data.papers


def test_sha256_mismatch_on_one_altered_byte(data_copy):
    path = data_copy / "evaluation_splits.json"
    body = bytearray(path.read_bytes())
    body[-2] = body[-2] ^ 0x01  # flip one bit of one byte
    path.write_bytes(bytes(body))
    with pytest.raises(KitError, match="sha256 mismatch") as err:
        csfcube.load(data_copy)
    assert "evaluation_splits.json" in str(err.value)


def test_malformed_json_names_the_file(data_copy, rewrite_manifest):
    (data_copy / "test-pid2anns-csfcube-result.json").write_text('{"1": {"cands": [')
    rewrite_manifest(data_copy)  # the damaged file now passes the checksum, so the parser sees it
    with pytest.raises(KitError, match="malformed JSON") as err:
        csfcube.load(data_copy)
    assert "test-pid2anns-csfcube-result.json" in str(err.value)


def test_readable_annotation_without_title_names_the_file(data_copy, rewrite_manifest):
    path = data_copy / "readable_annotations" / "929877-method-adju.txt"
    path.write_text(path.read_text().replace("TITLE: ", "TITEL: ", 1))
    rewrite_manifest(data_copy)
    with pytest.raises(KitError, match="no TITLE line") as err:
        csfcube.load(data_copy)
    assert "929877-method-adju.txt" in str(err.value)


# --- fetch into the cache, without the network ---------------------------------------------


@pytest.fixture
def offline_cache(data, monkeypatch, tmp_path):
    """No CSFCUBE_DIR, no shared copy, cache in tmp; urlopen serves the local release by URL."""
    monkeypatch.delenv("CSFCUBE_DIR", raising=False)
    monkeypatch.setenv("EVALKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(csfcube, "NEARBY_COPY", tmp_path / "no-shared-copy")
    by_url = {csfcube.UPSTREAM + upstream: data.root / rel for _, rel, upstream in csfcube._read_manifest()}
    calls: list[str] = []
    state = {"body": None}  # None: serve the real bytes; else serve these bytes

    def urlopen(url, timeout=None):
        calls.append(url)
        if state["body"] is not None:
            return io.BytesIO(state["body"])
        return io.BytesIO(by_url[url].read_bytes())

    monkeypatch.setattr(csfcube.urllib.request, "urlopen", urlopen)
    return calls, state


def test_fetch_downloads_verifies_and_then_reuses_the_cache(offline_cache, data, tmp_path):
    calls, _ = offline_cache
    root = csfcube.fetch()
    assert root == tmp_path / "cache" / f"csfcube-{csfcube.COMMIT[:12]}"
    manifest = csfcube._read_manifest()
    assert len(calls) == len(manifest) == 59
    assert all(url.startswith(f"https://raw.githubusercontent.com/iesl/CSFCube/{csfcube.COMMIT}/") for url in calls)
    for digest, rel, _ in manifest:
        assert hashlib.sha256((root / rel).read_bytes()).hexdigest() == digest
    assert not [p for p in root.rglob("*") if p.is_file() and p.name.startswith("tmp")]  # no temp leftovers
    assert csfcube.load().queries == data.queries  # load() finds the cache by itself

    calls.clear()
    assert csfcube.fetch() == root
    assert calls == []  # verified files are not downloaded again

    damaged = root / "queries-release.csv"
    damaged.write_bytes(damaged.read_bytes() + b"x")
    csfcube.fetch()
    assert calls == [csfcube.UPSTREAM + "queries-release.csv"]  # only the bad file is replaced
    csfcube.verify(root)


def test_fetch_rejects_wrong_bytes(offline_cache, tmp_path):
    _, state = offline_cache
    state["body"] = b"not the release"
    with pytest.raises(KitError, match="sha256 check") as err:
        csfcube.fetch()
    assert "evaluation_splits.json" in str(err.value)  # first manifest row, named by its URL
    assert not (csfcube.cache_dir() / "evaluation_splits.json").exists()


def test_fetch_network_failure_suggests_csfcube_dir(offline_cache, monkeypatch):
    def refuse(url, timeout=None):
        raise OSError("network unreachable")

    monkeypatch.setattr(csfcube.urllib.request, "urlopen", refuse)
    with pytest.raises(KitError, match="cannot download .*CSFCUBE_DIR"):
        csfcube.fetch()


def test_fetch_never_writes_into_a_user_copy(data_copy, monkeypatch):
    (data_copy / "queries-release.csv").unlink()
    monkeypatch.setenv("CSFCUBE_DIR", str(data_copy))

    def no_network(url, timeout=None):
        raise AssertionError("fetch must not download into CSFCUBE_DIR")

    monkeypatch.setattr(csfcube.urllib.request, "urlopen", no_network)
    with pytest.raises(KitError, match="missing CSFCube file"):
        csfcube.fetch()
    assert not (data_copy / "queries-release.csv").exists()


def test_manifest_lists_the_sample_runs():
    rels = {rel for _, rel, _ in csfcube._read_manifest()}
    assert {f"sample_ranked_pools/test-pid2pool-csfcube-specter-{f}-ranked.json" for f in csfcube.FACETS} <= rels
    assert sum(rel.startswith("readable_annotations/") for rel in rels) == 50
