"""Gradient inversion against the view an adversary really has, always beside the clean attack.

The papers' setting (JoPEQ IV-B, after iDLG): one client holds one image, computes the gradient of the
cross-entropy on it with the attacked model and sends it through the mechanism; the server (threat model
``server``) sees the decoded update x_hat = decode(encode(g, s), s) and inverts it. :func:`run_inversion`
does this for N images at once, attacks the clean gradients and the server's view with the *same* attack,
settings and initialisation, and scores both (:func:`auditkit.attacks.metrics.score`), so a weak "defence" cannot
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
import hashlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from auditkit import attacks
from auditkit import mechanisms
from auditkit.attacks import metrics
from auditkit.data import load_dataset
from auditkit.data.embedded import image_patch_sources, load_image_patches
from auditkit.fl.memory import model_device, one_example_pass
from auditkit.fl.params import load_flat_parameters, trained_tensors
from auditkit.fl.spec import Normalisation
from auditkit.models import build_model, create_model
from auditkit.mechanisms.randomness import derive_seed
from auditkit.config import AuditConfig
from auditkit.stages.base import GridFigure
from auditkit.stages.setting import load_configured_dataset
from auditkit.attacks.analytic_inversion import first_linear
from auditkit.attacks.budget import budget_entry
from auditkit.attacks.gradient_inversion import iteration_settings
from auditkit.config_bounds import ConfigError
from auditkit import results

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
    """The attacked model (any form ``auditkit.models.create_model`` builds) with weights drawn from ``seed`` (the
    LeNet's U(-0.5, 0.5), as DLG)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, "inversion-model"))
        return create_model(name, input_shape=tuple(input_shape), num_classes=num_classes, where="model")


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
            settings: Mapping[str, Any], scoring: str) -> dict[str, Any]:
    result = attacks.invert(attack, model, observed, input_shape=targets.input_shape,
                            label=targets.labels if label_given else None, **settings)
    scores = metrics.score(result.images, targets.images, labels=result.labels, true_labels=targets.labels,
                           scoring=scoring)
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
    scoring: str = "standard",
    settings: Mapping[str, Any] | None = None,
    clean: bool = True,
) -> dict[str, Any]:
    """Attack N single-image clients' gradients, clean and as the server sees them after ``mechanism``.

    Returns a JSON-friendly run with both runs' scores (SSIM, MSE, PSNR, label accuracy), the message sizes and
    every setting, plus ``"tensors"`` (ground truth and both reconstructions, for figures) and ``"mechanism"``,
    the configured mechanism; ``attack_document`` turns it into a results document. The mechanism's private
    randomness is keyed by ``seed``. ``clean=False`` skips the clean attack (``"clean": None``), for callers that
    run it once for many mechanisms on the same images and settings.
    """
    if attack not in attacks.INVERSION_ATTACKS:
        raise ValueError(f"attack must be one of {', '.join(attacks.INVERSION_ATTACKS)}, got {attack!r}")
    configured = mechanisms.create(mechanism, private_seed=derive_seed(seed, "inversion-private"), **dict(params or {}))
    targets = load_targets(source, images, seed=seed)
    settings = {"seed": seed, **dict(settings or {})}
    attacks.preset_settings(attack)  # validates the name before any work
    net = attacked_model(model, targets.input_shape, seed=seed)
    check_attack_layers(attack, net, 10, where="attack", model_name=model, labels_given=label_given)
    clean_gradients = attacks.per_image_gradients(net, targets.images, targets.labels)
    defended_gradients, bits = server_view(configured, clean_gradients, seed=seed)
    reference = _attack(attack, net, clean_gradients, targets, label_given, settings, scoring) if clean else None
    defended = _attack(attack, net, defended_gradients, targets, label_given, settings, scoring)
    error = (defended_gradients - clean_gradients).float()
    return {
        "attack": attack,
        "view": "server",
        "observation": "one image's gradient (one local step, batch 1), decoded by the server",
        "model": {"name": model, "num_params": int(clean_gradients.shape[1]), "init_seed": seed},
        "targets": {"source": source, "names": list(targets.names), "labels": targets.labels.tolist(),
                    "label_given": label_given},
        "mechanism": configured,
        "params_given": sorted(dict(params or {})),
        "settings": {**attacks.preset_settings(attack), **settings},
        "distortion": {"error_std": float(error.std()), "gradient_std": float(clean_gradients.float().std()),
                       "relative_error": float(error.norm() / clean_gradients.float().norm())},
        "bits_per_coordinate": float(np.mean(bits)) / clean_gradients.shape[1],
        "clean": None if reference is None else {k: v for k, v in reference.items() if k != "reconstructions"},
        "defended": {k: v for k, v in defended.items() if k != "reconstructions"},
        "tensors": {"truth": targets.images, "clean": None if reference is None else reference["reconstructions"],
                    "defended": defended["reconstructions"]},
    }


MESSAGES_IN_CLEAR = ("the messages as the server receives them, in clear: outside a central-noise claim (under secure "
                     "aggregation the server never sees them)")


@dataclass(frozen=True)
class RecordedView:
    """What the pipeline keeps of one checkpoint round for inversion: the server's decoded updates of the
    attacked clients, their true updates (ground truth, never shown to the attacker), the images each client
    trained on in that round (S x tau*B x C x H x W), the global model before the round, lr and tau.

    ``view``: the adversary's view ``server`` holds: "server" (the decoded updates), or "aggregate" for a
    central-noise round (row k: the noisy sum minus the other clients' clipped updates, the informed adversary's
    view of client k, which the claim covers; the messages in clear are then the ``extra`` view "server").

    ``extra``: further server-side estimates of the same updates, attacked beside ``server`` (a protocol whose
    server view is not the decoded updates, MSP-FL's consensus transcript: ``server`` is the strongest estimate
    of its registered update estimator, ``auditkit.attacks.update_estimator_for``); ``observations`` says what each of
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
    view: str = "server"
    buffers: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)  # the global model's (BatchNorm)
    client_mode: str = "train"

    @classmethod
    def from_observation(cls, observation: Any, train_images: torch.Tensor, count: int,
                         protocol: str = "uplink", client_mode: str = "train") -> "RecordedView":
        """The first ``count`` clients of an ``auditkit.fl.simulation.Observation`` of a run whose mechanism has
        ``protocol`` (the run's round protocol); a protocol with an update estimator has its server view turned into estimates."""
        count = min(count, len(observation.clients))
        used = observation.ground_truth["batch_indices"][:count].reshape(count, -1)
        server = observation.views["server"]
        extra: dict[str, torch.Tensor] = {}
        observations: dict[str, str] = {}
        estimator = attacks.update_estimator_for(protocol)
        if estimator is not None:
            estimates = estimator(server, observation.global_before)
            server = estimates.pop(next(iter(estimates)))[0]  # the strongest estimate is the defended view
            extra = {name: e[:count].detach().float().clone() for name, (e, _) in estimates.items()}
            observations = {name: observed for name, (_, observed) in estimates.items()}
        view = "server"
        informed = observation.views.get("aggregate-informed")
        if informed is not None:  # a central-noise round: its claim covers the aggregate; the messages beside it
            extra["server"] = server[:count].detach().float().clone()
            observations["server"] = MESSAGES_IN_CLEAR
            server, view = informed, "aggregate"
        return cls(
            round=observation.round, clients=list(observation.clients[:count]),
            global_before=observation.global_before.detach().float().clone(),
            server=server[:count].detach().float().clone(),
            truth=observation.ground_truth["updates"][:count].detach().float().clone(),
            images_used=train_images[used].detach().float().clone(), lr=observation.lr, tau=observation.tau,
            extra=extra, observations=observations, view=view,
            buffers={k: v.clone() for k, v in observation.global_buffers.items()}, client_mode=str(client_mode),
        )

    def to_tensors(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_tensors(cls, saved: Mapping[str, Any]) -> "RecordedView":
        return cls(**saved)


def as_the_clients_ran(model: nn.Module, buffers: Mapping[str, torch.Tensor], client_mode: str,
                       input_shape: tuple[int, ...]) -> Normalisation | None:
    """Put the attacked ``model`` in the clients' mode and say how its BatchNorm normalises one image of
    ``input_shape`` (None: it has none): ``eval``, by the global running statistics ``buffers`` it receives;
    ``train``, by each input's own batch statistics without tracking them
    (``torch.func.replace_all_batch_norm_modules_``: the attacker's dummy batch is not the client's batch), unless a
    BatchNorm sees a single value per channel of one image, whose batch statistics are undefined (torch refuses
    them): then by the running statistics, which the result records."""
    own = dict(model.named_buffers())
    with torch.no_grad():
        for name, value in buffers.items():
            own[name].copy_(value)
    inputs = _batchnorm_inputs(model, input_shape)
    if client_mode == "eval" or any(x[0, 0].numel() == 1 for x in inputs):
        model.eval()
        if not inputs:
            return None
        return Normalisation.RUNNING if client_mode == "eval" else Normalisation.RUNNING_ONE_VALUE
    model.train()
    torch.func.replace_all_batch_norm_modules_(model)
    return Normalisation.BATCH if inputs else None


def _batchnorm_inputs(model: nn.Module, input_shape: tuple[int, ...]) -> list[torch.Tensor]:
    """What each BatchNorm of ``model`` receives from one zero image (an eval-mode pass: no statistic moves)."""
    seen: list[torch.Tensor] = []
    one_example_pass(model, input_shape, [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)],
                     lambda _module, inputs, _out: seen.append(inputs[0]))
    return seen


def halfway_ssim(result: attacks.InversionResult, truth: torch.Tensor) -> float | None:
    """The mean SSIM against ``truth`` of the attack's images after half its iterations (None: not kept)."""
    return None if result.halfway is None else float(metrics.score(result.halfway, truth)["ssim_mean"])


def _best_matches(reconstructions: torch.Tensor, images_used: torch.Tensor) -> torch.Tensor:
    """For each client, the image of its own batch that its (clean) reconstruction resembles most (SSIM)."""
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
    tau SGD steps on one dummy image. Every run is scored against the same image per client (ground truth the
    attacker never sees): the one of the client's own batch (the images it trained on that round) that the clean
    reconstruction matches best. One assignment for all runs, so a defended reconstruction that is noise cannot
    score by being matched to whichever image it happens to resemble.
    """
    load_flat_parameters(model, view.global_before.clone())
    normalisation = as_the_clients_ran(model, view.buffers, view.client_mode, tuple(view.images_used.shape[2:]))
    settings = dict(settings or {})
    if unroll:
        settings.update(observation="update", local_steps=view.tau, local_lr=view.lr)
    shape = tuple(view.images_used.shape[2:])
    runs: dict[str, Any] = {}
    truth = None
    for name, updates in (("clean", view.truth), ("defended", view.server), *view.extra.items()):
        observed = updates if unroll else attacks.update_to_gradient(updates, lr=view.lr, local_steps=view.tau)
        result = attacks.invert(attack, model, observed, input_shape=shape, **settings)
        if truth is None:  # the clean run comes first: its matches are every run's ground truth
            truth = _best_matches(result.images, view.images_used)
        runs[name] = {"scores": metrics.score(result.images, truth), "labels": result.labels.tolist(),
                      "wall_time": result.wall_time, "reconstructions": result.images, "truth": truth,
                      "ssim_at_half": halfway_ssim(result, truth)}
    return {
        "attack": attack,
        "round": view.round,
        "clients": view.clients,
        "view": view.view,
        "observation": "update, unrolled over tau local steps" if unroll else "-update / (lr tau) as one gradient",
        "tau": view.tau,
        "lr": view.lr,
        "images_per_client": int(view.images_used.shape[1]),
        "settings": {**attacks.preset_settings(attack), **settings},
        "extra": list(view.extra),
        "normalisation": normalisation,
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
    "jopeq-exact": [{"noise": "laplace", "eps": e} for e in (30.0, 10.0, 3.0, 1.0)],
}


def check_attack_layers(attack: str, model: nn.Module, num_classes: int, *, where: str, model_name: str,
                        labels_given: bool = False) -> None:
    """``ConfigError`` in one line, naming the attack and the layer, when ``model`` lacks a layer ``attack`` reads:
    an output ``nn.Linear`` (num_classes x features weight) whose gradient gives each image's label (iDLG's label
    extraction, Zhao et al. 2020, used by idlg, inverting_gradients and analytic unless the labels are given), or a
    fully-connected layer with a bias whose gradients give its input exactly (the analytic attack)."""
    if attack == "analytic":
        try:
            first_linear(model)
        except ValueError:
            raise ConfigError(f"{where} {attack!r} needs a fully-connected layer with a bias (nn.Linear(..., bias=True)"
                              f"), whose gradients give its input exactly, and {model_name!r} has none; choose "
                              f"{where} = 'inverting_gradients' or 'dlg'") from None
    if labels_given or attacks.preset_settings(attack)["label_strategy"] != "extract":
        return
    matrices = [p for p in trained_tensors(model) if p.dim() == 2]
    if not matrices or matrices[-1].shape[0] != num_classes:
        raise ConfigError(f"{where} {attack!r} needs an output nn.Linear layer (a {num_classes} x features weight, "
                          f"last of the model's), whose gradient gives each image's label (iDLG), and {model_name!r} "
                          f"has none; choose {where} = 'dlg' (labels optimised)")


INVERSION_ITERATIONS = 200  # the inversion's budget on a CPU (``[inversion] iterations`` unset), where it fits
PROBE_ITERATIONS = 300  # the probe's (``[probe] iterations`` unset)
GPU_BUDGET = 5  # a GPU's default budget, in CPU budgets: its iterations cost a small fraction of a CPU's
MIN_ITERATIONS = 20  # the least default budget: below it the attack says little
# One iteration of one problem (an image's start) on one CPU core: a gradient of the model's parameters and its
# match against the observed one (measured: ResNet-18 at 32x32, 11.2M parameters, 0.41 s; its small stem, 1.1 GFLOP
# a forward pass, 0.47 s; benchmarks/bench_scale.py)
CPU_SECONDS_PER_PARAMETER = 36e-9
CPU_SECONDS_PER_FLOP = 5.8e-11
INVERSION_RUN_SECONDS = 600  # what one run (clean or defended) may cost on a CPU at the default budget
# A feature-inversion step of the analytic attack (a forward and backward pass to the first FC layer) against a
# matching step (measured: ResNet-18 at 32x32, 0.059 s and 0.169 s a problem on one core)
FEATURE_STEP_COST = 0.35
PROBE_STAGE_SECONDS = 1200  # what the probe's runs together may cost (clean, defended and the sweep's points)


@dataclass(frozen=True)
class AttackBudget:
    """An attack's iterations and restarts, and the seconds a run of them is estimated to take on a CPU core."""

    iterations: int
    restarts: int
    estimated_seconds: float


def iteration_seconds(model: nn.Module, input_shape: tuple[int, ...]) -> float:
    """The estimated CPU seconds of one iteration of one problem (the constants above): a deterministic cost, the
    model's parameters and one forward pass's FLOPs (``torch.utils.flop_counter``), never a measured time."""
    from torch.utils.flop_counter import FlopCounterMode

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(torch.zeros(1, *input_shape, device=model_device(model)))
        flops = counter.get_total_flops()
    except Exception:  # a user's model the counter cannot trace: its parameters alone set the cost
        flops = 0
    finally:
        model.train(was_training)
    parameters = sum(p.numel() for p in model.parameters())
    return parameters * CPU_SECONDS_PER_PARAMETER + flops * CPU_SECONDS_PER_FLOP


def attack_budget(attack: str, iterations: int | None, restarts: int | None, *, cpu_default: int, model: nn.Module,
                  input_shape: tuple[int, ...], targets: int, seconds: float) -> AttackBudget:
    """The budget an attack runs with: ``iterations`` and ``restarts`` where configured; else on a GPU
    ``GPU_BUDGET`` x ``cpu_default`` iterations and the preset's restarts, and on a CPU ``cpu_default`` iterations
    and the preset's restarts where a run of ``targets`` images fits ``seconds`` (``iteration_seconds`` per problem
    and phase: the analytic attack's iteration is a feature-inversion step and a refinement step, ``FEATURE_STEP_COST``),
    else one restart, then fewer iterations (at least ``MIN_ITERATIONS``). Deterministic: the device, the model and
    the config, never the machine's load, decide it."""
    starts = restarts if restarts is not None else attacks.preset_settings(attack)["restarts"]
    phases = 1 + FEATURE_STEP_COST if attack == "analytic" else 1
    per_iteration = iteration_seconds(model, input_shape) * targets * phases
    if iterations is not None:
        return AttackBudget(iterations, starts, iterations * starts * per_iteration)
    if model_device(model).type == "cuda":
        chosen = cpu_default * GPU_BUDGET
        return AttackBudget(chosen, starts, chosen * starts * per_iteration)
    if restarts is None and cpu_default * starts * per_iteration > seconds:
        starts = 1  # one start of many iterations before many starts of few
    affordable = int(seconds // (starts * per_iteration))
    chosen = max(MIN_ITERATIONS, min(cpu_default, affordable))
    return AttackBudget(chosen, starts, chosen * starts * per_iteration)


def budget_settings(attack: str, budget: AttackBudget) -> dict[str, int]:
    """The attack's settings that ``budget`` sets: its iterations (``iteration_settings``) and restarts."""
    return {**iteration_settings(attack, budget.iterations), "restarts": budget.restarts}


def invert_recorded_view(view: RecordedView, training: Any, inversion: Any, seed: int,
                         num_classes: int = 10) -> dict[str, Any]:
    """``attack_recorded_view`` with the settings of a config's ``[inversion]`` (attack, iterations, restarts,
    unroll) on a freshly built model of the ``[training]`` table (``auditkit.models.build_model``: its model and
    options) shaped for the view's images and the data's ``num_classes`` (10: every built-in dataset's)."""
    model = build_model(training, tuple(view.images_used.shape[2:]), num_classes)
    check_attack_layers(inversion.attack, model, num_classes, where="inversion.attack", model_name=training.model)
    budget = attack_budget(inversion.attack, inversion.iterations, inversion.restarts,
                           cpu_default=INVERSION_ITERATIONS, model=model, input_shape=tuple(view.images_used.shape[2:]),
                           targets=len(view.clients), seconds=INVERSION_RUN_SECONDS)
    settings = {**budget_settings(inversion.attack, budget), "seed": seed}
    done = attack_recorded_view(view, model, attack=inversion.attack, unroll=inversion.unroll, settings=settings)
    return {**done, "estimated_seconds": budget.estimated_seconds}


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
    """``attack`` against the server's view for every (mechanism, params) of ``curve``: ``{"clean": the clean
    run, "points": [one ``run_inversion`` run per point], "seconds"}``.

    Every point attacks the same images with the same settings and initialisation; the clean attack is
    run once (with ``mechanism="none"``, whose server view is the clean gradient) and is every point's reference.
    Each run carries the measured std of the server view's error per coordinate (``distortion.error_std``), the
    axis on which mechanisms of different kinds are compared. ``label_given`` defaults to JoPEQ's evaluation
    (the attacker is handed the true label). ``on_point(name, params, run)`` is called after each point.
    """
    curve = DEFAULT_CURVE if curve is None else curve
    for name, points in curve.items():
        for params in points:
            mechanisms.create(name, **dict(params))  # every point validated before the first attack
    started = time.perf_counter()
    clean = run_inversion(attack, model=model, images=images, source=source, seed=seed, label_given=label_given,
                          settings=settings, clean=False)
    runs = []
    for name, points in curve.items():
        for params in points:
            run = run_inversion(attack, mechanism=name, params=params, model=model, images=images, source=source,
                                seed=seed, label_given=label_given, settings=settings, clean=False)
            runs.append(run)
            if on_point is not None:
                on_point(name, params, run)
    return {"clean": clean, "points": runs, "seconds": time.perf_counter() - started}


# ------------------------------------------------------------------ results documents

_SCORES = ("ssim_mean", "mse_mean", "psnr_mean", "ssim", "mse", "psnr", "label_accuracy")


def _scores(run: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if run is None else {k: run["scores"][k] for k in _SCORES}


def inversion_section(run: Mapping[str, Any], *, clean: Mapping[str, Any] | None, figure: str | None) -> dict[str, Any]:
    """A results setting's ``inversion`` section for a ``run_inversion`` run (single-image gradients: no FL
    round, no clients); ``clean`` is the clean attack's run (scores under "defended" for a clean reference run)."""
    return {
        "attack": run["attack"], "view": run["view"], "round": None, "observation": run["observation"],
        "targets": None, "model": run["model"]["name"], "ssim_variant": run["defended"]["scores"]["ssim_variant"],
        "clean": _scores(clean), "defended": _scores(run["defended"]), "figure": figure,
        "images": len(run["targets"]["names"]), "source": run["targets"]["source"],
        "label_given": run["targets"]["label_given"], "error_std": run["distortion"]["error_std"],
        "bits_per_coordinate": run["bits_per_coordinate"],
    }


def _provenance(run: Mapping[str, Any], settings: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    return results.provenance(seed=seed, device=str(run["settings"].get("device") or "cpu"), settings=settings,
                              model={"name": run["model"]["name"], "num_params": run["model"]["num_params"]})


INVERSION_FIGURE = "figures/inversion.png"


def inversion_figure(run: dict[str, Any]) -> GridFigure:
    """The attack's grid, ``figures/inversion.png`` (drawn by ``auditkit.figure_files.write_grid``): rows ground
    truth, clean reconstruction, defended reconstruction, each with its SSIM."""
    mechanism = run["mechanism"]
    tensors = run["tensors"]
    rows = {name: tensors[key].numpy() for name, key in
            (("ground truth", "truth"), ("clean", "clean"), (mechanism.name, "defended"))}
    captions = {"clean": [f"SSIM {v:.2f}" for v in run["clean"]["scores"]["ssim"]],
                mechanism.name: [f"SSIM {v:.2f}" for v in run["defended"]["scores"]["ssim"]]}
    title_line = (f"{run['attack']} on {run['model']['name']}, server view after {mechanism.name} "
                  f"({mechanism.guarantee().summary()})")
    return GridFigure(INVERSION_FIGURE, rows, captions, title_line)


def attack_document(run: dict[str, Any], *, config: dict[str, Any], title: str) -> dict[str, Any]:
    """The results document of one attack (command ``attack``, one setting); its grid is
    :func:`inversion_figure`'s."""
    mechanism = run["mechanism"]
    entry = results.setting("s00", mechanism.name, mechanism,
                            inversion=inversion_section(run, clean=run["clean"], figure=INVERSION_FIGURE))
    return results.document("attack", title, config, _provenance(run, [entry], config["seed"]), [entry])


def curve_document(curve: dict[str, Any], *, config: dict[str, Any], title: str) -> dict[str, Any]:
    """The results document of a defence curve (command ``attack``, one setting per point of the curve, each beside
    the same clean attack); the report draws SSIM against the error's std from it."""
    clean = curve["clean"]["defended"]  # mechanism "none": the server sees the clean gradient
    entries = []
    for i, run in enumerate(curve["points"]):
        mechanism = run["mechanism"]
        label = f"{mechanism.name} " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                                 for k, v in mechanism.params.items() if k in run["params_given"])
        entries.append(results.setting(f"s{i:02d}", label.strip(), mechanism,
                                       inversion=inversion_section(run, clean={"scores": clean["scores"]},
                                                                   figure=None)))
    return results.document("attack", title, config, _provenance(curve["clean"], entries, config["seed"]), entries)


def clean_reference(kind: str, truth: np.ndarray, clean: np.ndarray, ssim: Sequence[float],
                    title: str) -> GridFigure:
    """The clean attack's grid (ground truth, clean reconstruction, each with its SSIM) at
    ``figures/{kind}-clean-{digest}.png``, the digest of the images and the title: settings whose clean attack ran on
    the same inputs (same targets, model, round and seed) draw the same images and share one file, drawn once in the
    report above the settings' own grids."""
    digest = hashlib.sha256(title.encode())
    for images in (truth, clean):
        digest.update(np.ascontiguousarray(images, dtype=np.float32).tobytes())
    path = f"figures/{kind}-clean-{digest.hexdigest()[:12]}.png"
    return GridFigure(path, {"truth": truth, "clean": clean}, {"clean": [f"SSIM {v:.2f}" for v in ssim]}, title,
                      content_addressed=True)


def inversion_stage(config: AuditConfig, view: RecordedView, *, figure_id: str,
                    label: str) -> tuple[dict[str, Any], tuple[GridFigure, GridFigure]]:
    """What the audit's ``inversion`` stage stores for one setting (its ``inversion`` section), and its grids (the
    caller draws them: ``auditkit.figure_files.write_grid``): the defended reconstructions at
    ``figures/reconstruction-{figure_id}.png`` (rows ground truth, defended, further views) and the clean reference
    (``clean_reference``, shared by the settings whose clean attack is the same)."""
    inv = config.inversion
    # loaded by the train stage already (a factory's data may have other than 10 classes)
    classes = load_configured_dataset(config, download=False).num_classes
    done = invert_recorded_view(view, config.training, inv, config.seed, classes)
    figure = f"figures/reconstruction-{figure_id}.png"
    truth = done["clean"]["truth"].numpy()
    rows = {"truth": truth, "defended": done["defended"]["reconstructions"].numpy()}
    for name in done["extra"]:
        rows[name] = done[name]["reconstructions"].numpy()
    captions = {run: [f"SSIM {v:.2f}" for v in done[run]["scores"]["ssim"]] for run in ("defended", *done["extra"])}
    grid = GridFigure(figure, rows, captions, f"{inv.attack}, {done['view']} view, round {done['round']}: {label}")
    clean = clean_reference("reconstruction", truth, done["clean"]["reconstructions"].numpy(),
                            done["clean"]["scores"]["ssim"],
                            f"{inv.attack}, the clients' true updates, round {done['round']}: clean reference (no "
                            "mechanism)")
    keep = ("ssim_mean", "mse_mean", "psnr_mean", "ssim", "mse", "psnr")
    document = {
        "attack": inv.attack, "view": done["view"], "round": done["round"], "observation": done["observation"],
        "targets": done["clients"], "model": config.training.model,
        "ssim_variant": done["clean"]["scores"]["ssim_variant"],
        "clean": {k: done["clean"]["scores"][k] for k in keep},
        "defended": {k: done["defended"]["scores"][k] for k in keep},
        "figure": figure,
        "clean_figure": clean.path,
        "normalisation": done["normalisation"],
        "budget": budget_entry(done["settings"], targets=len(done["clients"]), estimated_seconds=done["estimated_seconds"],
                               clean=(done["clean"]["ssim_at_half"], done["clean"]["scores"]["ssim_mean"]),
                               defended=(done["defended"]["ssim_at_half"], done["defended"]["scores"]["ssim_mean"])),
    }
    if done["extra"]:  # "defended" is the claim's view; further estimates or views beside it
        document["views"] = [
            {"name": name, "observation": view.observations[name],
             "defended": {k: done[name]["scores"][k] for k in keep}}
            for name in done["extra"]
        ]
    return document, (grid, clean)
