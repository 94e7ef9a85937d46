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
import io
import json
from typing import Any

import torch

from auditkit.folder import FolderError
from auditkit.output_folder import Workspace
from auditkit.strict_json import decode_non_finite, dumps_strict


def stage_key(inputs: Any) -> str:
    """SHA-256 of the inputs as canonical JSON: equal inputs, equal key."""
    # hashed, never written: allow_nan keeps the keys of stages already stored and tells inf from "Infinity"
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), allow_nan=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def changed_inputs(stage: str, stored: Any, current: dict[str, str] | None) -> str | None:
    """The note on a stage whose key changed with named inputs: "recomputing train: the model factory f.py:make_net
    changed"; None where none of them differs (its config did) or the stage file names none (an older one)."""
    if not isinstance(stored, dict) or current is None:
        return None
    names = [*current, *(name for name in stored if name not in current)]
    changed = [name for name in names if stored.get(name) != current.get(name)]
    return f"recomputing {stage}: {', '.join(changed)} changed" if changed else None


class StageArtefactError(Exception):
    """A stage's tensor file that is missing, damaged or written for other inputs."""


class StageStore:
    """The ``stages/`` folder of one audit output folder, written through its workspace (the caller holds the folder:
    ``auditkit.output_folder``): no link in it is followed, and each file is listed in the folder's manifest."""

    def __init__(self, workspace: Workspace, *, resume: bool) -> None:
        self.workspace = workspace
        self.resume = resume
        self._tensors: dict[tuple[str, str], dict[str, Any]] = {}  # loaded or saved in this run, by (setting, stage)

    def _name(self, setting: str, stage: str, suffix: str) -> str:
        return f"stages/{setting}/{stage}{suffix}"

    def load(self, setting: str, stage: str, key: str,
             user_inputs: dict[str, str] | None = None) -> tuple[dict[str, Any] | None, str | None]:
        """(the stored result, None) when resuming and its key matches; else (None, why it is recomputed) -- the
        reason is None where nothing was stored or its config changed, a note where a file is unusable or one of the
        named ``user_inputs`` stored beside its key changed (:func:`changed_inputs`)."""
        name = self._name(setting, stage, ".json")
        if not self.resume or not self.workspace.is_file(name):
            return None, None
        try:
            stored = json.loads(self.workspace.read_bytes(name).decode("utf-8"))
            matches = stored["key"] == key
            result = decode_non_finite(stored["result"]) if matches else None
            with_tensors = matches and stored.get("tensors", False) is True
        except (OSError, ValueError, KeyError, TypeError, RecursionError, FolderError):
            return None, f"{name} is unreadable; recomputing {stage}"
        if not matches:
            return None, changed_inputs(stage, stored.get("user_inputs"), user_inputs)
        if with_tensors:
            try:
                self.load_tensors(setting, stage, key)
            except StageArtefactError as err:
                return None, f"{err}; recomputing {stage}"
        return result, None

    def save(self, setting: str, stage: str, key: str, result: dict[str, Any], seconds: float,
             user_inputs: dict[str, str] | None = None) -> None:
        """Store a finished stage (atomically, as strict JSON), the completion marker of its tensors; ``seconds``
        is kept beside it, never in results.json, and so are the digests of the ``user_inputs`` in its key (by name:
        a resume says which changed)."""
        document = {"stage": stage, "key": key, "seconds": seconds, "result": result,
                    "tensors": (setting, stage) in self._tensors, "user_inputs": user_inputs or {}}
        self.workspace.write_bytes(self._name(setting, stage, ".json"), dumps_strict(document, indent=1).encode("utf-8"))

    def save_tensors(self, setting: str, stage: str, key: str, tensors: dict[str, Any]) -> None:
        """A stage's tensors, bound to its key (checked on load), written before its JSON."""
        self.workspace.write(self._name(setting, stage, ".pt"),
                             lambda file: torch.save({"key": key, "tensors": tensors}, file))
        self._tensors[(setting, stage)] = tensors

    def load_tensors(self, setting: str, stage: str, key: str) -> dict[str, Any]:
        """The tensors stored with ``key``; :class:`StageArtefactError` when the file is missing, damaged or holds
        another key."""
        if (setting, stage) in self._tensors:
            return self._tensors[(setting, stage)]
        name = self._name(setting, stage, ".pt")
        try:
            stored = torch.load(io.BytesIO(self.workspace.read_bytes(name)), weights_only=True)
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
        name = self._name(setting, stage, ".json")
        return json.loads(self.workspace.read_bytes(name))["seconds"] if self.workspace.is_file(name) else None
