"""Reproduction documents (``auditkit reproduce``'s ``reproduction.json``) built from a bundled paper's real plan and
the real document builder, with fake runs in place of training: every kind of run, with the non-finite numbers
real runs give (a lossless uplink's SNR: Infinity; a protocol without one: null, read as NaN).

Reusable from any test (the suite runs with ``--import-mode=importlib``, so load this file by path)::

    path = Path(__file__).parents[2] / "reports" / "reproductions.py"
    spec = importlib.util.spec_from_file_location("reproductions", path)
    reproductions = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reproductions)
    document = reproductions.sample_reproduction("dpsq")
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from auditkit.reproduction import reproduction_document
from auditkit.reproduction.paper import load_paper
from auditkit.reproduction.runner import Plan, plan_reproduction

PAPERS = ("dpsq", "jopeq", "msp")  # between them every kind of run: train (accuracy, SNR), attack, round attack,
# distortion; rows with and without x; plot-only rows; orderings with and without a claimed gap


def fake_measurements(kind: str, mechanism: str, seed: int, index: int, rounds: int) -> dict[str, Any]:
    """What a run of ``kind`` measures at ``seed``, made up but shaped as the runner's (``index``: the setting's
    place in the plan, which sets its level and its SNR: none, infinite or finite)."""
    rng = np.random.default_rng(1000 * index + seed)
    seconds = float(1 + rng.random())
    if kind == "train":
        accuracy = float(0.5 + 0.4 * rng.random())
        snr = (None, math.inf, float(5 + 10 * rng.random()))[index % 3]
        curve = [float(v) for v in np.linspace(0.1, accuracy, rounds)]
        return {"test_accuracy": accuracy, "snr_db": snr, "curve": curve, "snr_curve": [snr] * rounds,
                "seconds": seconds}
    if kind == "attack":
        mse = float(0.01 + 0.05 * rng.random())
        return {"ssim": float(0.2 + 0.6 * rng.random()), "mse": mse, "psnr": float(-10 * math.log10(mse)),
                "bits_per_coordinate": 32.0, "seconds": seconds}
    if kind == "round_attack":
        return {"round_mse": float(0.02 + 0.1 * rng.random()), "ssim": float(rng.random()),
                "clean_mse": float(0.01 * rng.random()), "test_accuracy": float(0.3 + 0.5 * rng.random()),
                "seconds": seconds}
    level = 4.9 if mechanism == "laplace-sq" else -1.5
    distortion = float(level + 0.05 * (index % 7) + 0.01 * rng.random())
    return {"distortion": distortion, "mean_squared_error": 10**distortion, "seconds": seconds}


def fake_runs(plan: Plan, rounds: int = 4) -> dict[str, dict[int, Any]]:
    """A fake run of every setting of ``plan`` at every seed: {setting key: {seed: measurements}}."""
    return {key: {seed: fake_measurements(setting["kind"], setting["config"]["mechanism"]["name"], seed, i, rounds)
                  for seed in plan.seeds}
            for i, (key, setting) in enumerate(plan.settings.items())}


def sample_reproduction(paper_id: str = "dpsq", seeds: int = 3) -> dict[str, Any]:
    """The reproduction document of ``paper_id`` at the quick budget with ``seeds`` seeds, on fake runs."""
    plan = plan_reproduction(load_paper(paper_id), budget="quick", seeds=seeds)
    return reproduction_document(plan, fake_runs(plan), 12.5)

