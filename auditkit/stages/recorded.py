"""``auditkit audit --recorded DIR``: the audit of what a Flower app recorded (``auditkit.flower``), not of a run
auditkit trains itself.

The recording's config (seed, data, training, the mechanism, written by ``AuditStrategy``) replaces those tables
of the audit config; the audit's own tables (inversion, probe, identification, distinguish, accounting) come from
the CONFIG or preset given. The train stage reads the recording instead of training
(:func:`train_from_recording`): the server view of the inversion round with the clients' ground truth, the global
model the probe starts from, the per-round bits and metrics. Every later stage runs unchanged.

A recording is data and may come from anyone: the plugins its config names are never imported. The plugins are the
user's own (``--plugin``, a CONFIG's ``plugins``), and a recording naming one the user did not give is refused in one
line (:func:`recorded_config`). So is a recording whose ``training.model`` or ``data.dataset`` names a user's factory
(``my_models.py:make_net``, ``auditkit.factories``) that the CONFIG does not name: the CONFIG's own is what runs.
Nor does a recording say where data lives or whether to fetch it: its ``data.data_dir`` and ``data.download`` are
never used (:func:`unused_data_places` names them for a note), the user's CONFIG, ``--data-dir`` and ``--download``
decide. Its views are checked against the config's model before any stage runs (:func:`check_recording`).
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any

import torch

from auditkit import mechanisms
from auditkit import results
from auditkit.config import AuditConfig, ConfigError, from_dict
from auditkit.factories import parse_factory
from auditkit.fl.simulation import RoundRecord, SimulationResult
from auditkit.flower.recording import Recording, RecordingError
from auditkit.models import build_model, count_parameters
from auditkit.stages.inversion import MESSAGES_IN_CLEAR, RecordedView
from auditkit.stages.setting import build_mechanism, load_configured_dataset
from auditkit.stages.train import training_provenance

__all__ = ["DATA_PLACES", "check_recording", "recorded_config", "recording_fingerprint", "train_from_recording",
           "unused_data_places"]

# and the round protocols' tables; [dp_sgd] too: how the app's clients trained is the app's, never the audit config's.
# Not "plugins": code is imported only where the user names it, never where a recording does.
_APP_TABLES = ("seed", "data", "training", "dp_sgd", "mechanism", "mechanisms")


def _module(plugin: str) -> str:
    """The module a plugin is imported as: a .py file's stem (of a POSIX or Windows path), a dotted name itself."""
    name = re.split(r"[\\/]", plugin)[-1]
    return name[:-3] if name.endswith(".py") else name


def _same_plugin(named: str, given: str) -> bool:
    """Whether the user's plugin ``given`` is the one a recording ``named``: the same module name, or, where either
    is a .py file, the same last component ("my_mech.py" is "pkg.my_mech")."""
    a, b = _module(named), _module(given)
    either_file = named.endswith(".py") or given.endswith(".py")
    return a == b or (either_file and a.rpartition(".")[2] == b.rpartition(".")[2])


def _shown_plugin(plugin: str) -> str:
    """A plugin named by a recording, as a message shows it: a .py file by its file name, a module by its name."""
    name = re.split(r"[\\/]", plugin)[-1] if plugin.endswith(".py") else plugin
    return name if len(name) <= 100 and name.isprintable() and " " not in name else repr(name[:60])


def _check_named_plugins(recording: Recording, own: list[Any]) -> None:
    """Refuse a recording whose config names a plugin the user did not give (``own``): its code is never imported, and
    without it the recording's mechanism would not be registered."""
    named = recording.config.get("plugins", [])
    if not isinstance(named, list) or not all(isinstance(p, str) and p.strip() for p in named):
        raise RecordingError(f"--recorded {str(recording.root)!r}: recording.json: config.plugins must be a list of "
                             f"module names or .py files, got {repr(named)[:60]}")
    missing = [p for p in named if not any(isinstance(g, str) and _same_plugin(p, g) for g in own)]
    if missing:
        listed = ", ".join(_shown_plugin(p) for p in named)
        raise RecordingError(
            f"the recording {str(recording.root)!r} names plugin{'s' * (len(named) > 1)} ({listed}) and auditkit "
            "never imports code a recording names; if you trust "
            f"{'them' if len(missing) > 1 else 'it'}, pass {' '.join(f'--plugin {_shown_plugin(p)}' for p in missing)}")


DATA_PLACES = ("data_dir", "download")
"""The ``[data]`` keys that choose a folder to read and create and whether to download into it: the user's, never a
recording's (a recording from anyone would otherwise make folders where it likes and fetch from the network)."""


def unused_data_places(recording: Recording) -> dict[str, Any]:
    """The recording's ``data.data_dir`` and ``data.download`` that :func:`recorded_config` does not use, those it
    sets (a data_dir not null, download not false), for a note."""
    data = recording.config.get("data")
    if not isinstance(data, dict):
        return {}
    return {key: data[key] for key in DATA_PLACES if data.get(key) not in (None, False)}


def _data_table(recording: Recording, audit: dict[str, Any]) -> Any:
    """The recording's ``data`` table with :data:`DATA_PLACES` from ``audit`` (the user's) instead of its own."""
    data = recording.config.get("data", {})
    if not isinstance(data, dict):
        return data  # from_dict names the wrong type
    mine = audit.get("data") if isinstance(audit.get("data"), dict) else {}
    kept = {k: v for k, v in data.items() if k not in DATA_PLACES}
    return {**kept, **{k: mine[k] for k in DATA_PLACES if k in mine}}


_FACTORY_KEYS = (("training", "model"), ("data", "dataset"), ("data", "prefer"))


def _same_factory(named: str, given: str) -> bool:
    """Whether the user's factory ``given`` is the one a recording ``named``: the same function of the same module
    (``_same_plugin``'s rule: "my_models.py:make_net" is "pkg.my_models:make_net"), or the same entry point."""
    a, b = parse_factory(named), parse_factory(given)
    if a is None or b is None or a.function != b.function or (a.kind == "entry") != (b.kind == "entry"):
        return False
    if a.kind == "entry":
        return a.target == b.target
    return _same_plugin(a.target if a.kind == "file" else a.module, b.target if b.kind == "file" else b.module)


def _check_named_factories(recording: Recording, audit: dict[str, Any]) -> dict[tuple[str, str], str]:
    """Refuse a recording whose ``training.model``, ``data.dataset`` or ``data.prefer`` names a user's factory the
    user's own config (``audit``) does not name: a recording's code is never imported. Returns the user's spelling of
    each factory named by both (key -> the CONFIG's value), which replaces the recording's: the file imported is the
    user's, never a path a recording gives."""
    own: dict[tuple[str, str], str] = {}
    for table, key in _FACTORY_KEYS:
        section = recording.config.get(table)
        named = section.get(key) if isinstance(section, dict) else None
        if parse_factory(named) is None:
            continue
        mine = audit.get(table)
        given = mine.get(key) if isinstance(mine, dict) else None
        if not (isinstance(given, str) and _same_factory(named, given)):
            shown = _shown_plugin(named.rpartition(":")[0]) + ":" + named.rpartition(":")[2][:60]
            raise RecordingError(
                f"the recording {str(recording.root)!r} names the factory {table}.{key} = {shown!r} and auditkit never "
                f"imports code a recording names; if you trust it, name the same factory as {table}.{key} in your "
                "CONFIG")
        own[(table, key)] = given
    return own


def recorded_config(recording: Recording, audit: dict[str, Any], plugins: Iterable[str] = ()) -> AuditConfig:
    """The audit config of a recording: its app tables over the ``audit`` tables (a CONFIG or preset); the
    inversion and the probe attack the first recorded round that holds ground truth unless ``audit`` names one.
    The plugins are ``audit``'s and ``plugins`` (the command line's ``--plugin``), never the recording's: one that
    the recording names and the user did not give is a ``RecordingError``. ``data.data_dir`` and ``data.download``
    are ``audit``'s, never the recording's (:data:`DATA_PLACES`)."""
    app_tables = (*_APP_TABLES, *mechanisms.protocol_tables())
    own = list(audit.get("plugins", [])) if isinstance(audit.get("plugins"), list) else []
    own += [p for p in plugins if p not in own]
    _check_named_plugins(recording, own)
    factories = _check_named_factories(recording, audit)
    raw = {k: v for k, v in audit.items() if k not in app_tables}
    raw.update({k: v for k, v in recording.config.items() if k in app_tables})
    raw["data"] = _data_table(recording, audit)
    for (table, key), given in factories.items():
        raw[table] = {**raw[table], key: given}
    if own:
        raw["plugins"] = own
    if not isinstance(raw.get("training", {}), dict):
        raise RecordingError(f"--recorded {str(recording.root)!r}: recording.json: config.training must be an object, "
                             f"got {repr(raw['training'])[:60]}")
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


def _model_fit(config: AuditConfig) -> tuple[int, tuple[int, ...], str]:
    """The parameter count of the config's model on its data, the data's image shape, and how messages name them."""
    d = config.data
    dataset = load_configured_dataset(config, download=False)  # the audit has loaded it already
    model = build_model(config.training, dataset.input_shape, dataset.num_classes)
    return count_parameters(model), tuple(dataset.input_shape), f"{config.training.model} on {d.dataset}"


def check_recording(recording: Recording, config: AuditConfig) -> None:
    """The recording holds what the configured stages need, in the shapes of the config's model and data: each view
    read (the probe's round, and the inversion's with its ground truth) holds one value per model parameter, each
    client's images the data's shape (a one-line ConfigError or RecordingError otherwise, before any stage runs)."""
    size, shape, model = _model_fit(config)
    round_ = config.checkpoint_round
    for read in dict.fromkeys([config.probe_round, *([round_] if config.inversion.enabled else [])]):
        values = recording.server_round(read)["global_before"].numel()
        if values != size:
            raise RecordingError(f"{recording.where(read)}: global_before holds {values} values, but the config's "
                                 f"model ({model}) has {size} parameters: the recording is of another model or data")
    if config.inversion.enabled:
        if not _truth_clients(recording, round_):
            raise ConfigError(f"--recorded {str(recording.root)!r}: no client's ground truth for round {round_} "
                              "(truth/round-*.pt; give mechanism_mod the same record_dir and record_rounds, and "
                              "call attach_training_images in the train handler), or set inversion.enabled = false")
        truths = {c: recording.truth(round_, c) for c in _truth_clients(recording, round_)}
        if any(t["images"] is None for t in truths.values()):
            raise ConfigError(f"--recorded {str(recording.root)!r}: round {round_}'s ground truth has no images "
                              "(call attach_training_images in the train handler), or set inversion.enabled = false")
        first = next(iter(truths.values()))["images"].shape
        for client, truth in truths.items():
            if truth["update"].numel() != size:
                raise RecordingError(f"{recording.where(round_, client)}: update holds {truth['update'].numel()} "
                                     f"values, but the config's model ({model}) has {size} parameters")
            images = tuple(truth["images"].shape)
            if images[1:] != shape:
                raise RecordingError(f"{recording.where(round_, client)}: images must be of shape (N, "
                                     f"{', '.join(map(str, shape))}) ({model}), got {images}")
            if images != tuple(first):
                raise RecordingError(f"{recording.where(round_, client)}: images must hold as many images as every "
                                     f"other client's of round {round_} ({first[0]}), got {images[0]}")


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
