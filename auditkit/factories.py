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

__all__ = ["FACTORY_FORMS", "Factory", "FactoryError", "call_factory", "factory_module", "load_factory", "one_line",
           "parse_factory"]

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


_FILES: dict[Path, tuple[bytes, Any]] = {}  # a factory file's source and module: imported again only where it changed


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
    """A factory file's module, imported once per version of its source (an edited file is imported again, so the
    code that runs is the file's, as its digest in the stage keys says: ``auditkit.input_fingerprint``); registered
    in ``sys.modules`` under its stem (so what it defines pickles), or under a private name where the stem is another
    module's."""
    if not path.is_file():
        raise FactoryError(f"{fail}: no such file")
    key = path.resolve()
    source = path.read_bytes()
    if key in _FILES and _FILES[key][0] == source:
        return _FILES[key][1]
    previous = _FILES[key][1].__name__ if key in _FILES else None
    name = previous or (path.stem if path.stem not in sys.modules and path.stem.isidentifier()
                        else f"_auditkit_factory_{len(_FILES)}")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FactoryError(f"{fail}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)  # the source read above, not a later version
    except BaseException:
        sys.modules.pop(name, None)
        raise
    _FILES[key] = (source, module)
    return module


def factory_module(spec: str, group: str) -> tuple[str, Path] | None:
    """The module a factory is defined in, as (the name it is imported as, its file); None where ``spec`` names no
    factory or its module has no file. A module that is not imported yet is located, not imported."""
    factory = parse_factory(spec)
    if factory is None:
        return None
    if factory.kind == "file":
        key = Path(factory.target).resolve()
        return (_FILES[key][1].__name__ if key in _FILES else factory.module), Path(factory.target)
    name = factory.target
    if factory.kind == "entry":
        points = [p for p in importlib.metadata.entry_points(group=group) if p.name == factory.target]
        if not points:
            return None
        name = points[0].module
    module = sys.modules.get(name)
    try:
        origin = getattr(module, "__file__", None) if module is not None else importlib.util.find_spec(name).origin
    except (ImportError, AttributeError, ValueError):  # no such module: find_spec gave None or failed
        return None
    return (name, Path(origin)) if isinstance(origin, str) and Path(origin).is_file() else None


def call_factory(fn: Callable[..., Any], spec: str, where: str, **kwargs: Any) -> Any:
    """``fn(**kwargs)``; what it raises becomes ``FactoryError`` "{where}: factory {spec!r} raised ...", one line."""
    try:
        return fn(**kwargs)
    except Exception as err:  # noqa: BLE001 -- a user's function may raise anything
        raise FactoryError(f"{where}: factory {spec!r} raised {one_line(err)}") from None
