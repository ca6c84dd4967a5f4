"""otAspire: contextual sentence vectors and optimal-transport scoring, as in the authors' code.

Read from github allenai/aspire (commit 3010cd4): src/learning/batchers.py
(AbsSentTokBatcher.prepare_abstracts / prepare_bert_sentences), src/learning/facetid_models/
disent_models.py (WordSentAlignBiEnc.sent_reps_bert, caching_encode, caching_score),
src/learning/facetid_models/pair_distances.py (AllPairMaskedWasserstein), the CSFCube ranking
in src/pre_process/pp_gen_nearest.py (CachingTrainedScoringModel) with the otAspire
hyper-parameters config/models_config/s2orccompsci/hparam_opt/miswordbienc-otstuni-best.json,
and examples/ex_aspire_consent_multimatch.py (the HF model card's ``AspireConSent``).

Encoding (one BERT pass per paper):

- the pieces are ``title + ' [SEP] '`` followed by the abstract sentences; each piece is
  tokenised on its own with ``tokenizer.tokenize`` (the literal "[SEP]" becomes the [SEP]
  token) and the pieces' tokens are concatenated; at most 500 tokens in all (``max_num_toks``):
  the piece that crosses the limit is cut, later pieces are dropped;
- input ids are ``[CLS] + tokens + [SEP]`` (the authors call BERT's
  ``build_inputs_with_special_tokens``, gone in transformers 5, so the ids are added here),
  token types all 0, attention mask 1, padded with the pad id;
- a sentence's vector is the mean of the final hidden states at its own token positions
  (1-based after [CLS]). The title piece (with its [SEP]), [CLS] and the final [SEP] belong
  to no sentence. An empty sentence keeps its (empty) slot and gets the zero vector
  (the authors divide by ``count.clamp(min=1)``). No normalisation.

Scoring (``caching_score`` -> ``AllPairMaskedWasserstein.compute_distance(...,
return_pair_sims=True)``, larger is more similar):

- cost: Euclidean distance between sentence vectors (``torch.cdist``);
- weights: query sentence i gets ``softmax_i(max_j -d_ij / T)``, candidate sentence j gets
  ``softmax_j(max_i -d_ij / T)`` with T = ``sent_sm_temp`` = 5000 (nearly uniform), the
  trained model's setting used for the paper's CSFCube runs (the demo notebook's
  ``AllPairMaskedWasserstein({})`` falls back to T = 1);
- entropic OT by GeomLoss 0.2.4 ``SamplesLoss("sinkhorn", p=1, blur=0.05, scaling=0.9,
  debias=False, potentials=True)`` (tensorized backend: epsilon-scaling from the point
  cloud's diameter down to blur, symmetric averaged updates, a last extrapolation step);
  the plan is ``exp((f_i + g_j - d_ij) / blur) * a_i * b_j`` and the score is
  ``sum_ij plan_ij * (-d_ij)``: a negative, transport-weighted distance.

`ot_score` re-implements that GeomLoss routine (geomloss/sinkhorn_divergence.py and
sinkhorn_samples.py at tag v0.2.4) in torch, float32 like the authors. One detail depends on
how the authors batched candidates: GeomLoss takes the diameter over the whole batch (the
repeated query, up to 64 candidates in pool order and their zero padding), which sets how
many epsilon steps run (scores move by up to ~3e-3 and rankings change); `ot_score` uses the
pair's own diameter unless `diameter` is given (`batch_diameter` reproduces the authors' value
for a batch, and the registry's otAspire scores the authors' batches: `models.paper.OTAspire`).
``solver="emd"`` gives the exact (unregularised) OT score with the same cost and weights, ``-ot.emd2(a, b, d)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evalkit.core.errors import DataError
from evalkit.encoders.bert_cls import LazyBert, resolved_revision

MULTIM_COMPSCI = "allenai/aspire-contextualsentence-multim-compsci"
MAX_NUM_TOKS = 500
TITLE_SUFFIX = " [SEP] "
# The trained otAspire model's scoring hyper-parameters (miswordbienc-otstuni-best.json).
BLUR = 0.05
SCALING = 0.9
SENT_SM_TEMP = 5000.0


def sentence_token_positions(tokenizer, title: str, sentences: Sequence[str],
                             max_tokens: int = MAX_NUM_TOKS) -> tuple[list[int], list[list[int]]]:
    """(input ids with [CLS]/[SEP], per abstract sentence its token positions), as the authors build them."""
    pieces = [title + TITLE_SUFFIX, *sentences]
    ids: list[int] = []
    positions: list[list[int]] = []
    for piece in pieces:
        tokens = tokenizer.tokenize(piece)
        piece_ids = tokenizer.convert_tokens_to_ids(tokens)
        start = len(ids)
        if start + len(tokens) <= max_tokens:
            positions.append([start + i + 1 for i in range(len(tokens))])
            ids.extend(piece_ids)
        else:
            keep = max_tokens - start
            if keep > 0:
                positions.append([start + i + 1 for i in range(keep)])
                ids.extend(piece_ids[:keep])
            break
    return [tokenizer.cls_token_id, *ids, tokenizer.sep_token_id], positions[1:]


class AspireEncoder(LazyBert):
    """otAspire contextual sentence encoder (default `allenai/aspire-contextualsentence-multim-compsci`).

    `location` is a hub id or a local folder, loaded on first use; `revision` pins a hub
    commit. `encode` takes (title, abstract sentences) documents and returns, per document,
    an (n, dim) float32 array: one row per abstract sentence kept (sentences past the
    500-token budget are dropped, so n can be smaller than the number of sentences given).
    `max_tokens` is the authors' ``max_num_toks`` (tokens besides [CLS] and [SEP]).
    """

    family = "otaspire"

    def __init__(self, location: str = MULTIM_COMPSCI, revision: str | None = None, device: str = "cpu",
                 max_tokens: int = MAX_NUM_TOKS, batch_size: int = 8):
        super().__init__(location, revision, device, batch_size)
        self.max_tokens = max_tokens

    def _build(self):
        tokenizer, model = super()._build()
        if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None or tokenizer.pad_token_id is None:
            raise DataError(self.location, "the tokenizer has no [CLS]/[SEP]/[PAD] token; use a BERT-style model")
        return tokenizer, model

    def describe(self) -> dict:
        """Everything that changes the vectors (and the scoring settings `ot_score` uses by default)."""
        return {"family": self.family, "location": self.location,
                "revision": resolved_revision(self.location, self.revision),
                "text_format": "[CLS] tokenize(title + ' [SEP] ') + tokenize(sentence) for each sentence + [SEP]",
                "max_tokens": self.max_tokens,
                "pooling": "per abstract sentence: mean of last_hidden_state over its tokens; not normalised",
                "scoring": {"cost": "euclidean", "weights": f"softmax(max -d / {SENT_SM_TEMP})",
                            "solver": f"geomloss 0.2.4 sinkhorn p=1 blur={BLUR} scaling={SCALING} debias=False",
                            "score": "sum(plan * -d)"},
                "adapter": None}

    def encode(self, documents: Sequence[tuple[str, Sequence[str]]]) -> list[np.ndarray]:
        """One (n_sentences, dim) float32 array per (title, sentences) document."""
        import torch

        tokenizer, model = self._load()
        out: list[np.ndarray] = []
        for start in range(0, len(documents), self.batch_size):
            batch = documents[start:start + self.batch_size]
            built = []
            for title, sentences in batch:
                if isinstance(sentences, str):
                    raise DataError("otAspire input",
                                    "otAspire documents are (title, list of abstract sentences); got one string")
                ids, positions = sentence_token_positions(tokenizer, title or "", list(sentences), self.max_tokens)
                if not positions:
                    raise DataError("otAspire", f"document {title[:60]!r} has no abstract sentence within "
                                    f"{self.max_tokens} tokens; give it at least one sentence")
                built.append((ids, positions))
            width = max(len(ids) for ids, _ in built)
            input_ids = torch.full((len(built), width), tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(built), width), dtype=torch.long)
            for row, (ids, _) in enumerate(built):
                input_ids[row, :len(ids)] = torch.tensor(ids)
                mask[row, :len(ids)] = 1
            with torch.inference_mode():
                hidden = model(input_ids.to(self.device), token_type_ids=torch.zeros_like(input_ids).to(self.device),
                               attention_mask=mask.to(self.device),
                               output_hidden_states=False).last_hidden_state.float().cpu()
            for row, (_, positions) in enumerate(built):
                vectors = torch.zeros((len(positions), hidden.shape[-1]))
                for i, pos in enumerate(positions):
                    if pos:
                        vectors[i] = hidden[row, pos].sum(dim=0) / len(pos)
                out.append(vectors.numpy().astype(np.float32))
        return out


def _as_tensor(vectors):
    import torch

    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] == 0:
        raise DataError("otAspire scoring", f"needs a non-empty (n_sentences, dim) array; got shape {array.shape}")
    return torch.from_numpy(np.ascontiguousarray(array))


def _pair(query_vectors, doc_vectors):
    query, doc = _as_tensor(query_vectors), _as_tensor(doc_vectors)
    if query.shape[1] != doc.shape[1]:
        raise DataError("otAspire scoring", f"vector sizes differ ({query.shape[1]} vs {doc.shape[1]})")
    return query, doc


def batch_diameter(query_vectors, docs: Sequence) -> float:
    """GeomLoss's diameter for the authors' batch: the query and the docs zero-padded to the longest."""
    import torch

    query = _as_tensor(query_vectors)
    tensors = [_as_tensor(d) for d in docs]
    longest = max(t.shape[0] for t in tensors)
    points = [query, *tensors]
    if any(t.shape[0] < longest for t in tensors):
        points.append(torch.zeros((1, query.shape[1])))
    everything = torch.cat(points)
    return (everything.max(dim=0)[0] - everything.min(dim=0)[0]).norm().item()


def _epsilon_schedule(diameter: float, blur: float, scaling: float, p: int = 1) -> list[float]:
    """GeomLoss 0.2.4 epsilon_schedule."""
    steps = np.arange(p * np.log(diameter), p * np.log(blur), p * np.log(scaling))
    return [diameter ** p] + [np.exp(e) for e in steps] + [blur ** p]


def _geomloss_distances(x, y):
    """GeomLoss 0.2.4 utils.distances: sqrt of the expanded squared distance, negatives set to 0."""
    import torch

    squared = (x * x).sum(-1).unsqueeze(2) - 2 * torch.matmul(x, y.permute(0, 2, 1)) + (y * y).sum(-1).unsqueeze(1)
    result = squared.sqrt()
    result[squared < 0] = 0
    return result


def sinkhorn_potentials(a, x, b, y, blur: float = BLUR, scaling: float = SCALING, diameter: float | None = None):
    """GeomLoss 0.2.4 ``SamplesLoss('sinkhorn', p=1, debias=False, potentials=True)`` (tensorized), one pair.

    a (n,), x (n, D), b (m,), y (m, D): weights and points. Returns the dual potentials (f on
    x, g on y) as 1-D tensors.
    """
    import torch

    x, y, a, b = x.unsqueeze(0), y.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0)
    c_xy, c_yx = _geomloss_distances(x, y), _geomloss_distances(y, x)
    if diameter is None:
        d = x.shape[-1]
        flat_x, flat_y = x.view(-1, d), y.view(-1, d)
        mins = torch.stack((flat_x.min(dim=0)[0], flat_y.min(dim=0)[0])).min(dim=0)[0]
        maxs = torch.stack((flat_x.max(dim=0)[0], flat_y.max(dim=0)[0])).max(dim=0)[0]
        diameter = (maxs - mins).norm().item()
    eps_s = _epsilon_schedule(diameter, blur, scaling)

    def log_weights(w):
        logs = w.log()
        logs[w <= 0] = -100000
        return logs

    def softmin(eps, cost, f):
        return -eps * (f.view(1, 1, -1) - cost / eps).logsumexp(2).view(1, -1)

    a_log, b_log = log_weights(a), log_weights(b)
    eps = eps_s[0]
    a_y = softmin(eps, c_yx, a_log)
    b_x = softmin(eps, c_xy, b_log)
    for eps in eps_s:
        at_y = softmin(eps, c_yx, a_log + b_x / eps)
        bt_x = softmin(eps, c_xy, b_log + a_y / eps)
        a_y, b_x = 0.5 * (a_y + at_y), 0.5 * (b_x + bt_x)
    a_y, b_x = softmin(eps, c_yx, a_log + b_x / eps), softmin(eps, c_xy, b_log + a_y / eps)
    return b_x[0], a_y[0]


def ot_plan(query_vectors, doc_vectors, *, blur: float = BLUR, scaling: float = SCALING,
            sent_sm_temp: float = SENT_SM_TEMP, diameter: float | None = None):
    """(score, transport plan (n, m), query weights, doc weights) as the authors compute them."""
    import torch
    from torch.nn import functional

    query, doc = _pair(query_vectors, doc_vectors)
    with torch.no_grad():
        neg = -1 * torch.cdist(query.unsqueeze(0), doc.unsqueeze(0))[0]
        a = functional.log_softmax(neg.max(dim=1)[0].unsqueeze(0) / sent_sm_temp, dim=1).exp()[0]
        b = functional.log_softmax(neg.max(dim=0)[0].unsqueeze(0) / sent_sm_temp, dim=1).exp()[0]
        f, g = sinkhorn_potentials(a, query, b, doc, blur=blur, scaling=scaling, diameter=diameter)
        outersum = f.unsqueeze(1).expand(-1, doc.shape[0]) + g.unsqueeze(0).expand(query.shape[0], -1)
        plan = torch.exp((outersum + neg) / blur) * torch.outer(a, b)
        score = (plan * neg).sum()
    return float(score), plan.numpy(), a.numpy(), b.numpy()


def ot_score(query_vectors, doc_vectors, *, solver: str = "sinkhorn", blur: float = BLUR, scaling: float = SCALING,
             sent_sm_temp: float = SENT_SM_TEMP, diameter: float | None = None) -> float:
    """otAspire similarity of a query's and a document's sentence vectors (larger is more similar).

    ``solver="sinkhorn"`` (default): the authors' entropic OT score (see the module
    docstring); ``solver="emd"``: ``-ot.emd2(a, b, d)``, exact OT with the same weights a, b
    and Euclidean cost d. To rank a query's facet, pass only that facet's query rows, as the
    authors do (they encode the whole query paper, then select its facet sentences).
    """
    if solver == "sinkhorn":
        return ot_plan(query_vectors, doc_vectors, blur=blur, scaling=scaling, sent_sm_temp=sent_sm_temp,
                       diameter=diameter)[0]
    if solver != "emd":
        raise DataError("model settings", f"unknown otAspire solver {solver!r}; use 'sinkhorn' (the authors') or 'emd'")
    import ot
    from scipy.spatial.distance import cdist
    from scipy.special import softmax

    query, doc = _pair(query_vectors, doc_vectors)
    cost = cdist(query.double().numpy(), doc.double().numpy())
    a = softmax(-cost.min(axis=1) / sent_sm_temp)
    b = softmax(-cost.min(axis=0) / sent_sm_temp)
    return -float(ot.emd2(a, b, cost))


