"""The one rule for a worker count: how many Ray workers a run, a plan or an LLM's replicas are
spread over. Every front end (the API's ``workers=``, the CLI's ``--workers``, make's and the
notebooks' ``WORKERS``) and every layer that takes a count (`evalkit.pipeline.settings`,
`evalkit.pipeline.plan`, `evalkit.llm.replicas`) checks it here, so each refuses the same values
with the same problem, spelled as its front end names the field (`evalkit.core.errors.spell`).
It lives in the core layer because the LLM layer, below the pipeline, needs it too."""

from __future__ import annotations

from evalkit.core.errors import RequestError

PROBLEM = "must be a positive whole number (Ray workers)"


def check_workers(workers) -> int | None:
    """`workers` when it is None (not given: one per GPU of the cluster, else one per core) or a
    positive whole number; else a RequestError of the field ``workers``."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise RequestError("workers", PROBLEM, value=workers)
    return workers


def ascii_whole(text: str) -> int | None:
    """The whole number `text` writes in the ASCII digits 0-9 alone, else None: the kit's one rule
    for a whole number given as text. Python's `int` and `str.isdigit` also take other scripts'
    digits and superscripts (``int('٢٠')`` is 20, ``'²'.isdigit()`` is true but ``int('²')``
    fails), so a count or a cut-off is never read from them."""
    return int(text) if isinstance(text, str) and text.isascii() and text.isdigit() else None


def parse_workers(text: str | None) -> int | None:
    """A worker count given as text (``--workers`` of `evalkit run` and `evalkit plan`, ``WORKERS``):
    None when blank, else the whole number it writes in ASCII digits (`ascii_whole`), checked by
    `check_workers` (``1.5``, ``abc``, ``-1``, ``²``: the same refusal as the number 0)."""
    text = (text or "").strip()
    if not text:
        return None
    value = ascii_whole(text)
    if value is None:
        raise RequestError("workers", PROBLEM, value=text)
    return check_workers(value)
