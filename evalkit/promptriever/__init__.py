"""The Promptriever evaluation recipe: FollowIR, InstructIR, MS MARCO / TREC DL and BEIR, with
prompt selection, for any registry model through the kit's one runner (`recipe`).

Datasets load through `evalkit.datasets`, runs through `evalkit.runner`, measures through
`evalkit.evaluation`; this package holds the recipe's table, the generic prompts and their
selection, and the published figures to compare against.
"""

from evalkit.promptriever.prompts import GENERIC_PROMPTS, NONE, Selection, load_prompts, select_prompt
from evalkit.promptriever.published import load_published
from evalkit.promptriever.recipe import recipe_table
from evalkit.runner import with_prompt

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
