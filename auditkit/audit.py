"""The audit pipeline: one config in, ``results.json``, ``report.html`` and ``report.md`` out.

For every mechanism setting of the config (sweeps expanded, :meth:`AuditConfig.settings`) five stages run (and
``canary`` and ``membership`` where enabled):

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
the reports replaced together. A stage's key hashes its inputs, the fingerprint of the code that
computes it (``auditkit.results.code_fingerprint``: the toolkit's and the plugins' sources) and the digests of the
user's own files it reads (``auditkit.stages.pipeline.user_inputs``: factories and the modules they import, image
folders, data files), so a resumed audit never reuses results computed by other code or from other data; a stage
recomputed because one of those files changed is named in a note with the file. Results are a pure function of the config and seed (timings are
kept in the stage files, never in ``results.json``), so a resumed audit equals an uninterrupted one -- provided
each mechanism draws its randomness from its seeds: ``auditkit.mechanisms.reproducible`` checks every setting's mechanism
once before the first stage (two encodes), and a setting whose mechanism fails it is marked in ``results.json``
(``mechanism.reproducible: false``) and in the report. Everything that can fail on user input is checked before
the first stage starts, and so is a plugin's code (``auditkit.mechanisms.preflight``: ``auditkit.mechanisms.PluginCodeError``).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from auditkit import mechanisms
from auditkit import results
from auditkit.config import AuditConfig, ConfigError
from auditkit.figure_files import write_grid
from auditkit.fl.threads import FairShare
from auditkit.flower.backend import check_protocol
from auditkit.output_folder import Mode, OutputFolder, Swap
from auditkit.reports import render_report
from auditkit.stage_store import StageStore, stage_key
from auditkit.stages.base import AuditContext, Event, SettingPlan, SettingRun, Stage
from auditkit.stages.canary import judged_views
from auditkit.stages.membership import membership_family
from auditkit.stages.distinguish import distinguish_family
from auditkit.stages.pipeline import PIPELINE, UserInputs, user_inputs
from auditkit.stages.inversion import check_attack_layers
from auditkit.fl.memory import PeakWatch
from auditkit.stages.probe import check_probe_inputs, check_probe_memory, sweep_group
from auditkit.stages.recorded import check_recording
from auditkit.stages.setting import build_mechanism, build_protocol
from auditkit.stages.train import audit_experiment
from auditkit.version import __version__

# every setting's stages; "canary" and "membership" run where enabled
STAGES = ("train", "account", "inversion", "probe", "distinguish")


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
    return len(judged_views(mechanism, config)) if config.canary.enabled else 0


def family_size(plans: list[SettingPlan], built: dict[str, mechanisms.Mechanism] | None = None) -> int:
    """The number of tests the whole audit runs: the Bonferroni family of every verdict it reports
    (distinguishing pairs, adaptive tests, identification tests, the canary stage's views, the membership attacks). ``built``: each plan's
    mechanism by plan id (built here when absent)."""
    total = 0
    for p in plans:
        mechanism = built[p.id] if built is not None else build_mechanism(p.config)
        if p.config.distinguish.enabled:
            total += distinguish_family(mechanism, p.config.distinguish.adaptive, p.config.distinguish.search)
        total += identification_family(mechanism, p.config) + canary_family(mechanism, p.config)
        total += membership_family(mechanism, p.config)
    return total


def sweep_starts(plans: list[SettingPlan], built: dict[str, mechanisms.Mechanism] | None = None) -> dict[str, float]:
    """Sweep group (``auditkit.stages.probe.sweep_group``) -> the smallest claimed epsilon among its settings, where the
    reconstruction sweep those settings share starts. ``built``: as for ``family_size``."""
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
        self.swap: Swap | None = None  # what an overwrite run's swap replaced, removed and kept
        self.finished = 0  # stages finished or resumed in this run
        self.title = title or config.title or "auditkit audit"
        self.plans = plan_audit(config)
        self.mechanisms = {plan.id: build_mechanism(plan.config) for plan in self.plans}  # once per setting
        self.family = family_size(self.plans, self.mechanisms)
        self.recorded = recorded  # an auditkit.flower.recording.Recording: the train stage reads it, trains nothing
        experiment = audit_experiment(self.plans[0].config)  # data files, device: every input checked before any stage runs
        self._data_summary = experiment.data_summary
        try:
            check_probe_inputs(config, experiment.simulation.data)
            check_probe_memory(config, experiment.model, experiment.simulation.data)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        for attack, where, enabled in ((config.inversion.attack, "inversion.attack", config.inversion.enabled),
                                       (config.probe.attack, "probe.attack", config.probe.enabled)):
            if enabled:  # a layer the attack reads and the model lacks: one line now, not after the training
                check_attack_layers(attack, experiment.model, experiment.num_classes, where=where,
                                    model_name=config.training.model)
        if config.training.backend == "flower":  # every setting, not only the first, must fit the backend
            for plan in self.plans:
                check_protocol(build_protocol(self.mechanisms[plan.id], plan.config))
        if recorded is not None:
            check_recording(recorded, config)
        # whether each setting's mechanism is determined by its seeds (two encodes; results.json and the report
        # say when it is not: its results will not reproduce)
        self.reproducible = {plan.id: mechanisms.reproducible(self.mechanisms[plan.id]) for plan in self.plans}
        self.code = results.code_fingerprint(config.plugins)
        self.inputs: UserInputs | None = None  # the user's own files' digests: taken at the first stage (_stage)
        self._sweep_starts = sweep_starts(self.plans, self.mechanisms)
        self.stages: tuple[Stage, ...] = PIPELINE
        self.threads = FairShare(config.limits.threads)  # the pools re-sized before each stage (a busy machine)

    @property
    def stage_count(self) -> int:
        """The stages the progress bar counts: ``STAGES`` per setting, and the canary and membership stages where
        enabled."""
        return len(self.plans) * len(STAGES) + sum(plan.config.canary.enabled + plan.config.membership.enabled
                                                    for plan in self.plans)

    def run(self, on_event: Event | None = None) -> dict[str, Any]:
        """Run (or resume) every stage, then write ``results.json``, ``report.html`` and ``report.md``."""
        notify = on_event or (lambda kind, **info: None)
        with OutputFolder(self.out, self.mode, resumable=True).open("auditkit audit") as folder:
            self._workspace = folder.work
            self.work = folder.work.path
            # an overwrite run continues its own interrupted .next/, whose stages are keyed like any others
            self.store = StageStore(folder.work, resume=self.mode is not Mode.NEW)
            context = AuditContext(self.store, self.family, self._data_summary, self.recorded, self._sweep_starts)
            settings = [self._run_setting(plan, context, notify) for plan in self.plans]
            document = self._results(settings)
            render_report(document, folder.work, with_results=True)
            self.swap = folder.swap_in()
        return document

    # ---------------------------------------------------------------- stages

    def _stage(self, setting: SettingRun, stage: Stage) -> dict[str, Any]:
        """The stage's stored result, or ``stage.run``'s, stored under its key (``setting.keys[stage.name]``) with
        its tensors, its figures drawn."""
        plan, notify = setting.plan, setting.notify
        if self.inputs is None:  # once per audit, in the held folder: its cache of file digests is written there
            self.inputs = user_inputs(self.config, self.store.workspace)
        used = self.inputs.of(stage)
        key = stage_key({"auditkit": __version__, "code": self.code, "stage": stage.name,
                         "inputs": stage.key_inputs(setting), "user_inputs": used})
        setting.keys[stage.name] = key
        stored, note = self.store.load(plan.id, stage.name, key, used)
        if note is not None:
            notify("note", setting=plan, stage=stage.name, text=note)
        if stored is not None:
            self.finished += 1
            notify("stage", setting=plan, stage=stage.name, status="resumed")
            return stored
        notify("stage", setting=plan, stage=stage.name, status="start")
        self.threads.rebalance()
        start = time.perf_counter()
        with PeakWatch() as memory:  # each stage's own peak, printed with its time
            output = stage.run(setting)
        if output.tensors is not None:
            self.store.save_tensors(plan.id, stage.name, key, output.tensors)
        for figure in output.figures:
            write_grid(figure, self._workspace)
        self.store.save(plan.id, stage.name, key, output.result, time.perf_counter() - start, used)
        self.finished += 1
        notify("stage", setting=plan, stage=stage.name, status="done", peak=memory.peak)
        return output.result

    def _run_setting(self, plan: SettingPlan, context: AuditContext, notify: Event) -> dict[str, Any]:
        """Every stage of one setting, in order: a stage that does not run for it has the result None."""
        setting = SettingRun(plan, self.mechanisms[plan.id], context, notify)
        for stage in self.stages:
            if not self.reproducible[plan.id]:
                # a fresh mechanism per stage: what a plugin keeps between calls does not pass from one stage into
                # the next, so a stage computes the same whether the stages before it ran or were resumed
                setting.mechanism = build_mechanism(plan.config)
            setting.results[stage.name] = self._stage(setting, stage) if stage.runs(plan) else None
        return {"plan": plan, **setting.results}

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
                               distinguish=s["distinguish"], canary=s["canary"], membership=s["membership"],
                               reproducible=self.reproducible[plan.id])


def run_audit(config: AuditConfig, *, out: str | Path = "auditkit-out", resume: bool = False,
              overwrite: bool = False, on_event: Event | None = None, recorded: Any = None) -> dict[str, Any]:
    """What ``auditkit audit`` does: plan, run (or resume) every stage, write results.json and the reports;
    returns the results document. ``out`` holding an earlier run needs ``resume`` (continue it) or ``overwrite``
    (replace it once this run has finished): ``auditkit.output_folder``. ``recorded``
    (``auditkit.flower.recording.Recording``): audit what a Flower app recorded instead of training (``config`` from
    ``auditkit.stages.recorded.recorded_config``)."""
    return Audit(config, out=out, resume=resume, overwrite=overwrite, recorded=recorded).run(on_event)


__all__ = ["Audit", "Event", "STAGES", "SettingPlan", "SettingRun", "family_size", "plan_audit", "run_audit"]
