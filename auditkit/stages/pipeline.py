"""The audit's stages in the order they run, each its cache key's inputs and its run (``auditkit.stages.base.Stage``);
``auditkit.audit`` runs them for every setting, stores each result and resumes from what is stored.

Besides the config, a stage's key holds the digests of the user's own files its result depends on
(:func:`user_inputs`, ``auditkit.input_fingerprint``): every stage the plugins' code, and the stages that train or
read the training (``reads_model_and_data``: all but ``distinguish``) the model factory's and dataset factory's
source with the modules they import from the user's folders, an image folder and the data files."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from auditkit.config import AuditConfig
from auditkit.data.catalog import dataset_files
from auditkit.data.factory import DATASET_GROUP, is_dataset_factory
from auditkit.input_fingerprint import (CACHE_BYTES, CACHE_NAME, DigestCache, factory_digests, files_digest,
                                        plugin_digests)
from auditkit.models.create import MODEL_GROUP, model_kind
from auditkit.output_folder import FolderError, Workspace
from auditkit.stages.account import account_stage
from auditkit.stages.base import SettingPlan, SettingRun, Stage, StageOutput
from auditkit.stages.canary import canary_stage
from auditkit.stages.distinguish import attacks_confidence, distinguish_stage
from auditkit.stages.inversion import RecordedView, inversion_stage
from auditkit.stages.membership import membership_stage
from auditkit.stages.probe import probe_stage, sweep_group
from auditkit.stages.recorded import recording_fingerprint, train_from_recording
from auditkit.stages.train import train_stage, training_inputs

__all__ = ["AccountStage", "CanaryStage", "DistinguishStage", "InversionStage", "MembershipStage", "PIPELINE", "ProbeStage",
           "TrainStage", "UserInputs", "user_inputs"]


@dataclass(frozen=True)
class UserInputs:
    """The digests of the user's own files an audit reads, each named as a resumed audit's note names it: the
    plugins' code (``code``) and the model and the data (``model_and_data``)."""

    code: dict[str, str]
    model_and_data: dict[str, str]

    def of(self, stage: Stage) -> dict[str, str]:
        """The digests ``stage``'s result depends on."""
        return {**self.code, **self.model_and_data} if stage.reads_model_and_data else dict(self.code)


def user_inputs(config: AuditConfig, workspace: Workspace) -> UserInputs:
    """The digests of the user's files ``config`` names: its plugins, a model or dataset factory (with the modules it
    imports from the user's folders), an image folder or the data files of ``data.data_dir``. Content digests are
    cached in the output folder ``workspace``'s ``stages/input-digests.json``, an unusable cache file is recomputed
    and replaced. Call it after the model and the data were built once (a factory is imported then)."""
    name = f"stages/{CACHE_NAME}"
    try:
        stored = workspace.read_bytes(name, max_bytes=CACHE_BYTES) if workspace.is_file(name) else None
    except (OSError, FolderError):
        stored = None
    cache = DigestCache(stored)
    found: dict[str, str] = {}
    model, data = config.training.model, config.data
    if model_kind(model) == "factory":
        found |= factory_digests(f"the model factory {model}", model, MODEL_GROUP)
    if is_dataset_factory(data.dataset):
        found |= factory_digests(f"the dataset factory {data.dataset}", data.dataset, DATASET_GROUP)
    files = dataset_files(data.dataset, data.data_dir)
    if files:
        what = "the image folder" if data.dataset == "imagefolder" else f"the {data.dataset} files in"
        found[f"{what} {data.data_dir}"] = files_digest(data.data_dir, files, cache)
    if cache.changed:
        workspace.write_bytes(name, cache.dumps())
    return UserInputs(plugin_digests(config.plugins), found)


def _per_test_confidence(setting: SettingRun) -> float:
    """The setting's confidence shared out over the audit's Bonferroni family."""
    return attacks_confidence(setting.config.distinguish.confidence, setting.context.family)


class TrainStage:
    """FedAvg with the mechanism (``auditkit.stages.train``), or the recording of a Flower app
    (``auditkit.stages.recorded``); keeps the views the inversion and probe stages read."""

    name = "train"
    reads_model_and_data = True

    def runs(self, plan: SettingPlan) -> bool:
        return True

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        config = setting.config
        inputs = {"config": training_inputs(config), "inversion_round": config.checkpoint_round,
                  "inversion_targets": config.inversion.targets, "probe_round": config.probe_round}
        if setting.context.recorded is not None:
            inputs["recording"] = recording_fingerprint(setting.context.recorded)
        return inputs

    def run(self, setting: SettingRun) -> StageOutput:
        context = setting.context
        if context.recorded is None:
            return train_stage(setting.config,
                               on_round=lambda record: setting.notify("round", setting=setting.plan, record=record))
        tensors: dict[str, Any] = {}
        result = train_from_recording(context.recorded, setting.config, context.data_summary, tensors.update)
        return StageOutput(result, tensors=tensors or None)


class AccountStage:
    """The mechanism's claim composed over the rounds trained (``auditkit.stages.account``)."""

    name = "account"
    reads_model_and_data = True

    def runs(self, plan: SettingPlan) -> bool:
        return True

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        return {"train": setting.keys["train"], "accounting": dataclasses.asdict(setting.config.accounting)}

    def run(self, setting: SettingRun) -> StageOutput:
        return StageOutput(account_stage(setting.mechanism, setting.config, setting.results["train"]))


class InversionStage:
    """The recorded server view inverted (``auditkit.stages.inversion``), with its reconstruction grid."""

    name = "inversion"
    reads_model_and_data = True

    def runs(self, plan: SettingPlan) -> bool:
        return plan.config.inversion.enabled

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        return {"train": setting.keys["train"], "inversion": dataclasses.asdict(setting.config.inversion)}

    def run(self, setting: SettingRun) -> StageOutput:
        view = RecordedView.from_tensors(setting.stored_tensors("train")["view"])
        document, figures = inversion_stage(setting.config, view, figure_id=setting.plan.id, label=setting.plan.label)
        return StageOutput(document, figures=figures)


class ProbeStage:
    """The claim's worst case at the checkpoint model and the identification tests (``auditkit.stages.probe``)."""

    name = "probe"
    reads_model_and_data = True

    def runs(self, plan: SettingPlan) -> bool:
        return plan.config.probe.enabled or plan.config.identification.enabled

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        config = setting.config
        return {"train": setting.keys["train"], "probe": dataclasses.asdict(config.probe),
                "family": setting.context.family, "identification": dataclasses.asdict(config.identification),
                "confidence": config.distinguish.confidence, "sweep_start": self._sweep_start(setting)}

    def run(self, setting: SettingRun) -> StageOutput:
        saved = setting.stored_tensors("train").get("probe")
        if saved is None:
            return StageOutput({"probe": None, "identification": None})
        section, figures = probe_stage(setting.config, setting.mechanism, saved, figure_id=setting.plan.id,
                                       label=setting.plan.label, per_test_confidence=_per_test_confidence(setting),
                                       sweep_start=self._sweep_start(setting), sweeps=setting.context.sweeps)
        return StageOutput(section, figures=tuple(figures))

    @staticmethod
    def _sweep_start(setting: SettingRun) -> float | None:
        """Where the setting's reconstruction sweep starts: the smallest claim among the settings that share it."""
        return setting.context.sweep_starts.get(sweep_group(setting.mechanism))


class DistinguishStage:
    """Black-box distinguishing tests on the mechanism and its adaptive tests (``auditkit.stages.distinguish``)."""

    name = "distinguish"
    reads_model_and_data = False

    def runs(self, plan: SettingPlan) -> bool:
        return plan.config.distinguish.enabled

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        config = setting.config
        return {"mechanism": training_inputs(config)["mechanisms"], "seed": config.seed,
                "family": setting.context.family, "distinguish": dataclasses.asdict(config.distinguish)}

    def run(self, setting: SettingRun) -> StageOutput:
        return StageOutput(distinguish_stage(setting.mechanism, setting.config, setting.context.family))


class CanaryStage:
    """The one-run canary audit of the whole training run (``auditkit.stages.canary``), where enabled."""

    name = "canary"
    reads_model_and_data = True

    def runs(self, plan: SettingPlan) -> bool:
        return plan.config.canary.enabled

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        config = setting.config
        return {"config": training_inputs(config), "canary": dataclasses.asdict(config.canary),
                "family": setting.context.family, "confidence": config.distinguish.confidence,
                "accounting": dataclasses.asdict(config.accounting)}

    def run(self, setting: SettingRun) -> StageOutput:
        return StageOutput(canary_stage(
            setting.config, per_test_confidence=_per_test_confidence(setting),
            on_round=lambda record: setting.notify("round", setting=setting.plan, record=record)))


class MembershipStage:
    """Membership inference against the final model, reference runs beside it (``auditkit.stages.membership``),
    where enabled."""

    name = "membership"
    reads_model_and_data = True

    def runs(self, plan: SettingPlan) -> bool:
        return plan.config.membership.enabled

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        config = setting.config
        return {"config": training_inputs(config), "membership": dataclasses.asdict(config.membership),
                "family": setting.context.family, "confidence": config.distinguish.confidence,
                "accounting": dataclasses.asdict(config.accounting)}

    def run(self, setting: SettingRun) -> StageOutput:
        return StageOutput(membership_stage(
            setting.config, setting.mechanism, per_test_confidence=_per_test_confidence(setting),
            on_round=lambda run, record: setting.notify("round", setting=setting.plan, record=record)))


PIPELINE: tuple[Stage, ...] = (TrainStage(), AccountStage(), InversionStage(), ProbeStage(), DistinguishStage(),
                               CanaryStage(), MembershipStage())
"""Every stage of an audit, in the order it runs them for each setting."""
