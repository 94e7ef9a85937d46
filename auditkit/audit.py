"""The audit pipeline: one config in, ``results.json``, ``report.html`` and ``report.md`` out.

For every mechanism setting of the config (sweeps expanded, :meth:`AuditConfig.settings`) five stages run (and a sixth, ``canary``, where enabled):

* ``train``       FedAvg with the mechanism between clients and server; the per-round metrics, bits and the
                  ``server`` view of the inversion round are kept (``auditkit.stages.train``);
* ``account``     the mechanism's one-round claim and the claim composed over the rounds run
                  (``auditkit.stages.account``);
* ``inversion``   the recorded server view inverted beside the clients' true updates, same attack and settings
                  (``auditkit.stages.inversion.attack_recorded_view``), with a reconstruction grid;
* ``probe``       the claim's worst case at the checkpoint model (``auditkit.stages.probe``): probe clients' single-example
                  updates through the mechanism, inverted beside the clean ones, and the informed adversary's
                  identification test judged against the claim's reconstruction bound
                  (``auditkit.stages.identification``);
* ``distinguish`` black-box distinguishing tests on the mechanism and its adaptive tests (``auditkit.stages.distinguish``); the
                  Bonferroni family is every test of the whole audit, so a correct mechanism is almost never
                  called violated.

Each stage's result is stored atomically as it finishes (``auditkit.stage_store``); ``resume=True`` loads
finished stages instead of recomputing them. The output folder is held for the run (``auditkit.output_folder``):
one audit at a time, an earlier audit's results kept unless ``resume`` or ``overwrite`` is given, results.json and
the reports replaced together. A stage's key hashes its inputs and the fingerprint of the code that
computes it (``auditkit.results.code_fingerprint``: the toolkit's and the plugins' sources), so a resumed audit
never reuses results computed by other code. Results are a pure function of the config and seed (timings are
kept in the stage files, never in ``results.json``), so a resumed audit equals an uninterrupted one -- provided
each mechanism draws its randomness from its seeds: ``auditkit.mechanisms.reproducible`` checks every setting's mechanism
once before the first stage (two encodes), and a setting whose mechanism fails it is marked in ``results.json``
(``mechanism.reproducible: false``) and in the report. Everything that can fail on user input is checked before
the first stage starts, and so is a plugin's code (``auditkit.mechanisms.preflight``: ``auditkit.mechanisms.PluginCodeError``).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auditkit import mechanisms
from auditkit import results
from auditkit.version import __version__
from auditkit.config import AuditConfig, ConfigError, MechanismConfig
from auditkit.stages.account import account_rounds, with_example_level
from auditkit.stages.distinguish import attacks_confidence, distinguish_family, run_distinguish
from auditkit.stages.probe import check_probe_inputs
from auditkit.stages.train import Experiment, build_mechanism, data_provenance
from auditkit.output_folder import Mode, OutputFolder
from auditkit.figure_files import write_grid
from auditkit.stage_store import StageStore, stage_key
from auditkit.stages.base import Stage

STAGES = ("train", "account", "inversion", "probe", "distinguish")  # every setting's; "canary" where enabled

Event = Callable[..., None]
"""on_event(kind, **info): kind is "stage" (setting, stage, status: "start" | "done" | "resumed"), "round"
(setting, record) during training, or "note" (setting, stage, text: why a stored stage is recomputed)."""


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


def plan_audit(config: AuditConfig) -> list[SettingPlan]:
    """Every setting of ``config``, validated: its mechanism is built once, so bad parameters fail here, and a
    plugin's mechanism is run once through its claim, capabilities, encode and decode (``auditkit.mechanisms.preflight``),
    so that a bug in its code fails here too (``auditkit.mechanisms.PluginCodeError``)."""
    plans = []
    for m in config.mechanisms:
        for point in m.grid():
            single = config.with_setting(point)
            mechanisms.preflight(build_mechanism(single))
            plans.append(SettingPlan(f"s{len(plans):02d}", point.display, point, single, tuple(m.sweep)))
    return plans


def identification_family(mechanism: mechanisms.Mechanism, config: AuditConfig) -> int:
    """How many identification tests the probe stage judges for ``mechanism``: one per M, where it makes a claim."""
    if not config.identification.enabled or mechanism.guarantee().epsilon is None:
        return 0
    return len(config.identification.candidates)


def canary_family(mechanism: mechanisms.Mechanism, config: AuditConfig) -> int:
    """How many one-run tests the canary stage judges for ``mechanism``: one per judged view, where enabled."""
    from auditkit.stages.canary import judged_views

    return len(judged_views(mechanism, config)) if config.canary.enabled else 0


def family_size(plans: list[SettingPlan], built: dict[str, mechanisms.Mechanism] | None = None) -> int:
    """The number of tests the whole audit runs: the Bonferroni family of every verdict it reports
    (distinguishing pairs, adaptive tests, identification tests, the canary stage's views). ``built``: each plan's
    mechanism by plan id (built here when absent)."""
    total = 0
    for p in plans:
        mechanism = built[p.id] if built is not None else build_mechanism(p.config)
        if p.config.distinguish.enabled:
            total += distinguish_family(mechanism, p.config.distinguish.adaptive, p.config.distinguish.search)
        total += identification_family(mechanism, p.config) + canary_family(mechanism, p.config)
    return total


def sweep_starts(plans: list[SettingPlan], built: dict[str, mechanisms.Mechanism] | None = None) -> dict[str, float]:
    """Sweep group (``auditkit.stages.probe.sweep_group``) -> the smallest claimed epsilon among its settings, where the
    reconstruction sweep those settings share starts. ``built``: as for ``family_size``."""
    from auditkit.stages.probe import sweep_group

    starts: dict[str, float] = {}
    for plan in plans:
        mechanism = built[plan.id] if built is not None else build_mechanism(plan.config)
        claimed = mechanism.guarantee().epsilon
        if claimed is not None:
            group = sweep_group(mechanism)
            starts[group] = min(starts.get(group, claimed), claimed)
    return starts


class Audit:
    """A planned audit writing into ``out``; :meth:`run` executes the stages and writes the reports."""

    def __init__(self, config: AuditConfig, *, out: str | Path = "auditkit-out", resume: bool = False,
                 overwrite: bool = False, title: str | None = None, recorded: Any = None) -> None:
        if resume and overwrite:
            raise ConfigError("give either resume or overwrite, not both")
        self.config = config
        self.mode = Mode.RESUME if resume else Mode.OVERWRITE if overwrite else Mode.NEW
        self.out = OutputFolder.check(out, self.mode, resumable=True)
        self.work = self.out  # where this run writes: out, or out/.next for an overwrite run (OutputFolder.work)
        self.finished = 0  # stages finished or resumed in this run
        self.title = title or config.title or "auditkit audit"
        self.plans = plan_audit(config)
        self.mechanisms = {plan.id: build_mechanism(plan.config) for plan in self.plans}  # once per setting
        self.family = family_size(self.plans, self.mechanisms)
        self.recorded = recorded  # an auditkit.flower.recording.Recording: the train stage reads it, trains nothing
        experiment = Experiment(self.plans[0].config)  # data files, device: every input checked before any stage runs
        self._data_summary = experiment.data_summary
        try:
            check_probe_inputs(config, experiment.simulation.data)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if config.training.backend == "flower":  # every setting, not only the first, must fit the backend
            from auditkit.flower.backend import check_protocol
            from auditkit.stages.train import build_protocol

            for plan in self.plans:
                check_protocol(build_protocol(self.mechanisms[plan.id], plan.config))
        if recorded is not None:
            from auditkit.stages.recorded import check_recording

            check_recording(recorded, config)
        # whether each setting's mechanism is determined by its seeds (two encodes; results.json and the report
        # say when it is not: its results will not reproduce)
        self.reproducible = {plan.id: mechanisms.reproducible(self.mechanisms[plan.id]) for plan in self.plans}
        self.code = results.code_fingerprint(config.plugins)
        self._sweep_starts = sweep_starts(self.plans, self.mechanisms)
        self._sweeps: dict[str, Any] = {}  # reconstruction sweeps by their inputs: settings share them
        self.stages: tuple[Stage, ...] = (TrainStage(self), AccountStage(self), InversionStage(self),
                                          ProbeStage(self), DistinguishStage(self), CanaryStage(self))

    @property
    def stage_count(self) -> int:
        """The stages the progress bar counts: ``STAGES`` per setting, and the canary stage where enabled."""
        return len(self.plans) * len(STAGES) + sum(plan.config.canary.enabled for plan in self.plans)

    def run(self, on_event: Event | None = None) -> dict[str, Any]:
        """Run (or resume) every stage, then write ``results.json``, ``report.html`` and ``report.md``."""
        from auditkit.reports import render_report

        notify = on_event or (lambda kind, **info: None)
        with OutputFolder(self.out, self.mode, resumable=True).open("auditkit audit") as folder:
            self.work = folder.work
            # an overwrite run continues its own interrupted .next/, whose stages are keyed like any others
            self.store = StageStore(self.work, resume=self.mode is not Mode.NEW)
            settings = [self._run_setting(plan, notify) for plan in self.plans]
            document = self._results(settings)
            render_report(document, self.work, with_results=True)
            folder.swap_in()
        return document

    # ---------------------------------------------------------------- stages

    def _stage(self, setting: SettingRun, stage: Stage) -> dict[str, Any]:
        """The stage's stored result, or ``stage.run``'s, stored under its key (``setting.keys[stage.name]``)."""
        plan, notify = setting.plan, setting.notify
        key = stage_key({"auditkit": __version__, "code": self.code, "stage": stage.name,
                         "inputs": stage.key_inputs(setting)})
        setting.keys[stage.name] = key
        stored, note = self.store.load(plan.id, stage.name, key)
        if note is not None:
            notify("note", setting=plan, stage=stage.name, text=note)
        if stored is not None:
            self.finished += 1
            notify("stage", setting=plan, stage=stage.name, status="resumed")
            return stored
        notify("stage", setting=plan, stage=stage.name, status="start")
        start = time.perf_counter()
        result = stage.run(setting)
        self.store.save(plan.id, stage.name, key, result, time.perf_counter() - start)
        self.finished += 1
        notify("stage", setting=plan, stage=stage.name, status="done")
        return result

    def _run_setting(self, plan: SettingPlan, notify: Event) -> dict[str, Any]:
        """Every stage of one setting, in order: a stage that does not run for it has the result None."""
        setting = SettingRun(plan, self.mechanisms[plan.id], notify)
        for stage in self.stages:
            setting.results[stage.name] = self._stage(setting, stage) if stage.runs(plan) else None
        return {"plan": plan, **setting.results}

    def _train(self, plan: SettingPlan, key: str, inversion_round: int | None, notify: Event) -> dict[str, Any]:
        from auditkit.stages.inversion import RecordedView

        experiment = Experiment(plan.config)
        run = experiment.train(lambda record: notify("round", setting=plan, record=record))
        observed = [o for o in run.result.observations if o.round == inversion_round]
        probed = [o for o in run.result.observations if o.round == plan.config.probe_round]
        tensors: dict[str, Any] = {}
        if plan.config.inversion.enabled and observed:
            tensors["view"] = RecordedView.from_observation(observed[0], experiment.simulation.data.train.x.cpu(),
                                                            plan.config.inversion.targets,
                                                            run.protocol).to_tensors()
        if probed:  # the global model the probe starts from, and the round's learning rate
            tensors["probe"] = {"round": probed[0].round, "lr": probed[0].lr,
                                "weights": probed[0].global_before.detach().float().cpu().clone()}
        if tensors:
            self.store.save_tensors(plan.id, "train", key, tensors)
        return {
            "training": results.training_entry(run.result, run.protocol),
            "device": str(run.device),
            "provenance": data_provenance(run),
            "inversion_round": inversion_round if observed else None,
        }

    def _account(self, plan: SettingPlan, trained: dict[str, Any]) -> dict[str, Any]:
        rounds = trained["training"]["final"]["round"]
        entry = account_rounds(self.mechanisms[plan.id], rounds, plan.config.accounting,
                               plan.config.training)
        return with_example_level(entry, plan.config, rounds, trained["provenance"]["data"])

    def _invert(self, plan: SettingPlan, train_key: str) -> dict[str, Any]:
        from auditkit.stages.inversion import RecordedView, inversion_stage

        view = RecordedView.from_tensors(self.store.load_tensors(plan.id, "train", train_key)["view"])
        document, figure = inversion_stage(plan.config, view, figure_id=plan.id, label=plan.label)
        write_grid(figure, self.work)
        return document

    def _probe(self, plan: SettingPlan, train_key: str) -> dict[str, Any]:
        from auditkit.stages.probe import probe_stage

        saved = self.store.load_tensors(plan.id, "train", train_key).get("probe")
        if saved is None:
            return {"probe": None, "identification": None}
        config = plan.config
        per_test = attacks_confidence(config.distinguish.confidence, self.family)
        section, figures = probe_stage(config, self.mechanisms[plan.id], saved, figure_id=plan.id,
                                       label=plan.label, per_test_confidence=per_test,
                                       sweep_start=self._sweep_start(plan), sweeps=self._sweeps)
        for figure in figures:
            write_grid(figure, self.work)
        return section

    def _sweep_start(self, plan: SettingPlan) -> float | None:
        """Where the plan's reconstruction sweep starts: the smallest claim among the settings that share it."""
        from auditkit.stages.probe import sweep_group

        return self._sweep_starts.get(sweep_group(self.mechanisms[plan.id]))

    def _distinguish(self, plan: SettingPlan) -> dict[str, Any]:
        d, seed = plan.config.distinguish, plan.config.seed
        audit, adaptive = run_distinguish(self.mechanisms[plan.id], trials=d.trials, confidence=d.confidence,
                                          family=self.family, adaptive=d.adaptive, search=d.search, seed=seed)
        return results.distinguish_entry(audit, adaptive, trials=d.trials, confidence=d.confidence, tests=self.family)

    def _canary(self, plan: SettingPlan, notify: Event) -> dict[str, Any]:
        from auditkit.stages.canary import canary_stage

        per_test = attacks_confidence(plan.config.distinguish.confidence, self.family)
        return canary_stage(plan.config, per_test_confidence=per_test,
                            on_round=lambda record: notify("round", setting=plan, record=record))

    # ---------------------------------------------------------------- results

    def _results(self, settings: list[dict[str, Any]]) -> dict[str, Any]:
        entries = [self._setting_entry(s) for s in settings]
        first = settings[0]["train"]
        provenance = results.provenance(seed=self.config.seed, device=first["device"], settings=entries,
                                        **first["provenance"])
        return results.document("audit", self.title, self.config.to_dict(), provenance, entries)

    @property
    def unreproducible(self) -> list[SettingPlan]:
        """The settings whose mechanism's output is not determined by its seeds (``auditkit.mechanisms.reproducible``)."""
        return [plan for plan in self.plans if not self.reproducible[plan.id]]

    def _setting_entry(self, s: dict[str, Any]) -> dict[str, Any]:
        plan = s["plan"]
        probed = s["probe"] or {"probe": None, "identification": None}
        return results.setting(plan.id, plan.label, self.mechanisms[plan.id], sweep=plan.sweep,
                               training=s["train"]["training"], accounting=s["account"], inversion=s["inversion"],
                               probe=probed["probe"], identification=probed["identification"],
                               distinguish=s["distinguish"], canary=s["canary"],
                               reproducible=self.reproducible[plan.id])


def training_inputs(config: AuditConfig) -> dict[str, Any]:
    """The config as the train stage's key sees it: all but the tables that only later stages read."""
    return {k: v for k, v in config.to_dict().items() if k not in ("accounting", "inversion", "distinguish", "title")}


@dataclass
class SettingRun:
    """One setting of a running audit, what its stages share (``auditkit.stages.base.Stage``): its plan, its
    mechanism (built once per setting), the progress callback, and the key and result of every stage run so far."""

    plan: SettingPlan
    mechanism: mechanisms.Mechanism
    notify: Event
    keys: dict[str, str] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> AuditConfig:
        return self.plan.config


class _AuditStage:
    """A stage of one ``Audit`` (``auditkit.stages.base.Stage``): it reads the audit's store, family and caches."""

    name = ""

    def __init__(self, audit: Audit) -> None:
        self.audit = audit

    def runs(self, plan: SettingPlan) -> bool:
        return True


class TrainStage(_AuditStage):
    """FedAvg with the mechanism (``auditkit.stages.train``), or the recording of a Flower app
    (``auditkit.stages.recorded``); keeps the views the inversion and probe stages read."""

    name = "train"

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        config = setting.config
        inputs = {"config": training_inputs(config), "inversion_round": config.checkpoint_round,
                  "inversion_targets": config.inversion.targets, "probe_round": config.probe_round}
        if self.audit.recorded is not None:
            from auditkit.stages.recorded import recording_fingerprint

            inputs["recording"] = recording_fingerprint(self.audit.recorded)
        return inputs

    def run(self, setting: SettingRun) -> dict[str, Any]:
        audit, plan, key = self.audit, setting.plan, setting.keys[self.name]
        if audit.recorded is not None:
            from auditkit.stages.recorded import train_from_recording

            return train_from_recording(audit.recorded, plan.config, audit._data_summary,
                                        lambda tensors: audit.store.save_tensors(plan.id, "train", key, tensors))
        return audit._train(plan, key, plan.config.checkpoint_round, setting.notify)


class AccountStage(_AuditStage):
    """The mechanism's claim composed over the rounds trained (``auditkit.stages.account``)."""

    name = "account"

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        return {"train": setting.keys["train"], "accounting": dataclasses.asdict(setting.config.accounting)}

    def run(self, setting: SettingRun) -> dict[str, Any]:
        return self.audit._account(setting.plan, setting.results["train"])


class InversionStage(_AuditStage):
    """The recorded server view inverted (``auditkit.stages.inversion``), with its reconstruction grid."""

    name = "inversion"

    def runs(self, plan: SettingPlan) -> bool:
        return plan.config.inversion.enabled

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        return {"train": setting.keys["train"], "inversion": dataclasses.asdict(setting.config.inversion)}

    def run(self, setting: SettingRun) -> dict[str, Any]:
        return self.audit._invert(setting.plan, setting.keys["train"])


class ProbeStage(_AuditStage):
    """The claim's worst case at the checkpoint model and the identification tests (``auditkit.stages.probe``)."""

    name = "probe"

    def runs(self, plan: SettingPlan) -> bool:
        return plan.config.probe.enabled or plan.config.identification.enabled

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        config = setting.config
        return {"train": setting.keys["train"], "probe": dataclasses.asdict(config.probe),
                "family": self.audit.family, "identification": dataclasses.asdict(config.identification),
                "confidence": config.distinguish.confidence, "sweep_start": self.audit._sweep_start(setting.plan)}

    def run(self, setting: SettingRun) -> dict[str, Any]:
        return self.audit._probe(setting.plan, setting.keys["train"])


class DistinguishStage(_AuditStage):
    """Black-box distinguishing tests on the mechanism and its adaptive tests (``auditkit.stages.distinguish``)."""

    name = "distinguish"

    def runs(self, plan: SettingPlan) -> bool:
        return plan.config.distinguish.enabled

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        config = setting.config
        return {"mechanism": training_inputs(config)["mechanisms"], "seed": config.seed, "family": self.audit.family,
                "distinguish": dataclasses.asdict(config.distinguish)}

    def run(self, setting: SettingRun) -> dict[str, Any]:
        return self.audit._distinguish(setting.plan)


class CanaryStage(_AuditStage):
    """The one-run canary audit of the whole training run (``auditkit.stages.canary``), where enabled."""

    name = "canary"

    def runs(self, plan: SettingPlan) -> bool:
        return plan.config.canary.enabled

    def key_inputs(self, setting: SettingRun) -> dict[str, Any]:
        config = setting.config
        return {"config": training_inputs(config), "canary": dataclasses.asdict(config.canary),
                "family": self.audit.family, "confidence": config.distinguish.confidence,
                "accounting": dataclasses.asdict(config.accounting)}

    def run(self, setting: SettingRun) -> dict[str, Any]:
        return self.audit._canary(setting.plan, setting.notify)


def run_audit(config: AuditConfig, *, out: str | Path = "auditkit-out", resume: bool = False,
              overwrite: bool = False, on_event: Event | None = None, recorded: Any = None) -> dict[str, Any]:
    """What ``auditkit audit`` does: plan, run (or resume) every stage, write results.json and the reports;
    returns the results document. ``out`` holding an earlier run needs ``resume`` (continue it) or ``overwrite``
    (replace it once this run has finished): ``auditkit.output_folder``. ``recorded``
    (``auditkit.flower.recording.Recording``): audit what a Flower app recorded instead of training (``config`` from
    ``auditkit.stages.recorded.recorded_config``)."""
    return Audit(config, out=out, resume=resume, overwrite=overwrite, recorded=recorded).run(on_event)


__all__ = ["Audit", "STAGES", "SettingPlan", "SettingRun", "family_size", "plan_audit", "run_audit"]
