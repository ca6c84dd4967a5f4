"""The identity of user code behind a run: what keys a run made by a model the kit did not write.

The run store (`evalkit.data.runstore`) reuses a run only when its sidecar matches; the kit's own
models are pinned by their registry entry, their weight folders' files and the kit's scoring
code. A user's Python model object is pinned by a fingerprint of **everything it reaches**,
walked from the object (`fingerprint`). It reads the code that is **loaded**, never a file on
disk: a module edited but not reloaded runs its old code, so it keeps the old code's key, and
a fresh process that loads the new code gets the new code's key.

- a function: its code object as loaded (bytecode, constants, nested code objects (lambdas,
  comprehensions, inner functions) in turn, names, variables, argument counts, flags; not its
  file name and line numbers), its closure cells, defaults, attributes (``f.weight = 2``), and
  every global its code (nested code included) reads, looked up in its module: helper
  functions, classes, module constants, modules, each walked in turn; a name read as
  ``globals()["NAME"]`` or ``globals().get("NAME")`` with a constant key is such a global; a
  module its ``import`` statements bind is one too; a builtin rebound after the kit was
  imported is walked;
- a bound method or ``functools.partial``: the function and what it is bound to; a C wrapper
  (``functools.lru_cache``): its pickle and the function it wraps (``__wrapped__``);
- an instance: its class and every attribute (``__dict__`` and ``__slots__``), walked; a torch
  module (a ``SentenceTransformer``) is an instance like any other, so its parameters, every
  buffer (non-persistent ones too), its submodules and their plain attributes
  (``max_seq_length``), tokenizers and configs are all in it; a ``pathlib`` path by its text
  (its slots cache ``str()`` and a hash that differs between processes);
- a class of user code: its qualified name, its bases and every attribute of its body
  (methods walked as functions);
- a module of user code: every name it defines, walked;
- values: numbers, strings, bytes, containers of them, numpy arrays and torch tensors by
  their bytes, dtype and shape; an object of C code without attributes by its pickle.

**Libraries.** A class, function or module of an installed library (site-packages, the
standard library) or of the kit itself (whose scoring code keys every run,
`evalkit.pipeline.runner.SCORING_CODE`) is pinned by its name and its distribution's version,
not walked: the library's code is what that version installed. What the process changed in it
is walked, by this rule: a library **class** (and each of its bases) records its plain class
attributes (numbers, strings, booleans) and every attribute that is not the library's own code
(`_own_code`): a function defined in user code (``Pooling.forward = my_forward``), one whose
code object's file is not among the library's installed files, one whose code is not its own
(``f.__code__`` replaced), or one put under another name (``Pooling.forward =
Pooling.other``); each is walked (a decorator's wrapper of the library's own method shows up
here too, the same in every process). A library **function** reached is its name and version,
plus its code object when that is not the library's own. A library **module** a function
reaches: the attributes of it that the function's code names (``helpers.SCALE``,
``np.pi``, ``torch.nn.functional.relu``: every attribute whose name is among the code's names)
are walked: code and data by value, an object of the library's own classes (its state: a
random generator, ``os.environ``) by its type name; ``sys`` and ``builtins`` are the process's
state, not walked.

The key is byte-stable: the same loaded code and values give the same fingerprint in any fresh
process of the same Python, whatever ``PYTHONHASHSEED`` (sets and frozensets are sorted, no
``id()`` or address is read). Bytecode differs between Python versions, so the key names the
interpreter (``sys.implementation.cache_tag``): another Python runs the model again.

What the walk cannot open (an open file, a lock, a socket, a generator, a C object that does
not pickle), and code whose reads are known only when it runs (a call of ``eval()`` or
``exec()``, ``globals()`` read by a computed key or passed on), make the fingerprint
**unknown**. `identity_and_reason` then keys the run by ``revision=`` alone when one is given
(the user's statement that the model is that revision, as mteb keys models by name and
revision), else by nothing: such a run is made again every time, and ``result.notes`` names the
value or the read and says which. With a known fingerprint, a given revision is recorded beside
it: it never hides a change the walk sees.

Not covered, and the user's to pin with ``revision=``: what no walk can see (a file read or a
server called at run time); a library module's function replaced and called only by the
library's own code (the walk reads the library classes and module attributes the model
reaches, not every module of the library); a library's file edited in place without a new
version; an attribute read by a name computed at run time (``getattr(module, name)``), an
object put in a library class that is neither code nor a plain value; and a builtin rebound
before the kit was imported.
"""

from __future__ import annotations

import builtins
import dis
import functools
import hashlib
import importlib.util
import inspect
import json
import os
import pickle
import sys
import sysconfig
import types
from functools import cache
from pathlib import Path, PurePath

from evalkit.core.errors import RequestError
from evalkit.core.hashing import files_sha256

PLAIN = (str, int, float, bool, complex, type(None))
SKIPPED_CLASS_KEYS = {"__dict__", "__weakref__", "__doc__", "__module__", "__qualname__", "__annotations__",
                      "__firstlineno__", "__static_attributes__", "__orig_bases__", "__parameters__",
                      "_abc_impl"}
BUILTIN_KINDS = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                 types.GetSetDescriptorType, types.MemberDescriptorType, types.MethodWrapperType,
                 types.ClassMethodDescriptorType)
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


@cache
def _real(path: str) -> str:
    """A file's resolved path (links followed), computed once per name."""
    return os.path.realpath(path)


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
    resolved = _real(file)
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


def _const(value):
    """A constant of a code object, by value; a frozenset's members sorted (their order follows
    string hashes, which vary with PYTHONHASHSEED)."""
    if isinstance(value, types.CodeType):
        return _code_identity(value)
    if isinstance(value, tuple):
        return ["tuple", [_const(v) for v in value]]
    if isinstance(value, frozenset):
        return ["frozenset", sorted(json.dumps(_const(v), sort_keys=True) for v in value)]
    return [type(value).__name__, repr(value)]


def _code_identity(code: types.CodeType) -> dict:
    """A loaded code object without its file name and line numbers: what it does (its bytecode,
    constants, nested code, names, variables, argument counts, flags and exception table)."""
    return {"name": getattr(code, "co_qualname", code.co_name), "code": _sha(code.co_code),
            "consts": [_const(c) for c in code.co_consts], "names": list(code.co_names),
            "vars": list(code.co_varnames), "free": list(code.co_freevars), "cellvars": list(code.co_cellvars),
            "args": [code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount], "flags": code.co_flags,
            "exceptions": _sha(bytes(getattr(code, "co_exceptiontable", b"")))}


SKIPPED_OPS = {"CACHE", "PRECALL", "PUSH_NULL", "NOP", "EXTENDED_ARG", "RESUME", "COPY_FREE_VARS"}
DYNAMIC_CALLS = {"eval": "calls eval(), whose code is known only when it runs",
                 "exec": "calls exec(), whose code is known only when it runs"}


def _is_subscript(op) -> bool:
    return op.opname in ("BINARY_SUBSCR", "BINARY_SUBSCRIPT") or (op.opname == "BINARY_OP" and op.argrepr == "[]")


def _reads(code: types.CodeType, package: str | None) -> tuple[set[str], set[str], list[tuple[str, str]]]:
    """(names, modules, dynamic) of a code object and the code nested in it: every name it loads
    (its globals and the attributes it reads, ``co_names``, and the constant keys of
    ``globals()["NAME"]`` / ``globals().get("NAME")``); the modules its ``import`` statements
    name; and (builtin, what) for each read whose target is known only at run time: a call of
    eval() or exec(), or globals() read otherwise than by a constant key."""
    names, modules, dynamic = set(code.co_names), set(), []
    ops = [op for op in dis.get_instructions(code) if op.opname not in SKIPPED_OPS]
    for i, op in enumerate(ops):
        if op.opname in ("LOAD_GLOBAL", "LOAD_NAME") and op.argval in DYNAMIC_CALLS:
            dynamic.append((op.argval, DYNAMIC_CALLS[op.argval]))
        elif op.opname in ("LOAD_GLOBAL", "LOAD_NAME") and op.argval == "globals":
            after = ops[i + 1:i + 5]
            called = len(after) > 2 and after[0].opname == "CALL" and after[0].arg == 0
            key = None
            if called and after[1].opname == "LOAD_CONST" and _is_subscript(after[2]):
                key = after[1].argval
            elif (called and len(after) > 3 and after[1].opname in ("LOAD_METHOD", "LOAD_ATTR")
                  and after[1].argval == "get" and after[2].opname == "LOAD_CONST"):
                key = after[2].argval
            if isinstance(key, str):
                names.add(key)
            else:
                dynamic.append(("globals", "reads globals() with a key computed at run time (or passes it on)"))
        elif op.opname == "IMPORT_NAME":
            level = ops[i - 2].argval if i >= 2 and ops[i - 2].opname == "LOAD_CONST" else 0
            name = op.argval
            if isinstance(level, int) and level > 0 and package:
                try:
                    name = importlib.util.resolve_name("." * level + op.argval, package)
                except (ImportError, ValueError):
                    continue
            parts = name.split(".")
            modules |= {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            more = _reads(const, package)
            names |= more[0]
            modules |= more[1]
            dynamic += more[2]
    return names, modules, dynamic


def _homes(module_name: str | None) -> tuple[str, ...]:
    """The installed files of the library a module belongs to: its top package's folders (or the
    one file of a single-module library)."""
    top = sys.modules.get((module_name or "").split(".")[0])
    folders = [p for p in (getattr(top, "__path__", None) or []) if isinstance(p, str)]
    if folders:
        return tuple(_real(p) + os.sep for p in folders)
    file = getattr(top, "__file__", None)
    return (_real(file),) if isinstance(file, str) else ()


def _own_code(function, module_name: str | None, qualname: str | None = None) -> bool:
    """Whether a library function's loaded code is the library's own: its code object's file is
    one of the library's installed files, the code is the function's (``co_qualname``), and,
    given `qualname`, the function is the one defined under that name (not another put there)."""
    code = function.__code__
    if getattr(code, "co_qualname", function.__qualname__) != function.__qualname__:
        return False
    if qualname is not None and function.__qualname__ != qualname:
        return False
    if code.co_filename.startswith("<frozen ") and (module_name or "").split(".")[0] in sys.stdlib_module_names:
        return True  # the standard library frozen into the interpreter (unless -X frozen_modules=off)
    file = _real(code.co_filename)
    return any(file == home or file.startswith(home) for home in _homes(module_name))


def _is_library_object(value) -> bool:
    """A function, class or object whose code is an installed library's (or the kit's)."""
    if isinstance(value, functools.partial):
        return _is_library_object(value.func)
    if inspect.isfunction(value) or inspect.isclass(value):
        module = _module_of(value.__module__)
        return module is None and inspect.isclass(value) or module is not None and is_library_module(module)
    if inspect.ismodule(value):
        return is_library_module(value)
    return _is_library_object(type(value))


def _unwrapped(value) -> list | None:
    """The functions a class attribute runs (a function, a static or class method, a property's
    accessors), or None for another value."""
    if inspect.isfunction(value):
        return [value]
    if isinstance(value, (staticmethod, classmethod)):
        return [value.__func__] if inspect.isfunction(value.__func__) else []
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel) if inspect.isfunction(f)]
    return None


def _type_name(value) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


DATA = (list, tuple, set, frozenset, dict, PurePath)
BUILTINS = dict(vars(builtins))  # the interpreter's builtins when the kit was imported: a name rebound later is walked
PROCESS_STATE_MODULES = {"sys", "builtins"}  # their attributes are the process's state (argv, path, modules)


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
            # walked in an order that does not follow hashes (PYTHONHASHSEED), so references number alike
            ordered = sorted(value, key=lambda v: [type(v).__name__, repr(v)] if isinstance(v, PLAIN) else
                             ["~", json.dumps(_Walk()(v, where), sort_keys=True)])
            items = sorted(json.dumps(self(v, f"{where}{{}}"), sort_keys=True) for v in ordered)
            return [type(value).__name__, items]
        if isinstance(value, dict):
            items = [[self(k, f"{where} key"), self(v, f"{where}[{k!r}]")] for k, v in value.items()]
            return [type(value).__name__, sorted(items, key=lambda kv: json.dumps(kv[0], sort_keys=True))]
        if isinstance(value, PurePath):  # by its text: its slots cache str() and a hash that varies by process
            return {"path": type(value).__name__, "value": os.fspath(value)}
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
        if isinstance(value, BUILTIN_KINDS):
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
        code = function.__code__
        if module is not None and is_library_module(module):
            found = _library(function.__module__, function.__qualname__)
            if not _own_code(function, function.__module__):  # code put in it from elsewhere: that code
                found["code"] = _code_identity(code)
            return found
        scope = function.__globals__
        names, modules, dynamic = _reads(code, scope.get("__package__") or None)
        for name, what in dynamic:
            if name not in scope:  # the builtin, not a function of the user's named so
                raise Unknown(where, what)
        loaded = getattr(function, "__builtins__", None)
        loaded = loaded if isinstance(loaded, dict) else BUILTINS
        reached = {}
        for name in sorted(names):
            if name in scope:
                reached[name] = scope[name]
            elif name in loaded and loaded[name] is not BUILTINS.get(name, loaded):  # a builtin rebound
                reached[f"builtins.{name}"] = loaded[name]
        for name in sorted(modules):  # what its import statements bind
            if name in sys.modules:
                reached[f"import {name}"] = sys.modules[name]
        cells = []
        for name, cell in zip(code.co_freevars, function.__closure__ or ()):
            try:
                cells.append([name, self(cell.cell_contents, f"{where} (closure {name})")])
            except ValueError:  # an empty cell
                cells.append([name, None])
        return {"function": function.__qualname__, "code": _code_identity(code), "cells": cells,
                "defaults": self(function.__defaults__, f"{where} (defaults)"),
                "kwdefaults": self(function.__kwdefaults__, f"{where} (defaults)"),
                "attributes": self(dict(vars(function)), f"{where} (attributes)"),
                "globals": [[name, self(v, f"{function.__module__}.{name}")] for name, v in sorted(reached.items())],
                "module_attributes": self._module_attributes(reached, names)}

    def _module_attributes(self, reached: dict, names: set[str]) -> list:
        """The attributes of the library modules a function reaches (its globals, its imports, their
        submodules) that its code names (``np.pi``, ``helpers.SCALE``): walked, not pinned by version."""
        queue = [v for _, v in sorted(reached.items()) if inspect.ismodule(v)]
        done: set[str] = set()
        found = []
        while queue:
            module = queue.pop(0)
            if module.__name__ in done or module.__name__ in PROCESS_STATE_MODULES:
                continue
            done.add(module.__name__)
            library = is_library_module(module)
            space = vars(module)
            for name in sorted(names & space.keys()):
                value = space[name]
                if inspect.ismodule(value):
                    queue.append(value)
                elif library:
                    found.append([f"{module.__name__}.{name}",
                                  self._library_attribute(value, f"{module.__name__}.{name}")])
        return found

    def _library_attribute(self, value, where: str):
        """A library module's attribute: code and data walked; an object of the library's own
        classes (its state: a random generator, os.environ) by its type, pinned with the library."""
        if isinstance(value, BUILTIN_KINDS + (types.MethodType,)):
            owner = getattr(value, "__self__", None)
            if (owner is not None and not inspect.ismodule(owner) and not inspect.isclass(owner)
                    and _is_library_object(owner)):
                return {"builtin": getattr(value, "__qualname__", repr(value)), "self": _type_name(owner)}
            return self(value, where)
        if (isinstance(value, PLAIN + (bytes, bytearray) + DATA) or inspect.isfunction(value)
                or inspect.isclass(value) or isinstance(value, functools.partial) or _tensor_identity(value)
                or type(value).__module__ == "numpy" or not _is_library_object(value)):
            return self(value, where)
        return {"library_object": _type_name(value)}

    def _class(self, kind: type, where: str):
        module = _module_of(kind.__module__)
        if module is None or is_library_module(module):
            return self._library_class(kind, where)
        body = {k: v for k, v in vars(kind).items() if k not in SKIPPED_CLASS_KEYS}
        return {"class": f"{kind.__module__}.{kind.__qualname__}",
                "bases": [self(b, f"{where} (base {b.__name__})") for b in kind.__bases__],
                "body": [[k, self(v, f"{kind.__qualname__}.{k}")] for k, v in sorted(body.items())]}

    def _library_class(self, kind: type, where: str):
        """A library class: its name and version, its bases, its plain class attributes (numbers,
        strings) and every attribute that is not the library's own code (`_own_code`): a method
        patched in from elsewhere is walked as that code."""
        found = _library(kind.__module__, kind.__qualname__)
        if not kind.__flags__ & HEAPTYPE:  # a static C type: nothing in it can be replaced
            return found
        values, patched = [], []
        for name, value in sorted(vars(kind).items()):
            if name in SKIPPED_CLASS_KEYS:
                continue
            if isinstance(value, PLAIN) and value is not None:
                values.append([name, self(value, where)])
                continue
            functions = _unwrapped(value)
            if functions is None:
                foreign = not isinstance(value, (types.MemberDescriptorType, types.GetSetDescriptorType)) \
                    and not _is_library_object(value)
            else:
                foreign = any(_module_of(f.__module__) is None or not is_library_module(_module_of(f.__module__))
                              or not _own_code(f, kind.__module__, f"{kind.__qualname__}.{name}") for f in functions)
            if foreign:
                patched.append([name, self(value, f"{kind.__qualname__}.{name}")])
        found.update(bases=[self(b, f"{where} (base {b.__name__})") for b in kind.__bases__ if b is not object],
                     values=values, not_own=patched)
        return found

    def _instance(self, value, where: str):
        kind = type(value)
        wrapped = getattr(value, "__wrapped__", None) if callable(value) else None
        if any(not k.__flags__ & HEAPTYPE for k in kind.__mro__[:-1]):  # state held in C: only a pickle shows it
            try:
                data = pickle.dumps(value, protocol=4)
            except Exception:  # noqa: BLE001 - any failure to pickle means the value cannot be read
                raise Unknown(where, f"a {kind.__module__}.{kind.__qualname__} (state the kit cannot read)") from None
            found = {"object": self(kind, where), "pickle_sha256": _sha(data)}
            if inspect.isfunction(wrapped):  # functools.lru_cache and other C wrappers: the code they run
                found["wrapped"] = self(wrapped, f"{where}.__wrapped__")
            return found
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
        seen = {"python": sys.implementation.cache_tag, "walk": seen}  # bytecode differs between versions
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
            raise RequestError("revision", "is empty; give a non-empty revision or leave it out")
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


def vectors_identity(identity: dict | None) -> dict | None:
    """What keys a user encoder's cached vectors: its fingerprint when known (a revision added
    beside it does not change a vector, so it does not re-encode), else the revision."""
    if identity is None:
        return None
    return {k: v for k, v in identity.items() if k != "revision"} if "fingerprint_sha256" in identity else identity

