"""The paper profile's PRP rows use Qin et al.'s prompt as ielab/llm-rankers writes it
(llmrankers/pairwise.py, PairwiseLlmRanker.prompt), the query slot carrying the instruction
and the seed; the kit's instruction-aware rewording (`prp`) stays an option."""

from __future__ import annotations

from evalkit.llm.templates import load_template
from evalkit.models import registry

LLM_RANKERS = '''Given a query "{query}", which of the following two passages is more relevant to the query?

Passage A: "{doc1}"

Passage B: "{doc2}"

Output Passage A or Passage B:'''


def test_paper_prp_rows_use_the_qin_prompt_and_say_so():
    prp = [registry.spec(m, "paper") for m in registry.model_names("paper")
           if registry.spec(m, "paper").settings.get("method") == "prp"]
    assert len(prp) == 5
    for spec in prp:
        assert spec.settings["template"] == "prp-qin" and "Qin prompt" in spec.label


def test_qin_template_is_the_llm_rankers_prompt():
    template = load_template("prp-qin")
    filled = (template.prefix + "\n\n" + template.suffix).format(instruction="Find the method.", seed="T. Abs.",
                                                                  a="first", b="second")
    assert filled == LLM_RANKERS.format(query="Find the method. Seed paper: T. Abs.", doc1="first", doc2="second")
    assert template.labels == (" A", " B") or list(template.labels) == [" A", " B"]
    assert load_template("prp").prefix != template.prefix  # the kit's rewording remains available
