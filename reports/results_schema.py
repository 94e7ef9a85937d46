"""The documents every auditkit command writes and reports are rendered from: schema ``auditkit/results``,
version 4, of two kinds sharing one header: ``results.json`` (the commands of ``COMMANDS``: settings) and
``reproduction.json`` (``auditkit reproduce``: a paper's tables beside ours; see "A reproduction" below).

Top level: ``schema`` ("auditkit/results"), ``schema_version`` (4), ``command`` (the command that wrote it: one
of ``COMMANDS``, "train", "audit", "attack", "distinguish", "account", or "reproduce"), ``title``, ``config`` (the
command's inputs as plain data) and ``provenance`` and ``settings`` (at least one).

``provenance``: ``auditkit_version``, ``code`` (a fingerprint of the code that computed the results, e.g.
"sha256:0123abcd..."), ``plugins`` (the plugin modules / entry points loaded; [] for none), ``seed``,
``device``, ``versions`` (package -> version), ``platform``, ``data`` (null, or dataset, its source, partition,
train / validation / test sizes, client_sizes, optionally ``classes``), ``model`` (null, or name, num_params), ``training`` (null, or clients,
rounds, tau, batch_size, lr, participation, sampling, and optionally backend: builtin, flower or a Flower app's
recording), ``threat_models`` (view -> what it sees), ``accountant_backends`` and ``neighbouring_relations``
(sorted lists of words).

Each setting (one mechanism setting, a grid point of a sweep):

- ``id`` (unique, filename-safe), ``label`` (user-supplied display name), ``sweep`` (swept parameter -> value);
- ``mechanism``: ``name``, ``params``, ``origin`` ("built-in", or the plugin that registered it: a module name
  or "entry point NAME = VALUE"), optionally ``view`` (the adversary's view the claim covers and the
  mechanism-level tests sample: "server", or "aggregate" for noise the server adds), ``clip_norm`` (the norm
  ``clip`` is measured in: "l2", "l1", "linf"; or
  null), ``guarantee`` (the one-round claim: ``epsilon`` or null for no claim, ``delta``, ``relation``
  (dp_accounting's ``NeighboringRelation`` name, e.g. "REPLACE_ONE"; null without a claim), unit, scope,
  threat_model, sensitivity, assumptions, caveats, flags, summary), optionally ``true_epsilon`` (the epsilon of the
  noise the mechanism really adds, per round, where it declares it; else null), ``capabilities`` (each of
  ``CAPABILITIES`` -> "declared" by the mechanism, or the "generic default" stood in; "unknown" in a version 2
  file upgraded here) and optionally ``reproducible`` (false: the command that wrote the file found the
  mechanism's output not determined by its seeds, two encodes under the same seeds differing, so its results
  will not reproduce; absent when it passed or was not checked);
- ``training`` (null when nothing was trained): ``protocol`` ("uplink", "consensus", "device-groups"; "unknown"
  when upgraded), ``rounds`` (per round: lr, losses, test_accuracy in [0, 1], bits_per_coordinate, optionally
  ``snr_db``: JoPEQ's uplink SNR 10 log10(mean_k Var(h_k) / Var(h_k - h~_k)), h_k the update as the mechanism
  receives it (after its clipping) and h~_k what the server decodes, null where the protocol has no
  decoded update per client, Infinity for a lossless one), ``final`` (accuracy, loss, bits, optionally ``snr_db``,
  the mean of the rounds' snr_db, ``compression_vs_float32`` or null, uplink bits, optionally ``uploads_per_round`` for
  protocols with several uploads per round, e.g. MSP-FL's K_t + 1) and ``checkpoints``;
- ``accounting`` (null when not run): the claim composed over ``rounds`` at ``composition_delta`` with the
  ``backend`` asked for (``composed``: epsilon, delta, rounds, the backend used and the event; or null with a
  ``refusal``; ``composed_actual``: the realised noise when the claim is exceeded), optionally ``paper_claim``
  (null, or a guarantee as above: a paper's record-level FL claim, e.g. CEPAM's Theorem 12), ``sampling``
  (how client participation entered ``composed``: participation, sample_rate, amplified, note) and ``check`` (null
  without a composed number, else ``composed`` against its recomputation from the run's client sampling,
  ``auditkit.accounting.check_sampling``: verdict "consistent" or "violated", independent_epsilon, reason);
  and, when the clients trained with DP-SGD (``[dp_sgd]``, added within version 4), ``example_level``: the claim
  about one training example (epsilon, delta, noise_multiplier, max_grad_norm, batch_size, the worst client's
  ``sample_rate``, that ``client`` and its ``client_examples``, the composed ``steps``, backend, event, note), beside
  and never combined with the client-level ``composed``;
- ``inversion`` (null when not run): the attack on the server's view at an FL ``round`` (null for ``auditkit
  attack``, which attacks single-image gradients), the ``clients`` attacked (null for ``auditkit attack``),
  clean (null when no clean reference was run) and defended SSIM / MSE / PSNR (optionally label_accuracy), and
  ``figure``, the reconstruction grid's path relative to the results folder (or null); optionally ``views``
  (further server-side estimates attacked the same way, MSP-FL: alpha_0, the first consensus residual, the
  least-squares reconstruction, each with its name, observation and defended scores), ``images``, ``source``,
  ``label_given``, ``error_std`` (the std of the defended update's error, the x axis of defence curves) and
  ``bits_per_coordinate``;
- ``probe`` (null when not run): the inversion probe at the claim's worst case (``auditkit.stages.probe``): attack,
  round, clients, batch_size, local_steps, model, observation, clean and defended scores, bits_per_coordinate,
  ``matched`` (per run "clean" / "defended": per M, how many reconstructions matched their own example among M
  candidates, with interval and the claim's bound), ``figure`` and optionally ``sweep`` (where reconstruction
  begins: the same attack with the mechanism recalibrated along eps, ``auditkit.stages.probe.reconstruction_sweep``:
  group, attack, clients, clean_ssim, level, ``crossing_eps`` and ``reaches_clean_eps`` (or null), ``stopped``
  (or null), and per point eps, the recalibrated params, ssim and mse with their intervals and the claim's
  ``rero_bound`` per M);
- ``identification`` (null when not run or without a claim): the informed adversary's identification tests
  (scoring, pool, confidence, per_test_confidence, observed_rounds, note, and per M: trials, successes, rate,
  interval, lower, kappa, the claim's ``bound`` and ``bound_form``, ``p_value``, ``verdict``);
- ``verdict`` (null when no test ran): the headline, the worst verdict over all the setting's tests, the test
  that ``decided_by`` it, its ``p_value`` and the number of ``tests``; optionally the Bonferroni ``family`` its
  tests were judged in, the ``adjusted_p_value`` min(1, family p) and the ``evidence`` of a refutation
  ("decisive": adjusted p below 1e-4, "marginal", "analytic": refuted by the mechanism's declared
  ``true_epsilon``, or null) and the ``bound``: the strongest certified epsilon lower bound of any of the
  setting's distinguishing tests (epsilon_lower_bound, the test, its max_certifiable, the confidence), or null;
- ``distinguish`` (null when not run): the certified epsilon lower bound at a confidence, its cap
  ``max_certifiable``, the verdict on the claim, ``p_value`` (of "the mechanism is (claimed_epsilon, delta)-DP"
  on the worst pair, or null), where the claim was tested (``setting``) and how outputs were drawn
  (``sampling``), the adaptive tests and optionally every pair's ``estimates`` and the worst-pair ``search``
  (null without it: every candidate pair's statistic and predicted, not certified, bound, and the index of the
  ``chosen`` one, whose held-out test is the one estimate).

A reproduction (``command`` "reproduce", added within version 4) has the same header (``config``: paper, budget,
seeds, data_dir, confidence), a ``provenance`` of ``auditkit_version``, ``code``, ``plugins``, ``versions`` and
``platform``, and in place of settings: ``paper`` (id, title, sources, data, data_note), ``budget`` (name,
rounds, seeds, why, the paper's rounds and seeds), ``dataset``, ``confidence`` (of the intervals over seeds, in
(0, 1)), ``seconds``, ``not_comparable`` (why no training row of the run can be held to the paper's numbers);
``tables``, each with id, caption, metric and its description, ``kind`` (one of ``RUN_KINDS``), dataset, rounds,
x_label, note and ``rows`` (the paper's number as printed, its ``line``, ``paper_value`` +- ``paper_plus_minus``
in our unit, ``per_seed``, ``mean``, ``interval``, ``difference``, ``verdict``: one of ``ROW_VERDICTS``, ``why``
and the ``setting``: the key of the run it reads); ``orderings`` (id, quote, table, metric and ``pairs``, each
with above, below, the paired seeds' ``difference`` and ``interval``, a ``verdict`` of ``ORDERING_VERDICTS``
and optionally the claimed ``gap``); and ``runs``: setting key -> kind, config and per seed what it measured
(``_RUN_MEASUREMENTS``). A number read from the paper's text, the confidence and the seconds must be finite.

Numbers may be NaN or +-Infinity. The file is strict JSON (RFC 8259, which has no NaN or Infinity), so
``dumps_strict`` writes them as the strings "NaN", "Infinity" and "-Infinity", as the proto3 JSON mapping writes
float NaN and infinities; ``load_results`` turns those strings back into floats only where the schema has a number
(``decode_non_finite``), never in free-form parts (``config``, ``params``, ``sweep``), and still reads files
written before, with bare NaN / Infinity. Checked here: each key's presence and JSON type, ``command`` and the
capabilities' values, at least one setting, unique filename-safe ids, reconstruction grid paths inside the
results folder, the length of every string (``MAX_NAME_CHARS`` for a title, label, name or id, ``MAX_STRING_CHARS``
for any other string or key); ``load_results`` reads a file of at most 64 MiB nested at most 100 deep
(``auditkit.reports.strict_json.read_bounded``), so a hostile file is one error line, fast.

``load_results`` reads version 4, and versions 2 and 3 (what auditkit wrote before) and the reproduction of
schema "auditkit.reproduction" version 2 upgraded in memory by ``upgrade_results``; any other version is refused
in one line saying how to regenerate the file.
"""
from __future__ import annotations

import copy
import math
import re
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

from auditkit.reports.strict_json import NON_FINITE, dumps_strict, read_bounded  # noqa: F401 (dumps_strict: re-exported)
from auditkit.config_bounds import MAX_NAME_CHARS

SCHEMA = "auditkit/results"
SCHEMA_VERSION = 4
COMMANDS = ("train", "audit", "attack", "distinguish", "account", "canary")  # the commands whose documents hold settings
REPRODUCE = "reproduce"  # the command whose document is a paper's reproduction (added within version 4)
RESULTS_FILE, REPRODUCTION_FILE = "results.json", "reproduction.json"
# the reproduction document as ``auditkit reproduce`` wrote it before it joined this schema (its version 2)
REPRODUCTION_V2_SCHEMA = "auditkit.reproduction"
RUN_KINDS = ("train", "attack", "round_attack", "distortion")  # what a reproduction's setting runs
ROW_VERDICTS = ("reproduced", "not reproduced", "not comparable")  # a row of a paper's table against ours
ORDERING_VERDICTS = ("holds", "reversed", "unresolved")  # a claimed ordering on our paired seeds
CAPABILITIES = ("tiling", "audit_setting", "output_log_density", "dp_event", "true_epsilon")
OPTIONAL_CAPABILITIES = ("batch_sampling", "side_values")  # added within version 4: absent from older files
CAPABILITY_VALUES = ("declared", "generic default", "unknown")
# version 2's neighbouring relations -> dp_accounting's NeighboringRelation names (None: no claim)
V2_RELATIONS = {"replace-one": "REPLACE_ONE", "add-remove": "ADD_OR_REMOVE_ONE", "none": None}


class _Nullable:
    """A value that is either null or matches ``spec``."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec


class _Optional:
    """A key that may be absent; when present its value matches ``spec``."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec


class _Map:
    """An object whose keys are data (setting keys, seeds), each value matching ``spec``."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec


class _Finite:
    """A finite number: NaN and +-Infinity are refused (a number read from a paper's text, a confidence, a time)."""


class _Measurements:
    """One run's measurements at one seed: an object of numbers (NaN and +-Infinity allowed), nulls and lists of
    them; the keys a run of each kind must hold are ``_RUN_MEASUREMENTS``'s, checked by ``_check_reproduction``."""


_FINITE = _Finite()
_MEASUREMENTS = _Measurements()

_NUMBER = (int, float)
_STRINGS = [str]
_RUN = {"epsilon": _NUMBER, "delta": _NUMBER, "rounds": int, "backend": str, "event": str}
_EXAMPLE_LEVEL = {"epsilon": _NUMBER, "delta": _NUMBER, "noise_multiplier": _NUMBER, "max_grad_norm": _NUMBER,
                  "batch_size": int, "sample_rate": _NUMBER, "client": int, "client_examples": int, "steps": int,
                  "backend": str, "event": str, "note": str}
_SCORES = {"ssim_mean": _NUMBER, "mse_mean": _NUMBER, "psnr_mean": _NUMBER,
           "ssim": [_NUMBER], "mse": [_NUMBER], "psnr": [_NUMBER], "label_accuracy": _Optional(_Nullable(_NUMBER))}
_GUARANTEE = {
    "epsilon": _Nullable(_NUMBER), "delta": _NUMBER, "relation": _Nullable(str), "unit": str, "scope": str,
    "threat_model": str, "sensitivity": str, "assumptions": _STRINGS, "caveats": _STRINGS, "flags": _STRINGS,
    "summary": str,
}
_TRAINING = {
    "protocol": str,
    "rounds": [{"round": int, "lr": _NUMBER, "train_loss": _NUMBER, "test_loss": _NUMBER,
                "test_accuracy": _NUMBER, "bits_per_coordinate": _NUMBER, "snr_db": _Optional(_Nullable(_NUMBER))}],
    "final": {"snr_db": _Optional(_Nullable(_NUMBER)), "round": int, "test_accuracy": _NUMBER, "best_test_accuracy": _NUMBER, "test_loss": _NUMBER,
              "bits_per_coordinate": _NUMBER, "float32_bits_per_coordinate": _NUMBER,
              "compression_vs_float32": _Nullable(_NUMBER), "uplink_bits_total": int,
              "uploads_per_round": _Optional(_NUMBER)},
    "checkpoints": [int],
}
_ADAPTIVE = [{"test": str, "claim": str, "claimed_epsilon": _Nullable(_NUMBER), "epsilon_lower_bound": _NUMBER,
              "max_certifiable": _NUMBER, "verdict": str, "p_value": _Optional(_Nullable(_NUMBER)), "note": str}]
# a setting of version 3 (before the probe, the identification tests and the headline verdict); version 4 adds them
_SETTING_V3 = {
    "id": str,
    "label": str,
    "mechanism": {"name": str, "params": dict, "origin": str, "clip_norm": _Nullable(str), "view": _Optional(str),
                  "guarantee": _GUARANTEE,
                  "true_epsilon": _Optional(_Nullable(_NUMBER)), "reproducible": _Optional(bool),
                  "capabilities": {**{name: str for name in CAPABILITIES},
                                   **{name: _Optional(str) for name in OPTIONAL_CAPABILITIES}}},
    "sweep": dict,
    "training": _Nullable(_TRAINING),
    "accounting": _Nullable({
        "rounds": int, "composition_delta": _NUMBER, "backend": str, "composed": _Nullable(_RUN),
        "refusal": _Nullable(str), "composed_actual": _Nullable(_RUN), "paper_claim": _Optional(_Nullable(_GUARANTEE)),
        "sampling": _Optional(_Nullable({"participation": str, "sample_rate": _Nullable(_NUMBER), "amplified": bool,
                                         "note": str})),
        "check": _Optional(_Nullable({"verdict": str, "independent_epsilon": _NUMBER, "reason": str})),
        "example_level": _Optional(_EXAMPLE_LEVEL),
    }),
    "inversion": _Nullable({
        "attack": str, "view": str, "round": _Nullable(int), "observation": str, "clients": _Nullable([int]),
        "model": str, "ssim_variant": str, "clean": _Nullable(_SCORES), "defended": _SCORES, "figure": _Nullable(str),
        "views": _Optional([{"name": str, "observation": str, "defended": _SCORES}]),
        "images": _Optional(int), "source": _Optional(str), "label_given": _Optional(bool),
        "error_std": _Optional(_NUMBER), "bits_per_coordinate": _Optional(_NUMBER),
    }),
    "distinguish": _Nullable({
        "trials": int, "confidence": _NUMBER, "tests": int, "claimed_epsilon": _Nullable(_NUMBER),
        "delta": _NUMBER, "epsilon_lower_bound": _NUMBER, "max_certifiable": _NUMBER, "worst_pair": str,
        "statistic": str, "verdict": str, "p_value": _Nullable(_NUMBER), "setting": str, "sampling": str,
        "adaptive": _ADAPTIVE,
        "estimates": _Optional([{"pair": str, "statistic": str, "epsilon_lower_bound": _NUMBER,
                                 "max_certifiable": _NUMBER, "p_value": _Nullable(_NUMBER), "sampling": str}]),
        "search": _Optional(_Nullable({
            "candidates": [{"pair": str, "statistic": str, "predicted_bound": _NUMBER, "selection_trials": int}],
            "chosen": int})),
    }),
}
_MATCHED = [{"candidates": int, "successes": int, "clients": int, "rate": _NUMBER, "interval": [_NUMBER],
             "bound": _NUMBER, "bound_form": str, "kappa": _NUMBER, "exceeds_bound": bool}]
_ONE_RUN = {"bound": str, "canaries": int, "guesses": int, "correct": int, "confidence": _NUMBER,
            "per_test_confidence": _NUMBER, "delta": _NUMBER, "epsilon_lower_bound": _NUMBER,
            "max_certifiable": _NUMBER, "claimed_epsilon": _Nullable(_NUMBER), "curve": _Nullable(str),
            "verdict": str, "guess_rule": str, "grid": [int], "refuted_curve": _Optional(_Nullable(str)),
            "curve_epsilon": _Optional(_Nullable(_NUMBER)), "curve_max_certifiable": _Optional(_Nullable(_NUMBER))}
# a one-run canary audit (added within version 4): the idealized game of ``auditkit canary`` or the canary clients
# of an FL run, each view judged against the claim (the whole run's, composed, for FL)
_CANARY = {
    "kind": str, "canaries": int, "bound": str, "confidence": _NUMBER, "seconds": _NUMBER,
    "claim": {"epsilon": _Nullable(_NUMBER), "delta": _NUMBER, "curve": _Nullable(str), "rounds": int, "note": str,
              "accountant_epsilon": _Optional(_NUMBER)},
    "views": [{"view": str, "scoring": str, "result": _ONE_RUN, "roc": {"fpr": [_NUMBER], "tpr": [_NUMBER]},
               "claim_tpr": [_NUMBER]}],
    "details": dict,
}
_SETTING = {
    **_SETTING_V3,
    "canary": _Optional(_Nullable(_CANARY)),
    "probe": _Nullable({
        "attack": str, "round": int, "clients": int, "batch_size": int, "local_steps": int, "model": str,
        "observation": str, "ssim_variant": str, "clean": _SCORES, "defended": _SCORES,
        "bits_per_coordinate": _NUMBER, "matched": {"clean": _MATCHED, "defended": _MATCHED}, "figure": str,
        "sweep": _Optional({
            "group": str, "attack": str, "clients": int, "clean_ssim": _NUMBER, "level": _NUMBER,
            "crossing_eps": _Nullable(_NUMBER), "reaches_clean_eps": _Nullable(_NUMBER), "stopped": _Nullable(str),
            "points": [{"eps": _NUMBER, "params": dict, "ssim": _NUMBER, "ssim_interval": [_NUMBER], "mse": _NUMBER,
                        "mse_interval": [_NUMBER], "rero_bound": dict}],
        }),
    }),
    "identification": _Nullable({
        "scoring": str, "pool": int, "confidence": _NUMBER, "per_test_confidence": _NUMBER, "observed_rounds": int,
        "note": str,
        "tests": [{"candidates": int, "trials": int, "successes": int, "rate": _NUMBER, "interval": [_NUMBER],
                   "kappa": _NUMBER, "lower": _NUMBER, "bound": _NUMBER, "bound_form": str, "p_value": _NUMBER,
                   "verdict": str}],
    }),
    "verdict": _Nullable({"verdict": str, "decided_by": str, "p_value": _Nullable(_NUMBER), "tests": int,
                          "family": _Optional(int), "adjusted_p_value": _Optional(_Nullable(_NUMBER)),
                          "evidence": _Optional(_Nullable(str)),
                          "bound": _Optional(_Nullable({"epsilon_lower_bound": _NUMBER, "test": str,
                                                        "max_certifiable": _NUMBER, "confidence": _NUMBER}))}),
}
_DOCUMENT = {
    "schema": str,
    "schema_version": int,
    "command": str,
    "title": str,
    "config": dict,
    "provenance": {
        "auditkit_version": str, "code": str, "plugins": _STRINGS, "seed": int, "device": str, "versions": dict,
        "platform": str,
        "data": _Nullable({"dataset": str, "source": str, "partition": str, "train": int, "validation": int,
                           "test": int, "client_sizes": [int], "classes": _Optional(int)}),
        "model": _Nullable({"name": str, "num_params": int}),
        "training": _Nullable({"clients": int, "rounds": int, "tau": int, "batch_size": int, "lr": _NUMBER,
                               "participation": str, "sampling": str, "backend": _Optional(str)}),
        "threat_models": dict,
        "accountant_backends": _STRINGS,
        "neighbouring_relations": _STRINGS,
    },
    "settings": [_SETTING],
}

# version 3 (before the probe, the identification tests and the headline verdict), checked before it is upgraded
_DOCUMENT_V3 = {
    **_DOCUMENT,
    "provenance": {
        **_DOCUMENT["provenance"],
        "data": _Nullable({key: spec for key, spec in _DOCUMENT["provenance"]["data"].spec.items() if key != "source"}),
    },
    "settings": [_SETTING_V3],
}
# version 2 (``auditkit audit`` before version 3), checked before it is upgraded
_SCORES_V2 = {key: spec for key, spec in _SCORES.items() if key != "label_accuracy"}
_RUN_V2 = {key: spec for key, spec in _RUN.items() if key != "rounds"}
_DOCUMENT_V2 = {
    **_DOCUMENT_V3,
    "provenance": {
        **{key: spec for key, spec in _DOCUMENT_V3["provenance"].items() if key not in ("code", "plugins")},
        "data": _DOCUMENT_V3["provenance"]["data"].spec,
        "model": _DOCUMENT["provenance"]["model"].spec,
        "training": _DOCUMENT["provenance"]["training"].spec,
    },
    "settings": [{
        **_SETTING_V3,
        "mechanism": {"name": str, "params": dict, "guarantee": {**_GUARANTEE, "relation": str}},
        "training": {key: spec for key, spec in _TRAINING.items() if key != "protocol"},
        "accounting": {"rounds": int, "delta": _NUMBER, "composed": _Nullable(_RUN_V2), "refusal": _Nullable(str),
                       "composed_actual": _Nullable(_RUN_V2)},
        "inversion": _Nullable({
            "attack": str, "view": str, "round": int, "observation": str, "clients": [int], "model": str,
            "ssim_variant": str, "clean": _SCORES_V2, "defended": _SCORES_V2, "figure": str,
            "views": _Optional([{"name": str, "observation": str, "defended": _SCORES_V2}]),
        }),
        "distinguish": _Nullable({
            "trials": int, "confidence": _NUMBER, "tests": int, "claimed_epsilon": _Nullable(_NUMBER),
            "delta": _NUMBER, "epsilon_lower_bound": _NUMBER, "max_certifiable": _NUMBER, "worst_pair": str,
            "statistic": str, "verdict": str, "adaptive": _ADAPTIVE,
        }),
    }],
}

# a reproduction (command "reproduce"): a paper's tables, each row's number beside ours, the claimed orderings checked
_REPRODUCTION_ROW = {
    "table": str, "method": str, "column": str, "x": _Nullable(_FINITE), "paper": str, "line": int,
    "paper_value": _Nullable(_NUMBER), "paper_plus_minus": _Nullable(_FINITE), "per_seed": [_NUMBER], "mean": _NUMBER,
    "interval": _Nullable([_NUMBER]), "difference": _Nullable(_FINITE), "verdict": str, "why": _STRINGS,
    "setting": str,
}
_REPRODUCTION_TABLE = {
    "id": str, "caption": str, "metric": str, "metric_description": str, "kind": str, "dataset": _Nullable(str),
    "rounds": _Nullable(int), "x_label": str, "note": str, "rows": [_REPRODUCTION_ROW],
}
_ORDERING = {
    "id": str, "quote": str, "table": str, "metric": str,
    "pairs": [{"ordering": str, "column": str, "x": _Nullable(_FINITE), "above": str, "below": str,
               "difference": _NUMBER, "interval": _Nullable([_NUMBER]), "verdict": str,
               "gap": _Optional({"claimed": _FINITE, "tolerance": _FINITE, "verdict": str})}],
}
_REPRODUCTION_BODY = {
    "paper": {"id": str, "title": str, "sources": _STRINGS, "data": str, "data_note": str},
    "budget": {"name": str, "rounds": int, "seeds": [int], "why": str, "paper_rounds": int, "paper_seeds": int},
    "dataset": str, "confidence": _FINITE, "seconds": _FINITE, "not_comparable": _STRINGS,
    "tables": [_REPRODUCTION_TABLE], "orderings": [_ORDERING],
    "runs": _Map({"kind": str, "config": dict, "seeds": _Map(_MEASUREMENTS)}),
}
_REPRODUCTION = {
    **{key: _DOCUMENT[key] for key in ("schema", "schema_version", "command", "title", "config")},
    "provenance": {key: _DOCUMENT["provenance"][key] for key in
                   ("auditkit_version", "code", "plugins", "versions", "platform")},
    **_REPRODUCTION_BODY,
}
# what a run of each kind measured at each seed (``auditkit.reproduction.runner``)
_RUN_MEASUREMENTS = {
    "train": {"test_accuracy": _NUMBER, "snr_db": _Nullable(_NUMBER), "curve": [_NUMBER],
              "snr_curve": [_Nullable(_NUMBER)], "seconds": _FINITE},
    "attack": {"ssim": _NUMBER, "mse": _NUMBER, "psnr": _NUMBER, "bits_per_coordinate": _NUMBER, "seconds": _FINITE},
    "round_attack": {"round_mse": _NUMBER, "ssim": _NUMBER, "clean_mse": _NUMBER, "test_accuracy": _NUMBER,
                     "seconds": _FINITE},
    "distortion": {"distortion": _NUMBER, "mean_squared_error": _NUMBER, "seconds": _FINITE},
}
# version 2 of "auditkit.reproduction": its own header, and before the confidence and the tables' note and dataset
_REPRODUCTION_V2 = {
    "schema": str, "schema_version": int, "auditkit": str, **_REPRODUCTION_BODY,
    "confidence": _Optional(_FINITE),
    "tables": [{**_REPRODUCTION_TABLE, "note": _Optional(str), "dataset": _Optional(_Nullable(str))}],
}
_TYPE_NAMES = {str: "a string", int: "an integer", _NUMBER: "a number", dict: "an object", bool: "a boolean"}
_FILENAME_SAFE = re.compile(r"[A-Za-z0-9._-]+")
# MAX_NAME_CHARS (auditkit.config_bounds): the longest title, label, name or id, as a config may give them
MAX_STRING_CHARS = 100_000
"""The longest of any other string or key, free-form parts (``config``, ``params``) included."""
_NAME_KEYS = ("title", "label", "name", "id")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check(value: Any, spec: Any, where: str) -> None:
    """Raise ValueError naming ``where`` when ``value`` does not match ``spec``."""
    if isinstance(spec, _Nullable):
        if value is not None:
            _check(value, spec.spec, where)
        return
    if spec is _FINITE:
        if isinstance(value, bool) or not isinstance(value, _NUMBER) or not math.isfinite(value):
            raise ValueError(f"{where} must be a finite number, got {_short(value)}")
        return
    if isinstance(spec, _Map) or spec is _MEASUREMENTS:
        if not isinstance(value, dict):
            raise ValueError(f"{where} must be an object, got {type(value).__name__}")
        if isinstance(spec, _Map):  # measurements are checked by their run's kind (``_check_runs``)
            for key, item in value.items():
                _check(item, spec.spec, f"{where}[{_short(key)}]")
        return
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise ValueError(f"{where} must be an object, got {type(value).__name__}")
        for key, item in spec.items():
            if isinstance(item, _Optional):
                if key in value:
                    _check(value[key], item.spec, f"{where}.{key}")
                continue
            if key not in value:
                raise ValueError(f"{where}.{key} is missing")
            _check(value[key], item, f"{where}.{key}")
        return
    if isinstance(spec, list):
        if not isinstance(value, list):
            raise ValueError(f"{where} must be a list, got {type(value).__name__}")
        for i, item in enumerate(value):
            _check(item, spec[0], f"{where}[{i}]")
        return
    if spec is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where} must be a boolean, got {_short(value)}")
        return
    if isinstance(value, bool) or not isinstance(value, spec):
        raise ValueError(f"{where} must be {_TYPE_NAMES[spec]}, got {_short(value)}")
    if spec is str:
        _check_length(value, where, MAX_NAME_CHARS if where.rpartition(".")[2] in _NAME_KEYS else MAX_STRING_CHARS)


def _check_length(text: str, where: str, limit: int = MAX_STRING_CHARS) -> None:
    if len(text) > limit:
        raise ValueError(f"{where} must be at most {limit:,} characters, got {len(text):,}")


def _check_strings(doc: Any, where: str) -> None:
    """Every string and key of ``doc``, the free-form parts' included, at most ``MAX_STRING_CHARS`` long."""
    stack, seen = [(doc, where)], set()
    while stack:  # no recursion: the nesting is bounded on reading (``read_bounded``), not in a document built here
        value, at = stack.pop()
        if isinstance(value, str):
            _check_length(value, at)
        elif id(value) in seen:  # a container met before (shared, or a cycle in a document built in memory)
            continue
        elif isinstance(value, dict):
            seen.add(id(value))
            for key, item in value.items():
                _check_length(str(key), f"a key of {at}")
                stack.append((item, f"{at}.{key}" if str(key).isidentifier() else f"{at}[{_short(key)}]"))
        elif isinstance(value, list | tuple):
            seen.add(id(value))
            stack.extend((item, f"{at}[{i}]") for i, item in enumerate(value))


def _check_figure(figure: str | None, where: str) -> None:
    """A reconstruction grid's path must stay inside the results folder."""
    if figure is None:
        return
    path = PurePosixPath(figure)
    if path.is_absolute() or ".." in path.parts or "\\" in figure:
        raise ValueError(f"{where} must be a relative path inside the results folder, got {_short(figure)}")


def _check_settings(settings: list[dict[str, Any]]) -> None:
    """At least one setting; ids unique and filename-safe; capability values known; figure paths inside the
    results folder."""
    if not settings:
        raise ValueError("results.settings must hold at least one setting")
    seen: set[str] = set()
    for i, setting in enumerate(settings):
        if not _FILENAME_SAFE.fullmatch(setting["id"]) or setting["id"] in seen:
            raise ValueError(f"results.settings[{i}].id must be unique and filename-safe, got {_short(setting['id'])}")
        seen.add(setting["id"])
        for name, value in setting["mechanism"]["capabilities"].items():
            if value not in CAPABILITY_VALUES:
                raise ValueError(f"results.settings[{i}].mechanism.capabilities.{name} must be one of "
                                 f"{', '.join(map(repr, CAPABILITY_VALUES))}, got {_short(value)}")
        for section in ("inversion", "probe"):
            if setting[section] is not None:
                _check_figure(setting[section]["figure"], f"results.settings[{i}].{section}.figure")


def _check_header(doc: Any, version: int) -> None:
    if not isinstance(doc, dict):
        raise ValueError(f"results must be a JSON object, got {type(doc).__name__}")
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"schema must be {SCHEMA!r}, got {_short(doc.get('schema'))}")
    if doc.get("schema_version") != version:
        raise ValueError(f"schema_version must be {version}, got {_short(doc.get('schema_version'))}")


def _one_of(value: str, allowed: tuple[str, ...], where: str) -> None:
    if value not in allowed:
        raise ValueError(f"{where} must be one of {', '.join(map(repr, allowed))}, got {_short(value)}")


def _check_interval(interval: list[float] | None, where: str) -> None:
    if interval is not None and len(interval) != 2:
        raise ValueError(f"{where} must be [low, high], got {len(interval)} numbers")


def _check_runs(runs: dict[str, Any], seeds: list[str]) -> None:
    """Each run's kind is known and it measured, at every seed of the budget, what a run of its kind measures."""
    for key, run in runs.items():
        where = f"reproduction.runs[{_short(key)}]"
        _one_of(run["kind"], RUN_KINDS, f"{where}.kind")
        if sorted(run["seeds"]) != sorted(seeds):
            raise ValueError(f"{where}.seeds must hold the budget's seeds {', '.join(seeds)}, got "
                             f"{_short(', '.join(run['seeds']))}")
        for seed, measured in run["seeds"].items():
            _check(measured, _RUN_MEASUREMENTS[run["kind"]], f"{where}.seeds[{seed!r}]")


def _check_reproduction(doc: dict[str, Any]) -> None:
    """What the layout cannot say: the confidence in (0, 1); the runs (``_check_runs``); unique table ids; each row
    in its table, with one value per seed, an interval of two numbers, a known verdict and the run of its table's
    kind that it reads; each ordering on a table of the document, its pairs' verdicts known."""
    if not 0 < doc["confidence"] < 1:
        raise ValueError(f"reproduction.confidence must be in (0, 1), got {_short(doc['confidence'])}")
    seeds = [str(seed) for seed in doc["budget"]["seeds"]]
    _check_runs(doc["runs"], seeds)
    tables: set[str] = set()
    for i, table in enumerate(doc["tables"]):
        where = f"reproduction.tables[{i}]"
        _one_of(table["kind"], RUN_KINDS, f"{where}.kind")
        if table["id"] in tables:
            raise ValueError(f"{where}.id must be unique, got {_short(table['id'])} twice")
        tables.add(table["id"])
        for j, row in enumerate(table["rows"]):
            at = f"{where}.rows[{j}]"
            if row["table"] != table["id"]:
                raise ValueError(f"{at}.table must be its table's id {table['id']!r}, got {_short(row['table'])}")
            if len(row["per_seed"]) != len(seeds):
                raise ValueError(f"{at}.per_seed must hold one value per seed ({len(seeds)}), got "
                                 f"{len(row['per_seed'])}")
            _check_interval(row["interval"], f"{at}.interval")
            _one_of(row["verdict"], ROW_VERDICTS, f"{at}.verdict")
            run = doc["runs"].get(row["setting"])
            if run is None or run["kind"] != table["kind"]:
                raise ValueError(f"{at}.setting must be the key of a {table['kind']} run in reproduction.runs, got "
                                 f"{_short(row['setting'])}")
    for i, ordering in enumerate(doc["orderings"]):
        where = f"reproduction.orderings[{i}]"
        if ordering["table"] not in tables:
            raise ValueError(f"{where}.table must be the id of one of reproduction.tables, got "
                             f"{_short(ordering['table'])}")
        for j, pair in enumerate(ordering["pairs"]):
            _check_interval(pair["interval"], f"{where}.pairs[{j}].interval")
            _one_of(pair["verdict"], ORDERING_VERDICTS, f"{where}.pairs[{j}].verdict")
            if "gap" in pair:
                _one_of(pair["gap"]["verdict"], ROW_VERDICTS[:2], f"{where}.pairs[{j}].gap.verdict")


def validate_results(doc: Any) -> None:
    """Raise ValueError (one line, naming the offending key) unless ``doc`` is a version 4 document of the
    ``auditkit/results`` schema: a results document (``command`` one of ``COMMANDS``: ``results.*`` names its keys)
    or a reproduction (``command`` "reproduce": ``reproduction.*``)."""
    _check_header(doc, SCHEMA_VERSION)
    if doc.get("command") == REPRODUCE:
        _check(doc, _REPRODUCTION, "reproduction")
        _check_strings(doc, "reproduction")
        _check_reproduction(doc)
        return
    _check(doc, _DOCUMENT, "results")
    _check_strings(doc, "results")
    if doc["command"] not in COMMANDS:
        raise ValueError(f"results.command must be one of {', '.join((*COMMANDS, REPRODUCE))}, got "
                         f"{_short(doc['command'])}")
    _check_settings(doc["settings"])


def file_name(doc: dict[str, Any]) -> str:
    """The file a document is written to: ``reproduction.json`` for a reproduction, else ``results.json``."""
    return REPRODUCTION_FILE if doc.get("command") == REPRODUCE else RESULTS_FILE


def document_path(path: str | Path) -> Path:
    """The document to read at ``path``: the file itself, or in a folder the ``results.json`` or
    ``reproduction.json`` it holds (ValueError in one line when it holds neither or both)."""
    path = Path(path)
    if not path.is_dir():
        return path
    found = [path / name for name in (RESULTS_FILE, REPRODUCTION_FILE) if (path / name).is_file()]
    if not found:
        raise ValueError(f"{path}: holds no {RESULTS_FILE} or {REPRODUCTION_FILE}")
    if len(found) > 1:
        raise ValueError(f"{path}: holds both {RESULTS_FILE} and {REPRODUCTION_FILE}; name the one to render")
    return found[0]


def _upgraded_run(run: dict[str, Any] | None, rounds: int) -> dict[str, Any] | None:
    return None if run is None else {**run, "rounds": rounds}


def _upgrade_v2(doc: Any) -> dict[str, Any]:
    """A version 2 document (checked as such: ValueError in one line) as version 3, a new document.

    What version 2 did not record is said to be unknown: provenance ``code`` "unknown (written by auditkit X as
    schema v2)", ``plugins`` [], every mechanism ``origin`` "built-in" (version 2 had no plugins), ``clip_norm``
    null, every capability "unknown", training ``protocol`` "unknown", the distinguishing ``setting`` and
    ``sampling`` "" and ``p_value`` null. Renamed or reworded: accounting ``delta`` -> ``composition_delta``
    (``backend`` "opacus-prv", version 2's only one; ``composed`` gains its ``rounds``), relations
    "replace-one" / "add-remove" / "none" -> "REPLACE_ONE" / "ADD_OR_REMOVE_ONE" / null (dp_accounting's names
    are kept as they are). The result is not validated here: ``load_results`` does that."""
    _check_header(doc, 2)
    _check(doc, _DOCUMENT_V2, "results")
    doc = copy.deepcopy(doc)
    provenance = doc["provenance"]
    provenance["code"] = f"unknown (written by auditkit {provenance['auditkit_version']} as schema v2)"
    provenance["plugins"] = []
    provenance["neighbouring_relations"] = [V2_RELATIONS.get(r, r) for r in provenance["neighbouring_relations"]
                                            if V2_RELATIONS.get(r, r) is not None]
    for setting in doc["settings"]:
        mechanism = setting["mechanism"]
        relation = mechanism["guarantee"]["relation"]
        mechanism["guarantee"]["relation"] = V2_RELATIONS.get(relation, relation)
        mechanism.update(origin="built-in", clip_norm=None, capabilities=dict.fromkeys(CAPABILITIES, "unknown"))
        setting["training"] = {"protocol": "unknown", **setting["training"]}
        accounting = setting["accounting"]
        setting["accounting"] = {
            "rounds": accounting["rounds"], "composition_delta": accounting["delta"], "backend": "opacus-prv",
            "composed": _upgraded_run(accounting["composed"], accounting["rounds"]), "refusal": accounting["refusal"],
            "composed_actual": _upgraded_run(accounting["composed_actual"], accounting["rounds"]),
        }
        if setting["distinguish"] is not None:
            setting["distinguish"].update(p_value=None, setting="", sampling="")
    doc["schema_version"] = 3
    return doc


def _upgrade_v3(doc: Any) -> dict[str, Any]:
    """A version 3 document (checked as such) as version 4: no probe and no identification tests were run
    (null), the data's ``source`` is "" (not recorded), and the headline ``verdict`` is computed from the
    distinguishing and adaptive tests it holds."""
    from auditkit.reports.headline import overall_verdict

    _check_header(doc, 3)
    _check(doc, _DOCUMENT_V3, "results")
    doc = copy.deepcopy(doc)
    if doc["provenance"]["data"] is not None:
        doc["provenance"]["data"]["source"] = ""
    for setting in doc["settings"]:
        setting.update(probe=None, identification=None, verdict=overall_verdict(setting["distinguish"], None))
    doc["schema_version"] = 4
    return doc


def _upgrade_reproduction_v2(doc: Any) -> dict[str, Any]:
    """A reproduction as ``auditkit reproduce`` wrote it before it joined this schema (``"auditkit.reproduction"``
    version 2, checked as such) as the current version, a new document: the header of this schema (command
    "reproduce", the title, the config the budget and paper record), a provenance saying what was not recorded
    (``code`` "unknown (written by auditkit X as auditkit.reproduction v2)", no versions, platform "unknown"), and
    what version 2 files could lack: the confidence (95 %, the only one then), each table's ``note`` ("") and
    ``dataset`` (the run's for tables that train, else null)."""
    if doc.get("schema_version") != 2:
        raise ValueError(f"schema_version of a {REPRODUCTION_V2_SCHEMA!r} document must be 2, got "
                         f"{_short(doc.get('schema_version'))}")
    _check(doc, _REPRODUCTION_V2, "reproduction")
    body = copy.deepcopy({key: doc[key] for key in _REPRODUCTION_V2 if key in doc})
    body.setdefault("confidence", 0.95)
    for table in body["tables"]:
        table.setdefault("note", "")
        table.setdefault("dataset", body["dataset"] if table["kind"] in ("train", "round_attack") else None)
    paper, budget, writer = body["paper"], body["budget"], body.pop("auditkit")
    del body["schema"], body["schema_version"]
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "command": REPRODUCE,
            "title": f"{paper['id']} ({budget['name']} budget)",
            "config": {"paper": paper["id"], "budget": budget["name"], "seeds": len(budget["seeds"]),
                       "confidence": body["confidence"]},
            "provenance": {"auditkit_version": writer, "plugins": [], "versions": {}, "platform": "unknown",
                           "code": f"unknown (written by auditkit {writer} as {REPRODUCTION_V2_SCHEMA} v2)"},
            **body}


def upgrade_results(doc: Any) -> dict[str, Any]:
    """A version 2 or 3 document (checked as such: ValueError in one line) as the current version, a new document
    (``_upgrade_v2``, then ``_upgrade_v3``); a reproduction of schema ``"auditkit.reproduction"`` version 2 as
    one of this schema (``_upgrade_reproduction_v2``). The result is not validated here: ``load_results`` does
    that."""
    if isinstance(doc, dict) and doc.get("schema") == REPRODUCTION_V2_SCHEMA:
        return _upgrade_reproduction_v2(doc)
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if version not in (2, 3):
        raise ValueError(f"schema_version must be 2 or 3 to upgrade, got {_short(version)}")
    if version == 2:
        doc = _upgrade_v2(doc)
    return _upgrade_v3(doc)


def _auditkit_version() -> str:
    try:
        return metadata.version("auditkit")
    except metadata.PackageNotFoundError:
        return "unknown"


def _unreadable(doc: dict[str, Any]) -> str:
    """One line for a document of a version this auditkit cannot read: which version, and how to regenerate it."""
    version = doc["schema_version"]
    provenance = doc.get("provenance") if isinstance(doc.get("provenance"), dict) else {}
    # version 1 kept the writer's version at the top; "auditkit.reproduction" as "auditkit"
    writer = doc.get("auditkit_version") or provenance.get("auditkit_version") or doc.get("auditkit")
    shown = isinstance(writer, str) and len(writer) <= 100 and writer.isprintable()
    written = f" (written by auditkit {writer})" if shown else ""
    command = REPRODUCE if doc.get("schema") == REPRODUCTION_V2_SCHEMA else doc.get("command")
    if command in ("train", "audit"):
        how = f"regenerate it with `auditkit {command}` on the config recorded in it"
    elif command == REPRODUCE:
        how = "regenerate it with `auditkit reproduce` on the paper, budget and seeds recorded in it"
    elif command in COMMANDS:
        how = f"regenerate it with `auditkit {command}` and the options recorded in its config"
    else:
        how = "regenerate it with the auditkit command that wrote it"
    newer = "; or upgrade auditkit" if isinstance(version, int) and version > SCHEMA_VERSION else ""
    return (f"schema version {_short(version)}{written} cannot be read by this auditkit ({_auditkit_version()}), "
            f"which reads versions 2 to {SCHEMA_VERSION}: {how} (the same config and seed give the same numbers)"
            f"{newer}")


def decode_non_finite(value: Any, spec: Any = None) -> Any:
    """Parsed JSON with the strings of ``NON_FINITE`` turned back into floats (a new object; ``value`` is kept):
    only where ``spec`` (a results schema spec, e.g. ``_DOCUMENT``) has a number, inside lists and nullable /
    optional values too, so a label or a free-form value (a ``dict`` spec: config, params, sweep) reading "NaN"
    stays a string; with ``spec`` None every such string anywhere, for auditkit's internal files."""
    if isinstance(spec, _Nullable | _Optional):
        return decode_non_finite(value, spec.spec)
    if spec is _MEASUREMENTS and isinstance(value, dict):  # numbers, nulls and lists of them only
        return decode_non_finite(value)
    if isinstance(spec, _Map) and isinstance(value, dict):
        return {key: decode_non_finite(item, spec.spec) for key, item in value.items()}
    if isinstance(value, str):
        return NON_FINITE.get(value, value) if spec is None or spec == _NUMBER else value
    if isinstance(value, dict) and spec is None:
        return {key: decode_non_finite(item) for key, item in value.items()}
    if isinstance(value, dict) and isinstance(spec, dict):
        return {key: decode_non_finite(item, spec[key]) if key in spec else item for key, item in value.items()}
    if isinstance(value, list) and (spec is None or isinstance(spec, list)):
        return [decode_non_finite(item, None if spec is None else spec[0]) for item in value]
    return value


def load_results(path: str | Path) -> dict[str, Any]:
    """Read a document of this schema, ``results.json`` or ``reproduction.json`` (results of versions 2 and 3, and a
    reproduction of schema "auditkit.reproduction" version 2, are upgraded in memory, ``upgrade_results``), and
    validate it as version 4; any problem is one ValueError line starting with the path. Non-finite numbers are read as written by
    ``dumps_strict`` ("NaN", "Infinity", "-Infinity" where the schema has a number) or, in files written before
    it, as bare NaN / Infinity (which Python's json module parses)."""
    path = Path(path)
    try:
        doc = read_bounded(path)  # within MAX_BYTES and MAX_DEPTH: a hostile file is one line, not a traceback
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    try:
        if isinstance(doc, dict) and doc.get("schema") == REPRODUCTION_V2_SCHEMA:
            if doc.get("schema_version") != 2:
                raise ValueError(_unreadable(doc))
            doc = upgrade_results(decode_non_finite(doc, _REPRODUCTION_V2))
        elif isinstance(doc, dict) and doc.get("schema") == SCHEMA:
            version = doc.get("schema_version")
            current = _REPRODUCTION if doc.get("command") == REPRODUCE else _DOCUMENT
            if version in (2, 3, SCHEMA_VERSION):  # each version's numbers where its own schema has them
                doc = decode_non_finite(doc, {2: _DOCUMENT_V2, 3: _DOCUMENT_V3, SCHEMA_VERSION: current}[version])
            if version in (2, 3):
                doc = upgrade_results(doc)
            elif isinstance(version, int) and not isinstance(version, bool) and version != SCHEMA_VERSION:
                raise ValueError(_unreadable(doc))
        validate_results(doc)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    return doc
