"""The Promptriever evaluation recipe: FollowIR, InstructIR, MS MARCO / TREC DL and BEIR, with
prompt selection, for any registry model through the kit's one runner (`recipe`).

Datasets load through `evalkit.datasets`, runs through `evalkit.pipeline.runner`, measures through
`evalkit.evaluation.evaluate`; this package holds the recipe's table, the generic prompts and their
selection, and the published figures to compare against.
"""

from evalkit.pipeline.runner import with_prompt
from evalkit.promptriever.prompts import GENERIC_PROMPTS, NONE, Selection, load_prompts, select_prompt
from evalkit.promptriever.published import load_published
from evalkit.promptriever.recipe import recipe_table

__all__ = [
    "GENERIC_PROMPTS",
    "NONE",
    "Selection",
    "load_prompts",
    "load_published",
    "recipe_table",
    "select_prompt",
    "with_prompt",
]
