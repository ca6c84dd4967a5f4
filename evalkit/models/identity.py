"""The identity of user code behind a run: what keys a run made by a model the kit did not write.

The run store (`evalkit.data.runstore`) reuses a run only when its sidecar matches; the kit's own
models are pinned by their registry entry, their weight folders' files and the kit's scoring
code. A user's Python model object is pinned by a fingerprint of **everything it reaches**,
walked from the object (`fingerprint`):

- a function: its source text (or, without source, its code objects), its closure cells,
  defaults, and every global name its code (nested functions and lambdas included) reads,
  looked up in its module: helper functions, classes, module constants, modules, each walked
  in turn;
- a bound method or ``functools.partial``: the function and what it is bound to;
- an instance: its class and every attribute (``__dict__`` and ``__slots__``), walked; a torch
  module (a ``SentenceTransformer``) is an instance like any other, so its parameters, every
  buffer (non-persistent ones too), its submodules and their plain attributes
  (``max_seq_length``), tokenizers and configs are all in it;
- a class of user code: its qualified name, its bases and every attribute of its body
  (methods walked as functions); a class, function or module of an installed library
  (site-packages, the standard library) or of the kit itself (whose scoring code keys every run,
  `evalkit.pipeline.runner.SCORING_CODE`): its name and version; an instance of one is walked as any;
- a module of user code: every name it defines, walked;
- values: numbers, strings, bytes, containers of them, numpy arrays and torch tensors by
  their bytes, dtype and shape; an object of C code without attributes by its pickle.

What the walk cannot open (an open file, a lock, a socket, a generator, a C object that does
not pickle) makes the fingerprint **unknown**. `identity_and_reason` then keys the run by
``revision=`` alone when one is given (the user's statement that the model is that revision,
as mteb keys models by name and revision), else by nothing: such a run is made again every
time, and ``result.notes`` names the value and says which. With a known fingerprint, a given
revision is recorded beside it: it never hides a change the walk sees. What no walk can see
(a file read or a server called at run time) is the user's to pin: change ``revision=``
when it changes.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import pickle
import sys
import sysconfig
import types
from functools import cache
from pathlib import Path

from evalkit.core.errors import KitError
from evalkit.core.hashing import files_sha256

PLAIN = (str, int, float, bool, complex, type(None))
SKIPPED_CLASS_KEYS = {"__dict__", "__weakref__", "__doc__", "__module__", "__qualname__", "__annotations__",
                      "__firstlineno__", "__static_attributes__", "__orig_bases__", "__parameters__",
                      "_abc_impl"}
HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (not a static C type)
MAX_NODES = 2_000_000  # a walk larger than this is called unknown rather than run for minutes


class Unknown(Exception):
    """The walk met a value it cannot identify; `where` is its path from the model object."""

    def __init__(self, where: str, what: str):
        super().__init__(f"{where}: {what}")
        self.where, self.what = where, what


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@cache
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    return tuple(str(Path(r).resolve()) for r in roots)


def _module_of(name: str | None):
    return sys.modules.get(name or "")


def is_library_module(module) -> bool:
    """An installed library or the standard library (pinned by its version), not user code."""
    if module is None:
        return True
    name = module.__name__
    if name in sys.builtin_module_names or name.split(".")[0] in sys.stdlib_module_names:
        return True
    if name == "evalkit" or name.startswith("evalkit."):  # the kit: its scoring code keys every run already
        return True
    file = getattr(module, "__file__", None)
    if not file:  # __main__ of a notebook, a namespace package or a module built in memory: user code
        return False
    resolved = str(Path(file).resolve())
    return any(resolved.startswith(root + "/") or resolved.startswith(root + "\\") for root in _library_roots())


@cache
def _distribution_version(top: str) -> str:
    from importlib import metadata

    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return f"python=={sys.version.split()[0]}"
    module = sys.modules.get(top)
    version = getattr(module, "__version__", None)
    if isinstance(version, str):  # what most libraries state; else the installed distribution's
        return f"{top}=={version}"
    for name in [top, *(metadata.packages_distributions().get(top) or [])]:
        try:
            return f"{name}=={metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return f"{top}==unknown"


def _library(module_name: str, qualname: str) -> dict:
    return {"library": f"{module_name}.{qualname}", "version": _distribution_version(module_name.split(".")[0])}


def _code_identity(code: types.CodeType) -> dict:
    """A code object without its file name and line numbers: what it does."""
    consts = [(_code_identity(c) if isinstance(c, types.CodeType) else repr(c)) for c in code.co_consts]
    return {"code": _sha(code.co_code), "consts": consts, "names": list(code.co_names),
            "vars": list(code.co_varnames), "free": list(code.co_freevars)}


def _global_names(code: types.CodeType) -> list[str]:
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += _global_names(const)
    return sorted(set(names))


class _Walk:
    def __init__(self):
        self.seen: dict[int, int] = {}
        self.keep: list = []  # values seen, kept alive so their ids are not reused during the walk
        self.nodes = 0

    def __call__(self, value, where: str):
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise Unknown(where, f"more than {MAX_NODES:,} values reachable")
        if isinstance(value, PLAIN):
            return [type(value).__name__, repr(value)]
        if isinstance(value, (bytes, bytearray)):
            return {"bytes": _sha(bytes(value))}
        key = id(value)
        if key in self.seen:
            return {"ref": self.seen[key]}
        self.seen[key] = len(self.seen)
        self.keep.append(value)
        return self._new(value, where)

    def _new(self, value, where: str):
        import numpy as np

        if isinstance(value, (list, tuple)):
            return [type(value).__name__, [self(v, f"{where}[{i}]") for i, v in enumerate(value)]]
        if isinstance(value, (set, frozenset)):
            items = sorted(json.dumps(self(v, f"{where}{{}}"), sort_keys=True) for v in value)
            return [type(value).__name__, items]
        if isinstance(value, dict):
            items = [[self(k, f"{where} key"), self(v, f"{where}[{k!r}]")] for k, v in value.items()]
            return [type(value).__name__, sorted(items, key=lambda kv: json.dumps(kv[0], sort_keys=True))]
        if isinstance(value, np.ndarray):
            if value.dtype == object:
                return ["ndarray", list(value.shape), self(value.tolist(), where)]
            return {"array_sha256": _sha(np.ascontiguousarray(value).tobytes()), "shape": list(value.shape),
                    "dtype": str(value.dtype)}
        if isinstance(value, np.generic):
            return ["numpy", str(value.dtype), repr(value.item())]
        tensor = _tensor_identity(value)
        if tensor is not None:
            return tensor
        if isinstance(value, functools.partial):
            return {"partial": self(value.func, f"{where}.func"), "args": self(value.args, f"{where}.args"),
                    "keywords": self(value.keywords, f"{where}.keywords")}
        if inspect.ismethod(value):
            return {"method": self(value.__func__, f"{where}.__func__"), "self": self(value.__self__, where)}
        if isinstance(value, (staticmethod, classmethod)):
            return {type(value).__name__: self(value.__func__, where)}
        if isinstance(value, property):
            return {"property": [self(f, where) for f in (value.fget, value.fset, value.fdel)]}
        if inspect.isfunction(value):
            return self._function(value, where)
        if inspect.ismodule(value):
            if is_library_module(value):
                return _library(value.__name__, "")
            return {"module": value.__name__,
                    "names": self({k: v for k, v in vars(value).items() if not k.startswith("__")}, where)}
        if inspect.isclass(value):
            return self._class(value, where)
        if isinstance(value, (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                              types.GetSetDescriptorType, types.MemberDescriptorType,
                              types.MethodWrapperType, types.ClassMethodDescriptorType)):
            owner = getattr(value, "__self__", None)
            if owner is not None and not inspect.ismodule(owner) and not inspect.isclass(owner):
                return {"builtin": getattr(value, "__qualname__", repr(value)), "self": self(owner, where)}
            module = getattr(value, "__module__", None) or getattr(getattr(value, "__objclass__", None),
                                                                   "__module__", "builtins")
            return _library(module, getattr(value, "__qualname__", getattr(value, "__name__", repr(value))))
        if isinstance(value, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
            raise Unknown(where, f"a {type(value).__name__} (its state cannot be read)")
        return self._instance(value, where)

    def _function(self, function, where: str):
        module = _module_of(function.__module__)
        if module is not None and is_library_module(module):
            return _library(function.__module__, function.__qualname__)
        try:
            code = {"source_sha256": _sha(inspect.getsource(function).encode())}
        except (OSError, TypeError):  # defined in a REPL without source: its code objects
            code = _code_identity(function.__code__)
        scope = function.__globals__
        reached = {name: scope[name] for name in _global_names(function.__code__) if name in scope}
        cells = []
        for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
            try:
                cells.append([name, self(cell.cell_contents, f"{where} (closure {name})")])
            except ValueError:  # an empty cell
                cells.append([name, None])
        return {"function": function.__qualname__, **code, "cells": cells,
                "defaults": self(function.__defaults__, f"{where} (defaults)"),
                "kwdefaults": self(function.__kwdefaults__, f"{where} (defaults)"),
                "globals": [[name, self(v, f"{function.__module__}.{name}")] for name, v in sorted(reached.items())]}

    def _class(self, kind: type, where: str):
        module = _module_of(kind.__module__)
        if module is None or is_library_module(module):
            return _library(kind.__module__, kind.__qualname__)
        body = {k: v for k, v in vars(kind).items() if k not in SKIPPED_CLASS_KEYS}
        return {"class": f"{kind.__module__}.{kind.__qualname__}",
                "bases": [self(b, f"{where} (base {b.__name__})") for b in kind.__bases__],
                "body": [[k, self(v, f"{kind.__qualname__}.{k}")] for k, v in sorted(body.items())]}

    def _instance(self, value, where: str):
        kind = type(value)
        if any(not k.__flags__ & HEAPTYPE for k in kind.__mro__[:-1]):  # state held in C: only a pickle shows it
            try:
                data = pickle.dumps(value, protocol=4)
            except Exception:  # noqa: BLE001 - any failure to pickle means the value cannot be read
                raise Unknown(where, f"a {kind.__module__}.{kind.__qualname__} (state the kit cannot read)") from None
            return {"object": self(kind, where), "pickle_sha256": _sha(data)}
        state = {}
        if hasattr(value, "__dict__"):
            state.update(vars(value))
        for slot in {s for k in kind.__mro__ for s in getattr(k, "__slots__", ()) if isinstance(s, str)}:
            if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                state[slot] = getattr(value, slot)
        if not state and not hasattr(value, "__dict__"):
            try:
                data = pickle.dumps(value, protocol=4)
            except Exception:  # noqa: BLE001 - any failure to pickle means the value cannot be read
                raise Unknown(where, f"a {kind.__module__}.{kind.__qualname__} (neither attributes nor a pickle)"
                              ) from None
            return {"object": self(kind, where), "pickle_sha256": _sha(data)}
        return {"object": self(kind, where),
                "state": [[k, self(v, f"{where}.{k}")] for k, v in sorted(state.items())]}


def _tensor_identity(value) -> dict | None:
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor):
        return None
    tensor = value.detach().cpu().contiguous()
    data = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
    return {"tensor_sha256": _sha(data), "dtype": str(tensor.dtype), "shape": list(tensor.shape),
            "kind": type(value).__name__}


def fingerprint(obj) -> tuple[str | None, str | None]:
    """(sha256 of everything `obj` reaches, None) or (None, why it cannot be known); see the module
    docstring for the walk."""
    try:
        seen = _Walk()(obj, getattr(obj, "__qualname__", None) or f"the {type(obj).__qualname__}")
    except Unknown as exc:
        return None, str(exc)
    except RecursionError:
        return None, "the model: nested too deeply to walk"
    return _sha(json.dumps(seen, sort_keys=True).encode()), None


def folder_identity(folder: Path) -> dict:
    """A local model folder: the sha256 of every file's name and bytes (`evalkit.core.hashing`)."""
    folder = Path(folder)
    paths = sorted(p for p in folder.rglob("*") if p.is_file())
    return {"folder_sha256": files_sha256(paths, [str(p.relative_to(folder)) for p in paths])}


def object_identity(obj) -> dict | None:
    """The fingerprint of a Python object as an identity, or None when it cannot be known."""
    return identity_and_reason(obj)[0]


def identity_and_reason(obj, revision: str | None = None) -> tuple[dict | None, str | None]:
    """(identity, note): the fingerprint (with `revision` beside it when given); else the revision
    alone, with a note that the kit could not see everything; else (None, why)."""
    if revision is not None:
        if not str(revision).strip():
            raise KitError("revision= is empty; give a non-empty revision or leave it out")
    found, why = fingerprint(obj)
    kind = type(obj) if not (inspect.isfunction(obj) or inspect.isclass(obj)) else obj
    described = {"object": f"{getattr(kind, '__module__', '?')}.{getattr(kind, '__qualname__', '?')}"}
    if found is not None:
        return {**described, "fingerprint_sha256": found,
                **({"revision": str(revision)} if revision is not None else {})}, None
    if revision is not None:
        return {**described, "revision": str(revision)}, (
            f"the kit cannot see everything that makes this model's scores ({why}), so its runs are keyed by "
            f"revision={revision!r} alone: change revision= whenever the model changes")
    return None, (f"the kit cannot see everything that makes this model's scores ({why}), so its runs are made "
                  "again every time and never reused; give revision= to key them yourself")


def identity_of(obj, revision: str | None = None) -> dict | None:
    """The identity keying a Python model object's runs (`identity_and_reason`)."""
    return identity_and_reason(obj, revision)[0]


def vectors_identity(identity: dict | None) -> dict | None:
    """What keys a user encoder's cached vectors: its fingerprint when known (a revision added
    beside it does not change a vector, so it does not re-encode), else the revision."""
    if identity is None:
        return None
    return {k: v for k, v in identity.items() if k != "revision"} if "fingerprint_sha256" in identity else identity

