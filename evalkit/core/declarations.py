"""One registry pattern for everything the kit lets a user declare: measures (`MeasureSpec`),
collections (dataset `Scheme`) and model families (`Family`).

Each is a frozen declaration value in a module of its own; its package lists the kit's values once,
in help order (the registration list: `evalkit.evaluation.measures.registry.BUILT_IN`,
`evalkit.datasets.KIT_SCHEMES`, `evalkit.models.families.ALL`), and a `Declarations` holds them with
those registered from outside the kit (a notebook, a package of the user's: ``register(VALUE)``
when its module is imported, as an ir_datasets collection registers itself), under one rule: a
declaration is found by its key (a name); registering the very same value again does nothing;
another value under a key already registered (the kit's or a user's) is refused in one line, so no
declaration ever replaces another silently; the kit's own cannot be unregistered. Registering
replaces the mapping (copy on write), so a mapping taken before never changes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from operator import attrgetter
from types import MappingProxyType
from typing import Generic, TypeVar

from evalkit.core.errors import DeclarationError

T = TypeVar("T")


class Declarations(Generic[T]):
    """The kit's declarations of one kind (`kit`, in order) and those registered after them.

    `kind` is the declaration's class, `what` its word in the errors (``measure``, ``scheme``,
    ``family``), `key` gives a declaration's key (its name by default) and `label` how an error
    names it; `call` and `example` spell the registering call in the error for a value of another
    class."""

    def __init__(self, kind: type, what: str, kit: Iterable[T], *, key: Callable[[T], Hashable] = attrgetter("name"),
                 label: Callable[[T], str] = attrgetter("name"), call: str = "register", example: str = "...") -> None:
        self.kind, self.what, self.key, self.label, self.call, self.example = kind, what, key, label, call, example
        self.kit: tuple[T, ...] = ()
        self.items: Mapping[Hashable, T] = MappingProxyType({})
        for item in kit:
            self.register(item)
        self.kit = tuple(self.items.values())

    def check(self, item: T, within: Mapping[Hashable, T] | None = None) -> None:
        """`item` may join `within` (default: the registered ones): a `kind`, under a key none holds
        unless it is the very same declaration; else one DeclarationError line."""
        if not isinstance(item, self.kind):
            raise DeclarationError(f"{self.call}({type(item).__name__})", f"{self.call} takes a {self.kind.__name__} "
                                   f"({self.kind.__module__}); write {self.call}({self.kind.__name__}({self.example}))")
        known = (self.items if within is None else within).get(self.key(item))
        if known is not None and known != item:
            whose = "the kit's" if known in self.kit else "registered before"
            raise DeclarationError(f"{self.what} {self.label(item)!r}", f"another {self.what} is registered under "
                                   f"this name ({whose}: declared already); give yours another name")

    def register(self, item: T) -> T:
        """Add `item` (`check`) after the others; returns it, so a module can write
        ``X = register(Declaration(...))``."""
        self.check(item)
        if self.key(item) not in self.items:
            self.items = MappingProxyType({**self.items, self.key(item): item})
        return item

    def unregister(self, item: T) -> None:
        """Remove a registered declaration; the kit's own stay (one line)."""
        if item in self.kit:
            raise DeclarationError(f"{self.what} {self.label(item)!r}", f"is one of the kit's {self.what} "
                                   "declarations; it cannot be unregistered")
        if self.items.get(self.key(item)) == item:
            self.items = MappingProxyType({k: v for k, v in self.items.items() if k != self.key(item)})

    @contextmanager
    def registered(self, item: T) -> Iterator[T]:
        """`register` for the length of a ``with`` block, then `unregister`."""
        self.register(item)
        try:
            yield item
        finally:
            self.unregister(item)

    def values(self) -> tuple[T, ...]:
        """Every declaration: the kit's, then the registered ones, in order."""
        return tuple(self.items.values())

    def get(self, key: Hashable) -> T | None:
        return self.items.get(key)
