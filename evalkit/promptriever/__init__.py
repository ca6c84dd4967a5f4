"""The Promptriever evaluation recipe: FollowIR, InstructIR, MS MARCO / TREC DL and BEIR, with prompt selection."""

from evalkit.promptriever.beir import IR_DATASETS, load_beir, load_collection, load_ir_datasets
from evalkit.promptriever.followir import FollowIR, load_followir
from evalkit.promptriever.instructir import InstructIR, load_instructir
from evalkit.promptriever.metrics import (
    DATASET_METRICS,
    MEASURES,
    changed_documents,
    followir_p_mrr,
    per_query,
    robustness,
    score,
)
from evalkit.promptriever.prompts import (
    NONE,
    Selection,
    choose_prompt,
    load_prompts,
    select_by_folds,
    select_prompt,
    with_prompt,
)
from evalkit.promptriever.published import load_published

__all__ = [
    "DATASET_METRICS",
    "IR_DATASETS",
    "MEASURES",
    "NONE",
    "FollowIR",
    "InstructIR",
    "Selection",
    "changed_documents",
    "choose_prompt",
    "followir_p_mrr",
    "load_beir",
    "load_collection",
    "load_followir",
    "load_instructir",
    "load_ir_datasets",
    "load_prompts",
    "load_published",
    "per_query",
    "robustness",
    "score",
    "select_by_folds",
    "select_prompt",
    "with_prompt",
]
