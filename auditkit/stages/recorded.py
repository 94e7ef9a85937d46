"""``auditkit audit --recorded DIR``: the audit of what a Flower app recorded (``auditkit.flower``), not of a run
auditkit trains itself.

The recording's config (seed, data, training, the mechanism, written by ``AuditStrategy``) replaces those tables
of the audit config; the audit's own tables (inversion, probe, identification, distinguish, accounting) come from
the CONFIG or preset given. The train stage reads the recording instead of training
(:func:`train_from_recording`): the server view of the inversion round with the clients' ground truth, the global
model the probe starts from, the per-round bits and metrics. Every later stage runs unchanged.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import torch

from auditkit import mechanisms
from auditkit import results
from auditkit.config import AuditConfig, ConfigError, from_dict
from auditkit.fl.simulation import RoundRecord, SimulationResult
from auditkit.flower.recording import Recording
from auditkit.stages.inversion import MESSAGES_IN_CLEAR, RecordedView
from auditkit.stages.train import build_mechanism, training_provenance

__all__ = ["check_recording", "recorded_config", "recording_fingerprint", "train_from_recording"]

# and the round protocols' tables; [dp_sgd] too: how the app's clients trained is the app's, never the audit config's
_APP_TABLES = ("seed", "data", "training", "dp_sgd", "mechanism", "mechanisms", "plugins")


def recorded_config(recording: Recording, audit: dict[str, Any]) -> AuditConfig:
    """The audit config of a recording: its app tables over the ``audit`` tables (a CONFIG or preset); the
    inversion and the probe attack the first recorded round that holds ground truth unless ``audit`` names one."""
    app_tables = (*_APP_TABLES, *mechanisms.protocol_tables())
    raw = {k: v for k, v in audit.items() if k not in app_tables}
    raw.update({k: v for k, v in recording.config.items() if k in app_tables})
    raw["training"] = {**raw.get("training", {}), "checkpoints": recording.recorded_rounds,
                       "rounds": max([*recording.recorded_rounds, *(r["round"] for r in recording.rounds)])}
    for table in ("inversion", "probe"):
        section = dict(raw.get(table, {}))
        if section.get("round") not in recording.recorded_rounds:
            section.pop("round", None)
        raw[table] = section
    try:
        return from_dict(raw)
    except ConfigError as err:
        raise ConfigError(f"--recorded {str(recording.root)!r}: {err}") from None


def recording_fingerprint(recording: Recording) -> str:
    """A hash of every file of the recording (names and bytes): the train stage's key, so a resumed audit never
    reuses a stage computed from another recording."""
    digest = hashlib.sha256()
    for path in sorted(p for p in recording.root.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest.update(str(path.relative_to(recording.root)).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _truth_clients(recording: Recording, round_: int) -> list[int]:
    return [c for c in recording.server_round(round_)["clients"] if recording.truth(round_, c) is not None]


def check_recording(recording: Recording, config: AuditConfig) -> None:
    """The recording holds what the configured stages need (a one-line ConfigError otherwise)."""
    round_ = config.checkpoint_round
    if config.inversion.enabled:
        if not _truth_clients(recording, round_):
            raise ConfigError(f"--recorded {str(recording.root)!r}: no client's ground truth for round {round_} "
                              "(truth/round-*.pt; give mechanism_mod the same record_dir and record_rounds, and "
                              "call attach_training_images in the train handler), or set inversion.enabled = false")
        images = [recording.truth(round_, c)["images"] for c in _truth_clients(recording, round_)]
        if any(i is None for i in images):
            raise ConfigError(f"--recorded {str(recording.root)!r}: round {round_}'s ground truth has no images "
                              "(call attach_training_images in the train handler), or set inversion.enabled = false")


def _round_records(recording: Recording) -> list[RoundRecord]:
    nan = float("nan")
    out = []
    for r in recording.rounds:
        bits = [int(b) for b in r["bits"]]
        coordinates = max(int(r.get("coordinates", 0)), 1)
        out.append(RoundRecord(
            round=int(r["round"]), lr=float(r.get("lr", nan)), clients=[int(c) for c in r["clients"]],
            train_loss=float(r.get("train_loss", nan)), validation_loss=nan, validation_accuracy=nan,
            test_loss=float(r.get("test_loss", nan)), test_accuracy=float(r.get("test_accuracy", nan)),
            bits=bits, bits_per_coordinate=sum(bits) / (len(bits) * coordinates) if bits else 0.0,
            stats=dict(r.get("stats", {}))))
    return out


def train_from_recording(recording: Recording, config: AuditConfig, data_summary: dict[str, Any],
                         save_tensors: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The train stage's result from ``recording``: what ``Audit._train`` returns for a run it trained, with the
    tensors the inversion and probe stages read saved through ``save_tensors``."""
    inversion_round = config.checkpoint_round
    server = recording.server_round(inversion_round)
    tensors: dict[str, Any] = {}
    if config.inversion.enabled:
        chosen = _truth_clients(recording, inversion_round)[:config.inversion.targets]
        rows = [server["clients"].index(c) for c in chosen]
        truths = [recording.truth(inversion_round, c) for c in chosen]
        seen, extra, observations, view = server["server"][rows], {}, {}, "server"
        if "aggregate" in server:  # a central-DP app: its claim covers the noisy sum; the messages beside it
            mechanism = build_mechanism(config)
            clipped = torch.stack([mechanism.clip_update(row) for row in server["server"]])
            informed = mechanisms.informed_aggregate(server["aggregate"].double(), clipped)
            extra, observations = {"server": seen.float()}, {"server": MESSAGES_IN_CLEAR}
            seen, view = informed[rows].float(), "aggregate"
        tensors["view"] = RecordedView(
            round=inversion_round, clients=chosen, global_before=server["global_before"],
            server=seen, truth=torch.stack([t["update"] for t in truths]),
            images_used=torch.stack([t["images"] for t in truths]), lr=server["lr"], tau=config.training.tau,
            extra=extra, observations=observations, view=view,
        ).to_tensors()
    probe = recording.server_round(config.probe_round)
    tensors["probe"] = {"round": config.probe_round, "lr": probe["lr"], "weights": probe["global_before"]}
    save_tensors(tensors)
    rounds = _round_records(recording)
    result = SimulationResult(rounds=rounds, final_params=probe["global_before"], observations=[],
                              num_params=int(probe["global_before"].numel()))
    training = results.training_entry(result, mechanisms.mechanism_class(config.mechanism.name).protocol or "uplink")
    training["checkpoints"] = recording.recorded_rounds
    data = {**data_summary, "source": f"recorded by a Flower app ({recording.root.name}); {data_summary['source']}"}
    return {
        "training": training,
        "device": "flower app (recorded)",
        "provenance": training_provenance(
            config, data, result.num_params, rounds=rounds[-1].round if rounds else 0,
            sampling="as the Flower app trained (recorded); the audit reads its server view",
            backend=f"a Flower app's recording ({recording.root.name})",
        ),
        "inversion_round": inversion_round if config.inversion.enabled else None,
    }
