"""Fixtures for the report tests: a realistic results document (schema v2) with its reconstruction grids and one
shared rendering of it (the headless-browser fixture ``report_browser`` is in tests/conftest.py)."""
from __future__ import annotations

import copy
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from reports import render_report
from reports.figures import image_grid

SCRIPT_LABEL = '<script>alert("x")</script> $\\notacommand$ gaussian'  # "$": broken mathtext if parsed
PIPE_LABEL = "JoPEQ | eps=1"
SCRIPT_PARAM = "<script>alert(1)</script>"


def _rounds(accuracies: list[float], bits: float) -> list[dict[str, Any]]:
    return [{"round": r + 1, "lr": 0.01, "train_loss": 1.0 / (r + 1), "test_loss": 1.2 / (r + 1),
             "test_accuracy": a, "bits_per_coordinate": bits} for r, a in enumerate(accuracies)]


def _training(accuracies: list[float], bits: float, ratio: float | None) -> dict[str, Any]:
    return {"rounds": _rounds(accuracies, bits),
            "final": {"round": len(accuracies), "test_accuracy": accuracies[-1], "best_test_accuracy": max(accuracies),
                      "test_loss": 0.4, "bits_per_coordinate": bits, "float32_bits_per_coordinate": 32,
                      "compression_vs_float32": ratio, "uplink_bits_total": 123_456},
            "checkpoints": [1, 3]}


def _guarantee(epsilon: float | None, delta: float, flags: list[str], summary: str) -> dict[str, Any]:
    return {"epsilon": epsilon, "delta": delta, "relation": "REPLACE_ONE", "unit": "one client update",
            "scope": "per round", "threat_model": "server sees each update", "sensitivity": "l1 clip 1",
            "assumptions": ["private randomness per client"], "caveats": ["the quantizer's dither is shared"],
            "flags": flags, "summary": summary}


def _scores(ssim: float, mse: float, psnr: float) -> dict[str, Any]:
    return {"ssim_mean": ssim, "mse_mean": mse, "psnr_mean": psnr, "ssim": [ssim], "mse": [mse], "psnr": [psnr]}


def _inversion(setting_id: str, clean: dict[str, Any], defended: dict[str, Any]) -> dict[str, Any]:
    return {"attack": "inverting_gradients", "view": "server", "round": 3,
            "observation": "-update / (lr tau) as one gradient", "clients": [0], "model": "cnn",
            "ssim_variant": "skimage.structural_similarity(data_range=1)", "clean": clean, "defended": defended,
            "figure": f"figures/reconstruction-{setting_id}.png"}


def _settings() -> list[dict[str, Any]]:
    """No claim (with inversion); a claim with distinguishing and inversion; a claim with distinguishing only."""
    none = {
        "id": "s00", "label": "float32 (none)",
        "mechanism": {"name": "none", "params": {},
                      "guarantee": _guarantee(None, 0.0, ["no-privacy"], "no privacy guarantee [no-privacy]")},
        "sweep": {},
        "training": _training([0.5, 0.8, 0.9123], 32.0, 1.0),
        "accounting": {"rounds": 3, "delta": 1e-5, "composed": None, "refusal": None, "composed_actual": None},
        "inversion": _inversion("s00", _scores(0.97, 0.0, math.inf), _scores(0.97, 0.0, math.inf)),
        "distinguish": None,
    }
    jopeq = {
        "id": "s01", "label": PIPE_LABEL,
        "mechanism": {"name": "jopeq-laplace", "params": {"eps": 1.0, "n": 2},
                      "guarantee": _guarantee(1.0, 0.0, ["claim-exceeded"], "(1, 0)-DP per round [claim-exceeded]")},
        "sweep": {"eps": 1.0},
        "training": _training([0.4, 0.7, 0.8123], 2.75, 11.636),
        "accounting": {"rounds": 3, "delta": 1e-5, "refusal": None,
                       "composed": {"epsilon": 3.0, "delta": 0.0, "backend": "basic composition", "event": "3 x claim"},
                       "composed_actual": {"epsilon": 9.5, "delta": 0.0, "backend": "basic composition",
                                           "event": "3 x realised noise"}},
        "inversion": _inversion("s01", _scores(0.412, 0.0123, 19.1), _scores(0.0213, 0.0456, 13.4)),
        "distinguish": {"trials": 20000, "confidence": 0.95, "tests": 4, "claimed_epsilon": 1.0, "delta": 0.0,
                        "epsilon_lower_bound": 1.83, "max_certifiable": 4.61, "worst_pair": "0 vs clip",
                        "statistic": "likelihood ratio", "verdict": "violated",
                        "adaptive": [{"test": "moment-matching excess", "claim": "per round", "claimed_epsilon": 1.0,
                                      "epsilon_lower_bound": 2.2, "max_certifiable": 4.61, "verdict": "violated",
                                      "note": "noise scale set from a moment match"}]},
    }
    gaussian = {
        "id": "s02", "label": SCRIPT_LABEL,
        "mechanism": {"name": "gaussian", "params": {"sigma": 0.8, "clip": 1.0, "note": SCRIPT_PARAM},
                      "guarantee": _guarantee(2.5, 1e-5, [], "(2.5, 1e-05)-DP per round")},
        "sweep": {"sigma": 0.8},
        "training": _training([0.3, 0.6, 0.7], 32.0, None),
        "accounting": {"rounds": 3, "delta": 1e-5, "composed": None, "composed_actual": None,
                       "refusal": "the accountant needs the sampling rate"},
        "inversion": None,
        "distinguish": {"trials": 20000, "confidence": 0.95, "tests": 4, "claimed_epsilon": 2.5, "delta": 1e-5,
                        "epsilon_lower_bound": 0.4, "max_certifiable": 4.61, "worst_pair": "0 vs clip",
                        "statistic": "threshold", "verdict": "consistent", "adaptive": []},
    }
    gaussian["training"]["rounds"][0]["test_loss"] = math.nan
    return [none, jopeq, gaussian]


def results_document() -> dict[str, Any]:
    """A realistic version 2 results document of three settings."""
    return {
        "schema": "auditkit/results", "schema_version": 2, "command": "audit", "title": "quickstart <b>",
        "config": {"seed": 4, "device": "cpu", "mechanisms": [{"name": "gaussian", "label": SCRIPT_LABEL}]},
        "provenance": {
            "auditkit_version": "0.1.0", "seed": 4, "device": "cpu",
            "versions": {"python": "3.11.9", "torch": "2.4.0", "numpy": "2.0.0"},
            "platform": "Linux-x86_64",
            "data": {"dataset": "digits", "partition": "iid", "train": 1200, "validation": 200, "test": 397,
                     "client_sizes": [120] * 10},
            "model": {"name": "cnn", "num_params": 6422},
            "training": {"clients": 10, "rounds": 3, "tau": 15, "batch_size": 1, "lr": 0.01,
                         "participation": "all clients every round",
                         "sampling": "each local step draws 1 sample uniformly with replacement"},
            "threat_models": {"server": "every client's message", "eavesdropper": "the bitstreams",
                              "peer": "the aggregate", "public": "the final model"},
            "accountant_backends": ["basic composition"],
            "neighbouring_relations": ["REPLACE_ONE"],
        },
        "settings": _settings(),
    }


@pytest.fixture
def document() -> dict[str, Any]:
    """A fresh copy of the realistic results document (no files behind it)."""
    return results_document()


@pytest.fixture(scope="session")
def grid_png(tmp_path_factory) -> bytes:
    """A small real reconstruction grid (PNG bytes), drawn once."""
    rng = np.random.default_rng(0)
    rows = {name: rng.random((2, 1, 8, 8)) for name in ("ground truth", "clean", "defended")}
    return image_grid(rows, tmp_path_factory.mktemp("grid") / "grid.png", title=SCRIPT_LABEL).read_bytes()


def write_results_folder(folder: Path, png: bytes) -> dict[str, Any]:
    """A results document with its reconstruction grids written under ``folder``."""
    document = results_document()
    for setting in document["settings"]:
        if setting["inversion"] is not None:
            path = folder / setting["inversion"]["figure"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(png)
    return document


@pytest.fixture
def results_folder(tmp_path, grid_png) -> tuple[Path, dict[str, Any]]:
    """(folder, document) of a fresh results folder of one's own."""
    return tmp_path, write_results_folder(tmp_path, grid_png)


@pytest.fixture(scope="session")
def rendered(tmp_path_factory, grid_png) -> SimpleNamespace:
    """One rendering (HTML and markdown) shared by the read-only tests: folder, document, written paths."""
    folder = tmp_path_factory.mktemp("report")
    document = write_results_folder(folder, grid_png)
    paths = render_report(copy.deepcopy(document), folder)
    return SimpleNamespace(folder=folder, document=document, paths=paths)
