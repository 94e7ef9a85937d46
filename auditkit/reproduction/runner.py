"""Run a paper's settings over seeds and compare each row, and each claimed ordering, with the paper.

Each distinct setting (``base`` overlaid with a row's ``config``) trains once per seed with the budget's rounds;
a row's number is the mean of the metric over seeds with the two-sided 95% Student-t interval
mean +- t_{0.975, s-1} sd / sqrt(s) (s seeds). Row verdicts:

* "reproduced": the paper's number, widened by the +- it states, meets our interval;
* "not reproduced": it does not;
* "not comparable": our run cannot be held to the paper's number: for the whole run (:func:`run_reasons`:
  another dataset, the embedded ``mnist-5k`` instead of the paper's MNIST; fewer rounds than the paper's,
  ``--budget quick``; one seed, no interval), or for the row (a reason the paper file records: a setting the
  paper leaves unstated).

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
from auditkit.pipeline import Experiment
from auditkit.reproduction.paper import Ordering, Paper, Row

__all__ = ["HOLDS", "NOT_COMPARABLE", "NOT_REPRODUCED", "REPRODUCED", "REVERSED", "UNRESOLVED", "Plan", "interval",
           "ordering_entry", "plan_reproduction", "row_entry", "run_plan", "run_reasons"]

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable"
HOLDS, REVERSED, UNRESOLVED = "holds", "reversed", "unresolved"


@dataclass(frozen=True)
class Plan:
    """What a reproduction runs: the distinct settings (key -> raw config) and the seeds, rounds, data."""

    paper: Paper
    budget: str
    seeds: tuple[int, ...]
    rounds: int
    data_dir: str | None
    settings: dict[str, dict[str, Any]]
    row_setting: dict[tuple[str, int], str]  # (table id, row index) -> setting key

    @property
    def dataset(self) -> str:
        """The dataset the runs use: the paper's when ``data_dir`` holds it, else the base's embedded one."""
        data = self.paper.base.get("data", {})
        preferred = data.get("prefer")
        if preferred and self.data_dir and dataset_available(preferred, self.data_dir):
            return preferred
        return data.get("dataset", "mnist-5k")


def _key(raw: dict[str, Any]) -> str:
    import json

    return json.dumps(raw, sort_keys=True)


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
            raw = merge(paper.base, row.config)
            raw = merge(raw, {"training": {"rounds": rounds, "checkpoints": [rounds]},
                              "data": {"data_dir": data_dir}})
            key = _key(raw)
            settings.setdefault(key, raw)
            row_setting[(table.id, i)] = key
    return Plan(paper, budget, tuple(range(count)), rounds, data_dir, settings, row_setting)


def configs(plan: Plan) -> list[tuple[str, int, AuditConfig]]:
    """Every (setting key, seed, validated config) the plan trains; validating all first refuses bad input
    before any training starts."""
    out = []
    for key, raw in plan.settings.items():
        for seed in plan.seeds:
            out.append((key, seed, from_dict(merge(raw, {"seed": seed}))))
    return out


def run_plan(plan: Plan, on_run: Callable[[str, int, dict[str, Any]], None] | None = None) -> dict[str, dict[int, Any]]:
    """Train every setting at every seed: {setting key: {seed: {"test_accuracy", "rounds", "seconds"}}}."""
    runs: dict[str, dict[int, Any]] = {}
    for key, seed, config in configs(plan):
        start = time.perf_counter()
        result = Experiment(config).train().result
        entry = {
            "test_accuracy": result.rounds[-1].test_accuracy,
            "curve": [r.test_accuracy for r in result.rounds],
            "seconds": time.perf_counter() - start,
        }
        runs.setdefault(key, {})[seed] = entry
        if on_run is not None:
            on_run(key, seed, entry)
    return runs


def interval(values: list[float], confidence: float = 0.95) -> tuple[float, float, float] | None:
    """(mean, low, high): the Student-t interval of the mean; None for fewer than 2 values."""
    if len(values) < 2:
        return None
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2, len(values) - 1)) * sd / math.sqrt(len(values))
    return mean, mean - half, mean + half


def run_reasons(plan: Plan) -> list[str]:
    """Why no row of this run can be held to the paper's numbers (empty when the run matches the paper's):
    another dataset, fewer rounds, one seed."""
    reasons = []
    if plan.dataset != plan.paper.data:
        reasons.append(f"our data: {plan.dataset} (the embedded real MNIST subset, 3,500 training digits), the "
                       f"paper's: {plan.paper.data_note}; rerun with --data-dir holding {plan.paper.data}")
    paper_rounds = plan.paper.budgets["paper"]["rounds"]
    if plan.rounds < paper_rounds:
        reasons.append(f"{plan.rounds} rounds (--budget {plan.budget}), the paper's {paper_rounds}")
    if len(plan.seeds) < 2:
        reasons.append("one seed: no interval")
    return reasons


def row_entry(plan: Plan, table_id: str, index: int, runs: dict[str, dict[int, Any]]) -> dict[str, Any]:
    """One row of the reproduction: the paper's number, ours with its interval, the verdict and why."""
    row = plan.paper.table(table_id).rows[index]
    value, plus_minus = row.reported
    per_seed = [100 * runs[plan.row_setting[(table_id, index)]][s]["test_accuracy"] for s in plan.seeds]
    ours = interval(per_seed)
    reasons = [row.why] if not row.comparable else []
    if reasons or run_reasons(plan):
        verdict = NOT_COMPARABLE
    else:
        assert ours is not None  # two seeds at least, or "one seed" above
        meets = ours[1] <= value + plus_minus and value - plus_minus <= ours[2]
        verdict = REPRODUCED if meets else NOT_REPRODUCED
    return {
        "table": table_id, "method": row.method, "column": row.column, "paper": row.paper, "line": row.line,
        "paper_value": value, "paper_plus_minus": plus_minus, "per_seed": per_seed,
        "mean": float(np.mean(per_seed)), "interval": None if ours is None else [ours[1], ours[2]],
        "difference": float(np.mean(per_seed)) - value, "verdict": verdict, "why": reasons,  # the row's own
        "setting": plan.row_setting[(table_id, index)],
    }


def ordering_entry(plan: Plan, ordering: Ordering, runs: dict[str, dict[int, Any]]) -> list[dict[str, Any]]:
    """Each (above, below) pair of the ordering within each column, checked on paired seeds."""
    table = plan.paper.table(ordering.table)
    by_label = {(r.method, r.column): i for i, r in enumerate(table.rows)}
    out = []
    for column in dict.fromkeys(r.column for r in table.rows):
        for a in ordering.above:
            for b in ordering.below:
                if (a, column) not in by_label or (b, column) not in by_label:
                    continue
                ra = runs[plan.row_setting[(table.id, by_label[(a, column)])]]
                rb = runs[plan.row_setting[(table.id, by_label[(b, column)])]]
                diffs = [100 * (ra[s]["test_accuracy"] - rb[s]["test_accuracy"]) for s in plan.seeds]
                found = interval(diffs)
                if found is None:
                    verdict = UNRESOLVED
                else:
                    verdict = HOLDS if found[1] > 0 else REVERSED if found[2] < 0 else UNRESOLVED
                out.append({"ordering": ordering.id, "column": column, "above": a, "below": b,
                            "difference": float(np.mean(diffs)),
                            "interval": None if found is None else [found[1], found[2]], "verdict": verdict})
    return out
