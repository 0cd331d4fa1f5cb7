"""Import a library without one of the heavy modules it imports at its top but uses only on
paths a service never takes (pymilvus: pandas; spaCy: its command line, with typer, rich,
weasel, jinja2). For the import, each such module is a `StandIn` in `sys.modules`; the
library keeps a reference to the stand-in, whose attributes come from the real module,
imported on first use. So nothing is taken away: a path that does use the module imports it
then. While the library is being imported, the names it only needs to exist (a class in its
signatures, a function it imports by name) are given without importing the real module;
any other name imports it at once (only memory is lost, and the tests that check the module
stays out say so).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

Provisional = Literal["call", "annotation"]


class StandIn(types.ModuleType):
    """A module's stand-in: see the module's docstring."""

    def __init__(self, name: str, provisional: Mapping[str, Provisional]) -> None:
        super().__init__(name, f"stands in for {name}, imported on first use")
        self.__path__: list[str] = []  # a package: `a.b.c` resolves through `a` and `a.b`
        self._provisional = dict(provisional)
        self._importing = True

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        kind = self._provisional.get(attr) if self._importing else None
        if kind == "call":
            return _on_first_call(self.__name__, attr)
        if kind == "annotation":  # a placeholder; the real class is in function bodies' use
            return type(attr, (), {"__module__": self.__name__})
        return getattr(importlib.import_module(self.__name__), attr)


def _on_first_call(module: str, name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


@contextlib.contextmanager
def standing_in(modules: Mapping[str, Mapping[str, Provisional]]) -> Iterator[bool]:
    """Within the block (the library's import), `modules` are stand-ins (each with the names
    it gives provisionally, and what for); yields False, and stands in for nothing, if one
    of them is imported already (the library then imports it as usual). On exit the
    stand-ins leave `sys.modules`: any later `import` of them is the real module."""
    if any(name in sys.modules for name in modules):
        yield False
        return
    stand_ins = {name: StandIn(name, provisional) for name, provisional in modules.items()}
    sys.modules.update(stand_ins)
    try:
        yield True
    finally:
        for name, module in stand_ins.items():
            module._importing = False
            if sys.modules.get(name) is module:
                del sys.modules[name]
