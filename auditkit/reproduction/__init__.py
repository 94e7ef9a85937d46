"""``auditkit reproduce PAPER``: a paper's own settings, run over seeds, each reported number set beside ours.

``paper`` holds what a paper reports (its tables as data, numbers quoted exactly); ``runner`` trains the
settings and judges each row and each claimed ordering; :func:`reproduce` ties them into the
``reproduction.json`` document (schema ``auditkit/results``, command "reproduce": validated before it is
written) that ``auditkit.reports.render_report`` turns into report.html / report.md, as ``auditkit report`` does.
"""
from __future__ import annotations

import dataclasses

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from auditkit.reproduction.paper import BUDGETS, METRICS, ROUND_ATTACK, TRAIN, Paper, load_paper, paper_ids
from auditkit.reproduction.runner import (
    Plan,
    configs,
    ordering_entry,
    plan_reproduction,
    row_entry,
    run_plan,
    run_reasons,
)
from auditkit.config import ConfigError
from auditkit.data import dataset_available
from auditkit.results import Command, SCHEMA, SCHEMA_VERSION, provenance, validate_results
from auditkit.output_folder import Mode, OutputFolder, Swap
from auditkit.reports import render_report

__all__ = ["BUDGETS", "check_reproduction_inputs", "load_paper", "paper_ids", "reproduce", "reproduction_document"]


def check_reproduction_inputs(
    paper_id: str, budget: str, seeds: int | None, data_dir: str | None, confidence: float = 0.95
) -> Plan:
    """Every check of the user's input, before anything is trained or written; the plan to run."""
    paper = load_paper(paper_id)  # ValueError naming PAPER and the bundled ones
    if budget not in BUDGETS:
        raise ConfigError(f"--budget must be one of {', '.join(BUDGETS)}; got {budget!r}")
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1):
        raise ConfigError(f"--seeds must be an integer >= 1, got {seeds!r}")
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 < confidence < 1:
        raise ConfigError(f"--confidence must be in (0, 1), got {confidence!r}")
    if data_dir is not None:
        if not Path(data_dir).is_dir():
            raise ConfigError(f"--data-dir must be an existing folder, got {data_dir!r}")
        wanted = list(dict.fromkeys([paper.data, *(t.data for t in paper.tables if t.data)]))
        if not any(dataset_available(name, data_dir) for name in wanted):
            raise ConfigError(f"--data-dir {data_dir!r} does not hold {' or '.join(wanted)} in torchvision's layout "
                              f"(e.g. {data_dir}/MNIST/raw/train-images-idx3-ubyte); leave it out to run on the "
                              "embedded mnist-5k")
    plan = dataclasses.replace(plan_reproduction(paper, budget=budget, seeds=seeds, data_dir=data_dir),
                               confidence=float(confidence))
    configs(plan)  # validates every setting's config
    return plan


def _provenance() -> dict[str, Any]:
    """Who computed the runs: the keys of a results document's provenance that a reproduction has (auditkit's
    version, the code's fingerprint, the plugins, the packages' versions, the platform)."""
    full = provenance(seed=0, device="cpu")  # seed and device are per run here, in each run's config
    return {key: full[key] for key in ("auditkit_version", "code", "plugins", "versions", "platform")}


def reproduction_document(plan: Plan, runs: dict[str, dict[int, Any]], seconds: float) -> dict[str, Any]:
    """The ``reproduction.json`` document (schema ``auditkit/results``, command "reproduce"; see
    ``auditkit.results.reproduction``): the plan, every row and ordering with its verdict, the runs."""
    paper = plan.paper
    tables = []
    for table in paper.tables:
        tables.append({"id": table.id, "caption": table.caption, "metric": table.metric,
                       "dataset": plan.table_dataset(table) if table.kind in (TRAIN, ROUND_ATTACK) else None,
                       "metric_description": METRICS[table.metric].description, "kind": table.kind,
                       "rounds": table.rounds, "x_label": table.x_label, "note": table.note,
                       "rows": [row_entry(plan, table.id, i, runs) for i in range(len(table.rows))]})
    orderings = [{"id": o.id, "quote": o.quote, "table": o.table,
                  "metric": paper.table(o.table).metric, "pairs": ordering_entry(plan, o, runs)}
                 for o in paper.orderings]
    return {
        "schema": SCHEMA, "schema_version": SCHEMA_VERSION, "command": Command.REPRODUCE,
        "title": f"{paper.id} ({plan.budget} budget)",
        "config": {"paper": paper.id, "budget": plan.budget, "seeds": len(plan.seeds), "data_dir": plan.data_dir,
                   "confidence": plan.confidence},
        "provenance": _provenance(),
        "paper": {"id": paper.id, "title": paper.title, "sources": list(paper.sources), "data": paper.data,
                  "data_note": paper.data_note},
        "budget": {"name": plan.budget, "rounds": plan.rounds, "seeds": list(plan.seeds),
                   "why": paper.budgets[plan.budget].get("why", ""),
                   "paper_rounds": paper.budgets["paper"]["rounds"], "paper_seeds": paper.budgets["paper"]["seeds"]},
        "dataset": plan.dataset, "confidence": plan.confidence, "seconds": seconds, "not_comparable": run_reasons(plan),
        "tables": tables, "orderings": orderings,
        "runs": {key: {"kind": plan.settings[key]["kind"], "config": plan.settings[key]["config"],
                       "seeds": {str(s): r for s, r in by_seed.items()}} for key, by_seed in runs.items()},
    }


def reproduce(paper_id: str, *, budget: str = "quick", seeds: int | None = None, data_dir: str | None = None,
              out: str | Path = "auditkit-reproduce", confidence: float = 0.95, overwrite: bool = False,
              on_run: Callable[[str, int, dict[str, Any]], None] | None = None,
              on_swap: Callable[[Swap | None], None] | None = None) -> dict[str, Any]:
    """Run ``paper_id``'s settings at ``budget`` and write reproduction.json (validated first, strict JSON:
    ``auditkit.results.write_results``), report.html, report.md and the figures in ``out`` (``auditkit.reports.
    render_report``, as ``auditkit report`` renders it), replaced together; ``confidence``: of the intervals over
    seeds that the verdicts read. An ``out`` holding an earlier run is replaced only with ``overwrite``, once this
    run has finished (``auditkit.output_folder``); ``on_swap`` is told what that replaced, removed and kept."""
    plan = check_reproduction_inputs(paper_id, budget, seeds, data_dir, confidence)
    folder = OutputFolder(out, Mode.OVERWRITE if overwrite else Mode.NEW)
    folder.check(folder.path, folder.mode)  # refused before any training
    start = time.perf_counter()
    runs = run_plan(plan, on_run)
    document = reproduction_document(plan, runs, time.perf_counter() - start)
    validate_results(document)  # an invalid document writes nothing, not even the folder
    with folder.open("auditkit reproduce"):
        render_report(document, folder.work, with_results=True)
        swap = folder.swap_in()
    if on_swap is not None:
        on_swap(swap)
    return document


def describe(paper: Paper) -> list[tuple[str, str, int]]:
    """(table id, caption, rows) of each table: what ``--list`` shows."""
    return [(t.id, t.caption, len(t.rows)) for t in paper.tables]
