"""What makes the dense index's blocked search exact (`evalkit.retrieval.vector_index`).

- `error_bound`: an upper bound on the float32 rounding of a blocked score, so the search keeps
  every row that could be in a query's top ``k`` and rescores only those;
- `block_hits`: one block's products and the rows at or above each query's running floor, in
  numpy on the CPU or torch on a GPU (`torch_hits`, TF32 off: `full_float32`), only the hits
  leaving the device;
- `search_device`: where the products run (``EVALKIT_SEARCH_DEVICE``, else a visible GPU, else
  the CPU); the ranking does not depend on it;
- `merge_top`, `spans`: an index searched shard by shard (a range of rows each), each query's
  shard tops merged into the whole index's top ``k`` by the tie rule, exactly;
- `TieRule`: the kit's tie rule (`evalkit.data.runs.ranked`) over rows of a corpus whose ids are
  known, shared with BM25's index.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np

from evalkit.core.devices import device_kind, resolve_device
from evalkit.core.errors import DataError
from evalkit.data.runs import ranked

UNIT = 2.0 ** -24  # float32 unit roundoff


class TieRule:
    """The kit's tie rule (`evalkit.data.runs.ranked`: score descending, then id as Python orders
    strings) over rows of a corpus whose ids are known, without building a dict per row."""

    def __init__(self, ids: Sequence[str]):
        self.ids = np.array(ids, dtype=object)
        self.order = np.empty(len(ids), dtype=np.int64)
        self.order[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids))

    def top(self, rows: np.ndarray, scores: np.ndarray, k: int) -> dict[str, float]:
        """{id: score} of the `k` best of `rows` (scores aligned with them), best first."""
        rows, scores = np.asarray(rows), np.asarray(scores)
        by_id = np.argsort(self.order[rows], kind="stable")  # linear time when rows come in id order
        best = by_id[np.argsort(-scores[by_id], kind="stable")[:k]]
        return dict(zip(self.ids[rows[best]].tolist(), scores[best].tolist()))



def error_bound(metric: str, dim: int, query_norm: np.ndarray, max_norm: float) -> np.ndarray:
    """An upper bound on |blocked score - the model's own score| per query (float32 rounding of
    two dot products of length `dim`, each within dim * u * |q| * |d|; for L2 also of the squared
    norms, the float64 distance's own rounding included with room to spare)."""
    gamma = (dim + 4) * UNIT
    if metric == "l2":
        return gamma * (2 * query_norm * max_norm + max_norm ** 2 + query_norm ** 2) * 2 + 1e-30
    return 2 * gamma * query_norm * max_norm + 1e-30



def block_hits(device: str, queries: np.ndarray, metric: str, k: int, slack: np.ndarray):
    """``hits(rows, skipped, floor) -> (query, row, score) arrays``: the block's scores at or above
    each query's `floor`, after setting a still-unset floor from the block's own `k`-th best less
    `slack`, the `skipped` (query, row) cells left out. numpy on the CPU (torch's CPU top-k is
    several times slower than numpy's partition), torch on a GPU (`torch_hits`)."""
    if device_kind(device) != "cpu":
        return torch_hits(device, queries, metric, k, slack)

    def hits(rows: np.ndarray, skipped: tuple, floor: np.ndarray):
        scores = queries @ rows.T
        if metric == "l2":  # -|q - d|^2 + |q|^2: the same order as the negative distance
            scores = 2 * scores - np.einsum("ij,ij->i", rows, rows, dtype=np.float32)[None]
        scores[skipped] = -np.inf
        unset = ~np.isfinite(floor)
        if unset.any() and len(rows) >= k:
            floor[unset] = np.partition(scores[unset], len(rows) - k, axis=1)[:, len(rows) - k] - slack[unset]
        hit_q, hit_r = np.nonzero(scores >= floor[:, None])
        return hit_q, hit_r, scores[hit_q, hit_r]
    return hits


def torch_hits(device: str, queries: np.ndarray, metric: str, k: int, slack: np.ndarray):
    """`block_hits` in torch on `device`: products in full float32 (TF32 off, so `error_bound`
    holds), only the hits leaving the device."""
    import torch

    on_device = torch.from_numpy(queries).to(device)

    def hits(rows: np.ndarray, skipped: tuple, floor: np.ndarray):
        with full_float32(torch), torch.inference_mode():
            block = torch.from_numpy(np.array(rows)).to(device)
            scores = on_device @ block.T
            if metric == "l2":
                scores = 2 * scores - (block * block).sum(dim=1)[None]
            scores[torch.from_numpy(skipped[0]), torch.from_numpy(skipped[1])] = -torch.inf
            unset = np.flatnonzero(~np.isfinite(floor))
            if len(unset) and len(rows) >= k:
                kth = torch.topk(scores[torch.from_numpy(unset)], k, dim=1, sorted=False).values.min(dim=1).values
                floor[unset] = kth.double().cpu().numpy() - slack[unset]
            found = torch.nonzero(scores >= torch.from_numpy(floor).to(device)[:, None])
            hit_scores = scores[found[:, 0], found[:, 1]]
            return found[:, 0].cpu().numpy(), found[:, 1].cpu().numpy(), hit_scores.cpu().numpy()
    return hits


def search_device() -> str:
    """Where a search's blocked products run: ``EVALKIT_SEARCH_DEVICE``, else a visible GPU,
    else the CPU. The ranking does not depend on it (the shortlist's scores are rescored)."""
    named = os.environ.get("EVALKIT_SEARCH_DEVICE") or None
    device = resolve_device(named)
    if named is not None and device_kind(device) != "cpu":
        import torch  # only when a device other than the CPU is named

        try:
            kind = torch.device(device).type
        except (RuntimeError, ValueError):
            kind = None
        index = device.partition(":")[2]
        usable = (kind == "cuda" and torch.cuda.is_available() and (not index or index.isdigit()
                  and int(index) < torch.cuda.device_count())) or (kind == "mps" and torch.backends.mps.is_available())
        if not usable:
            raise DataError(f"EVALKIT_SEARCH_DEVICE={named!r}", "is not a device of this machine; use cpu, cuda or "
                            "cuda:N with N below the number of visible GPUs, or unset it")
    return device


@contextmanager
def full_float32(torch):
    """float32 products in full precision (no TF32), whatever the caller set globally."""
    matmul = torch.backends.cuda.matmul
    saved = matmul.allow_tf32
    matmul.allow_tf32 = False
    try:
        yield
    finally:
        matmul.allow_tf32 = saved


def merge_top(parts: Sequence[Sequence[dict[str, float]]], k: int) -> list[dict[str, float]]:
    """Per query, the top `k` of the union of its shards' tops (each shard's exact top `k` of its
    rows), ranked by the kit's tie rule (`evalkit.data.runs.ranked`): the whole index's top `k`,
    since every document of it is in its own shard's top `k` under the same total order."""
    out = []
    for tops in zip(*parts):
        union = {doc: score for top in tops for doc, score in top.items()}
        out.append({doc: union[doc] for doc in ranked(union)[:k]})
    return out


def spans(rows: int, size: int) -> list[tuple[int, int]]:
    """The index's rows as fixed shards of `size` rows (the last shorter), in row order."""
    return [(begin, min(begin + size, rows)) for begin in range(0, rows, size)] or [(0, 0)]
