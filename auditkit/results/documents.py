"""Checking, reading and writing results documents: ``validate_results`` (the current version, one error line
naming the key), ``load_results`` (any version auditkit wrote, upgraded in memory), ``write_results`` (strict
JSON, atomically)."""
from __future__ import annotations

import enum
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from auditkit.output_folder import replace_atomically
from auditkit.results import legacy
from auditkit.results.errors import message
from auditkit.results.model import SCHEMA, SCHEMA_VERSION, Command, ResultsDocument
from auditkit.results.reproduction import Reproduction
from auditkit.results.types import Section, short
from auditkit.results.upgrade import REPRODUCTION_V2_SCHEMA, upgrade
from auditkit.strict_json import dumps_strict, read_bounded

__all__ = ["RESULTS_FILE", "REPRODUCTION_FILE", "as_dict", "as_model", "document_path", "file_name", "load_results",
           "upgrade_results", "validate_results", "write_results"]

RESULTS_FILE, REPRODUCTION_FILE = "results.json", "reproduction.json"
FIRST_VERSION = 2  # the oldest version read
_COMMANDS = ", ".join(Command)
_MODELS: dict[tuple[int, bool], type[Section]] = {  # (version, a reproduction?) -> its model
    (6, False): ResultsDocument, (6, True): Reproduction, (5, False): legacy.DocumentV5,
    (5, True): legacy.ReproductionV5, (4, False): legacy.DocumentV4,
    (4, True): legacy.ReproductionV4, (3, False): legacy.DocumentV3, (2, False): legacy.DocumentV2,
}


def _validated(doc: Any, version: int) -> Section:
    """``doc`` checked as a document of ``version``, as its model (ValueError in one line naming the key)."""
    if not isinstance(doc, dict):
        raise ValueError(f"results must be a JSON object, got {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"schema must be {SCHEMA!r}, got {short(doc.get('schema'))}")
    if doc.get("schema_version") != version or isinstance(doc.get("schema_version"), bool):
        raise ValueError(f"schema_version must be {version}, got {short(doc.get('schema_version'))}")
    command = doc.get("command")
    if isinstance(command, str) and command not in Command.__members__.values():
        raise ValueError(f"results.command must be one of {_COMMANDS}, got {short(command)}")
    reproduction = command == Command.REPRODUCE
    model = _MODELS.get((version, reproduction), ResultsDocument)
    try:
        return model.model_validate(doc)
    except ValidationError as err:
        raise ValueError(message(err, "reproduction" if reproduction else "results")) from None


def _check(doc: Any, version: int) -> dict[str, Any]:
    """``doc`` checked as a document of ``version``: the same document with its non-finite numbers decoded where
    the schema has a number (ValueError in one line naming the key)."""
    return as_dict(_validated(doc, version))


def as_dict(model: Section) -> dict[str, Any]:
    """A checked document (or section) as parsed JSON holds it: the keys written, vocabularies as strings."""
    return _plain(model.model_dump(exclude_unset=True, by_alias=True))


def _plain(value: Any) -> Any:
    """A dumped document as parsed JSON would hold it: the members of closed vocabularies as their strings."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def validate_results(doc: Any) -> None:
    """Raise ValueError (one line, naming the offending key) unless ``doc`` is a document of the current version:
    a ``ResultsDocument`` or, with ``command`` "reproduce", a ``Reproduction``."""
    _check(doc, SCHEMA_VERSION)


def as_model(doc: Any) -> ResultsDocument | Reproduction:
    """``doc`` as the model of its kind, checked as ``validate_results`` checks it (the same ValueError); a model
    is returned as it is."""
    if isinstance(doc, ResultsDocument | Reproduction):
        return doc
    return _validated(doc, SCHEMA_VERSION)


def _check_reproduction_v2(doc: dict[str, Any]) -> dict[str, Any]:
    if doc.get("schema_version") != 2:
        raise ValueError(f"schema_version of a {REPRODUCTION_V2_SCHEMA!r} document must be 2, got "
                         f"{short(doc.get('schema_version'))}")
    try:
        return _plain(legacy.ReproductionV2.model_validate(doc).model_dump(exclude_unset=True, by_alias=True))
    except ValidationError as err:
        raise ValueError(message(err, "reproduction")) from None


def upgrade_results(doc: Any) -> dict[str, Any]:
    """An older document (checked as its own version first: ValueError in one line) as the current version, a new
    document checked as such; a reproduction of schema "auditkit.reproduction" version 2 as one of this schema."""
    if isinstance(doc, dict) and doc.get("schema") == REPRODUCTION_V2_SCHEMA:
        checked = _check_reproduction_v2(doc)
    else:
        version = doc.get("schema_version") if isinstance(doc, dict) else None
        if not isinstance(version, int) or isinstance(version, bool) or not FIRST_VERSION <= version < SCHEMA_VERSION:
            raise ValueError(f"schema_version must be {FIRST_VERSION} to {SCHEMA_VERSION - 1} to upgrade, got "
                             f"{short(version)}")
        checked = _check(doc, version)
    return _check(upgrade(checked), SCHEMA_VERSION)


def _auditkit_version() -> str:
    try:
        return metadata.version("auditkit")
    except metadata.PackageNotFoundError:
        return "unknown"


def _unreadable(doc: dict[str, Any]) -> str:
    """One line for a document of a version this auditkit cannot read: which version, and how to regenerate it."""
    version = doc["schema_version"]
    provenance = doc.get("provenance") if isinstance(doc.get("provenance"), dict) else {}
    # version 1 kept the writer's version at the top; "auditkit.reproduction" as "auditkit"
    writer = doc.get("auditkit_version") or provenance.get("auditkit_version") or doc.get("auditkit")
    shown = isinstance(writer, str) and len(writer) <= 100 and writer.isprintable()
    written = f" (written by auditkit {writer})" if shown else ""
    command = Command.REPRODUCE if doc.get("schema") == REPRODUCTION_V2_SCHEMA else doc.get("command")
    if command in (Command.TRAIN, Command.AUDIT):
        how = f"regenerate it with `auditkit {command}` on the config recorded in it"
    elif command == Command.REPRODUCE:
        how = "regenerate it with `auditkit reproduce` on the paper, budget and seeds recorded in it"
    elif command in Command.__members__.values():
        how = f"regenerate it with `auditkit {command}` and the options recorded in its config"
    else:
        how = "regenerate it with the auditkit command that wrote it"
    newer = "; or upgrade auditkit" if isinstance(version, int) and version > SCHEMA_VERSION else ""
    return (f"schema version {short(version)}{written} cannot be read by this auditkit ({_auditkit_version()}), "
            f"which reads versions {FIRST_VERSION} to {SCHEMA_VERSION}: {how} (the same config and seed give the "
            f"same numbers){newer}")


def _readable(doc: Any) -> dict[str, Any]:
    """A parsed file as a checked document of the current version."""
    if not isinstance(doc, dict):
        return _check(doc, SCHEMA_VERSION)
    version = doc.get("schema_version")
    known = isinstance(version, int) and not isinstance(version, bool)
    if doc.get("schema") == REPRODUCTION_V2_SCHEMA:
        if version != 2:
            raise ValueError(_unreadable(doc))
        return upgrade_results(doc)
    if doc.get("schema") == SCHEMA and known and FIRST_VERSION <= version < SCHEMA_VERSION:
        return upgrade_results(doc)
    if doc.get("schema") == SCHEMA and known and version != SCHEMA_VERSION:
        raise ValueError(_unreadable(doc))
    return _check(doc, SCHEMA_VERSION)


def load_results(path: str | Path) -> dict[str, Any]:
    """Read a document, ``results.json`` or ``reproduction.json``, of any version auditkit wrote (older ones
    upgraded in memory) within the size and nesting limits (``read_bounded``), as the current version; any
    problem is one ValueError line starting with the path. Non-finite numbers are read as ``dumps_strict`` writes
    them ("NaN", "Infinity", "-Infinity" where the schema has a number) or, in older files, bare."""
    path = Path(path)
    try:
        return _readable(read_bounded(path))
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def file_name(doc: dict[str, Any]) -> str:
    """The file a document is written to: ``reproduction.json`` for a reproduction, else ``results.json``."""
    return REPRODUCTION_FILE if doc.get("command") == Command.REPRODUCE else RESULTS_FILE


def document_path(path: str | Path) -> Path:
    """The document to read at ``path``: the file itself, or in a folder the ``results.json`` or
    ``reproduction.json`` it holds (ValueError in one line when it holds neither or both)."""
    path = Path(path)
    if not path.is_dir():
        return path
    found = [path / name for name in (RESULTS_FILE, REPRODUCTION_FILE) if (path / name).is_file()]
    if not found:
        raise ValueError(f"{path}: holds no {RESULTS_FILE} or {REPRODUCTION_FILE}")
    if len(found) > 1:
        raise ValueError(f"{path}: holds both {RESULTS_FILE} and {REPRODUCTION_FILE}; name the one to render")
    return found[0]


def write_results(doc: dict[str, Any], out: Path) -> Path:
    """Validate ``doc`` (nothing is written if it is invalid) and write it to ``out/results.json``, or
    ``out/reproduction.json`` for a reproduction, atomically (readers see the old file or the new), as strict
    JSON: non-finite numbers as the strings "NaN", "Infinity", "-Infinity" (``dumps_strict``)."""
    validate_results(doc)
    path = Path(out) / file_name(doc)
    text = dumps_strict(doc, indent=2) + "\n"
    replace_atomically(path, lambda file: file.write(text.encode("utf-8")))
    return path
