"""What the audit's stages share: the ``Stage`` protocol the audit iterates (``auditkit.audit``), and the figure data
a stage returns (a stage does not render: the app layer draws it, ``auditkit.figure_files``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = ["GridFigure", "Stage"]


@dataclass(frozen=True)
class GridFigure:
    """A grid of images to draw at ``path`` (relative to the output folder): one row of images per name in
    ``rows`` (arrays of shape (N, C, H, W)), each image's caption under it, and the figure's title."""

    path: str
    rows: Mapping[str, np.ndarray]
    captions: Mapping[str, Sequence[str]] = field(default_factory=dict)
    title: str = ""


class Stage(Protocol):
    """One stage of an audit, run once per mechanism setting, in order, through ``auditkit.stage_store.StageStore``.

    ``runs(plan)``: whether it runs for this setting (its result is None otherwise); ``key_inputs(setting)``: the
    inputs of its cache key (a stored result is reused when they, the auditkit version and the code fingerprint are
    equal); ``run(setting)``: compute its result (JSON data). ``setting`` is the setting's context (its ``plan``,
    its mechanism built once, the keys and results of the stages before it: ``auditkit.audit.SettingRun``)."""

    name: str

    def runs(self, plan: Any) -> bool: ...

    def key_inputs(self, setting: Any) -> dict[str, Any]: ...

    def run(self, setting: Any) -> dict[str, Any]: ...
