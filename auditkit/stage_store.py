"""Finished audit stages on disk, so an interrupted audit resumes where it stopped.

Each stage of each mechanism setting is one JSON file ``stages/<setting id>/<stage>.json`` holding the stage's
result and the *key* of its inputs (a SHA-256 of everything the result depends on). A stage may also keep
tensors beside it (``<stage>.pt``, written first: the JSON is the completion marker). Every file is written to a
temporary name in the same folder and renamed over the target, so a killed process leaves either the previous
file or the complete new one, never half of one (the temporaries of killed runs are removed when the folder is
opened again: ``auditkit.output_folder``). With ``resume=True`` a stage whose file exists and whose key
matches is loaded instead of recomputed; a changed input changes the key, and the stage runs again.

Stage files are strict JSON, as every file auditkit writes: a non-finite number is the string "NaN", "Infinity" or
"-Infinity" (``auditkit.strict_json.dumps_strict``). They are internal to auditkit and carry no schema, so
loading turns every value equal to one of those three strings back into the float, wherever it is
(``decode_non_finite`` without a spec); files written before, with bare NaN / Infinity, load as well. New files
(and their temporary names) are created with mode 0666 less the umask, as ``open`` would create them.

A stage's tensor file holds its key too: on resume a stage whose tensors are missing, damaged or written for other
inputs is recomputed, with a note saying why.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from auditkit.output_folder import replace_atomically
from auditkit.strict_json import decode_non_finite, dumps_strict


def stage_key(inputs: Any) -> str:
    """SHA-256 of the inputs as canonical JSON: equal inputs, equal key."""
    # hashed, never written: allow_nan keeps the keys of stages already stored and tells inf from "Infinity"
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), allow_nan=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class StageArtefactError(Exception):
    """A stage's tensor file that is missing, damaged or written for other inputs."""


class StageStore:
    """The ``stages/`` folder of one audit output folder (the caller holds the folder: ``auditkit.output_folder``)."""

    def __init__(self, root: Path, *, resume: bool) -> None:
        self.root = Path(root) / "stages"
        self.resume = resume
        self._tensors: dict[tuple[str, str], dict[str, Any]] = {}  # loaded or saved in this run, by (setting, stage)

    def _path(self, setting: str, stage: str, suffix: str) -> Path:
        return self.root / setting / f"{stage}{suffix}"

    def _name(self, setting: str, stage: str, suffix: str) -> str:
        return f"stages/{setting}/{stage}{suffix}"

    def load(self, setting: str, stage: str, key: str) -> tuple[dict[str, Any] | None, str | None]:
        """(the stored result, None) when resuming and its key matches; else (None, why it is recomputed) -- the
        reason is None where nothing was stored or its inputs changed, a note where a file is unusable."""
        path = self._path(setting, stage, ".json")
        if not self.resume or not path.is_file():
            return None, None
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
            matches = stored["key"] == key
            result = decode_non_finite(stored["result"]) if matches else None
            with_tensors = matches and stored.get("tensors", False) is True
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None, f"{self._name(setting, stage, '.json')} is unreadable; recomputing {stage}"
        if not matches:
            return None, None
        if with_tensors:
            try:
                self.load_tensors(setting, stage, key)
            except StageArtefactError as err:
                return None, f"{err}; recomputing {stage}"
        return result, None

    def save(self, setting: str, stage: str, key: str, result: dict[str, Any], seconds: float) -> None:
        """Store a finished stage (atomically, as strict JSON), the completion marker of its tensors; ``seconds``
        is kept beside it, never in results.json."""
        document = {"stage": stage, "key": key, "seconds": seconds, "result": result,
                    "tensors": (setting, stage) in self._tensors}
        text = dumps_strict(document, indent=1)
        replace_atomically(self._path(setting, stage, ".json"), lambda tmp: tmp.write_text(text, encoding="utf-8"))

    def save_tensors(self, setting: str, stage: str, key: str, tensors: dict[str, Any]) -> None:
        """A stage's tensors, bound to its key (checked on load), written before its JSON."""
        replace_atomically(self._path(setting, stage, ".pt"), lambda tmp: torch.save({"key": key, "tensors": tensors},
                                                                                     tmp))
        self._tensors[(setting, stage)] = tensors

    def load_tensors(self, setting: str, stage: str, key: str) -> dict[str, Any]:
        """The tensors stored with ``key``; :class:`StageArtefactError` when the file is missing, damaged or holds
        another key."""
        if (setting, stage) in self._tensors:
            return self._tensors[(setting, stage)]
        name = self._name(setting, stage, ".pt")
        try:
            stored = torch.load(self._path(setting, stage, ".pt"), weights_only=True)
        except FileNotFoundError:
            raise StageArtefactError(f"{name} is missing") from None
        except Exception as err:  # noqa: BLE001 -- torch raises many kinds on a damaged file
            raise StageArtefactError(f"{name} is damaged ({type(err).__name__})") from None
        if not isinstance(stored, dict) or stored.get("key") != key or not isinstance(stored.get("tensors"), dict):
            raise StageArtefactError(f"{name} was written for other inputs (its key differs)")
        self._tensors[(setting, stage)] = stored["tensors"]
        return stored["tensors"]

    def seconds(self, setting: str, stage: str) -> float | None:
        """How long the stored run of a stage took (None when it is not stored)."""
        path = self._path(setting, stage, ".json")
        return json.loads(path.read_text(encoding="utf-8"))["seconds"] if path.is_file() else None
