"""Finished audit stages on disk, so an interrupted audit resumes where it stopped.

Each stage of each mechanism setting is one JSON file ``stages/<setting id>/<stage>.json`` holding the stage's
result and the *key* of its inputs (a SHA-256 of everything the result depends on). A stage may also keep
tensors beside it (``<stage>.pt``, written first: the JSON is the completion marker). Every file is written to a
temporary name in the same folder and renamed over the target, so a killed process leaves either the previous
file or the complete new one, never half of one. With ``resume=True`` a stage whose file exists and whose key
matches is loaded instead of recomputed; a changed input changes the key, and the stage runs again.

Stage files are strict JSON, as every file auditkit writes: a non-finite number is the string "NaN", "Infinity" or
"-Infinity" (``auditkit.reports.results_schema.dumps_strict``). They are internal to auditkit and carry no schema, so
loading turns every value equal to one of those three strings back into the float, wherever it is
(``decode_non_finite`` without a spec); files written before, with bare NaN / Infinity, load as well. New files
(and their temporary names) are created with mode 0666 less the umask, as ``open`` would create them.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from auditkit.reports.files import replace_atomically
from auditkit.reports.results_schema import decode_non_finite, dumps_strict


def stage_key(inputs: Any) -> str:
    """SHA-256 of the inputs as canonical JSON: equal inputs, equal key."""
    # hashed, never written: allow_nan keeps the keys of stages already stored and tells inf from "Infinity"
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), allow_nan=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class StageStore:
    """The ``stages/`` folder of one audit output folder."""

    def __init__(self, root: Path, *, resume: bool) -> None:
        self.root = Path(root) / "stages"
        self.resume = resume
        for stale in self.root.glob("*/.*.tmp*"):  # left by a killed run between writing and renaming
            stale.unlink(missing_ok=True)

    def _path(self, setting: str, stage: str, suffix: str) -> Path:
        return self.root / setting / f"{stage}{suffix}"

    def load(self, setting: str, stage: str, key: str) -> dict[str, Any] | None:
        """The stored result when resuming and its key matches, else None."""
        path = self._path(setting, stage, ".json")
        if not self.resume or not path.is_file():
            return None
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None  # unreadable: recompute
        return decode_non_finite(stored["result"]) if stored.get("key") == key else None

    def save(self, setting: str, stage: str, key: str, result: dict[str, Any], seconds: float) -> None:
        """Store a finished stage (atomically, as strict JSON); ``seconds`` is kept beside it, never in
        results.json."""
        text = dumps_strict({"stage": stage, "key": key, "seconds": seconds, "result": result}, indent=1)
        replace_atomically(self._path(setting, stage, ".json"), lambda tmp: tmp.write_text(text, encoding="utf-8"))

    def save_tensors(self, setting: str, stage: str, tensors: dict[str, Any]) -> None:
        replace_atomically(self._path(setting, stage, ".pt"), lambda tmp: torch.save(tensors, tmp))

    def load_tensors(self, setting: str, stage: str) -> dict[str, Any]:
        return torch.load(self._path(setting, stage, ".pt"), weights_only=True)

    def seconds(self, setting: str, stage: str) -> float | None:
        """How long the stored run of a stage took (None when it is not stored)."""
        path = self._path(setting, stage, ".json")
        return json.loads(path.read_text(encoding="utf-8"))["seconds"] if path.is_file() else None
