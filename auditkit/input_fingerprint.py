"""Digests of the user's own inputs, which the audit's stage keys include (issue 54), so a resumed audit never reuses a
stage computed from other code or other data than it is given now.

* :func:`source_digests`: a module's file and the modules it imports, directly or through each other, that are the
  user's own (not the standard library, not an installed package, not auditkit), found by reading its ``import``
  statements (``ast``: nothing is imported or run). An import is located as Python locates it (``sys.modules``, then
  ``sys.path``), else in the importing file's folder. Names imported at run time (``importlib.import_module``) are
  not seen. :func:`factory_digests` and :func:`plugin_digests` apply it to a factory and to the plugins.
* :func:`files_digest`: one digest of a list of files, each one's path relative to a folder, size and content.
* :class:`DigestCache`: a file's content digest (SHA-256 read in chunks, never the whole file in memory) reused while
  its size, mtime, ctime, inode and device are those it was hashed at, kept between audits in a JSON file (the
  caller reads and writes it: ``auditkit.stages.pipeline.user_inputs``), so a large folder is read once. A file
  whose mtime is less than ``RACY_SECONDS`` before it was hashed is not kept: a second change within the clock's
  granularity could leave its size and times as they were (git's "racily clean" files).

Each digest is named as the note of a resumed audit names what changed ("the model factory f.py:make_net",
"helpers, a module the model factory f.py:make_net imports").
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import json
import os
import re
import site
import sys
import sysconfig
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from auditkit.factories import factory_module

__all__ = ["CACHE_BYTES", "CACHE_NAME", "RACY_SECONDS", "DigestCache", "factory_digests", "file_sha256", "files_digest",
           "plugin_digests", "source_digests"]

CACHE_NAME = "input-digests.json"
"""The cache's file name, in an output folder's ``stages/``."""
RACY_SECONDS = 2.0
_CACHE_VERSION = 1
_HEX = re.compile(r"[0-9a-f]{64}")
CACHE_BYTES = 1 << 30
"""The largest cache file read; a larger one is ignored."""


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's content, hex, read in chunks (``hashlib.file_digest``)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _stamp(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]


class DigestCache:
    """Content digests by absolute path, each reused while the file's stamp (size, mtime_ns, ctime_ns, inode, device)
    is the one it was hashed at. ``stored``: the cache file's bytes (:meth:`dumps` of an earlier audit; None or
    anything else: an empty cache). ``reads`` counts the files read to hash them."""

    def __init__(self, stored: bytes | None = None) -> None:
        self._stored = _parse_cache(stored)
        self._kept: dict[str, list[Any]] = {}  # the entries this audit used: what dumps() gives
        self.reads = 0

    def digest(self, file: str | os.PathLike[str]) -> str:
        """``file``'s SHA-256 (hex), from the cache where its stamp is unchanged."""
        name = os.path.abspath(file)
        stamp = _stamp(os.stat(name))
        entry = self._kept.get(name) or self._stored.get(name)
        if entry is not None and entry[:-1] == stamp:
            self._kept[name] = entry
            return entry[-1]
        settled = time.time_ns() - RACY_SECONDS * 1e9
        digest = file_sha256(name)
        self.reads += 1
        if stamp[1] < settled and _stamp(os.stat(name)) == stamp:  # and unchanged while it was read
            self._kept[name] = [*stamp, digest]
        return digest

    @property
    def changed(self) -> bool:
        """Whether :meth:`dumps` differs from what the cache was read from."""
        return self._kept != self._stored

    def dumps(self) -> bytes:
        """The cache file's content: the entries this audit used (the others are dropped)."""
        return json.dumps({"version": _CACHE_VERSION, "files": self._kept}, sort_keys=True,
                          allow_nan=False).encode("utf-8")


def _parse_cache(stored: bytes | None) -> dict[str, list[Any]]:
    """The valid entries of a cache file's bytes; none where it is not this format."""
    try:
        document = json.loads(stored) if stored is not None else None
    except (ValueError, RecursionError):
        return {}
    files = document.get("files") if isinstance(document, dict) and document.get("version") == _CACHE_VERSION \
        else None
    if not isinstance(files, dict):
        return {}
    return {name: entry for name, entry in files.items()
            if isinstance(entry, list) and len(entry) == 6 and all(type(v) is int for v in entry[:5])
            and isinstance(entry[5], str) and _HEX.fullmatch(entry[5])}


def files_digest(root: str | os.PathLike[str], files: Iterable[str | os.PathLike[str]], cache: DigestCache) -> str:
    """"sha256:" and the digest of ``files`` (each under ``root``): their paths relative to ``root``, sizes and
    content digests, in sorted order; a file added, removed, renamed or changed changes it."""
    digest = hashlib.sha256()
    listed = sorted((Path(f).relative_to(root).as_posix(), Path(f)) for f in files)
    for relative, file in listed:
        size = os.stat(file).st_size
        digest.update(os.fsencode(relative) + f"\0{size}\0{cache.digest(file)}\n".encode())
    return "sha256:" + digest.hexdigest()


# ---------------------------------------------------------------- source files and their imports


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """Where the standard library and installed packages live: this environment's and its base installation's."""
    dirs: set[str] = set()
    for scheme in (sysconfig.get_paths(), sysconfig.get_paths(vars={"base": sys.base_prefix,
                                                                      "platbase": sys.base_exec_prefix})):
        dirs.update(scheme[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in scheme)
    dirs.update(site.getsitepackages())
    dirs.add(site.getusersitepackages())
    dirs.update(p for p in sys.path if Path(p).name in ("site-packages", "dist-packages"))
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


def _is_users(name: str, file: str) -> bool:
    """Whether module ``name`` at ``file`` is the user's own: not auditkit's, not under a library folder."""
    return name.partition(".")[0] != "auditkit" and not os.path.realpath(file).startswith(_library_dirs())


def _prefixes(name: str) -> list[str]:
    """"a.b.c" -> ["a", "a.b", "a.b.c"]: importing a module runs its packages' ``__init__`` too."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _absolute(module: str | None, level: int, importer: str, is_package: bool) -> str | None:
    """The absolute name of ``from <level dots><module> import ...`` in module ``importer``; None where it has none
    (a relative import in a module outside any package)."""
    if level == 0:
        return module
    parts = importer.split(".") if is_package else importer.split(".")[:-1]
    if level - 1 > len(parts) or not parts[: len(parts) - (level - 1)]:
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


def _imported_names(file: str, importer: str) -> list[str]:
    """Every module name an ``import`` of ``file`` may load (anywhere in it, deferred imports too)."""
    try:
        tree = ast.parse(Path(file).read_bytes(), filename=file)
    except (OSError, SyntaxError, ValueError):  # not Python source (an extension module), or no longer valid
        return []
    is_package = Path(file).name == "__init__.py"
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names += _prefixes(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, importer, is_package)
            if base is not None:
                names += _prefixes(base) + [f"{base}.{a.name}" for a in node.names if a.name != "*"]
    return names


def _search_locations(name: str, folder: str) -> list[str] | None:
    """Where the submodules of package ``name`` are looked for; None where it is no package or not found."""
    module = sys.modules.get(name)
    if module is not None:
        path = getattr(module, "__path__", None)
        return list(path) if path is not None else None
    spec = _spec(name, folder)
    return list(spec.submodule_search_locations) if spec is not None and spec.submodule_search_locations else None


def _spec(name: str, folder: str) -> importlib.machinery.ModuleSpec | None:
    parent = name.rpartition(".")[0]
    search = _search_locations(parent, folder) if parent else [*sys.path, folder]
    if search is None:
        return None
    try:
        return importlib.machinery.PathFinder.find_spec(name, search)
    except (ImportError, ValueError, OSError):
        return None


def _locate(name: str, folder: str) -> str | None:
    """The file module ``name`` is (or would be) imported from, nothing imported: ``sys.modules``, else ``sys.path``
    and then ``folder`` (the importing file's); None for a built-in module, a namespace package or no module."""
    module = sys.modules.get(name)
    if module is not None:
        file = getattr(module, "__file__", None)
        return file if isinstance(file, str) else None
    spec = _spec(name, folder)
    return spec.origin if spec is not None and spec.has_location and spec.origin else None


def source_digests(label: str, file: str | os.PathLike[str], module: str) -> dict[str, str]:
    """{``label``: ``file``'s digest} and, for each module of the user's that ``file`` imports (directly or through
    each other), {"NAME, a module LABEL imports": its file's digest}. ``module``: the name ``file`` is imported as
    (its packages' ``__init__`` count, and its relative imports resolve against it)."""
    file = os.fspath(file)
    digests = {label: "sha256:" + file_sha256(file)}
    found: dict[str, str] = {}
    seen = {module}
    pending, packages = [(module, file)], _prefixes(module)[:-1]  # importing the module runs its packages' too
    while pending:
        importer, path = pending.pop()
        for name in _imported_names(path, importer) + packages:
            if name in seen:
                continue
            seen.add(name)
            origin = _locate(name, os.path.dirname(path))
            if origin is not None and os.path.isfile(origin) and _is_users(name, origin):
                found[name] = origin
                pending.append((name, origin))
        packages = []
    for name in sorted(found):
        digests[f"{name}, a module {label} imports"] = "sha256:" + file_sha256(found[name])
    return digests


def factory_digests(label: str, spec: str, group: str) -> dict[str, str]:
    """:func:`source_digests` of the module factory ``spec`` is defined in (an entry point of ``group`` for
    ``entry:NAME``); {} where that module has no file."""
    located = factory_module(spec, group)
    return source_digests(label, located[1], located[0]) if located is not None else {}


def plugin_digests(plugins: Iterable[str]) -> dict[str, str]:
    """:func:`source_digests` of every plugin (a module name, ``module:attribute``, or a ``.py`` file imported under
    its stem), labelled "the plugin NAME"; a plugin that is not imported and cannot be found counts as empty."""
    digests: dict[str, str] = {}
    for plugin in sorted(set(plugins)):
        label = f"the plugin {plugin}"
        if plugin.endswith(".py"):
            name, file = Path(plugin).stem, plugin
        else:
            name = plugin.split(":")[0]
            file = _locate(name, os.getcwd())
        if file is not None and os.path.isfile(file):
            digests |= source_digests(label, file, name)
        else:
            digests[label] = "absent"
    return digests
