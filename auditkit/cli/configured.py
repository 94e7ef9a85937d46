"""The config a ``train`` or ``audit`` command line describes: a CONFIG file or a preset, with the command line's
overrides and mechanism parameters on top."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from auditkit.cli.errors import UsageFailure
from auditkit.cli.mechanism_flags import parse_mechanism_params
from auditkit.config import AuditConfig, from_dict, load_config, merge, preset_dict, read_config

__all__ = ["load", "mechanism_params", "title"]


def mechanism_params(name: str, words: dict[str, str]) -> dict[str, Any]:
    """The typed parameters of mechanism ``name`` from the command line's words (``UsageFailure`` if refused)."""
    try:
        return parse_mechanism_params(name, words)
    except ValueError as err:
        raise UsageFailure(str(err)) from None


def load(config_path: Path | None, preset: str | None, overrides: dict[str, Any], words: dict[str, str],
         plugins: list[str], *, settings: bool = True) -> AuditConfig:
    """The validated config. ``settings=False`` (``train``) takes a preset's data and training without its mechanism
    settings."""
    if config_path is not None and preset is not None:
        raise UsageFailure("give either a CONFIG file or --preset, not both")
    if config_path is not None:
        load_config(config_path)  # validates the file on its own first, for a precise message
        raw = read_config(config_path)
    else:
        raw = preset_dict(preset or "quickstart", mechanisms=settings)
    if plugins:
        raw = {**raw, "plugins": sorted(set(raw.get("plugins", [])) | set(plugins))}
    overrides = dict(overrides)
    name = overrides.pop("mechanism_name", None)
    if name is not None:
        # a mechanism named on the command line replaces the config's settings; it inherits the config's
        # parameters only from a single [mechanism] table of the same name
        same = isinstance(raw.get("mechanism"), dict) and raw["mechanism"].get("name") == name
        raw = {k: v for k, v in raw.items() if k != "mechanisms" and (k != "mechanism" or same)}
    elif words and "mechanisms" in raw:
        raise UsageFailure("this config lists several [[mechanisms]]: give --mechanism with the parameters")
    if name is not None or words:
        target = name or (raw.get("mechanism", {}) or {}).get("name", "none")
        overrides["mechanism"] = {"name": target, **mechanism_params(target, words)}
    rounds = overrides.get("training", {}).get("rounds")
    if isinstance(rounds, int) and rounds >= 1:
        raw = _fit_checkpoints(raw, rounds)
    return from_dict(merge(raw, overrides))


def _fit_checkpoints(raw: dict[str, Any], rounds: int) -> dict[str, Any]:
    """With --rounds T, the config's checkpoints past T are dropped and T itself is kept if the config watched its
    own last round (so the final round stays observed)."""
    training = dict(raw.get("training", {}))
    checkpoints = training.get("checkpoints")
    if not isinstance(checkpoints, list) or not all(isinstance(c, int) for c in checkpoints):
        return raw  # malformed: let validation report it
    last = training.get("rounds")
    kept = [c for c in checkpoints if c <= rounds]
    if any(c > rounds for c in checkpoints) and last in checkpoints and rounds not in kept:
        kept.append(rounds)
    training["checkpoints"] = kept
    return {**raw, "training": training}


def title(config: AuditConfig, config_path: Path | None, preset: str | None) -> str:
    """The results' title: the config's own, else the config file's stem or the preset's name."""
    return config.title or (config_path.stem if config_path is not None else (preset or "quickstart"))
