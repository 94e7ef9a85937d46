"""The results document (``results.json``) that reports are rendered from: schema ``auditkit/results``, version 2.

Top level: ``schema``, ``schema_version`` (2), ``command``, ``title``, ``config`` (the validated config as plain
data), ``provenance`` and ``settings`` (at least one).

``provenance``: ``auditkit_version``, ``seed``, ``device``, ``versions`` (package -> version), ``platform``,
``data`` (dataset, partition, train / validation / test sizes, client_sizes), ``model`` (name, num_params),
``training`` (clients, rounds, tau, batch_size, lr, participation, sampling), ``threat_models`` (view -> what it
sees), ``accountant_backends`` and ``neighbouring_relations`` (sorted lists of words).

Each setting (one mechanism setting, a grid point of a sweep):

- ``id`` (unique, filename-safe), ``label`` (user-supplied display name), ``sweep`` (swept parameter -> value);
- ``mechanism``: ``name``, ``params``, ``guarantee`` (the one-round claim: ``epsilon`` or null for no claim,
  ``delta``, relation, unit, scope, threat_model, sensitivity, assumptions, caveats, flags, summary);
- ``training``: ``rounds`` (per round: lr, losses, test_accuracy in [0, 1], bits_per_coordinate), ``final``
  (accuracy, loss, bits, ``compression_vs_float32`` or null, uplink bits, optionally ``uploads_per_round`` for
  protocols with several uploads per round, e.g. MSP-FL's K_t + 1) and ``checkpoints``;
- ``accounting``: the claim composed over the rounds run (``composed`` or null with a ``refusal``;
  ``composed_actual``: the realised noise when the claim is exceeded);
- ``inversion`` (null when switched off): the attack on the server's view, clean and defended SSIM / MSE /
  PSNR, and ``figure``, the reconstruction grid's path relative to the results folder; optionally ``views``,
  further server-side estimates attacked the same way (MSP-FL: alpha_0, the first consensus residual, the
  least-squares reconstruction), each with its name, observation and defended scores;
- ``distinguish`` (null when switched off): the certified epsilon lower bound at a confidence, its cap
  ``max_certifiable``, the verdict on the claim and the adaptive tests.

Numbers may be NaN or Infinity. Checked here: each key's presence and JSON type, at least one setting, unique
filename-safe ids, reconstruction grid paths inside the results folder.
"""
from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

SCHEMA = "auditkit/results"
SCHEMA_VERSION = 2


class _Nullable:
    """A value that is either null or matches ``spec``."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec


class _Optional:
    """A key that may be absent; when present its value matches ``spec``."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec


_NUMBER = (int, float)
_STRINGS = [str]
_RUN = {"epsilon": _NUMBER, "delta": _NUMBER, "backend": str, "event": str}
_SCORES = {"ssim_mean": _NUMBER, "mse_mean": _NUMBER, "psnr_mean": _NUMBER,
           "ssim": [_NUMBER], "mse": [_NUMBER], "psnr": [_NUMBER]}
_SETTING = {
    "id": str,
    "label": str,
    "mechanism": {
        "name": str,
        "params": dict,
        "guarantee": {
            "epsilon": _Nullable(_NUMBER), "delta": _NUMBER, "relation": str, "unit": str, "scope": str,
            "threat_model": str, "sensitivity": str, "assumptions": _STRINGS, "caveats": _STRINGS,
            "flags": _STRINGS, "summary": str,
        },
    },
    "sweep": dict,
    "training": {
        "rounds": [{"round": int, "lr": _NUMBER, "train_loss": _NUMBER, "test_loss": _NUMBER,
                    "test_accuracy": _NUMBER, "bits_per_coordinate": _NUMBER}],
        "final": {"round": int, "test_accuracy": _NUMBER, "best_test_accuracy": _NUMBER, "test_loss": _NUMBER,
                  "bits_per_coordinate": _NUMBER, "float32_bits_per_coordinate": _NUMBER,
                  "compression_vs_float32": _Nullable(_NUMBER), "uplink_bits_total": int,
                  "uploads_per_round": _Optional(_NUMBER)},
        "checkpoints": [int],
    },
    "accounting": {"rounds": int, "delta": _NUMBER, "composed": _Nullable(_RUN), "refusal": _Nullable(str),
                   "composed_actual": _Nullable(_RUN)},
    "inversion": _Nullable({
        "attack": str, "view": str, "round": int, "observation": str, "clients": [int], "model": str,
        "ssim_variant": str, "clean": _SCORES, "defended": _SCORES, "figure": str,
        "views": _Optional([{"name": str, "observation": str, "defended": _SCORES}]),
    }),
    "distinguish": _Nullable({
        "trials": int, "confidence": _NUMBER, "tests": int, "claimed_epsilon": _Nullable(_NUMBER),
        "delta": _NUMBER, "epsilon_lower_bound": _NUMBER, "max_certifiable": _NUMBER, "worst_pair": str,
        "statistic": str, "verdict": str,
        "adaptive": [{"test": str, "claim": str, "claimed_epsilon": _Nullable(_NUMBER),
                      "epsilon_lower_bound": _NUMBER, "max_certifiable": _NUMBER, "verdict": str, "note": str}],
    }),
}
_DOCUMENT = {
    "schema": str,
    "schema_version": int,
    "command": str,
    "title": str,
    "config": dict,
    "provenance": {
        "auditkit_version": str, "seed": int, "device": str, "versions": dict, "platform": str,
        "data": {"dataset": str, "partition": str, "train": int, "validation": int, "test": int,
                 "client_sizes": [int]},
        "model": {"name": str, "num_params": int},
        "training": {"clients": int, "rounds": int, "tau": int, "batch_size": int, "lr": _NUMBER,
                     "participation": str, "sampling": str},
        "threat_models": dict,
        "accountant_backends": _STRINGS,
        "neighbouring_relations": _STRINGS,
    },
    "settings": [_SETTING],
}
_TYPE_NAMES = {str: "a string", int: "an integer", _NUMBER: "a number", dict: "an object"}
_FILENAME_SAFE = re.compile(r"[A-Za-z0-9._-]+")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check(value: Any, spec: Any, where: str) -> None:
    """Raise ValueError naming ``where`` when ``value`` does not match ``spec``."""
    if isinstance(spec, _Nullable):
        if value is not None:
            _check(value, spec.spec, where)
        return
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise ValueError(f"{where} must be an object, got {type(value).__name__}")
        for key, item in spec.items():
            if isinstance(item, _Optional):
                if key in value:
                    _check(value[key], item.spec, f"{where}.{key}")
                continue
            if key not in value:
                raise ValueError(f"{where}.{key} is missing")
            _check(value[key], item, f"{where}.{key}")
        return
    if isinstance(spec, list):
        if not isinstance(value, list):
            raise ValueError(f"{where} must be a list, got {type(value).__name__}")
        for i, item in enumerate(value):
            _check(item, spec[0], f"{where}[{i}]")
        return
    if isinstance(value, bool) or not isinstance(value, spec):
        raise ValueError(f"{where} must be {_TYPE_NAMES[spec]}, got {_short(value)}")


def _check_settings(settings: list[dict[str, Any]]) -> None:
    """At least one setting; ids unique and filename-safe; figure paths inside the results folder."""
    if not settings:
        raise ValueError("results.settings must hold at least one setting")
    seen: set[str] = set()
    for i, setting in enumerate(settings):
        if not _FILENAME_SAFE.fullmatch(setting["id"]) or setting["id"] in seen:
            raise ValueError(f"results.settings[{i}].id must be unique and filename-safe, got {_short(setting['id'])}")
        seen.add(setting["id"])
        inversion = setting["inversion"]
        if inversion is not None:
            figure = PurePosixPath(inversion["figure"])
            if figure.is_absolute() or ".." in figure.parts or "\\" in inversion["figure"]:
                raise ValueError(f"results.settings[{i}].inversion.figure must be a relative path inside the "
                                 f"results folder, got {_short(inversion['figure'])}")


def validate_results(doc: Any) -> None:
    """Raise ValueError (one line, naming the offending key) unless ``doc`` is a version 2 results document."""
    if not isinstance(doc, dict):
        raise ValueError(f"results must be a JSON object, got {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"schema must be {SCHEMA!r}, got {_short(doc.get('schema'))}")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"schema_version must be {SCHEMA_VERSION}, got {_short(doc.get('schema_version'))}")
    _check(doc, _DOCUMENT, "results")
    _check_settings(doc["settings"])


def load_results(path: str | Path) -> dict[str, Any]:
    """Read and validate ``results.json``; any problem is one ValueError line starting with the path."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot read ({type(err).__name__})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    try:
        validate_results(doc)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    return doc
