"""SPECTER2 paper encoder: `allenai/specter2_base` with the proximity adapter, without `adapters`.

What the authors run (github allenai/SPECTER2 README): ``AutoAdapterModel.from_pretrained(
'allenai/specter2_base')``, ``model.load_adapter('allenai/specter2', source='hf',
load_as='proximity', set_active=True)``, text ``title + tokenizer.sep_token + (abstract or
'')``, ``tokenizer(..., padding=True, truncation=True, return_token_type_ids=False,
max_length=512)`` and ``output.last_hidden_state[:, 0, :]``, not normalised (the same text
and pooling as SciNCL, see `bert_cls.py`).

The `adapters` library pins transformers 4.x, so the adapter is run natively here. The
proximity adapter was trained by SciRepEval with ``add_adapter(task, config="pfeiffer")``
(github allenai/scirepeval, adapter_fusion.py; "pfeiffer" is "seq_bn" in `adapters`), whose
values (src/adapters/configuration/adapter_config.py, SeqBnConfig) are: reduction_factor 16,
non_linearity relu, original_ln_before True, original_ln_after True, residual_before_ln True,
adapter_residual_before_ln False, ln_before False, ln_after False, mh_adapter False,
output_adapter True, scaling 1.0. The values are read from the adapter folder's
``adapter_config.json``; weights from ``adapter.safetensors`` or ``pytorch_adapter.bin``.

Forward of one sequential bottleneck adapter (src/adapters/methods/modeling.py, Adapter.
pre_forward / forward / post_forward, called from methods/bottleneck.py
bottleneck_layer_forward, which models/bert/modeling_bert.py puts in place of the
``LayerNorm(h + input)`` of BertSelfOutput (mh_adapter) and BertOutput (output_adapter)),
with h = dropout(dense(x)) of that sublayer, r its residual input and LN its LayerNorm:

    residual = h                          if residual_before_ln is True
    h = LN(h + r)                         if original_ln_before ("post_add": residual = h + r)
    residual = h                          if residual_before_ln is False
    a = ln_before(h); a = up(act(down(a))) * scaling
    a = ln_after(a + residual)            if adapter_residual_before_ln
    a = ln_after(a) + residual            otherwise (ln_* only when configured)
    out = LN(a + r)                       if original_ln_after, else a

For the proximity adapter: ``LN(h + up(relu(down(LN(h + r)))) + r)``, output sublayers only.
Each layer's bottleneck width is ``int(hidden_size // reduction_factor)`` (at least 1).
PHM layers, gating, parallel adapters, learned scaling and invertible adapters are not
implemented and raise `KitError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from evalkit.core.errors import DataError, MissingPrerequisite
from evalkit.encoders.bert_cls import POOLING, TEXT_FORMAT, BertClsEncoder, one_line, resolved_revision

BASE = "allenai/specter2_base"
PROXIMITY = "allenai/specter2"
CONFIG_FILE = "adapter_config.json"
WEIGHT_FILES = ("adapter.safetensors", "pytorch_adapter.bin")

# Named configs of `adapters` (and adapter-transformers 3) that an old adapter_config.json may cite.
_SEQ_BN = {"original_ln_before": True, "original_ln_after": True, "residual_before_ln": True,
           "adapter_residual_before_ln": False, "ln_before": False, "ln_after": False, "mh_adapter": False,
           "output_adapter": True, "non_linearity": "relu", "reduction_factor": 16}
_DOUBLE_SEQ_BN = {**_SEQ_BN, "original_ln_before": False, "mh_adapter": True, "non_linearity": "swish"}
NAMED_CONFIGS = {"pfeiffer": _SEQ_BN, "seq_bn": _SEQ_BN, "houlsby": _DOUBLE_SEQ_BN, "double_seq_bn": _DOUBLE_SEQ_BN}
# BnConfig defaults for keys a saved config may leave out.
BN_DEFAULTS = {"original_ln_before": False, "original_ln_after": True, "ln_before": False, "ln_after": False,
               "residual_before_ln": True, "adapter_residual_before_ln": False, "scaling": 1.0,
               "leave_out": [], "is_parallel": False, "use_gating": False, "phm_layer": False,
               "inv_adapter": None}

# <prefix>layer.N.(attention.output|output).<adapters container>.<name>.<part>.(weight|bias)
_KEY = re.compile(r"(?:^|\.)layer\.(\d+)\.(attention\.output|output)\.(\w*adapters)\.([^.]+)\.(.+)\.(weight|bias)$")


def bottleneck_config(raw: Mapping) -> dict:
    """The bottleneck settings of an adapter_config.json (its ``config`` entry), checked."""
    config = raw.get("config", raw)
    if isinstance(config, str):
        if config.lower() not in NAMED_CONFIGS:
            raise DataError(CONFIG_FILE, f"adapter config {config!r} is not a sequential bottleneck adapter; "
                                         "use a SPECTER2-style (pfeiffer/seq_bn) adapter")
        config = NAMED_CONFIGS[config.lower()]
    if config.get("architecture") not in (None, "bottleneck"):
        raise DataError(CONFIG_FILE, f"adapter architecture {config.get('architecture')!r} is not supported; "
                                     "only sequential bottleneck adapters are")
    missing = [k for k in ("mh_adapter", "output_adapter", "reduction_factor", "non_linearity") if k not in config]
    if missing:
        raise DataError(CONFIG_FILE, f"adapter config lacks {', '.join(missing)}; check {CONFIG_FILE}")
    merged = {**BN_DEFAULTS, **config}
    for key, bad in (("is_parallel", True), ("use_gating", True), ("phm_layer", True)):
        if merged.get(key) == bad:
            raise DataError(CONFIG_FILE, f"adapter setting {key}={bad} is not supported by the native SPECTER2 adapter")
    if not isinstance(merged["scaling"], (int, float)) or isinstance(merged["scaling"], bool):
        raise DataError(CONFIG_FILE, f"adapter scaling {merged['scaling']!r} is not supported (only a constant)")
    if merged["residual_before_ln"] == "post_add" and not merged["original_ln_before"]:
        raise DataError(CONFIG_FILE,
                        "adapter residual_before_ln='post_add' needs original_ln_before; check the adapter config")
    return merged


def _reduction(config: Mapping, layer: int) -> float:
    factor = config["reduction_factor"]
    if isinstance(factor, Mapping):
        if str(layer) in factor:
            return factor[str(layer)]
        if "default" in factor:
            return factor["default"]
        raise DataError(CONFIG_FILE, f"adapter reduction_factor gives no value for layer {layer} and no default")
    return factor


def _make_adapter_class():
    """The bottleneck module (defined lazily so that importing this file needs no torch)."""
    import torch
    from torch import nn
    from transformers.activations import get_activation

    class Bottleneck(nn.Module):
        """One sequential bottleneck adapter with its pre/post residual and LayerNorm handling."""

        def __init__(self, hidden: int, width: int, config: Mapping):
            super().__init__()
            self.config = dict(config)
            self.norm_before = nn.LayerNorm(hidden) if config["ln_before"] else None
            self.down = nn.Linear(hidden, width)
            name = config["non_linearity"]
            if name is None:
                self.act = nn.Identity()
            elif name.lower() == "leakyrelu":
                self.act = nn.LeakyReLU()
            else:
                self.act = get_activation(name.lower())
            self.up = nn.Linear(width, hidden)
            self.norm_after = nn.LayerNorm(hidden) if config["ln_after"] else None
            self.scaling = float(config["scaling"])

        def forward(self, h: torch.Tensor, residual_input: torch.Tensor, layer_norm: nn.Module) -> torch.Tensor:
            c = self.config
            residual = h if c["residual_before_ln"] is True else None
            if c["original_ln_before"]:
                h = h + residual_input
                if c["residual_before_ln"] == "post_add":
                    residual = h
                h = layer_norm(h)
            if not c["residual_before_ln"]:
                residual = h
            a = self.norm_before(h) if self.norm_before is not None else h
            a = self.up(self.act(self.down(a))) * self.scaling
            if c["adapter_residual_before_ln"]:
                a = a + residual
            if self.norm_after is not None:
                a = self.norm_after(a)
            if not c["adapter_residual_before_ln"]:
                a = a + residual
            if c["original_ln_after"]:
                a = layer_norm(a + residual_input)
            return a

    class AdaptedOutput(nn.Module):
        """BertSelfOutput / BertOutput with the adapter in place of ``LayerNorm(h + input)``."""

        def __init__(self, inner: nn.Module, adapter: Bottleneck):
            super().__init__()
            self.dense, self.dropout, self.LayerNorm = inner.dense, inner.dropout, inner.LayerNorm
            self.adapter = adapter

        def forward(self, hidden_states, input_tensor):
            return self.adapter(self.dropout(self.dense(hidden_states)), input_tensor, self.LayerNorm)

    return Bottleneck, AdaptedOutput


def adapter_folder(adapter: str, revision: str | None) -> Path:
    """The local folder of an adapter: `adapter` itself, or its hub snapshot (config and weights only)."""
    if Path(adapter).is_dir():
        return Path(adapter)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(adapter, revision=revision, allow_patterns=[CONFIG_FILE, *WEIGHT_FILES]))
    except Exception as exc:  # hub errors come in many types
        raise MissingPrerequisite(f"cannot fetch adapter {adapter} ({one_line(exc)})",
                                  "check the hub id, revision or folder") from None


def read_adapter(folder: Path) -> tuple[dict, dict]:
    """(adapter_config.json, state dict) of an AdapterHub-format folder."""
    import torch

    config_path = folder / CONFIG_FILE
    if not config_path.is_file():
        raise DataError(config_path, f"missing; the adapter folder must hold {CONFIG_FILE} and its weights")
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
        if (folder / WEIGHT_FILES[0]).is_file():
            from safetensors.torch import load_file

            weights = load_file(str(folder / WEIGHT_FILES[0]))
        elif (folder / WEIGHT_FILES[1]).is_file():
            weights = torch.load(folder / WEIGHT_FILES[1], map_location="cpu", weights_only=True)
        else:
            raise DataError(folder, f"no {' or '.join(WEIGHT_FILES)}; check the adapter folder")
    except (OSError, ValueError, RuntimeError) as exc:
        raise DataError(folder, f"cannot read the adapter ({one_line(exc)}); check the adapter folder") from None
    return raw, weights


def attach_adapter(model, raw_config: Mapping, weights: Mapping, where: str = "adapter") -> dict:
    """Put the bottleneck adapter described by `raw_config` and `weights` into a transformers BertModel.

    Returns the bottleneck settings used. Every expected weight must be present and every
    adapter weight used; a mismatch raises `KitError` naming `where`.
    """
    import torch

    config = bottleneck_config(raw_config)
    hidden = model.config.hidden_size
    if raw_config.get("hidden_size", hidden) != hidden:
        raise DataError(where, f"adapter hidden_size {raw_config['hidden_size']} != model's {hidden}; "
                        "pair the adapter with its base model")
    found: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    names = set()
    for key, tensor in weights.items():
        if "invertible_adapters" in key:
            if config.get("inv_adapter"):
                raise DataError(where, "invertible adapters are not supported")
            continue  # a legacy task adapter's unused invertible weights, dropped as `adapters` does
        match = _KEY.search(key)
        if not match:
            raise DataError(where, f"unexpected weight {key}; only bottleneck adapter weights are supported")
        layer, location, _, name, part, kind = match.groups()
        names.add(name)
        found.setdefault((int(layer), location), {})[f"{part}.{kind}"] = tensor
    if len(names) > 1:
        raise DataError(where, f"weights of several adapters ({', '.join(sorted(names))}); keep one per folder")

    Bottleneck, AdaptedOutput = _make_adapter_class()
    down = "adapter_down.1" if config["ln_before"] else "adapter_down.0"
    parts = {"down": down, "up": "adapter_up"}
    if config["ln_before"]:
        parts["norm_before"] = "adapter_norm_before"
    if config["ln_after"]:
        parts["norm_after"] = "adapter_norm_after"
    layers = model.encoder.layer
    wanted = [loc for loc, on in (("attention.output", config["mh_adapter"]), ("output", config["output_adapter"]))
              if on]
    leave_out = {int(i) for i in config["leave_out"]}
    for index, layer in enumerate(layers):
        for location in wanted:
            tensors = found.pop((index, location), None)
            if index in leave_out:
                if tensors:
                    raise DataError(where, f"weights for left-out layer {index}; check {CONFIG_FILE}")
                continue
            if not tensors:
                raise DataError(where, f"no adapter weights for layer {index} {location}; check {CONFIG_FILE}")
            width = max(1, int(hidden // _reduction(config, index)))
            adapter = Bottleneck(hidden, width, config)
            state = {}
            for module, stem in parts.items():
                for kind in ("weight", "bias"):
                    tensor = tensors.pop(f"{stem}.{kind}", None)
                    if tensor is None and module == "norm_before":  # `adapters` also saves it as adapter_down.0
                        tensor = tensors.get(f"adapter_down.0.{kind}")
                    if tensor is None:
                        raise DataError(where, f"layer {index} {location} lacks {stem}.{kind}")
                    state[f"{module}.{kind}"] = tensor
            if config["ln_before"]:
                for kind in ("weight", "bias"):
                    tensors.pop(f"adapter_down.0.{kind}", None)
            if tensors:
                raise DataError(where, f"layer {index} {location} has unused weights {sorted(tensors)}")
            try:
                adapter.load_state_dict(state, strict=True)
            except RuntimeError as exc:
                raise DataError(where, f"adapter weights do not fit the config ({one_line(exc)})") from None
            owner = layer.attention if location == "attention.output" else layer
            inner = owner.output
            adapted = AdaptedOutput(inner, adapter).to(device=inner.dense.weight.device, dtype=inner.dense.weight.dtype)
            adapted.eval()
            owner.output = adapted
    if found:
        raise DataError(where, f"weights for sublayers the config does not enable: {sorted(found)}")
    return config


class Specter2Encoder(BertClsEncoder):
    """SPECTER2: base model plus a bottleneck adapter (default: the proximity adapter).

    `location` is the base model (hub id or folder), `adapter` the adapter (hub id or
    AdapterHub-format folder); both load on first use. `revision` / `adapter_revision` pin
    hub commits. Text and pooling are SciNCL's (`BertClsEncoder`).
    """

    family = "specter2"

    def __init__(self, location: str = BASE, adapter: str | None = PROXIMITY, revision: str | None = None,
                 adapter_revision: str | None = None, device: str = "cpu", max_length: int = 512,
                 batch_size: int = 16):
        super().__init__(location, revision, device, max_length, batch_size)
        self.adapter = adapter
        self.adapter_revision = adapter_revision
        self.adapter_config: dict | None = None  # the bottleneck settings used, once loaded

    def _build(self):
        tokenizer, model = super()._build()
        if self.adapter:
            raw, weights = read_adapter(adapter_folder(self.adapter, self.adapter_revision))
            self.adapter_config = attach_adapter(model, raw, weights, where=f"adapter {self.adapter}")
            model.eval()
        return tokenizer, model

    def describe(self) -> dict:
        """Everything that changes the vectors."""
        adapter = None
        if self.adapter:
            adapter = {"location": self.adapter, "revision": resolved_revision(self.adapter, self.adapter_revision),
                       "kind": "sequential bottleneck (AdapterHub), run natively"}
        return {"family": self.family, "location": self.location,
                "revision": resolved_revision(self.location, self.revision),
                "text_format": TEXT_FORMAT, "pooling": POOLING, "max_length": self.max_length,
                "token_type_ids": "not passed (return_token_type_ids=False)", "adapter": adapter}
