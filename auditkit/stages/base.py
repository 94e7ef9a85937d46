"""What the audit's stages share: the ``Stage`` protocol the audit iterates (``auditkit.audit``), the setting a stage
runs for (``SettingPlan``, ``SettingRun``), what the audit lends every stage (``AuditContext``), and what a stage
returns (``StageOutput``: its result, the tensors later stages read, the figures to draw; a stage does not render or
write: the app layer does, ``auditkit.figure_files``).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from auditkit import mechanisms
from auditkit.config import AuditConfig, MechanismConfig
from auditkit.stage_store import StageStore

__all__ = ["AuditContext", "GridFigure", "SettingPlan", "SettingRun", "Stage", "StageOutput"]

Event = Callable[..., None]
"""on_event(kind, **info): kind is "stage" (setting, stage, status: "start" | "done" | "resumed"), "round"
(setting, record) during training, or "note" (setting, stage, text: why a stored stage is recomputed)."""


@dataclass(frozen=True)
class GridFigure:
    """A grid of images to draw at ``path`` (relative to the output folder): one row of images per name in
    ``rows`` (arrays of shape (N, C, H, W)), each image's caption under it, and the figure's title;
    ``content_addressed``: ``path`` names its content (a digest), so a file already there is this figure."""

    path: str
    rows: Mapping[str, np.ndarray]
    captions: Mapping[str, Sequence[str]] = field(default_factory=dict)
    title: str = ""
    content_addressed: bool = False


@dataclass(frozen=True)
class SettingPlan:
    """One mechanism setting of the audit: its id (for files), display label and single-setting config."""

    id: str
    label: str
    setting: MechanismConfig
    config: AuditConfig
    swept: tuple[str, ...] = ()

    @property
    def sweep(self) -> dict[str, Any]:
        """The swept parameters' values at this grid point (a swept ``target_eps`` as the target)."""
        swept = {k: v for k, v in self.setting.params.items() if k in self.swept}
        if "target_eps" in self.swept:
            swept["target_eps"] = self.setting.target_eps
        return swept


@dataclass
class AuditContext:
    """What the audit lends every stage: the store of finished stages (whose tensors later stages read), the size
    of the Bonferroni family, a Flower app's recording (None: the train stage trains), the data's summary, and the
    reconstruction sweeps' starts and cache (settings that differ only in their epsilon share one sweep)."""

    store: StageStore
    family: int
    data_summary: dict[str, Any]
    recorded: Any = None
    sweep_starts: dict[str, float] = field(default_factory=dict)
    sweeps: dict[str, Any] = field(default_factory=dict)


@dataclass
class SettingRun:
    """One setting of a running audit, what its stages share: its plan, its mechanism, the audit's context, the
    progress callback, and the key and result of every stage run so far."""

    plan: SettingPlan
    mechanism: mechanisms.Mechanism
    context: AuditContext
    notify: Event
    keys: dict[str, str] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> AuditConfig:
        return self.plan.config

    def stored_tensors(self, stage: str) -> dict[str, Any]:
        """The tensors an earlier stage of this setting saved (``StageOutput.tensors``)."""
        return self.context.store.load_tensors(self.plan.id, stage, self.keys[stage])


@dataclass(frozen=True)
class StageOutput:
    """A stage's result (JSON data, stored under its key), the tensors later stages read (stored beside it), and
    the figures it drew the data of."""

    result: dict[str, Any]
    tensors: dict[str, Any] | None = None
    figures: tuple[GridFigure, ...] = ()


class Stage(Protocol):
    """One stage of an audit, run once per mechanism setting, in order, through ``auditkit.stage_store.StageStore``.

    ``runs(plan)``: whether it runs for this setting (its result is None otherwise); ``key_inputs(setting)``: the
    inputs of its cache key (a stored result is reused when they, the auditkit version and the code fingerprint are
    equal); ``run(setting)``: compute it. ``reads_model_and_data``: whether its result depends on the user's model and
    data files (it trains, or reads a training), whose digests its key then holds (``auditkit.stages.pipeline``)."""

    name: str
    reads_model_and_data: bool

    def runs(self, plan: SettingPlan) -> bool: ...

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]: ...

    def run(self, setting: SettingRun) -> StageOutput: ...
