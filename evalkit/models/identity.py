"""The identity of user code behind a run: what keys a run made by a model the kit did not write.

The run store (`evalkit.runstore`) reuses a run only when its sidecar matches; the kit's own
models are pinned by their registry entry and the kit's scoring code. A user's model is
pinned by one of, in order:

- a revision the user gives (any string: a commit, a version, a date);
- a fingerprint the kit derives: the sha256 of a local model folder's files (its weights),
  of a torch module's weights and architecture, of a callable's or a class's source text;
- nothing: `None`, and a run keyed by it is never reused (made again every time).

A source fingerprint covers the source text of the function or class that scores (for a
bound method or an instance: its class) and the state it carries: a closure's cells and
defaults, an instance's attributes, when those are plain values (numbers, strings, lists
and dicts of them), numpy arrays or torch modules (by their weights); any other value makes
the fingerprint unknown (None). State the source does not show (a global model loaded
elsewhere, a file read at run time) is not in it: give a revision for that.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path

PLAIN = (str, int, float, bool, type(None))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def folder_identity(folder: Path) -> dict:
    """A local model folder: the sha256 of every file's name and bytes (`evalkit.hashing`)."""
    from evalkit.hashing import files_sha256

    folder = Path(folder)
    paths = sorted(p for p in folder.rglob("*") if p.is_file())
    return {"folder_sha256": files_sha256(paths, [str(p.relative_to(folder)) for p in paths])}


def module_weights_sha256(module) -> str:
    """sha256 of a torch module's architecture (its repr) and every tensor of its state dict
    (name, dtype, shape, bytes)."""
    import torch

    digest = hashlib.sha256(repr(module).encode())
    for name, tensor in module.state_dict().items():
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def _is_torch_module(value) -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency
        return False
    return isinstance(value, torch.nn.Module)


def _value_identity(value):
    """A value's contribution to a fingerprint: plain values (and lists, tuples, dicts of them) as
    they are, numpy arrays and torch modules by their bytes; None for anything else (the
    fingerprint is then incomplete)."""
    import numpy as np

    if isinstance(value, PLAIN):
        return value
    if isinstance(value, (tuple, list)):
        items = [_value_identity(v) for v in value]
        return None if any(i is None and v is not None for i, v in zip(items, value)) else items
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        items = {k: _value_identity(v) for k, v in value.items()}
        return None if any(items[k] is None and value[k] is not None for k in value) else items
    if isinstance(value, np.ndarray):
        return {"array_sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest(),
                "shape": list(value.shape), "dtype": str(value.dtype)}
    if _is_torch_module(value):
        return {"weights_sha256": module_weights_sha256(value)}
    return None


def _state(values) -> str | None:
    """sha256 of some values' identities; None when one of them has none."""
    seen = _value_identity(list(values))
    return None if seen is None else _sha(json.dumps(seen, sort_keys=True))


def _source(obj) -> str | None:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):  # built in, defined in a REPL without source, C extension
        return None


def object_identity(obj) -> dict | None:
    """The fingerprint the kit derives for a Python model object, or None when it cannot see
    what decides the scores (see the module docstring)."""
    if _is_torch_module(obj):  # a SentenceTransformer, or the user's own torch encoder
        kind = type(obj)
        return {"class": f"{kind.__module__}.{kind.__qualname__}", "weights_sha256": module_weights_sha256(obj)}
    if inspect.ismethod(obj):  # a bound method: its object decides (class source and state)
        found = object_identity(obj.__self__)
        return None if found is None else {"method": obj.__func__.__qualname__, **found}
    if inspect.isfunction(obj):
        values = [c.cell_contents for c in (obj.__closure__ or ())] + list(obj.__defaults__ or ())
        values += list((obj.__kwdefaults__ or {}).values())
        return _fingerprint(obj, obj.__qualname__, values)
    if inspect.isclass(obj):
        return _fingerprint(obj, obj.__qualname__, [])
    kind = type(obj)  # an instance: its class's source and its attributes
    return _fingerprint(kind, kind.__qualname__, [vars(obj)] if hasattr(obj, "__dict__") else [])


def _fingerprint(code, qualname: str, values: list) -> dict | None:
    source = _source(code)
    state = _state(values)
    if source is None or state is None:
        return None
    return {"qualname": qualname, "source_sha256": _sha(source), "state_sha256": state}


def identity_of(obj, revision: str | None = None) -> dict | None:
    """A user-given revision wins; else the derived fingerprint (`object_identity`)."""
    if revision is not None:
        from evalkit.errors import KitError

        if not str(revision).strip():
            raise KitError("revision is empty; give a non-empty revision or leave it out")
        return {"revision": str(revision)}
    return object_identity(obj)
