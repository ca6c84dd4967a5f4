"""`evalkit.api.evaluate`'s and `Evaluation.compare_table`'s arguments: each bad one is one
`RequestError` line naming it as Python spells it (``runs_dir=``), before any run is made;
Fisher's test options follow the one rule `evalkit evaluate --test fisher` follows."""

from __future__ import annotations

import pytest

from evalkit import api
from evalkit.core.errors import RequestError

pytestmark = pytest.mark.usefixtures("fresh_cache")  # tests/api/conftest.py
QUERIES = ["929877_background"]
SEEDS = ["929877", "3264891", "2090262"]  # six queries: enough pairs for a test


def words(query, documents):
    return [len(d.text) for d in documents]


def overlap(query, documents):
    known = set(query.text.lower().split())
    return [len(known & set(d.text.lower().split())) for d in documents]


@pytest.mark.parametrize("kwargs, text", [
    ({"dataset": None}, "dataset=None: give a dataset spec"),
    ({"dataset": 123}, "dataset=123: give a dataset spec"),
    ({"dataset": " "}, "dataset=' ': give a dataset spec"),
    ({"runs_dir": 123}, "runs_dir=123: give the folder of the run store"),
    ({"runs_dir": ""}, "runs_dir='': give the folder of the run store"),
    ({"runs_dir": "/dev/null"}, "runs_dir='/dev/null': is not a folder"),
    ({"instructions": 123}, "instructions='123': no such file"),
    ({"measures": []}, "measures=[]: names no measure"),
    ({"seeds": [], "queries": None}, "seeds= names no ids"),
    ({"variants": []}, "variants=[]: names no variant"),
    ({"test": "fisher", "permutations": 0}, "permutations=0: give between 100 and 10,000,000"),
    ({"test": "fisher", "permutations": -1}, "permutations=-1: give between"),
    ({"test": "fisher", "permutations": 10**12}, "permutations=1000000000000: give between"),
    ({"test": "fisher", "permutations": 1.5}, "permutations=1.5: give a whole number"),
    ({"test": "fisher", "permutations": True}, "permutations=True: give a whole number"),
    ({"test": "fisher", "permutations": "100"}, "permutations='100': give a whole number"),
    ({"test": "fisher", "seed": -1}, "seed=-1: give a whole number from 0"),
    ({"test": "fisher", "seed": 2**32}, "seed=4294967296: give a whole number from 0"),
    ({"permutations": 500}, "permutations= sets Fisher's randomization test; add test='fisher'"),
    ({"test": "z"}, "test='z': choose one of t, fisher"),
])
def test_each_bad_argument_is_one_line_naming_it(tmp_path, kwargs, text, executed):
    arguments = {"name": "words", "queries": QUERIES, "runs_dir": tmp_path / "runs", **kwargs}
    with pytest.raises(RequestError) as raised:
        api.evaluate(words, **arguments)
    line = str(raised.value)
    assert line.startswith(text) and "\n" not in line, line
    assert executed == []  # refused before any run was made


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """An evaluation against BM25 under Fisher's test (1,000 permutations, seed 7)."""
    folder = tmp_path_factory.mktemp("fisher")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVALKIT_CACHE", str(folder / "cache"))
        return api.evaluate(overlap, name="words-fisher", reference="bm25", seeds=SEEDS, runs_dir=folder / "runs",
                            test="fisher", permutations=1000, seed=7)


def test_the_api_runs_fishers_test(compared):
    tested = compared.tests.dropna(subset=["p"])
    assert len(tested) and all(abs(p * 1000 - round(p * 1000)) < 1e-9 for p in tested["p"])  # k/1000
    assert "Fisher's paired randomization tests against the reference" in str(compared)
    assert compared.checked.test.described() == {"test": "fisher", "permutations": 1000, "seed": 7}


@pytest.mark.parametrize("kwargs, text", [
    ({"test": "fisher", "permutations": 0}, "permutations=0: give between 100 and 10,000,000"),
    ({"test": "fisher", "permutations": -1}, "permutations=-1: give between"),
    ({"test": "fisher", "permutations": 1.5}, "permutations=1.5: give a whole number"),
    ({"test": "fisher", "permutations": True}, "permutations=True: give a whole number"),
    ({"test": "fisher", "permutations": "100"}, "permutations='100': give a whole number"),
    ({"test": "fisher", "permutations": 10**12}, "permutations=1000000000000: give between"),
    ({"test": "fisher", "seed": -1}, "seed=-1: give a whole number from 0"),
    ({"seed": 3}, "seed= sets Fisher's randomization test; add test='fisher'"),
    ({"alpha": 0}, "alpha=0: give a significance level"),
    ({"measures": []}, "measures=[]: names no measure"),
])
def test_compare_table_refuses_what_evaluate_refuses(compared, kwargs, text):
    with pytest.raises(RequestError) as raised:
        compared.compare_table(**kwargs)
    assert str(raised.value).startswith(text)
