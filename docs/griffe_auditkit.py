"""What the API reference documents, found by walking the installed packages, and a Griffe extension that lets
mkdocstrings read them from source.

The wheel installs one namespace, ``auditkit``, but three of its subpackages live in other folders of the
repository (``pyproject.toml``'s ``[tool.setuptools.package-dir]`` maps ``auditkit.mechanisms`` to
``mechanisms/``, ...). Python's import system follows that mapping; Griffe, reading files, looks for
``auditkit/mechanisms/`` and does not find it. ``MappedSubpackages`` loads every subpackage whose folder is not
where Griffe looks, from the folder Python imports it from, as a member of its parent.

Nothing here names a module: the packages come from the project's own declaration (``pyproject.toml``) and the
folders Python imports, and their modules from walking those folders, so modules moved, added or removed appear
in the reference as they are.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
import tomllib
from pathlib import Path

ROOT = "auditkit"
REPOSITORY = Path(__file__).resolve().parent.parent


def _declared_packages() -> set[str]:
    """The ``auditkit`` packages pyproject.toml declares (its ``packages`` list and ``package-dir`` keys)."""
    try:
        project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return set()
    setuptools = project.get("tool", {}).get("setuptools", {})
    declared = set(setuptools.get("package-dir", {}))
    if isinstance(setuptools.get("packages"), list):
        declared.update(setuptools["packages"])
    return {name for name in declared if name == ROOT or name.startswith(ROOT + ".")}


def _public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def packages() -> dict[str, Path]:
    """Every public package of the ``auditkit`` namespace, by dotted name, with the folder it is imported from."""
    found: dict[str, Path] = {}
    for name in sorted({ROOT, *_declared_packages()}):
        try:
            package = importlib.import_module(name)
        except ImportError as err:  # declared but gone (a package being moved): nothing to document
            print(f"gen_reference: skipping {name}: {err}", file=sys.stderr)
            continue
        if not hasattr(package, "__path__") or not _public(name):
            continue
        found[name] = Path(package.__path__[0])
        for info in pkgutil.walk_packages(package.__path__, name + ".", onerror=lambda _name: None):
            if info.ispkg and _public(info.name):
                sub = importlib.import_module(info.name)
                found[info.name] = Path(sub.__path__[0])
    return found


def modules() -> list[str]:
    """Every public module and package of the namespace, sorted (a package before its modules)."""
    names = set()
    for package, folder in packages().items():
        names.add(package)
        names.update(f"{package}.{info.name}" for info in pkgutil.iter_modules([str(folder)])
                     if not info.ispkg and _public(info.name))
    return sorted(names, key=lambda name: name.split("."))


try:
    import griffe
except ImportError:  # the generator imports this module too; only mkdocstrings needs Griffe
    griffe = None


if griffe is not None:

    class MappedSubpackages(griffe.Extension):
        """Load the subpackages Griffe cannot find beside their parent from the folders Python imports them from."""

        def on_package(self, *, pkg: "griffe.Module", loader: "griffe.GriffeLoader", **kwargs) -> None:
            if pkg.name != ROOT:
                return
            for name, folder in packages().items():
                parent_path, _, child = name.rpartition(".")
                if not parent_path:
                    continue
                try:
                    parent = pkg if parent_path == ROOT else pkg.get_member(parent_path[len(ROOT) + 1:])
                except (KeyError, ValueError):
                    continue  # its parent is a mapped package loaded with its own subpackages
                if child in parent.members and not parent.members[child].is_alias:
                    continue  # Griffe found it where it looked
                init = folder / "__init__.py"  # none: a namespace package (a folder of modules)
                path = init if init.is_file() else [folder]
                module = loader._load_module(child, path, submodules=True, parent=parent)
                parent.set_member(child, module)

    class PlainDocstrings(griffe.Extension):
        """Docstrings as Markdown reads them: reST roles (``:func:`name```) become code, and a paragraph ending in
        reST's ``::`` (a literal block follows) ends in one colon."""

        def on_instance(self, *, obj: "griffe.Object", **kwargs) -> None:
            if obj.docstring is not None:
                obj.docstring.value = plain(obj.docstring.value)


_ROLE = None


def plain(text: str) -> str:
    """``text`` with reST roles made inline code and ``::`` before a literal block made ``:``."""
    import re

    global _ROLE
    if _ROLE is None:
        _ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const|ref):`~?([^`]+)`")
    text = _ROLE.sub(r"`\1`", text)
    return re.sub(r"(\S)::(\n|$)", r"\1:\2", text)
