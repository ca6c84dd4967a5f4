"""SPECTER2 encoder with its adapter run natively, against golden vectors from the real `adapters` library.

tests/golden/specter2/ was written by scripts/specter2_golden.py in a separate venv with
`adapters` 1.3.0 / transformers 4.57.6 (see that script's docstring): a tiny random BERT, a
random adapter with the Specter2 proximity configuration ("[PRX]", pfeiffer/seq_bn), a
second adapter exercising the other bottleneck options, and the [CLS] vectors the library
gave for five papers. Here they load through the kit's own loader, without `adapters`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from evalkit.core.errors import KitError
from evalkit.encoders.specter2 import Specter2Encoder, bottleneck_config

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "specter2"


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads((GOLDEN / "golden.json").read_text(encoding="utf-8"))


def papers(golden):
    return [(p["title"], p["abstract"]) for p in golden["papers"]]


def encoder(adapter: str | Path | None, **kwargs) -> Specter2Encoder:
    return Specter2Encoder(str(GOLDEN / "base"), adapter=None if adapter is None else str(adapter), **kwargs)


def test_golden_is_small_and_has_the_specter2_proximity_config():
    assert sum(p.stat().st_size for p in GOLDEN.rglob("*") if p.is_file()) < 500_000
    raw = json.loads((GOLDEN / "adapter_proximity" / "adapter_config.json").read_text())
    config = raw["config"]
    expected = {"reduction_factor": 16, "non_linearity": "relu", "original_ln_before": True,
                "original_ln_after": True, "residual_before_ln": True, "adapter_residual_before_ln": False,
                "ln_before": False, "ln_after": False, "mh_adapter": False, "output_adapter": True,
                "scaling": 1.0, "use_gating": False, "phm_layer": False, "is_parallel": False,
                "inv_adapter": None, "leave_out": []}
    assert {k: config[k] for k in expected} == expected
    assert bottleneck_config({"config": "pfeiffer"})["reduction_factor"] == 16


@pytest.mark.parametrize("batch_size", [2, 5])
def test_proximity_adapter_matches_the_adapters_library(golden, batch_size):
    got = encoder(GOLDEN / "adapter_proximity", batch_size=batch_size).encode(papers(golden))
    assert got.dtype == np.float32 and got.shape == (5, 32)
    np.testing.assert_allclose(got, np.asarray(golden["embeddings"]["proximity"]), atol=1e-5, rtol=0)


def test_other_bottleneck_options_match_the_adapters_library(golden):
    got = encoder(GOLDEN / "adapter_variant", batch_size=3).encode(papers(golden))
    np.testing.assert_allclose(got, np.asarray(golden["embeddings"]["variant"]), atol=1e-5, rtol=0)


def test_the_adapter_matters(golden):
    base = encoder(None).encode(papers(golden))
    np.testing.assert_allclose(base, np.asarray(golden["embeddings"]["none"]), atol=1e-5, rtol=0)
    assert np.abs(base - np.asarray(golden["embeddings"]["proximity"])).max() > 0.1


def test_safetensors_weights_load_the_same(golden, tmp_path):
    import torch
    from safetensors.torch import save_file

    folder = tmp_path / "adapter"
    folder.mkdir()
    shutil.copy(GOLDEN / "adapter_proximity" / "adapter_config.json", folder)
    weights = torch.load(GOLDEN / "adapter_proximity" / "pytorch_adapter.bin", weights_only=True)
    save_file({k: v.clone().contiguous() for k, v in weights.items()}, str(folder / "adapter.safetensors"))
    got = encoder(folder).encode(papers(golden)[:2])
    np.testing.assert_allclose(got, np.asarray(golden["embeddings"]["proximity"][:2]), atol=1e-5, rtol=0)


def _adapter_copy(tmp_path, **changes) -> Path:
    folder = tmp_path / "adapter"
    shutil.copytree(GOLDEN / "adapter_proximity", folder)
    raw = json.loads((folder / "adapter_config.json").read_text())
    raw["config"].update(changes)
    (folder / "adapter_config.json").write_text(json.dumps(raw))
    return folder


@pytest.mark.parametrize("changes, words", [
    ({"phm_layer": True}, "phm_layer"),
    ({"use_gating": True}, "use_gating"),
    ({"mh_adapter": True}, "no adapter weights"),
    ({"reduction_factor": 8}, "do not fit"),
    ({"architecture": "lora"}, "architecture"),
])
def test_unsupported_or_mismatched_adapters_fail_in_one_line(golden, tmp_path, changes, words):
    with pytest.raises(KitError) as err:
        encoder(_adapter_copy(tmp_path, **changes)).encode(papers(golden)[:1])
    assert words in str(err.value) and "\n" not in str(err.value)


def test_missing_files_fail_in_one_line(golden, tmp_path):
    with pytest.raises(KitError) as err:
        encoder(tmp_path).encode(papers(golden)[:1])
    assert "adapter_config.json" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(KitError) as err:
        Specter2Encoder(str(tmp_path / "no-base"), adapter=None).encode(papers(golden)[:1])
    assert str(tmp_path / "no-base") in str(err.value) and "\n" not in str(err.value)


def test_describe():
    info = encoder(GOLDEN / "adapter_proximity").describe()
    assert info["family"] == "specter2" and len(info["revision"]) == 16
    assert info["adapter"]["location"] == str(GOLDEN / "adapter_proximity") and len(info["adapter"]["revision"]) == 16
    assert info["text_format"] == "title + tokenizer.sep_token + (abstract or '')" and info["max_length"] == 512
    default = Specter2Encoder().describe()
    assert default["location"] == "allenai/specter2_base" and default["adapter"]["location"] == "allenai/specter2"
    assert default["revision"] == "main" and default["adapter"]["revision"] == "main"
