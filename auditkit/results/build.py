"""Building the sections of a results document from what the commands computed (``auditkit.results.model`` says
their shape): ``provenance`` (versions, platform, seed, device, the code's fingerprint, the plugins),
``mechanism_entry``, ``training_entry``, ``accounting_entry``, ``distinguish_entry``, ``canary_entry``, and
``setting`` / ``document`` assembling them."""
from __future__ import annotations

import functools
import hashlib
import importlib
import math
import platform
import warnings
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from auditkit import mechanisms
from auditkit.input_fingerprint import plugin_digests
from auditkit.version import __version__
from auditkit.accounting import account
from auditkit.attacks.headline import overall_verdict
from auditkit.attacks.one_run import claim_roc, empirical_roc
from auditkit.attacks.roc import roc_summary
from auditkit.fl.snr import snr_db
from auditkit.mechanisms.capabilities import CAPABILITIES, CapabilityState
from auditkit.mechanisms.densities import ClippedGaussian, ClippedLaplace
from auditkit.mechanisms.views import THREAT_MODELS
from auditkit.results.documents import validate_results
from auditkit.results.model import SCHEMA, SCHEMA_VERSION, Command

__all__ = [
    "FLOAT32_BITS",
    "accounting_entry",
    "canary_entry",
    "canary_view",
    "code_fingerprint",
    "distinguish_entry",
    "document",
    "mechanism_entry",
    "noise_std",
    "provenance",
    "setting",
    "training_entry",
]

FLOAT32_BITS = 32
_VERSIONED = ("torch", "numpy", "scipy", "scikit-image", "opacus", "dp-accounting")
_SOURCE_PACKAGES = ("auditkit", "auditkit.mechanisms", "auditkit.attacks", "auditkit.reports")
_SOURCE_SUFFIXES = (".py", ".j2", ".toml")


@functools.cache
def _package_digest() -> str:
    """SHA-256 over the toolkit's own source files (path and content), in a fixed order."""
    digest = hashlib.sha256()
    for package in _SOURCE_PACKAGES:
        root = Path(importlib.import_module(package).__file__).parent
        for path in sorted(p for p in root.rglob("*") if p.suffix in _SOURCE_SUFFIXES and "__pycache__" not in p.parts):
            digest.update(f"{package}/{path.relative_to(root).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def code_fingerprint(plugins: Iterable[str] = ()) -> str:
    """"sha256:" and 16 hex digits identifying the code that computes results: the toolkit's sources and, for every
    plugin in ``plugins`` (a module or a ``.py`` file), its source and that of the modules it imports from the
    user's folders (``auditkit.input_fingerprint.plugin_digests``). Resumed stages are reused only under the same
    fingerprint, so results computed by other code are never mixed in."""
    digest = hashlib.sha256(_package_digest().encode())
    for name, value in plugin_digests(plugins).items():
        digest.update(f"\0{name}\0{value}".encode())
    return "sha256:" + digest.hexdigest()[:16]


def provenance(
    *, seed: int, device: str, data: dict[str, Any] | None = None, model: dict[str, Any] | None = None,
    training: dict[str, Any] | None = None, settings: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """The provenance block; accountants, neighbouring relations and the plugins whose mechanisms ran are
    read off the ``settings``."""
    accountants, relations = set(), set()
    for s in settings:
        accounting = s.get("accounting")
        if accounting is not None:
            runs = (accounting["composed"], accounting["composed_actual"])
            accountants.update(run["accountant"] for run in runs if run)
        relation = s["mechanism"]["guarantee"]["relation"]
        if relation is not None:
            relations.add(relation)
    plugins = sorted({s["mechanism"]["origin"] for s in settings} - {"built-in"})
    return {
        "auditkit_version": __version__,
        "code": code_fingerprint(plugins),
        "plugins": plugins,
        "seed": seed,
        "device": device,
        "versions": {"python": platform.python_version(), **{p: metadata.version(p) for p in _VERSIONED}},
        "platform": platform.platform(terse=True),
        "data": data,
        "model": model,
        "training": training,
        "threat_models": THREAT_MODELS,
        "accountants": sorted(accountants),
        "neighbouring_relations": sorted(relations),
    }


def mechanism_entry(mechanism: mechanisms.Mechanism, *, reproducible: bool | None = None) -> dict[str, Any]:
    """A setting's ``mechanism`` section: name, parameters, origin, the clip's norm, the adversary's ``view`` the
    claim covers and the mechanism-level audits test ("server", or "aggregate" for noise the server adds), the
    claim, the epsilon of the
    noise the mechanism really adds where it declares it (``true_epsilon``, per round; else null), the std per
    coordinate of its noise where its output density says it (``noise_std``, absent otherwise), and for each
    audit capability whether the mechanism declared it or a generic default stood in; ``reproducible: false``
    when the command found its output not determined by its seeds (``auditkit.mechanisms.reproducible``; absent when it
    passed or was not checked)."""
    actual = mechanisms.capability(mechanism, "true_epsilon")
    entry = {
        "name": mechanism.name,
        "params": dict(mechanism.params),
        "origin": mechanisms.origin(mechanism.name),
        "clip_norm": mechanism.clip_norm if "clip" in mechanism.params else None,
        "view": mechanism.view,
        "guarantee": mechanism.guarantee().to_dict(),
        "true_epsilon": None if actual is None else float(actual),
        "capabilities": {
            name: CapabilityState.DECLARED if mechanisms.declared(mechanism, name) else CapabilityState.GENERIC_DEFAULT
            for name in CAPABILITIES
        },
    }
    noise = noise_std(mechanism)
    if noise is not None:
        entry["noise_std"] = noise
    if reproducible is False:
        entry["reproducible"] = False
    return entry


def noise_std(mechanism: mechanisms.Mechanism) -> float | None:
    """The std per coordinate of the noise in the mechanism's view, from its declared output density: sigma for
    y = clip(x) + N(0, sigma^2 I), sqrt(2) b for iid Laplace(b); None for any other density or none declared."""
    density = mechanisms.capability(mechanism, "output_log_density")
    if isinstance(density, ClippedGaussian):
        return float(density.sigma)
    if isinstance(density, ClippedLaplace):
        return math.sqrt(2) * float(density.scale)
    return None


def round_snr_db(record: Any) -> float | None:
    """JoPEQ's SNR of one round's uplink in dB (``auditkit.fl.snr``); None when the protocol has no decoded update
    per client to measure it on (MSP-FL's consensus)."""
    value = record.stats.get("snr")
    return None if value is None else snr_db(value)


def training_entry(result: Any, protocol: str) -> dict[str, Any]:
    """A setting's ``training`` section from a ``SimulationResult``: every round's metrics (with ``snr_db``, JoPEQ's
    uplink SNR), the final ones (``snr_db``: its mean over the rounds, in dB), the checkpoint rounds and the round
    protocol ("uplink", "consensus" or "device-groups")."""
    keep = ("round", "lr", "train_loss", "test_loss", "test_accuracy", "bits_per_coordinate")
    rounds = result.rounds
    last = rounds[-1]
    sent = [r for r in rounds if r.bits]
    bits_per_coordinate = float(np.mean([r.bits_per_coordinate for r in sent])) if sent else 0.0
    snrs = [round_snr_db(r) for r in rounds]
    measured = [v for v in snrs if v is not None]
    return {
        "protocol": protocol,
        "rounds": [{**{k: getattr(r, k) for k in keep}, "snr_db": v} for r, v in zip(rounds, snrs, strict=True)],
        "final": {
            "snr_db": float(np.mean(measured)) if measured else None,
            "round": last.round,
            "test_accuracy": last.test_accuracy,
            "test_loss": last.test_loss,
            "best_test_accuracy": max(r.test_accuracy for r in rounds),
            "bits_per_coordinate": bits_per_coordinate,
            "float32_bits_per_coordinate": FLOAT32_BITS,
            "compression_vs_float32": FLOAT32_BITS / bits_per_coordinate if bits_per_coordinate else None,
            "uplink_bits_total": int(sum(sum(r.bits) for r in rounds)),
            "uploads_per_round": float(np.mean([r.stats.get("uploads", 1.0) for r in sent])) if sent else 0.0,
        },
        "checkpoints": result.checkpoints,
    }


def accounting_entry(
    mechanism: mechanisms.Mechanism, rounds: int, *, composition_delta: float, accountant: str,
    fl: Any = None, participation: str = "full", sample_rate: float | None = None,
) -> dict[str, Any]:
    """A setting's ``accounting`` section: the claim composed over ``rounds`` (or the refusal) under the rounds'
    client ``participation`` with its ``check`` against the recomputation from that participation
    (``auditkit.accounting.check_sampling``), the realised noise composed when the claim is exceeded, and the
    paper's FL claim when ``fl`` (the FL settings it reads) is given."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the accountants' numerical warnings are not the user's concern
        report = account(mechanism, rounds=rounds, composition_delta=composition_delta, accountant=accountant, fl=fl,
                         participation=participation, sample_rate=sample_rate)
    entry = report.to_dict()
    del entry["mechanism"], entry["per_round"]  # both are in the setting's mechanism section
    if fl is None:
        del entry["paper_claim"]
    return {"rounds": rounds, "composition_delta": composition_delta, "accountant": accountant, **entry}


def distinguish_entry(audit: Any, adaptive: Sequence[Any], *, trials: int, confidence: float,
                      tests: int) -> dict[str, Any]:
    """A setting's ``distinguish`` section from an ``auditkit.attacks.MechanismAudit`` and its adaptive test results
    (``search``: the worst-pair search's candidates and the chosen one, null without the search; ``roc_summary``:
    a test's held-out ROC, absent where the estimate has none)."""
    worst = audit.worst
    return {
        "trials": trials, "confidence": confidence, "tests": tests,
        "claimed_epsilon": audit.claimed_epsilon, "delta": worst.delta,
        "epsilon_lower_bound": worst.epsilon_lower_bound, "max_certifiable": worst.max_certifiable,
        "worst_pair": worst.pair.label, "statistic": worst.statistic, "verdict": audit.verdict,
        "p_value": worst.p_value, "audit_setting": audit.audit_setting, "sampling": worst.sampling,
        "estimates": [
            {"pair": e.pair.label, "statistic": e.statistic, "epsilon_lower_bound": e.epsilon_lower_bound,
             "max_certifiable": e.max_certifiable, "p_value": e.p_value, "sampling": e.sampling, **_roc_of(e)}
            for e in audit.estimates
        ],
        "search": None if audit.search is None else audit.search.to_dict(),
        "adaptive": [
            {"test": r.test, "claim": r.claim, "stated_claim": r.stated_claim, "claimed_epsilon": r.claimed_epsilon,
             "epsilon_lower_bound": r.epsilon_lower_bound, "max_certifiable": r.worst.max_certifiable,
             "verdict": r.verdict, "p_value": r.p_value, "note": r.note}
            for r in adaptive
        ],
        **_roc_of(worst),
    }


def _roc_of(estimate: Any) -> dict[str, Any]:
    """{"roc_summary": ...} of an ``EpsilonEstimate`` that has one, else {} (the key is optional)."""
    return {} if estimate.roc_summary is None else {"roc_summary": estimate.roc_summary.to_dict()}


def canary_view(view: str, statistic: str, result: Any, scores: Any, inserted: Any, curve: Any) -> dict[str, Any]:
    """One judged view of a one-run canary audit: ``result`` (an ``auditkit.attacks.one_run.OneRunBound``), the
    empirical ROC of the canary ``scores`` against the bits ``inserted``, and the TPR the claim's ``curve`` allows at
    the same FPRs (empty without a curve), and ``roc_summary`` (``auditkit.attacks.roc.roc_summary``: AUROC and
    TPR at low FPRs with intervals; absent with fewer than 2 canaries in or out)."""
    roc = empirical_roc(scores, inserted)
    bound = {key: _finite_or_none(value) for key, value in result.to_dict().items()}
    scores, inserted = np.asarray(scores, dtype=np.float64), np.asarray(inserted, dtype=bool)
    counted = min(np.count_nonzero(inserted), np.count_nonzero(~inserted)) >= 2
    return {"view": view, "statistic": statistic, "result": bound, "roc": roc,
            "claim_tpr": [] if curve is None else claim_roc(curve, roc["fpr"]),
            **({"roc_summary": roc_summary(scores, inserted).to_dict()} if counted else {})}


def canary_entry(*, kind: str, canaries: int, bound: str, confidence: float, claim: dict[str, Any],
                 views: list[dict[str, Any]], seconds: float, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A setting's ``canary`` section: a one-run canary audit of ``kind`` "idealized" (``auditkit canary``) or "fl"
    (canary clients in the run), the ``claim`` it is judged against (epsilon, delta, curve label, rounds, note) and
    one ``canary_view`` per judged view; ``details``: what the kind adds (JSON values)."""
    claim = {**claim, "epsilon": _finite_or_none(claim.get("epsilon"))}
    return {"kind": kind, "canaries": canaries, "bound": bound, "confidence": confidence, "seconds": seconds,
            "claim": claim, "views": views, "details": dict(details or {})}


def membership_attack(attack: str, result: Any, scores: Any, members: Any, tpr_at: Sequence[Any], curve: Any, *,
                      auc: float) -> dict[str, Any]:
    """One attack of the membership stage: the target run's one-run bound ``result`` (an
    ``auditkit.attacks.one_run.OneRunBound``), the pooled ``scores``' log-log ROC against ``members``, the TPR the
    claim's ``curve`` allows at its FPRs (empty without a curve), ``tpr_at`` (``auditkit.attacks.roc.TprAtFpr``)
    and the AUC."""
    roc = empirical_roc(scores, members)
    bound = {key: _finite_or_none(value) for key, value in result.to_dict().items()}
    return {"attack": attack, "auc": auc, "tpr_at": [dict(vars(point)) for point in tpr_at], "roc": roc,
            "claim_tpr": [] if curve is None else claim_roc(curve, roc["fpr"]), "result": bound}


def membership_entry(*, level: str, view: str, references: int, tested: int, population: int, confidence: float,
                     claim: dict[str, Any], attacks: list[dict[str, Any]], seconds: float,
                     details: dict[str, Any]) -> dict[str, Any]:
    """A setting's ``membership`` section: the game (``level``, the ``view`` attacked, ``references``, ``tested``: the records or clients tested per run, ``population``), the
    whole run's ``claim`` it is judged against and one ``membership_attack`` per attack."""
    claim = {**claim, "epsilon": _finite_or_none(claim.get("epsilon"))}
    return {"level": level, "view": view, "references": references, "tested": tested, "population": population,
            "confidence": confidence, "seconds": seconds, "claim": claim, "attacks": attacks,
            "details": dict(details)}


def _finite_or_none(value: Any) -> Any:
    """An infinite or NaN float as null (strict JSON); anything else unchanged."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def setting(id_: str, label: str, mechanism: mechanisms.Mechanism, *, sweep: dict[str, Any] | None = None,
            training: dict[str, Any] | None = None, accounting: dict[str, Any] | None = None,
            inversion: dict[str, Any] | None = None, probe: dict[str, Any] | None = None,
            identification: dict[str, Any] | None = None,
            distinguish: dict[str, Any] | None = None, canary: dict[str, Any] | None = None,
            membership: dict[str, Any] | None = None, reproducible: bool | None = None) -> dict[str, Any]:
    """One setting of a document; the sections a command did not run are null; ``verdict`` is the headline over
    every test it ran (``overall_verdict``); ``reproducible``: what ``auditkit.mechanisms.reproducible`` found, where the
    command checked it (``mechanism_entry``)."""
    entry = mechanism_entry(mechanism, reproducible=reproducible)
    return {"id": id_, "label": label, "sweep": dict(sweep or {}), "mechanism": entry,
            "training": training, "accounting": accounting, "inversion": inversion, "probe": probe,
            "identification": identification, "distinguish": distinguish, "canary": canary,
            "membership": membership,
            "verdict": overall_verdict(distinguish, identification, entry, accounting, canary, membership)}


def document(command: str, title: str, config: dict[str, Any], provenance_: dict[str, Any],
             settings: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole results document, validated (``validate_results``: a ``ValueError`` naming the key)."""
    if command not in Command.__members__.values() or command == Command.REPRODUCE:
        raise ValueError(f"command must be one of {', '.join(c for c in Command if c != Command.REPRODUCE)}, "
                         f"got {command!r}")
    doc = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "command": Command(command), "title": title,
           "config": config, "provenance": provenance_, "settings": settings}
    validate_results(doc)
    return doc
