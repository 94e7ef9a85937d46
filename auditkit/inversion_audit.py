"""Gradient inversion against the view an adversary really has, always beside the clean attack.

The papers' setting (JoPEQ IV-B, after iDLG): one client holds one image, computes the gradient of the
cross-entropy on it with the attacked model and sends it through the mechanism; the server (threat model
``server``) sees the decoded update x_hat = decode(encode(g, s), s) and inverts it. :func:`run_inversion`
does this for N images at once, attacks the clean gradients and the server's view with the *same* attack,
settings and initialisation, and scores both (:func:`attacks.metrics.score`), so a weak "defence" cannot
hide behind a mis-tuned attack.

:func:`attack_recorded_view` attacks a real FL run instead (what ``auditkit audit`` does): the server's decoded
updates of some clients at a checkpoint round (a :class:`RecordedView`), inverted with the global model of that
round, either as one gradient -x/(eta tau) or by unrolling the client's tau local SGD steps (Inverting Gradients'
FedAvg variant), beside the same attack on the clients' true updates; reconstructions are scored against the
images the clients really trained on.

:func:`defence_curve` sweeps mechanisms and noise levels and reports SSIM / MSE against the measured
distortion of the server's view, the axis on which mechanisms of different kinds can be compared.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import attacks
import mechanisms
from attacks import metrics
from auditkit.data import load_dataset
from auditkit.data.embedded import image_patch_sources, load_image_patches
from auditkit.models import MODEL_NAMES, create_model
from auditkit.pipeline import write_atomic
from auditkit.stage_store import replace_atomically
from mechanisms.randomness import derive_seed

INVERSION_SCHEMA = "auditkit/inversion"
CURVE_SCHEMA = "auditkit/defence-curve"
SCHEMA_VERSION = 1
SOURCES = ("patches", "digits")
PATCH_CLASSES = 10  # the patches carry no class: image i is given class i mod 10 (the attack must recover it)


@dataclass(frozen=True)
class Targets:
    """The images the clients hold: N x C x H x W in [0, 1], their classes, and where each came from."""

    images: torch.Tensor
    labels: torch.Tensor
    names: tuple[str, ...]
    source: str

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return tuple(self.images.shape[1:])  # type: ignore[return-value]


def load_targets(source: str = "patches", count: int = 8, *, seed: int = 0) -> Targets:
    """``count`` target images: natural RGB patches (3 x 32 x 32, the papers' CIFAR-shaped setting; classes
    i mod 10) or the embedded digits' test split (1 x 28 x 28, their true classes), deterministic in ``seed``."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"images must be an integer >= 1, got {count!r}")
    if source == "patches":
        images = load_image_patches(count, seed=seed)
        names = tuple(f"{s.photo}@({s.top},{s.left})" for s in image_patch_sources(count, seed=seed))
        return Targets(images, torch.arange(count) % PATCH_CLASSES, names, source)
    test = load_dataset("digits").test
    if count > len(test.y):
        raise ValueError(f"images must be at most {len(test.y)} for source digits, got {count}")
    order = torch.randperm(len(test.y), generator=torch.Generator().manual_seed(seed))[:count]
    return Targets(test.x[order], test.y[order], tuple(f"digits-test[{int(i)}]" for i in order), source)


def attacked_model(name: str, input_shape: Sequence[int], *, seed: int, num_classes: int = 10) -> nn.Module:
    """The attacked model with weights drawn from ``seed`` (the LeNet's U(-0.5, 0.5), as DLG)."""
    if name not in MODEL_NAMES:
        raise ValueError(f"model must be one of {', '.join(MODEL_NAMES)}, got {name!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "inversion-model"))
        return create_model(name, input_shape=tuple(input_shape), num_classes=num_classes)


def server_view(
    mechanism: mechanisms.Mechanism, gradients: torch.Tensor, *, seed: int
) -> tuple[torch.Tensor, list[int]]:
    """Row i: decode(encode(g_i, s_i), s_i) with s_i keyed by (seed, i); and the message size in bits."""
    decoded, bits = [], []
    for i, row in enumerate(gradients.detach().cpu().float()):
        shared = derive_seed(seed, "inversion-client", i)
        message = mechanism.encode(row, shared)
        decoded.append(mechanism.decode(message, shared))
        bits.append(int(message.num_bits))
    return torch.stack(decoded).to(gradients.dtype), bits


def _attack(attack: str, model: nn.Module, observed: torch.Tensor, targets: Targets, label_given: bool,
            settings: Mapping[str, Any], compat: str | None) -> dict[str, Any]:
    result = attacks.invert(attack, model, observed, input_shape=targets.input_shape,
                            label=targets.labels if label_given else None, **settings)
    scores = metrics.score(result.images, targets.images, labels=result.labels, true_labels=targets.labels,
                           compat=compat)
    return {
        "scores": scores,
        "labels": result.labels.tolist(),
        "label_source": result.label_source,
        "matching_loss": result.loss.tolist(),
        "steps": result.steps.tolist(),
        "wall_time": result.wall_time,
        "images_per_second": len(targets.labels) / result.wall_time if result.wall_time > 0 else math.inf,
        "reconstructions": result.images,
    }


def run_inversion(
    attack: str = "idlg",
    *,
    mechanism: str = "none",
    params: Mapping[str, Any] | None = None,
    model: str = "lenet",
    images: int = 8,
    source: str = "patches",
    seed: int = 0,
    label_given: bool = False,
    compat: str | None = None,
    settings: Mapping[str, Any] | None = None,
    clean: bool = True,
) -> dict[str, Any]:
    """Attack N single-image clients' gradients, clean and as the server sees them after ``mechanism``.

    Returns a JSON-friendly document (schema ``auditkit/inversion``) with both runs' scores (SSIM, MSE,
    PSNR, label accuracy), the message sizes and every setting, plus ``"tensors"`` (ground truth and both
    reconstructions, for figures; drop it before writing JSON). ``clean=False`` skips the clean attack
    (``"clean": None``), for callers that run it once for many mechanisms on the same images and settings.
    """
    if attack not in attacks.INVERSION_ATTACKS:
        raise ValueError(f"attack must be one of {', '.join(attacks.INVERSION_ATTACKS)}, got {attack!r}")
    configured = mechanisms.create(mechanism, **dict(params or {}))
    targets = load_targets(source, images, seed=seed)
    settings = {"seed": seed, **dict(settings or {})}
    attacks.preset_settings(attack)  # validates the name before any work
    net = attacked_model(model, targets.input_shape, seed=seed)
    clean_gradients = attacks.per_image_gradients(net, targets.images, targets.labels)
    defended_gradients, bits = server_view(configured, clean_gradients, seed=seed)
    reference = _attack(attack, net, clean_gradients, targets, label_given, settings, compat) if clean else None
    defended = _attack(attack, net, defended_gradients, targets, label_given, settings, compat)
    error = (defended_gradients - clean_gradients).float()
    guarantee = configured.guarantee()
    return {
        "schema": INVERSION_SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "attack": attack,
        "view": "server",
        "observation": "one image's gradient (one local step, batch 1), decoded by the server",
        "model": {"name": model, "num_params": int(clean_gradients.shape[1]), "init_seed": seed},
        "targets": {"source": source, "names": list(targets.names), "labels": targets.labels.tolist(),
                    "label_given": label_given},
        "mechanism": {"name": mechanism, "params": dict(configured.params),
                      "guarantee_summary": guarantee.summary(), "guarantee": guarantee.to_dict()},
        "settings": {**attacks.preset_settings(attack), **settings},
        "distortion": {"error_std": float(error.std()), "gradient_std": float(clean_gradients.float().std()),
                       "relative_error": float(error.norm() / clean_gradients.float().norm())},
        "bits_per_coordinate": float(np.mean(bits)) / clean_gradients.shape[1],
        "clean": None if reference is None else {k: v for k, v in reference.items() if k != "reconstructions"},
        "defended": {k: v for k, v in defended.items() if k != "reconstructions"},
        "tensors": {"truth": targets.images, "clean": None if reference is None else reference["reconstructions"],
                    "defended": defended["reconstructions"]},
    }


@dataclass(frozen=True)
class RecordedView:
    """What the pipeline keeps of one checkpoint round for inversion: the server's decoded updates of the
    attacked clients, their true updates (ground truth, never shown to the attacker), the images each client
    trained on in that round (S x tau*B x C x H x W), the global model before the round, lr and tau.

    ``extra``: further server-side estimates of the same updates, attacked beside ``server`` (a protocol whose
    server view is not the decoded updates, MSP-FL's consensus transcript: ``server`` is the strongest estimate
    of its registered update estimator, ``attacks.update_estimator_for``); ``observations`` says what each of
    ``extra`` observes.
    """

    round: int
    clients: list[int]
    global_before: torch.Tensor
    server: torch.Tensor
    truth: torch.Tensor
    images_used: torch.Tensor
    lr: float
    tau: int
    extra: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)
    observations: dict[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_observation(cls, observation: Any, train_images: torch.Tensor, count: int,
                         round_protocol: str = "uplink") -> "RecordedView":
        """The first ``count`` clients of an ``auditkit.fl.simulation.Observation`` of a run whose mechanism has
        ``round_protocol``; a protocol with an update estimator has its server view turned into estimates."""
        count = min(count, len(observation.clients))
        used = observation.ground_truth["batch_indices"][:count].reshape(count, -1)
        server = observation.views["server"]
        extra: dict[str, torch.Tensor] = {}
        observations: dict[str, str] = {}
        estimator = attacks.update_estimator_for(round_protocol)
        if estimator is not None:
            estimates = estimator(server, observation.global_before)
            server = estimates.pop(next(iter(estimates)))[0]  # the strongest estimate is the defended view
            extra = {name: e[:count].detach().float().clone() for name, (e, _) in estimates.items()}
            observations = {name: observed for name, (_, observed) in estimates.items()}
        return cls(
            round=observation.round, clients=list(observation.clients[:count]),
            global_before=observation.global_before.detach().float().clone(),
            server=server[:count].detach().float().clone(),
            truth=observation.ground_truth["updates"][:count].detach().float().clone(),
            images_used=train_images[used].detach().float().clone(), lr=observation.lr, tau=observation.tau,
            extra=extra, observations=observations,
        )

    def to_tensors(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_tensors(cls, saved: Mapping[str, Any]) -> "RecordedView":
        return cls(**saved)


def _best_matches(reconstructions: torch.Tensor, images_used: torch.Tensor) -> torch.Tensor:
    """For each client, the image it trained on that its reconstruction resembles most (SSIM)."""
    best = []
    for rec, candidates in zip(reconstructions, images_used):
        similarity = metrics.ssim(rec[None].expand_as(candidates), candidates)
        best.append(candidates[int(np.argmax(similarity))])
    return torch.stack(best)


def attack_recorded_view(
    view: RecordedView,
    model: nn.Module,
    *,
    attack: str = "inverting_gradients",
    unroll: bool = False,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Invert the server's decoded updates of ``view`` and, with the same attack and settings, the clients'
    true updates (the clean reference); one reconstruction per client, batched over clients.

    ``model``: the architecture; its weights are set to the round's global model. ``unroll=False`` attacks
    -x/(lr tau) as one gradient (exact for tau = 1, batch 1); ``unroll=True`` matches the update by unrolling
    tau SGD steps on one dummy image. Each reconstruction is scored against the image of its client's round
    that it matches best (ground truth the attacker never sees).
    """
    from torch.nn.utils import vector_to_parameters

    vector_to_parameters(view.global_before.clone(), model.parameters())
    settings = dict(settings or {})
    if unroll:
        settings.update(observation="update", local_steps=view.tau, local_lr=view.lr)
    shape = tuple(view.images_used.shape[2:])
    runs: dict[str, Any] = {}
    for name, updates in (("clean", view.truth), ("defended", view.server), *view.extra.items()):
        observed = updates if unroll else attacks.update_to_gradient(updates, lr=view.lr, local_steps=view.tau)
        result = attacks.invert(attack, model, observed, input_shape=shape, **settings)
        truth = _best_matches(result.images, view.images_used)
        runs[name] = {"scores": metrics.score(result.images, truth), "labels": result.labels.tolist(),
                      "wall_time": result.wall_time, "reconstructions": result.images, "truth": truth}
    return {
        "attack": attack,
        "round": view.round,
        "clients": view.clients,
        "view": "server",
        "observation": "update, unrolled over tau local steps" if unroll else "-update / (lr tau) as one gradient",
        "tau": view.tau,
        "lr": view.lr,
        "images_per_client": int(view.images_used.shape[1]),
        "settings": {**attacks.preset_settings(attack), **settings},
        "extra": list(view.extra),
        **runs,
    }


# ------------------------------------------------------------------ defence curve

DEFAULT_CURVE: dict[str, list[dict[str, Any]]] = {
    # noise straight on the gradient (clip far above any LeNet gradient norm, ~30: no clipping)
    "gaussian": [{"sigma": s, "clip": 1e6} for s in (1e-3, 1e-2, 3e-2, 1e-1)],
    "laplace": [{"scale": s, "clip": 1e9} for s in (1e-3, 1e-2, 3e-2, 1e-1)],
    # SDQ on [-2, 2] (LeNet gradient entries stay below 1.7): fine R = 8 to coarse R = 2
    "sdq": [{"bits": r, "support": 2.0} for r in (8, 4, 2)],
    # JoPEQ at the paper's R = 8 over eps (b = 2/eps in the scaled domain)
    "jopeq-laplace": [{"eps": e, "bits": 8} for e in (30.0, 10.0, 3.0, 1.0)],
    # the exact Laplace mechanism on JoPEQ's scaled coordinates: JoPEQ's "Laplace mechanism" baseline
    "jopeq-exact": [{"target": "laplace", "eps": e} for e in (30.0, 10.0, 3.0, 1.0)],
}


def defence_curve(
    attack: str = "idlg",
    *,
    curve: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    model: str = "lenet",
    images: int = 8,
    source: str = "patches",
    seed: int = 0,
    label_given: bool = True,
    settings: Mapping[str, Any] | None = None,
    on_point: Callable[[str, Mapping[str, Any], dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """SSIM and MSE of ``attack`` against the server's view for every (mechanism, params) of ``curve``.

    Every point attacks the same images with the same settings and initialisation; the clean attack is
    run once (with ``mechanism="none"``, whose server view is the clean gradient) and reported as the
    reference. x-axis: the measured std of the server view's error per
    coordinate (decoded - true gradient), beside each point's own parameters. ``label_given`` defaults to
    JoPEQ's evaluation (the attacker is handed the true label).
    """
    curve = DEFAULT_CURVE if curve is None else curve
    for name, points in curve.items():
        for params in points:
            mechanisms.create(name, **dict(params))  # every point validated before the first attack
    started = time.perf_counter()
    reference = run_inversion(attack, model=model, images=images, source=source, seed=seed,
                              label_given=label_given, settings=settings, clean=False)
    clean = reference["defended"]["scores"]  # mechanism "none": the server sees the clean gradient
    series: dict[str, list[dict[str, Any]]] = {}
    for name, points in curve.items():
        series[name] = []
        for params in points:
            run = run_inversion(attack, mechanism=name, params=params, model=model, images=images, source=source,
                                seed=seed, label_given=label_given, settings=settings, clean=False)
            point = {
                "params": dict(params),
                "guarantee_summary": run["mechanism"]["guarantee_summary"],
                "error_std": run["distortion"]["error_std"],
                "bits_per_coordinate": run["bits_per_coordinate"],
                "ssim_mean": run["defended"]["scores"]["ssim_mean"],
                "mse_mean": run["defended"]["scores"]["mse_mean"],
                "psnr_mean": run["defended"]["scores"]["psnr_mean"],
                "ssim": run["defended"]["scores"]["ssim"],
            }
            series[name].append(point)
            if on_point is not None:
                on_point(name, params, point)
    return {
        "schema": CURVE_SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "attack": attack,
        "view": "server",
        "model": reference["model"],
        "targets": reference["targets"],
        "settings": reference["settings"],
        "ssim_variant": clean["ssim_variant"],
        "clean": {"ssim_mean": clean["ssim_mean"], "mse_mean": clean["mse_mean"], "ssim": clean["ssim"],
                  "gradient_std": reference["distortion"]["gradient_std"]},
        "series": series,
        "seconds": time.perf_counter() - started,
    }


# ------------------------------------------------------------------ writing results


def write_inversion(document: dict[str, Any], out: str | Path) -> list[Path]:
    """``inversion.json`` (the document without its tensors) and ``inversion.png`` (rows: ground truth, clean
    reconstruction, defended reconstruction, each captioned with its SSIM) into ``out``."""
    from reports.figures import image_grid

    out = Path(out)
    tensors = document["tensors"]
    rows = {name: tensors[key].numpy() for name, key in
            (("ground truth", "truth"), ("clean", "clean"), (document["mechanism"]["name"], "defended"))}
    captions = {"clean": [f"SSIM {v:.2f}" for v in document["clean"]["scores"]["ssim"]],
                document["mechanism"]["name"]: [f"SSIM {v:.2f}" for v in document["defended"]["scores"]["ssim"]]}
    title = (f"{document['attack']} on {document['model']['name']}, server view after "
             f"{document['mechanism']['name']} ({document['mechanism']['guarantee_summary']})")
    png = replace_atomically(out / "inversion.png", lambda p: image_grid(rows, p, captions=captions, title=title))
    body = {k: v for k, v in document.items() if k != "tensors"}
    json_path = out / "inversion.json"
    write_atomic(json_path, json.dumps(body, indent=2, allow_nan=True) + "\n")
    return [json_path, png]


def write_curve(document: dict[str, Any], out: str | Path) -> list[Path]:
    """``curve.json`` and ``curve.png`` (SSIM and MSE against the server view's error std) into ``out``."""
    from reports.figures import defence_curves

    out = Path(out)
    paths = []
    for metric, label in (("ssim_mean", f"mean SSIM ({document['ssim_variant'].split('(')[0]})"),
                          ("mse_mean", "mean MSE per pixel-channel on [0, 1]")):
        series = {name: [(p["error_std"], p[metric]) for p in points] for name, points in document["series"].items()}
        png = out / f"curve_{metric.split('_')[0]}.png"
        paths.append(replace_atomically(png, lambda p, s=series, m=metric, y=label: defence_curves(
            s, p, xlabel="std of the server view's error per coordinate", ylabel=y, log_x=True,
            title=f"{document['attack']} vs noise ({len(document['targets']['names'])} images, "
                  f"{document['model']['name']})", reference=document["clean"][m], reference_label="clean attack")))
    json_path = out / "curve.json"
    write_atomic(json_path, json.dumps(document, indent=2, allow_nan=True) + "\n")
    return [json_path, *paths]
