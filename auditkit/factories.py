"""A user's own factory function, named as ``path/to/file.py:fn``, ``package.module:fn`` or ``entry:NAME`` (an installed
entry point of a group such as ``auditkit.models`` or ``auditkit.datasets``): parsed, imported and called here, for
models (``training.model``) and datasets (``data.dataset``) alike.

Every failure is one line naming the key, the factory and what went wrong: no such file, no such function, the
import's exception in one line. Parsing (:func:`parse_factory`) imports nothing: a config naming a factory is
checked without running code, which runs only where a model or dataset is built (:func:`load_factory`). Base layer:
imports only ``auditkit.config_bounds`` (a :class:`FactoryError` is a ``ConfigError``: the config named the factory).
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auditkit.config_bounds import ConfigError

__all__ = ["FACTORY_FORMS", "Factory", "FactoryError", "parse_factory", "load_factory", "call_factory", "one_line"]

FACTORY_FORMS = "'path/to/file.py:fn', 'package.module:fn' or 'entry:NAME'"

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class FactoryError(ConfigError):
    """A factory cannot be loaded or gave something else than asked; the one-line message names the key."""


@dataclass(frozen=True)
class Factory:
    """A parsed factory reference: ``kind`` is "file", "module" or "entry"; ``target`` the file path, the dotted
    module or the entry point's name; ``function`` the attribute called (None for an entry point)."""

    kind: str
    target: str
    function: str | None
    spec: str

    @property
    def module(self) -> str:
        """The module the factory is imported as: a file's stem, a dotted name itself, an entry point's name."""
        return Path(self.target).stem if self.kind == "file" else self.target


def parse_factory(spec: Any) -> Factory | None:
    """The factory ``spec`` names, or None when it is no factory form (a closed name such as ``cnn``). The last ``:``
    separates the function, so a Windows drive letter stays in the path."""
    if not isinstance(spec, str) or ":" not in spec:
        return None
    target, _, function = spec.strip().rpartition(":")
    if target == "entry":
        return Factory("entry", function, None, spec) if function.strip() else None
    if not _IDENTIFIER.fullmatch(function):
        return None
    if target.endswith(".py"):
        return Factory("file", target, function, spec)
    if _MODULE.fullmatch(target):
        return Factory("module", target, function, spec)
    return None


def one_line(err: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


_FILES: dict[Path, Any] = {}  # a factory file is imported once per process, as a plugin is


def load_factory(spec: str, where: str, group: str) -> Callable[..., Any]:
    """The function ``spec`` names (an entry point of ``group`` for ``entry:NAME``), imported; ``FactoryError``
    "{where}: factory {spec!r} failed to load: ..." (no such file, no such function, the import's exception)."""
    factory = parse_factory(spec)
    if factory is None:
        raise FactoryError(f"{where} must be a factory {FACTORY_FORMS}, got {spec!r}")
    fail = f"{where}: factory {spec!r} failed to load"
    if factory.kind == "entry":
        points = [p for p in importlib.metadata.entry_points(group=group) if p.name == factory.target]
        if not points:
            raise FactoryError(f"{fail}: no entry point {factory.target!r} in group {group!r} is installed")
        try:
            return _callable(points[0].load(), fail)
        except FactoryError:
            raise
        except Exception as err:  # noqa: BLE001 -- any failure of foreign code is reported as the factory's
            raise FactoryError(f"{fail}: import failed: {one_line(err)}") from None
    try:
        module = _import_file(Path(factory.target), fail) if factory.kind == "file" else \
            importlib.import_module(factory.target)
    except FactoryError:
        raise
    except Exception as err:  # noqa: BLE001 -- as above
        raise FactoryError(f"{fail}: import failed: {one_line(err)}") from None
    if not hasattr(module, factory.function):
        raise FactoryError(f"{fail}: {factory.module} has no function {factory.function!r}")
    return _callable(getattr(module, factory.function), fail)


def _callable(obj: Any, fail: str) -> Callable[..., Any]:
    if not callable(obj):
        raise FactoryError(f"{fail}: it names a {type(obj).__name__}, not a function")
    return obj


def _import_file(path: Path, fail: str) -> Any:
    """A factory file's module, imported once; registered in ``sys.modules`` under its stem (so what it defines
    pickles), or under a private name where the stem is another module's."""
    if not path.is_file():
        raise FactoryError(f"{fail}: no such file")
    key = path.resolve()
    if key in _FILES:
        return _FILES[key]
    name = path.stem if path.stem not in sys.modules and path.stem.isidentifier() else f"_auditkit_factory_{len(_FILES)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FactoryError(f"{fail}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    _FILES[key] = module
    return module


def call_factory(fn: Callable[..., Any], spec: str, where: str, **kwargs: Any) -> Any:
    """``fn(**kwargs)``; what it raises becomes ``FactoryError`` "{where}: factory {spec!r} raised ...", one line."""
    try:
        return fn(**kwargs)
    except Exception as err:  # noqa: BLE001 -- a user's function may raise anything
        raise FactoryError(f"{where}: factory {spec!r} raised {one_line(err)}") from None
