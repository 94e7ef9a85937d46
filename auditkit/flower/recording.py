"""A recording of what a Flower app's server saw, for ``auditkit audit --recorded DIR``.

``AuditStrategy`` writes it on the server, ``mechanism_mod`` the ground truth on the clients (a simulation on one
machine, or a shared folder); this module reads and writes the files and needs no Flower::

    DIR/recording.json                 format, the auditkit config the app declared (seed, data, training,
                                       mechanism; the recorded rounds are its training.checkpoints) and one
                                       entry per round (clients, uplink bits, loss and accuracy when reported,
                                       the round's statistics when there are: a DP wrapper's noise std)
    DIR/server/round-0001.pt           a recorded round: clients, the global model before it, the decoded
                                       updates (the server's view), the learning rate, and for an app on
                                       Flower's DP wrappers the noisy sum they released (the aggregate view)
    DIR/truth/round-0001-client-7.pt   client 7's true update and the images it trained on (never sent)

Every file is written to a temporary name and renamed, so an interrupted app leaves whole files only.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from auditkit.reports.files import replace_atomically
from auditkit.reports.results_schema import decode_non_finite, dumps_strict

__all__ = ["FORMAT", "Recording", "RecordingError", "load_recording", "write_manifest", "write_server_round",
           "write_truth"]

FORMAT = "auditkit-flower-recording"
VERSION = 1


class RecordingError(ValueError):
    """A folder that is not a readable recording; the message says what is missing."""


def _server_path(root: Path, round_: int) -> Path:
    return root / "server" / f"round-{round_:04d}.pt"


def _truth_path(root: Path, round_: int, client: int) -> Path:
    return root / "truth" / f"round-{round_:04d}-client-{client}.pt"


def _save(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(path, lambda tmp: torch.save(value, tmp))


def write_manifest(root: str | Path, config: dict[str, Any], rounds: list[dict[str, Any]]) -> None:
    """``recording.json``: the app's auditkit config and the per-round entries so far, as strict JSON (a metric not
    reported yet, NaN, is the string "NaN": ``auditkit.reports.results_schema.dumps_strict``)."""
    path = Path(root) / "recording.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = dumps_strict({"format": FORMAT, "version": VERSION, "config": config, "rounds": rounds}, indent=1)
    replace_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_server_round(root: str | Path, round_: int, *, clients: list[int], global_before: torch.Tensor,
                       server: torch.Tensor, lr: float, aggregate: torch.Tensor | None = None) -> None:
    """What the server saw in one recorded round: ``server`` holds the decoded updates (S, P) of ``clients``;
    ``aggregate`` (P,), where the round released a noisy sum (Flower's central-DP wrappers), that sum."""
    view = {"round": round_, "clients": [int(c) for c in clients], "lr": float(lr),
            "global_before": global_before.detach().float().cpu().clone(),
            "server": server.detach().float().cpu().clone()}
    if aggregate is not None:
        view["aggregate"] = aggregate.detach().float().cpu().clone()
    _save(_server_path(Path(root), round_), view)


def write_truth(root: str | Path, round_: int, client: int, *, update: torch.Tensor,
                images: torch.Tensor | None) -> None:
    """Client ``client``'s ground truth of round ``round_``: its true update and the images it trained on."""
    _save(_truth_path(Path(root), round_, client), {
        "update": update.detach().float().cpu().clone(),
        "images": None if images is None else images.detach().float().cpu().clone(),
    })


@dataclass(frozen=True)
class Recording:
    """A recording folder, read: the app's config, its rounds, and access to the recorded views."""

    root: Path
    config: dict[str, Any]
    rounds: list[dict[str, Any]]

    @property
    def recorded_rounds(self) -> list[int]:
        return sorted(int(p.stem.split("-")[1]) for p in (self.root / "server").glob("round-*.pt"))

    def server_round(self, round_: int) -> dict[str, Any]:
        path = _server_path(self.root, round_)
        if not path.is_file():
            raise RecordingError(f"recording {str(self.root)!r} holds no server view of round {round_} "
                                 f"(recorded rounds: {self.recorded_rounds or 'none'})")
        return torch.load(path, weights_only=True)

    def truth(self, round_: int, client: int) -> dict[str, Any] | None:
        path = _truth_path(self.root, round_, client)
        return torch.load(path, weights_only=True) if path.is_file() else None


def load_recording(root: str | Path) -> Recording:
    """Read ``root``; a RecordingError (one line) when it is not a recording of this format."""
    root = Path(root)
    manifest = root / "recording.json"
    if not manifest.is_file():
        raise RecordingError(f"--recorded {str(root)!r} holds no recording.json (write one with "
                             "auditkit.flower.AuditStrategy(record_dir=...))")
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RecordingError(f"--recorded {str(root)!r}: recording.json is not valid JSON ({err})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RecordingError(f"--recorded {str(root)!r}: recording.json is not an {FORMAT} file")
    if data.get("version") != VERSION:
        raise RecordingError(f"--recorded {str(root)!r}: recording version {data.get('version')!r} is not the "
                             f"supported {VERSION}")
    # the rounds hold numbers only: each "NaN" / "Infinity" / "-Infinity" there is a non-finite metric; the config
    # is the user's (a label may read "NaN") and holds finite numbers only (auditkit.config checks them)
    recording = Recording(root, data["config"], decode_non_finite(data["rounds"]))
    if not recording.recorded_rounds:
        raise RecordingError(f"--recorded {str(root)!r} holds no recorded round (server/round-*.pt): set "
                             "record_rounds to rounds the app runs")
    return recording
