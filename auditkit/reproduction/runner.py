"""Run a paper's settings over seeds and compare each row, and each claimed ordering, with the paper.

Each distinct setting (the table's or the paper's ``base`` overlaid with a row's ``config``) runs once per seed;
what it runs is its table's metric's kind: FL training with the budget's rounds (test accuracy, SNR), an attack
on single-image gradients through the mechanism (``auditkit.stages.inversion.run_inversion``: SSIM, MSE), or the
mechanism alone on synthetic inputs (distortion), or training up to a round and attacking the server's view of
that round as ``auditkit audit`` does (``round_mse``). A row's number is the mean of the metric over seeds with the
two-sided 95% Student-t interval mean +- t_{0.975, s-1} sd / sqrt(s) (s seeds). Row verdicts:

* "reproduced": the paper's number, widened by the +- it states or the row's tolerance (what "approximately"
  or the printed precision allows), meets our interval;
* "not reproduced": it does not;
* "not comparable": our run cannot be held to the paper's number: for every training row of the run
  (:func:`run_reasons`: another dataset, the embedded ``mnist-5k`` instead of the paper's MNIST; fewer rounds
  than the paper's, ``--budget quick``), for every row (one seed, no interval), or for the row (a reason the
  paper file records: a setting the paper leaves unstated; a figure that prints no number).

Orderings ("A above B") are checked on our runs, seed by seed (the same seed gives both settings the same data,
partition and initial model): the paired differences' 95% interval is above 0 ("holds"), below 0
("reversed"), or contains 0 ("unresolved").
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from auditkit.config import AuditConfig, from_dict, merge
from auditkit.data import dataset_available
from auditkit.stages.train import Experiment
from auditkit.reproduction.paper import ATTACK, ROUND_ATTACK, TRAIN, Ordering, Paper, Table
from auditkit.results.reproduction import OrderingVerdict, RowVerdict
from auditkit import attacks, mechanisms
from auditkit.models import model_kind
from auditkit.results import training_entry
from auditkit.attacks.gradient_inversion import iteration_settings
from auditkit.stages.inversion import RecordedView, invert_recorded_view, run_inversion
from auditkit.mechanisms.randomness import derive_seed

__all__ = ["HOLDS", "NOT_COMPARABLE", "NOT_REPRODUCED", "REPRODUCED", "REVERSED", "UNRESOLVED", "Plan", "interval",
           "ordering_entry", "plan_reproduction", "row_entry", "run_plan", "run_reasons", "run_setting"]

# the verdicts' words, as the reproduction document's schema knows them
REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = RowVerdict
HOLDS, REVERSED, UNRESOLVED = OrderingVerdict


@dataclass(frozen=True)
class Plan:
    """What a reproduction runs: the distinct settings (key -> {"kind", "config"}) and the seeds, rounds, data."""

    paper: Paper
    budget: str
    seeds: tuple[int, ...]
    rounds: int
    data_dir: str | None
    settings: dict[str, dict[str, Any]]
    row_setting: dict[tuple[str, int], str]  # (table id, row index) -> setting key
    confidence: float = 0.95  # of the Student-t intervals the verdicts read

    @property
    def dataset(self) -> str:
        """The dataset the runs use: the paper's when ``data_dir`` holds it, else the base's embedded one."""
        data = self.paper.base.get("data", {})
        preferred = data.get("prefer")
        if preferred and self.data_dir and dataset_available(preferred, self.data_dir):
            return preferred
        return data.get("dataset", "mnist-5k")

    def table_dataset(self, table: Table) -> str:
        """The dataset ``table``'s training runs use: its own (``table.data``) when ``data_dir`` holds it."""
        return table.data if table_data_available(table, self.data_dir) else self.dataset


def table_data_available(table: Table, data_dir: str | None) -> bool:
    return table.data is not None and bool(data_dir) and dataset_available(table.data, data_dir)


def _key(setting: dict[str, Any]) -> str:
    import json

    return json.dumps(setting, sort_keys=True)


def _setting(paper: Paper, table: Table, config: dict[str, Any], rounds: int,
             data_dir: str | None) -> dict[str, Any]:
    """A row's setting: its kind and raw config (training: the dataset chosen, the rounds and data folder set)."""
    raw = merge(table.base if table.base is not None else paper.base, config)
    if table.kind != ATTACK and "distortion" not in raw:
        raw = {**raw, "data": _data(raw.get("data", {}), table, data_dir)}
    if table.kind in (TRAIN, ROUND_ATTACK):  # a round attack attacks the last round: nothing after it is needed
        rounds = table.rounds or (1 if table.kind == ROUND_ATTACK else rounds)
        raw = merge(raw, {"training": {"rounds": rounds, "checkpoints": [rounds]}, "data": {"data_dir": data_dir}})
        if table.kind == ROUND_ATTACK:
            raw = merge(raw, {"inversion": {"round": rounds}})
    return {"kind": table.kind, "config": raw}


def _data(data: dict[str, Any], table: Table, data_dir: str | None) -> dict[str, Any]:
    """A training setting's ``[data]`` with its dataset chosen here: the table's own (``table.data``) or the base's
    ``prefer`` when ``data_dir`` holds its files, else the base's embedded dataset (``run_reasons`` and ``row_entry``
    say so). The config leaves no ``prefer`` to resolve: a config refuses a data_dir without its preferred files
    (``auditkit.config``), while a reproduction uses what a data folder holds, table by table, and states the rest."""
    preferred = data.get("prefer")
    if table_data_available(table, data_dir):
        dataset = table.data
    elif preferred and data_dir and dataset_available(preferred, data_dir):
        dataset = preferred
    else:
        dataset = data.get("dataset", "mnist-5k")
    return {**{k: v for k, v in data.items() if k != "prefer"}, "dataset": dataset}


def plan_reproduction(paper: Paper, *, budget: str = "quick", seeds: int | None = None,
                      data_dir: str | None = None, rounds: int | None = None) -> Plan:
    """The runs of ``paper`` at ``budget`` (its rounds and seeds unless given)."""
    spent = paper.budgets[budget]
    rounds = int(rounds if rounds is not None else spent["rounds"])
    count = int(seeds if seeds is not None else spent["seeds"])
    settings: dict[str, dict[str, Any]] = {}
    row_setting: dict[tuple[str, int], str] = {}
    for table in paper.tables:
        for i, row in enumerate(table.rows):
            setting = _setting(paper, table, row.config, rounds, data_dir)
            key = _key(setting)
            settings.setdefault(key, setting)
            row_setting[(table.id, i)] = key
    return Plan(paper, budget, tuple(range(count)), rounds, data_dir, settings, row_setting)


def _checked(setting: dict[str, Any], seed: int) -> Any:
    """The setting made ready to run at ``seed``: a validated AuditConfig (training), or the raw config with its
    mechanism built once to validate its parameters (attack, distortion); ValueError naming what is wrong."""
    raw = setting["config"]
    if setting["kind"] in (TRAIN, ROUND_ATTACK):
        return from_dict(merge(raw, {"seed": seed}))
    params = dict(raw["mechanism"])
    mechanisms.create(params.pop("name"), **params)
    if setting["kind"] == ATTACK:
        attack = raw["attack"]
        if attack["name"] not in attacks.INVERSION_ATTACKS or model_kind(attack["model"]) is None:
            raise ValueError(f"attack {attack['name']!r} on model {attack['model']!r} is not available")
    return raw


def configs(plan: Plan) -> list[tuple[str, int, Any]]:
    """Every (setting key, seed, ready setting) the plan runs; validating all first refuses bad input before any
    run starts."""
    return [(key, seed, _checked(setting, seed)) for key, setting in plan.settings.items() for seed in plan.seeds]


def _train(config: AuditConfig) -> dict[str, Any]:
    run = Experiment(config).train()
    entry = training_entry(run.result, run.protocol)
    return {"test_accuracy": entry["final"]["test_accuracy"], "snr_db": entry["final"]["snr_db"],
            "curve": [r["test_accuracy"] for r in entry["rounds"]], "snr_curve": [r["snr_db"] for r in entry["rounds"]]}


def _attack(raw: dict[str, Any], seed: int) -> dict[str, Any]:
    """``raw["attack"]``: name, model, images, source, iterations, label_given; ``raw["mechanism"]``: the
    mechanism the single-image clients' gradients go through."""
    attack, params = raw["attack"], dict(raw["mechanism"])
    run = run_inversion(attack["name"], mechanism=params.pop("name"), params=params, model=attack["model"],
                        images=attack["images"], source=attack["source"], seed=seed,
                        label_given=attack.get("label_given", False),
                        settings=iteration_settings(attack["name"], attack["iterations"]), clean=False)
    scores = run["defended"]["scores"]
    return {"ssim": scores["ssim_mean"], "mse": scores["mse_mean"], "psnr": scores["psnr_mean"],
            "bits_per_coordinate": run["bits_per_coordinate"]}


def _round_attack(config: AuditConfig) -> dict[str, Any]:
    """Train up to the config's inversion round and attack the server's view of it as ``auditkit audit`` does
    (``[inversion]``: attack, targets, iterations; MSP-FL's view is its transcript's least-squares estimate)."""
    experiment = Experiment(config)
    run = experiment.train()
    observed = [o for o in run.result.observations if o.round == config.checkpoint_round]
    view = RecordedView.from_observation(observed[0], experiment.simulation.data.train.x.cpu(),
                                         config.inversion.targets, run.protocol)
    done = invert_recorded_view(view, config.training, config.inversion, config.seed,
                                experiment.num_classes)
    scores = done["defended"]["scores"]
    return {"round_mse": scores["mse_mean"], "ssim": scores["ssim_mean"],
            "clean_mse": done["clean"]["scores"]["mse_mean"], "test_accuracy": run.result.rounds[-1].test_accuracy}


def _distortion(raw: dict[str, Any], seed: int) -> dict[str, Any]:
    """E (Q(a) - a)^2 per coordinate for ``coordinates`` inputs a ~ U[low, high] (``raw["distortion"]``) through
    the real mechanism (decode of encode), as log10."""
    import torch

    spec, params = raw["distortion"], dict(raw["mechanism"])
    mechanism = mechanisms.create(params.pop("name"), private_seed=derive_seed(seed, "distortion-private"),
                                  **params)
    generator = torch.Generator().manual_seed(derive_seed(seed, "distortion-inputs"))
    a = spec["low"] + (spec["high"] - spec["low"]) * torch.rand(spec["coordinates"], generator=generator,
                                                                 dtype=torch.float64)
    shared = derive_seed(seed, "distortion-shared")
    y = mechanism.decode(mechanism.encode(a, shared), shared)
    error = float(torch.mean((y.double() - a) ** 2))
    return {"distortion": math.log10(error), "mean_squared_error": error}


def run_setting(setting: dict[str, Any], seed: int, ready: Any) -> dict[str, Any]:
    """Run one setting at one seed: its metrics and the seconds it took."""
    start = time.perf_counter()
    if setting["kind"] == TRAIN:
        entry = _train(ready)
    elif setting["kind"] == ROUND_ATTACK:
        entry = _round_attack(ready)
    elif setting["kind"] == ATTACK:
        entry = _attack(ready, seed)
    else:
        entry = _distortion(ready, seed)
    return {**entry, "seconds": time.perf_counter() - start}


def run_plan(plan: Plan, on_run: Callable[[str, int, dict[str, Any]], None] | None = None) -> dict[str, dict[int, Any]]:
    """Run every setting at every seed: {setting key: {seed: metrics}}."""
    runs: dict[str, dict[int, Any]] = {}
    for key, seed, ready in configs(plan):
        entry = run_setting(plan.settings[key], seed, ready)
        runs.setdefault(key, {})[seed] = entry
        if on_run is not None:
            on_run(key, seed, entry)
    return runs


def interval(values: list[float], confidence: float = 0.95) -> tuple[float, float, float] | None:
    """(mean, low, high): the Student-t interval of the mean; None for fewer than 2 values. Equal infinite
    values (a lossless uplink's SNR) give (inf, inf, inf)."""
    if len(values) < 2:
        return None
    if not all(math.isfinite(v) for v in values):
        return (values[0],) * 3 if len(set(values)) == 1 else None
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2, len(values) - 1)) * sd / math.sqrt(len(values))
    return mean, mean - half, mean + half


def run_reasons(plan: Plan) -> list[str]:
    """Why no training row of this run can be held to the paper's numbers (empty when the run matches the
    paper's): another dataset, fewer rounds."""
    reasons = []
    if plan.dataset != plan.paper.data:
        reasons.append(f"our data: {plan.dataset} (the embedded real MNIST subset, 3,500 training digits), the "
                       f"paper's: {plan.paper.data_note}; rerun with --data-dir holding {plan.paper.data}")
    paper_rounds = plan.paper.budgets["paper"]["rounds"]
    if plan.rounds < paper_rounds:
        reasons.append(f"{plan.rounds} rounds (--budget {plan.budget}), the paper's {paper_rounds}")
    return reasons


def _metric(entry: dict[str, Any], metric: str) -> float:
    value = entry[metric]
    return float("nan") if value is None else 100 * value if metric == "test_accuracy" else value


def row_entry(plan: Plan, table_id: str, index: int, runs: dict[str, dict[int, Any]]) -> dict[str, Any]:
    """One row of the reproduction: the paper's number (in our unit), ours with its interval, the verdict, why."""
    table = plan.paper.table(table_id)
    row = table.rows[index]
    key = plan.row_setting[(table_id, index)]
    per_seed = [_metric(runs[key][s], table.metric) for s in plan.seeds]
    ours = interval(per_seed, plan.confidence)
    mean = float(np.mean(per_seed)) if ours is None else ours[0]
    reported = row.reported
    reasons = [] if row.comparable else [row.why]
    if table.kind in (TRAIN, ROUND_ATTACK) and table.data and plan.table_dataset(table) != table.data:
        reasons.append(f"the paper ran this table on {table.data}; ours on {plan.table_dataset(table)} (rerun with "
                       f"--data-dir holding {table.data})")
    if reported is None:
        reasons.append("plot only: the paper prints no number for this point")
    elif len(plan.seeds) < 2:
        reasons.append("one seed: no interval")
    value = plus_minus = None
    if reported is not None:
        value, plus_minus = reported[0] * table.scale, max(reported[1], row.tolerance or 0.0) * table.scale
    if reasons or (table.kind == TRAIN and run_reasons(plan)) or ours is None:
        verdict = NOT_COMPARABLE
    else:
        meets = ours[1] <= value + plus_minus and value - plus_minus <= ours[2]
        verdict = REPRODUCED if meets else NOT_REPRODUCED
    difference = None if value is None or not math.isfinite(mean - value) else mean - value
    return {
        "table": table_id, "method": row.method, "column": row.column, "x": row.x, "paper": row.paper,
        "line": row.line, "paper_value": value, "paper_plus_minus": plus_minus, "per_seed": per_seed,
        "mean": mean, "interval": None if ours is None else [ours[1], ours[2]], "difference": difference,
        "verdict": verdict, "why": reasons, "setting": key,  # why: the row's own reasons
    }


def ordering_entry(plan: Plan, ordering: Ordering, runs: dict[str, dict[int, Any]]) -> list[dict[str, Any]]:
    """Each (above, below) pair of the ordering within each column and x, checked on paired seeds; with ``by``,
    the claimed gap against the differences' interval ("reproduced" when it meets it, widened by the
    tolerance)."""
    table = plan.paper.table(ordering.table)
    by_label = {(r.method, r.column, r.x): i for i, r in enumerate(table.rows)}
    out = []
    for column, x in dict.fromkeys((r.column, r.x) for r in table.rows):
        for a in ordering.above:
            for b in ordering.below:
                if (a, column, x) not in by_label or (b, column, x) not in by_label:
                    continue
                ra = runs[plan.row_setting[(table.id, by_label[(a, column, x)])]]
                rb = runs[plan.row_setting[(table.id, by_label[(b, column, x)])]]
                diffs = [_metric(ra[s], table.metric) - _metric(rb[s], table.metric) for s in plan.seeds]
                found = interval(diffs, plan.confidence)
                if found is None:
                    verdict = UNRESOLVED
                else:
                    verdict = HOLDS if found[1] > 0 else REVERSED if found[2] < 0 else UNRESOLVED
                pair = {"ordering": ordering.id, "column": column, "x": x, "above": a, "below": b,
                        "difference": float(np.mean(diffs)),
                        "interval": None if found is None else [found[1], found[2]], "verdict": verdict}
                if ordering.by is not None:
                    meets = found is not None and found[1] <= ordering.by + ordering.tolerance \
                        and ordering.by - ordering.tolerance <= found[2]
                    pair["gap"] = {"claimed": ordering.by, "tolerance": ordering.tolerance,
                                   "verdict": REPRODUCED if meets else NOT_REPRODUCED}
                out.append(pair)
    return out
