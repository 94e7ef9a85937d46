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

A recording may come from anyone, so reading it runs no code and trusts no type: recording.json is read within a size
and a nesting limit (``auditkit.strict_json.read_bounded``) and each round entry's fields are checked, the .pt
files are loaded with ``weights_only=True`` and their keys, dtypes and shapes checked; anything else is a
``RecordingError`` of one line naming the file and the field. The plugins its config names are never imported
(``auditkit.stages.recorded.recorded_config``).
"""
from __future__ import annotations

import fnmatch
import pickle
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from auditkit.folder import Folder, FolderError, Kind
from auditkit.strict_json import NON_FINITE, dumps_strict, read_bounded

__all__ = ["FORMAT", "Recording", "RecordingError", "load_recording", "write_manifest", "write_server_round",
           "write_truth"]

FORMAT = "auditkit-flower-recording"
VERSION = 1


class RecordingError(ValueError):
    """A folder that is not a readable recording; the message (one line) names the file and what is wrong."""


_SERVER_NAME = re.compile(r"round-(\d{4,})\.pt")
# a round entry's optional numbers (a metric not reported is "NaN", as dumps_strict writes it)
_ROUND_NUMBERS = ("lr", "train_loss", "test_loss", "test_accuracy")


def _server_name(round_: int) -> str:
    return f"server/round-{round_:04d}.pt"


def _truth_name(round_: int, client: int) -> str:
    return f"truth/round-{round_:04d}-client-{client}.pt"


def _save(root: str | Path, name: str, write: Any) -> None:
    """``write(file)`` into ``root/name`` atomically, inside ``root`` and without following a link in it
    (``auditkit.folder``)."""
    with Folder.open(root, create=True) as folder:
        folder.write(name, write)


def write_manifest(root: str | Path, config: dict[str, Any], rounds: list[dict[str, Any]]) -> None:
    """``recording.json``: the app's auditkit config and the per-round entries so far, as strict JSON (a metric not
    reported yet, NaN, is the string "NaN": ``auditkit.strict_json.dumps_strict``)."""
    text = dumps_strict({"format": FORMAT, "version": VERSION, "config": config, "rounds": rounds}, indent=1)
    _save(root, "recording.json", lambda file: file.write(text.encode("utf-8")))


def write_server_round(root: str | Path, round_: int, *, clients: list[int], global_before: torch.Tensor,
                       server: torch.Tensor, lr: float, aggregate: torch.Tensor | None = None) -> None:
    """What the server saw in one recorded round: ``server`` holds the decoded updates (S, P) of ``clients``;
    ``aggregate`` (P,), where the round released a noisy sum (Flower's central-DP wrappers), that sum."""
    view = {"round": round_, "clients": [int(c) for c in clients], "lr": float(lr),
            "global_before": global_before.detach().float().cpu().clone(),
            "server": server.detach().float().cpu().clone()}
    if aggregate is not None:
        view["aggregate"] = aggregate.detach().float().cpu().clone()
    _save(root, _server_name(round_), lambda file: torch.save(view, file))


def write_truth(root: str | Path, round_: int, client: int, *, update: torch.Tensor,
                images: torch.Tensor | None) -> None:
    """Client ``client``'s ground truth of round ``round_``: its true update and the images it trained on."""
    truth = {"update": update.detach().float().cpu().clone(),
             "images": None if images is None else images.detach().float().cpu().clone()}
    _save(root, _truth_name(round_, client), lambda file: torch.save(truth, file))


def _shown(value: Any) -> str:
    """A value of the recording in a message: its repr, cut to 40 characters (it may be anything)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_int(value: Any, minimum: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _number(value: Any) -> float | None:
    """A number of a round entry as a float ("NaN", "Infinity", "-Infinity" as written by dumps_strict), else None."""
    if isinstance(value, str):
        return NON_FINITE.get(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _round_entry(entry: Any, where: str) -> dict[str, Any]:
    """One entry of recording.json's ``rounds``, its types checked, its non-finite metrics decoded."""
    if not isinstance(entry, dict):
        raise RecordingError(f"{where} must be an object, got {type(entry).__name__}")
    out = dict(entry)
    if not _is_int(entry.get("round"), 1):
        raise RecordingError(f"{where}.round must be an integer >= 1, got {_shown(entry.get('round'))}")
    for key in ("clients", "bits"):
        values = entry.get(key)
        if not isinstance(values, list) or not all(_is_int(v) for v in values):
            raise RecordingError(f"{where}.{key} must be a list of integers >= 0, got {_shown(values)}")
    for key in _ROUND_NUMBERS:
        if key in entry:
            out[key] = _number(entry[key])
            if out[key] is None:
                raise RecordingError(f"{where}.{key} must be a number, got {_shown(entry[key])}")
    if "coordinates" in entry and not _is_int(entry["coordinates"]):
        raise RecordingError(f"{where}.coordinates must be an integer >= 0, got {_shown(entry['coordinates'])}")
    if "stats" in entry:
        stats = entry["stats"]
        if not isinstance(stats, dict) or any(_number(v) is None for v in stats.values()):
            raise RecordingError(f"{where}.stats must be an object of numbers, got {_shown(stats)}")
        out["stats"] = {key: _number(v) for key, v in stats.items()}
    return out


def _tensor(view: dict[str, Any], key: str, dims: int, where: str) -> torch.Tensor:
    """``view[key]``, a dense float32 tensor of ``dims`` dimensions (what the writers save), else RecordingError."""
    value = view.get(key)
    if not isinstance(value, torch.Tensor):
        raise RecordingError(f"{where}: {key} must be a tensor, got {type(value).__name__}")
    if value.dtype != torch.float32 or value.layout != torch.strided or value.dim() != dims:
        raise RecordingError(f"{where}: {key} must be a dense float32 tensor of {dims} dimension{'s' * (dims > 1)}, "
                             f"got {value.dtype} of shape {tuple(value.shape)}"
                             + ("" if value.layout == torch.strided else f" ({value.layout})"))
    return value


@dataclass(frozen=True)
class Recording:
    """A recording folder, read: the app's config, its rounds, and access to the recorded views (each file's keys,
    dtypes and shapes checked as it is read)."""

    root: Path
    config: dict[str, Any]
    rounds: list[dict[str, Any]]

    def _where(self, name: str) -> str:
        return f"--recorded {str(self.root)!r}: {name}"

    def where(self, round_: int, client: int | None = None) -> str:
        """How messages name the server view of ``round_`` (or ``client``'s ground truth): "--recorded 'DIR':
        server/round-0001.pt"."""
        return self._where(_server_name(round_) if client is None else _truth_name(round_, client))

    def _kind(self, name: str) -> Kind:
        try:
            with Folder.open(self.root) as folder:
                return folder.kind(name)
        except FolderError as err:
            raise RecordingError(f"--recorded: {err}") from None

    @property
    def recorded_rounds(self) -> list[int]:
        if self._kind("server") is not Kind.FOLDER:
            return []
        rounds = []
        with Folder.open(self.root) as folder:
            names = [name for name, _ in folder.entries("server") if fnmatch.fnmatchcase(name, "round-*.pt")]
        for name in names:
            match = _SERVER_NAME.fullmatch(name)
            if match is None or f"server/{name}" != _server_name(int(match.group(1))):
                raise RecordingError(f"{self._where('server/' + name)} is not named as a recorded round "
                                     "(server/round-NNNN.pt, e.g. round-0001.pt)")
            rounds.append(int(match.group(1)))
        return sorted(rounds)

    def _load(self, name: str) -> Any:
        """A .pt file of the recording, read without running code (``weights_only``) and without following a link
        in the recording's folder (``auditkit.folder``); unreadable: RecordingError."""
        if self._kind(name) is not Kind.FILE:
            link = self._kind(name) is Kind.LINK
            raise RecordingError(f"{self._where(name)} is {'a symbolic link (never followed)' if link else 'not a file'}")
        try:
            with Folder.open(self.root) as folder, folder.open_read(name) as file:
                if not zipfile.is_zipfile(file):
                    raise RecordingError(f"{self._where(name)} is not a whole torch file (torch.save writes a zip "
                                         "archive, and this is not one)")
                file.seek(0)
                return torch.load(file, weights_only=True, map_location="cpu")
        except RecordingError:
            raise
        except pickle.UnpicklingError as err:  # what weights_only refuses: a global it would import, or garbage
            if "global" in str(err).lower():
                raise RecordingError(f"{self._where(name)} holds objects other than tensors and plain data, which "
                                     "auditkit never loads (they would run code)") from None
            raise RecordingError(f"{self._where(name)} is not a readable torch file (its pickled data is damaged)"
                                 ) from None
        except Exception as err:  # noqa: BLE001 -- any failure to read foreign bytes is the file's
            reason = str(err).strip().split(". ")[0].splitlines()
            raise RecordingError(f"{self._where(name)} is not a readable torch file ({type(err).__name__}"
                                 f"{': ' + reason[0][:120] if reason else ''})") from None

    def server_round(self, round_: int) -> dict[str, Any]:
        """The server view of ``round_``: round, clients, lr, global_before (P,), server (S, P), aggregate (P,)."""
        name = _server_name(round_)
        if self._kind(name) is Kind.MISSING:
            raise RecordingError(f"recording {str(self.root)!r} holds no server view of round {round_} "
                                 f"(recorded rounds: {self.recorded_rounds or 'none'})")
        view, where = self._load(name), self._where(name)
        if not isinstance(view, dict):
            raise RecordingError(f"{where} must hold a dict of the round's view, got {type(view).__name__}")
        if view.get("round") != round_ or not _is_int(view.get("round")):
            raise RecordingError(f"{where}: round must be {round_}, the file's round, got {_shown(view.get('round'))}")
        clients = view.get("clients")
        if not isinstance(clients, list) or not all(_is_int(c) for c in clients) or len(set(clients)) < len(clients):
            raise RecordingError(f"{where}: clients must be a list of distinct integers >= 0, got {_shown(clients)}")
        lr = view.get("lr")
        if not isinstance(lr, float | int) or isinstance(lr, bool):  # NaN: an app that sent no "lr"
            raise RecordingError(f"{where}: lr must be a number, got {_shown(lr)}")
        size = _tensor(view, "global_before", 1, where).numel()
        server = _tensor(view, "server", 2, where)
        if tuple(server.shape) != (len(clients), size):
            raise RecordingError(f"{where}: server must hold one row of {size} values (global_before's) per client "
                                 f"({len(clients)}), got shape {tuple(server.shape)}")
        if "aggregate" in view and _tensor(view, "aggregate", 1, where).numel() != size:
            raise RecordingError(f"{where}: aggregate must hold {size} values (global_before's), got "
                                 f"{view['aggregate'].numel()}")
        return view

    def truth(self, round_: int, client: int) -> dict[str, Any] | None:
        """Client ``client``'s ground truth of ``round_`` (update (P,), images (N, C, H, W) or None); None if absent."""
        name = _truth_name(round_, client)
        if self._kind(name) is Kind.MISSING:
            return None
        truth, where = self._load(name), self._where(name)
        if not isinstance(truth, dict):
            raise RecordingError(f"{where} must hold a dict of the client's ground truth, got {type(truth).__name__}")
        _tensor(truth, "update", 1, where)
        if truth.get("images") is not None:
            _tensor(truth, "images", 4, where)
        return truth


def load_recording(root: str | Path) -> Recording:
    """Read ``root``; a RecordingError (one line) when it is not a recording of this format."""
    root = Path(root)
    manifest = root / "recording.json"
    if not manifest.is_file():
        raise RecordingError(f"--recorded {str(root)!r} holds no recording.json (write one with "
                             "auditkit.flower.AuditStrategy(record_dir=...))")
    try:
        data = read_bounded(manifest)
    except ValueError as err:
        raise RecordingError(f"--recorded {str(root)!r}: recording.json is {err}") from None
    if not isinstance(data, dict):
        raise RecordingError(f"--recorded {str(root)!r}: recording.json must hold a JSON object, got "
                             f"{'an array' if isinstance(data, list) else _shown(data)}")
    if data.get("format") != FORMAT:
        raise RecordingError(f"--recorded {str(root)!r}: recording.json is not an {FORMAT} file")
    if data.get("version") != VERSION:
        raise RecordingError(f"--recorded {str(root)!r}: recording version {_shown(data.get('version'))} is not the "
                             f"supported {VERSION}")
    where = f"--recorded {str(root)!r}: recording.json"
    if not isinstance(data.get("config"), dict):
        raise RecordingError(f"{where}: config must be an object, got {_shown(data.get('config'))}")
    if not isinstance(data.get("rounds"), list):
        raise RecordingError(f"{where}: rounds must be a list, got {_shown(data.get('rounds'))}")
    # the rounds hold numbers only: each "NaN" / "Infinity" / "-Infinity" there is a non-finite metric; the config
    # is the user's (a label may read "NaN") and holds finite numbers only (auditkit.config checks them)
    rounds = [_round_entry(entry, f"{where}: rounds[{i}]") for i, entry in enumerate(data["rounds"])]
    recording = Recording(root, data["config"], rounds)
    if not recording.recorded_rounds:
        raise RecordingError(f"--recorded {str(root)!r} holds no recorded round (server/round-*.pt): set "
                             "record_rounds to rounds the app runs")
    return recording
