"""Gradient inversion: reconstruct a client's training image from the gradient (or update) it sent.

All three attacks optimise dummy inputs x (and, for DLG, a dummy soft label) so that the observation the
client would have sent for them matches the observed one (:mod:`auditkit.attacks.gradient_matching`):

    x* = argmin_x  D(simulate(x, y), observed) + tv * TV(x)

They differ only in their settings (presets, every value overridable by keyword and recorded in the result):

* **DLG** (Zhu et al., "Deep Leakage from Gradients", NeurIPS 2019): dummy image ~ N(0, 1) and dummy soft
  label softmax(z), z ~ N(0, 1), both optimised; squared-L2 distance summed over layers; L-BFGS with lr 1 and
  20 inner iterations per step (torch defaults, as the reference code), 300 steps, early stop on a matching
  loss below 1e-6, 4 starts (the reference code runs one; see "Restarts" below).
* **iDLG** (Zhao et al., "iDLG: Improved Deep Leakage from Gradients", 2020): as DLG, but the label is first
  extracted analytically (:func:`auditkit.attacks.label_extraction.extract_labels`) and only the image is optimised.
* **Inverting Gradients** (Geiping et al., "Inverting Gradients - How easy is it to break privacy in federated
  learning?", NeurIPS 2020): cosine distance + total-variation prior, Adam with lr 0.1 on the *signed*
  gradient, the image projected onto the box [0, 1] after every step, the lr divided by 10 at 3/8, 5/8 and
  7/8 of the iterations, restarts (the start with the smallest final matching loss is kept); labels
  extracted as in iDLG. The iteration count (2,000), TV weight (1e-2 on [0, 1] pixels) and restarts (4) are
  this toolkit's CPU-sized choice: the reference script (inversefed's ``reconstruct_image.py``) uses 24,000
  iterations and TV 1e-4 on normalised images, its notebooks TV 1e-1 and 8 restarts; override them for
  full-strength runs.

Labels: ``label=`` hands the attacker the true label(s) (``label_source="given"``, JoPEQ's evaluation);
otherwise ``label_strategy`` extracts them (``"extracted"``) or optimises a dummy soft label
(``"optimised"``, reported as its argmax).

Observations (:mod:`auditkit.attacks.observations`): one image's, or N independent images' gradients. For a
multi-step FedAvg update x = w_after - w_before either convert it with
:func:`auditkit.attacks.observations.update_to_gradient` (the "one gradient" approximation, then attack as a gradient)
or pass ``observation="update", local_steps=tau, local_lr=eta`` to unroll the client's tau SGD steps on the
dummy data (Inverting Gradients' FedAvg variant); the model must then hold the weights *before* the update.

Batched and sequential (``mode``): by default the problems (image x start) are attacked as one batched
optimisation, with per-image model gradients from ``torch.func``; the objective is the sum of the per-image
objectives, whose gradient with respect to each dummy is that image's own gradient. Adam is elementwise, so
one Adam over the stacked dummies *is* N independent Adam runs. L-BFGS is not (its curvature pairs, step
size and stopping tests would couple the images), so the batched path uses
:class:`auditkit.attacks.batched_lbfgs.BatchedLBFGS`, which keeps all L-BFGS state and stopping per image and follows
``torch.optim.LBFGS`` step for step. ``mode="sequential"`` gives every problem its own ``torch.optim.LBFGS`` /
``torch.optim.Adam`` with plain autograd (no ``torch.func``), the reference implementations' way, and steps
the problems one at a time, in turn (so that early stopping sees the same steps). Both modes start from the
same seeded initialisation and agree to floating-point rounding: the tests check Adam runs to 1e-6 in float32
and L-BFGS runs to 1e-6 in float64 (L-BFGS with lr 1 and no line search is chaotic, so over hundreds of
float32 steps the two paths' rounding differences can grow into visibly different reconstructions, as two
runs of the reference code on different hardware).

Restarts (``restarts``): every image is attacked from ``restarts`` starts, and the start with the smallest
final matching loss is kept (the distance alone, without the TV prior, as inversefed's
``scoring_choice="loss"``). L-BFGS from one random start is a coin on natural images: on the centre 32x32
crops of 8 scikit-image photographs x 3 LeNet init seeds (one image per attack, torch 2.15, float32), clean iDLG
from one start reached SSIM 0.9 in 21 of 24 cases (failed starts stall at a matching loss of 1.9 to 459), and
over 8 starts per case 156 of 192 single starts (81 %) did, as few as 2 of 8 in the hardest cases; keeping
the lowest-loss of 4 starts reached it in 24 of 24 (98.5 % expected over any 4 of the 8 starts). On the 8
patches of ``benchmarks/bench_inversion.py --restart-cost`` 4 starts reached SSIM 0.9 in 7 of 8 against 5 of 8
for one, at 1.05x its time (4 batched rows cost more per step, but solved images stop early while a failed
single start runs to the iteration cap). Hence the presets' 4 restarts.
All starts of all images run as one batched optimisation (problem r * count + i is start r of image i: one
forward-backward and one :class:`auditkit.attacks.batched_lbfgs.BatchedLBFGS` step serve them all; on the CPU, 4 rows
cost ~1.25x one). Start r draws its dummies from its own generator, seeded with
``derive_seed(seed, "inversion-start", r)`` (:func:`start_seeds`): a run is reproducible from ``seed`` (bit for
bit on the CPU; on a GPU cuDNN's backward kernels sum in no fixed order and L-BFGS amplifies it, so two runs
agree to ~1e-3 per pixel), and start r is the same whatever the number of restarts, the mode or the device.
``InversionResult.start_loss`` holds every start's final matching loss and ``InversionResult.start`` the kept one.

Early stopping: an image stops after the first step that starts, for any one of its starts, with a matching
loss below ``stop_loss`` (None: never); all its starts stop then, since the image is solved.

Memory: ``chunk`` bounds the problems whose observations are simulated and matched at once
(:class:`auditkit.attacks.gradient_matching.GradientMatching`, "Memory"); the optimisers still step all of them
together, so a chunked run is the unchunked one to rounding.

Everything runs on ``device`` (default: the device of the model's parameters) in the parameters' dtype; the
model itself is not moved or modified. Results are returned on the CPU.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from auditkit.attacks.analytic_inversion import analytic, preset as analytic_preset
from auditkit.attacks.batched_lbfgs import BatchedLBFGS
from auditkit.attacks.gradient_matching import DISTANCES, OBSERVATIONS, ClientSimulator, GradientMatching, default_chunk
from auditkit.attacks.label_extraction import extract_labels
from auditkit.attacks.inversion_common import (  # noqa: F401 (shared with analytic_inversion; gi's names too)
    COUNT,
    FLAG,
    INITS,
    LR_DECAY_AT,
    LR_DECAY_GAMMA,
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    InversionResult,
    TorchDevice,
    _check_input_shape,
    _labels,
    _num_classes,
    observed_on_device,
    start_seeds,
)
from auditkit.attacks.observations import Observation
from auditkit.mechanisms.randomness import derive_seed
from auditkit.validation import Choice, Constraint, Optional

INVERSION_ATTACKS = ("dlg", "idlg", "inverting_gradients", "analytic")  # analytic: attacks.analytic_inversion
OPTIMIZERS = ("lbfgs", "adam")
LABEL_STRATEGIES = ("optimise", "extract")
MODES = ("batched", "sequential")

_COMMON: dict[str, Any] = {
    "seed": 0,  # seeds the dummy initialisation (drawn on the CPU, so identical on every device)
    "init": "randn",  # "randn": N(0, 1) as DLG / Inverting Gradients; "rand": U[0, 1)
    "device": None,  # None: the device of the model's parameters
    "mode": "batched",
    "observation": "gradient",
    "local_steps": 1,  # with observation="update": the client's SGD steps (tau) to unroll
    "local_lr": None,  # with observation="update": the client's learning rate (eta)
    "lbfgs_max_iter": 20,  # torch.optim.LBFGS defaults, as in the DLG and iDLG reference code
    "lbfgs_history": 100,
    "lbfgs_tolerance_grad": 1e-7,
    "lbfgs_tolerance_change": 1e-9,
    "chunk": None,  # the problems matched at once (None: ``default_chunk``); memory, not the result
}
_DLG: dict[str, Any] = {
    **_COMMON,
    "optimizer": "lbfgs",
    "lr": 1.0,
    "iterations": 300,
    "distance": "l2",
    "tv": 0.0,
    "signed": False,
    "box": False,
    "lr_decay": False,
    "restarts": 4,  # one L-BFGS start is a coin on natural images (module docstring, "Restarts")
    "stop_loss": 1e-6,
    "label_strategy": "optimise",
}
_PRESETS: dict[str, dict[str, Any]] = {
    "dlg": _DLG,
    "idlg": {**_DLG, "label_strategy": "extract"},
    "inverting_gradients": {
        **_COMMON,
        "optimizer": "adam",
        "lr": 0.1,
        "iterations": 2000,
        "distance": "cosine",
        "tv": 1e-2,
        "signed": True,
        "box": True,
        "lr_decay": True,
        "restarts": 4,
        "stop_loss": None,
        "label_strategy": "extract",
    },
}


def iteration_settings(attack: str, iterations: int) -> dict[str, int]:
    """The settings of ``attack`` that one iteration budget bounds: the analytic attack's feature inversion and
    gradient-matching refinement (both run only for the layers before the first fully-connected one), or the
    optimisation attacks' iterations."""
    if attack == "analytic":
        return {"feature_iterations": iterations, "refine_iterations": iterations}
    return {"iterations": iterations}


def preset_settings(attack: str) -> dict[str, Any]:
    """A copy of the default settings of ``attack`` (one of :data:`INVERSION_ATTACKS`)."""
    if attack == "analytic":
        return analytic_preset()
    return dict(_PRESETS[Choice(INVERSION_ATTACKS).check(attack, "attack")])


def dlg(
    model: nn.Module, observed: Observation, *, input_shape: Sequence[int], label: Any = None, **settings: Any
) -> InversionResult:
    """Deep Leakage from Gradients (Zhu et al. 2019); see :func:`invert` for the arguments."""
    return invert("dlg", model, observed, input_shape=input_shape, label=label, **settings)


def idlg(
    model: nn.Module, observed: Observation, *, input_shape: Sequence[int], label: Any = None, **settings: Any
) -> InversionResult:
    """Improved DLG (Zhao et al. 2020): analytic label extraction, then DLG on the image; see :func:`invert`."""
    return invert("idlg", model, observed, input_shape=input_shape, label=label, **settings)


def inverting_gradients(
    model: nn.Module, observed: Observation, *, input_shape: Sequence[int], label: Any = None, **settings: Any
) -> InversionResult:
    """Inverting Gradients (Geiping et al. 2020): cosine loss + TV, signed Adam, box, restarts; see :func:`invert`."""
    return invert("inverting_gradients", model, observed, input_shape=input_shape, label=label, **settings)


def invert(
    attack: str,
    model: nn.Module,
    observed: Observation,
    *,
    input_shape: Sequence[int],
    label: Any = None,
    **settings: Any,
) -> InversionResult:
    """Run the gradient inversion ``attack`` (one of :data:`INVERSION_ATTACKS`): its preset, overridden by ``settings``.

    ``model``: the model the observation was computed with (its current weights; the weights *before* the
    update for ``observation="update"``). ``observed``: one image's observation (a list of tensors shaped like
    the model's trained parameters, ``auditkit.attacks.observations.trained_parameters``, or a flat vector of
    their length P) or N images' (each tensor with a leading N, or an
    N x P matrix). ``input_shape``: (C, H, W) of one image. ``label``: None, or the true label(s) (an int for
    one image, or N ints) handed to the attacker. ``"analytic"`` runs :func:`auditkit.attacks.analytic_inversion.analytic`.
    """
    if attack == "analytic":
        return analytic(model, observed, input_shape=input_shape, label=label, **settings)
    config = _resolve_settings(attack, settings)
    input_shape = _check_input_shape(input_shape)
    device, dtype, shapes, observed_matrix = observed_on_device(model, observed, config["device"])
    count = observed_matrix.shape[0]
    if config["chunk"] is None:
        config["chunk"] = default_chunk(observed_matrix.shape[1], device)
    simulator = ClientSimulator(
        model, device=device, dtype=dtype, observation=config["observation"],
        local_steps=config["local_steps"], local_lr=config["local_lr"],
    )
    num_classes = _num_classes(simulator, input_shape)
    labels, label_source = _labels(label, config, observed_matrix, shapes, num_classes)
    matching = GradientMatching(simulator, observed_matrix, distance=config["distance"], tv=config["tv"],
                                chunk=config["chunk"])

    start = time.perf_counter()
    restarts = config["restarts"]
    seeds = start_seeds(config["seed"], restarts)
    x0, z0 = _starts(seeds, count, input_shape, None if labels is not None else num_classes, config["init"])
    x0 = x0.to(device=device, dtype=dtype)
    z0 = None if z0 is None else z0.to(device=device, dtype=dtype)
    # Problem p = r * count + i is start r of image i; all problems run as one optimisation.
    image_of = torch.arange(restarts * count, device=device) % count
    targets = None if labels is None else F.one_hot(labels[image_of], num_classes).to(dtype)
    attack_problems = _attack_batched if config["mode"] == "batched" else _attack_sequential
    halfway: dict[str, Tensor] = {}
    x, z, steps, final = attack_problems(matching, x0, z0, targets, image_of, config, halfway)
    final = torch.nan_to_num(final.view(restarts, count), nan=float("inf"))
    best = final.argmin(dim=0) * count + torch.arange(count, device=device)  # ties: the lowest start
    if labels is None:
        labels = z[best].argmax(dim=1)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall_time = time.perf_counter() - start

    recorded = {"attack": attack, **config, "device": str(device), "dtype": str(dtype).removeprefix("torch.")}
    return InversionResult(
        images=torch.nan_to_num(x[best].detach(), nan=0.0).clamp(0.0, 1.0).to(device="cpu", dtype=torch.float32),
        labels=labels.detach().cpu().long(),
        loss=final.flatten()[best].detach().cpu().float(),
        steps=steps[best].cpu(),
        settings=recorded,
        wall_time=wall_time,
        label_source=label_source,
        start_loss=final.t().detach().cpu().float(),
        start_seeds=seeds,
        start=(best // count).cpu(),
        halfway=_halfway_images(halfway, restarts, count),
    )


def _halfway_images(halfway: dict[str, Tensor], restarts: int, count: int) -> Tensor | None:
    """Each image's start with the lowest matching loss after half the iterations, clamped to [0, 1] (None where
    the run stopped before half of them)."""
    if not halfway:
        return None
    loss = torch.nan_to_num(halfway["loss"].view(restarts, count), nan=float("inf"))
    kept = loss.argmin(dim=0) * count + torch.arange(count, device=loss.device)
    return torch.nan_to_num(halfway["images"][kept], nan=0.0).clamp(0.0, 1.0).to(device="cpu", dtype=torch.float32)


def _starts(seeds: Sequence[int], count: int, input_shape: tuple[int, int, int], num_classes: int | None,
            init: str) -> tuple[Tensor, Tensor | None]:
    """Stacked initial dummies, start-major (row r * count + i: start r of image i), drawn on the CPU: per start,
    ``count`` images, then (``num_classes`` given: the label is optimised) ``count`` label logits ~ N(0, 1)."""
    draw = torch.randn if init == "randn" else torch.rand
    xs, zs = [], []
    for seed in seeds:
        generator = torch.Generator().manual_seed(seed)
        xs.append(draw((count, *input_shape), generator=generator))
        if num_classes is not None:
            zs.append(torch.randn((count, num_classes), generator=generator))
    return torch.cat(xs), (torch.cat(zs) if zs else None)


# --- the two paths --------------------------------------------------------------------------------------


def _attack_batched(
    matching: GradientMatching, x0: Tensor, z0: Tensor | None, targets: Tensor | None, image_of: Tensor, config: dict,
    halfway: dict[str, Tensor],
) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
    """All problems as one optimisation; returns (images, label logits, steps, final matching loss)."""

    def objective(x: Tensor, z: Tensor | None, rows: Tensor) -> tuple[Tensor, Tensor]:
        target = targets[rows] if z is None else F.softmax(z, dim=-1)
        return matching.batched(x, target, image_of[rows])

    every = torch.arange(x0.shape[0], device=x0.device)
    if config["optimizer"] == "adam":
        run: _Run = _AdamRun(x0, z0, lambda x, z: objective(x, z, every), config)
    else:
        run = _BatchedLBFGSRun(x0, z0, objective, config)
    steps = _optimise(run, config, image_of, halfway)
    x, z = run.images().detach(), _detach(run.logits())
    return x, z, steps, objective(x, z, every)[1].detach()


def _attack_sequential(
    matching: GradientMatching, x0: Tensor, z0: Tensor | None, targets: Tensor | None, image_of: Tensor, config: dict,
    halfway: dict[str, Tensor],
) -> tuple[Tensor, Tensor | None, Tensor, Tensor]:
    """One problem per optimiser (``torch.optim``, plain autograd), the problems stepped in turn, so that early
    stopping sees the same steps as :func:`_attack_batched`; same returns."""
    objectives, runs = [], []
    for p in range(x0.shape[0]):
        row = int(image_of[p])

        def objective(x: Tensor, z: Tensor | None, p: int = p, row: int = row) -> tuple[Tensor, Tensor]:
            target = targets[p : p + 1] if z is None else F.softmax(z, dim=-1)
            return matching.single(x, target, row)

        z_p = None if z0 is None else z0[p : p + 1]
        run_class = _AdamRun if config["optimizer"] == "adam" else _TorchLBFGSRun
        runs.append(run_class(x0[p : p + 1], z_p, objective, config))
        objectives.append(objective)
    steps = _optimise(_OneAtATime(runs), config, image_of, halfway)
    xs = [run.images().detach() for run in runs]
    zs = [_detach(run.logits()) for run in runs]
    finals = [objective(x, z)[1].detach() for objective, x, z in zip(objectives, xs, zs)]
    z_all = None if z0 is None else torch.cat(zs)
    return torch.cat(xs), z_all, steps, torch.cat(finals)


def _optimise(run: _Run, config: dict, image_of: Tensor, halfway: dict[str, Tensor] | None = None) -> Tensor:
    """The outer loop shared by both paths: lr schedule, box projection, early stopping. Returns steps taken;
    ``halfway`` (given) receives the images and each problem's matching loss after half the iterations (what the
    budget bought by then: ``InversionResult.halfway``).

    Early stopping is per image: once one start of an image begins a step with a matching loss below
    ``stop_loss``, every start of that image stops (the image is solved; its other starts could only cost time).
    """
    device = run.images().device
    count = image_of.shape[0]
    active = torch.ones(count, dtype=torch.bool, device=device)
    steps = torch.zeros(count, dtype=torch.long, device=device)
    images = int(image_of.max()) + 1
    iterations = config["iterations"]
    milestones = [round(iterations * f) for f in LR_DECAY_AT] if config["lr_decay"] else []
    for iteration in range(iterations):
        lr = config["lr"] * LR_DECAY_GAMMA ** sum(iteration >= m for m in milestones)
        matching = run.step(lr, active)
        steps += active.long()
        if config["box"]:
            run.clamp_()
        if halfway is not None and iteration + 1 == max(1, iterations // 2):
            halfway.update(images=run.images().detach().clone(), loss=matching.detach().clone())
        if config["stop_loss"] is not None:
            solved = active & (matching < config["stop_loss"])
            if bool(solved.any()):
                done = torch.zeros(images, dtype=torch.bool, device=device)
                done[image_of[solved]] = True
                active = active & ~done[image_of]
            if not bool(active.any()):
                break
    return steps


# --- optimiser runs: step(lr, active) -> matching loss at the step's first evaluation ----------------------


class _Run:
    def images(self) -> Tensor:
        raise NotImplementedError

    def logits(self) -> Tensor | None:
        raise NotImplementedError

    def step(self, lr: float, active: Tensor) -> Tensor:
        raise NotImplementedError

    def clamp_(self) -> None:
        with torch.no_grad():
            self.images().clamp_(0.0, 1.0)


class _TorchOptimiserRun(_Run):
    """Dummy images (and label logits) as leaves of a ``torch.optim`` optimiser; rows that stopped are restored
    after each step, so they stay frozen (Adam is elementwise: the other rows are unaffected)."""

    def __init__(self, x0: Tensor, z0: Tensor | None, objective: Callable, config: dict) -> None:
        self.x = x0.clone().requires_grad_(True)
        self.z = None if z0 is None else z0.clone().requires_grad_(True)
        self.leaves = [self.x] if self.z is None else [self.x, self.z]
        self.objective = objective
        self.signed = config["signed"]
        self.optimizer = self._make_optimizer(config)

    def _make_optimizer(self, config: dict) -> torch.optim.Optimizer:
        raise NotImplementedError

    def images(self) -> Tensor:
        return self.x

    def logits(self) -> Tensor | None:
        return self.z

    def step(self, lr: float, active: Tensor) -> Tensor:
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        frozen = ~active
        saved = [leaf.detach().clone() for leaf in self.leaves] if bool(frozen.any()) else None
        first: list[Tensor] = []

        def closure() -> Tensor:
            objective, matching = self.objective(self.x, self.z)
            grads = torch.autograd.grad(objective.sum(), self.leaves)
            for leaf, g in zip(self.leaves, grads):
                leaf.grad = g.sign() if self.signed else g
            first.append(matching.detach())
            return objective.detach().sum()

        self.optimizer.step(closure)
        if saved is not None:
            with torch.no_grad():
                for leaf, value in zip(self.leaves, saved):
                    leaf[frozen] = value[frozen]
        return first[0]


class _AdamRun(_TorchOptimiserRun):
    def _make_optimizer(self, config: dict) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.leaves, lr=config["lr"])


class _TorchLBFGSRun(_TorchOptimiserRun):
    """``torch.optim.LBFGS`` on one problem (the sequential reference)."""

    def _make_optimizer(self, config: dict) -> torch.optim.Optimizer:
        return torch.optim.LBFGS(
            self.leaves, lr=config["lr"], max_iter=config["lbfgs_max_iter"], history_size=config["lbfgs_history"],
            tolerance_grad=config["lbfgs_tolerance_grad"], tolerance_change=config["lbfgs_tolerance_change"],
        )


class _OneAtATime(_Run):
    """Single-problem runs stepped in turn, as one run over their rows (the sequential path)."""

    def __init__(self, runs: list[_Run]) -> None:
        self.runs = runs

    def images(self) -> Tensor:
        return torch.cat([run.images() for run in self.runs])

    def logits(self) -> Tensor | None:
        logits = [run.logits() for run in self.runs]
        return None if logits[0] is None else torch.cat(logits)

    def step(self, lr: float, active: Tensor) -> Tensor:
        first = self.runs[0].images()
        out = torch.full((len(self.runs),), float("nan"), device=first.device, dtype=first.dtype)
        one = torch.ones(1, dtype=torch.bool, device=first.device)
        for p in active.nonzero().squeeze(1).tolist():
            out[p] = self.runs[p].step(lr, one)[0]
        return out

    def clamp_(self) -> None:
        for run in self.runs:
            run.clamp_()


class _BatchedLBFGSRun(_Run):
    """:class:`BatchedLBFGS` over rows [flattened image, label logits]; stopped rows are not evaluated."""

    def __init__(self, x0: Tensor, z0: Tensor | None, objective: Callable, config: dict) -> None:
        self.shape = x0.shape[1:]
        self.numel = x0[0].numel()
        flat = x0.reshape(x0.shape[0], -1)
        if z0 is not None:
            flat = torch.cat([flat, z0], dim=1)
        self.has_logits = z0 is not None
        self.objective = objective
        self.lbfgs = BatchedLBFGS(
            flat.clone(), max_iter=config["lbfgs_max_iter"], history_size=config["lbfgs_history"],
            tolerance_grad=config["lbfgs_tolerance_grad"], tolerance_change=config["lbfgs_tolerance_change"],
        )

    def images(self) -> Tensor:
        return self.lbfgs.x[:, : self.numel].view(-1, *self.shape)

    def logits(self) -> Tensor | None:
        return self.lbfgs.x[:, self.numel :] if self.has_logits else None

    def step(self, lr: float, active: Tensor) -> Tensor:
        rows = active.nonzero().squeeze(1)

        def closure(flat: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            x = flat[:, : self.numel].reshape(-1, *self.shape).clone().requires_grad_(True)
            leaves = [x]
            z = None
            if self.has_logits:
                z = flat[:, self.numel :].clone().requires_grad_(True)
                leaves.append(z)
            objective, matching = self.objective(x, z, rows)
            grads = torch.autograd.grad(objective.sum(), leaves)
            flat_grad = torch.cat([g.reshape(len(rows), -1) for g in grads], dim=1)
            return objective.detach(), flat_grad, matching.detach()

        _, matching = self.lbfgs.step(closure, rows, lr)
        out = torch.full((active.shape[0],), float("nan"), device=matching.device, dtype=matching.dtype)
        out[rows] = matching
        return out


# --- validation -------------------------------------------------------------------------------------------


def _resolve_settings(attack: str, overrides: dict[str, Any]) -> dict[str, Any]:
    config = preset_settings(attack)
    unknown = sorted(set(overrides) - set(config))
    if unknown:
        raise ValueError(
            f"unknown setting(s) {', '.join(map(repr, unknown))} for {attack}; valid: {', '.join(sorted(config))}"
        )
    config.update(overrides)
    for name, constraint in SETTINGS.items():
        config[name] = constraint.check(config[name], name)
    if config["signed"] and config["optimizer"] == "lbfgs":
        raise ValueError("signed=True needs optimizer='adam' (L-BFGS cannot use sign-only gradients)")
    if config["observation"] == "update" and config["local_lr"] is None:
        raise ValueError("local_lr is required when observation='update' (the client's learning rate)")
    return config


SETTINGS: dict[str, Constraint] = {
    "optimizer": Choice(OPTIMIZERS),
    "lr": POSITIVE,
    "iterations": COUNT,
    "distance": Choice(DISTANCES),
    "tv": NON_NEGATIVE,
    "signed": FLAG,
    "box": FLAG,
    "lr_decay": FLAG,
    "restarts": COUNT,
    "stop_loss": Optional(POSITIVE),
    "label_strategy": Choice(LABEL_STRATEGIES),
    "seed": SEED,
    "init": Choice(INITS),
    "device": TorchDevice(),
    "mode": Choice(MODES),
    "observation": Choice(OBSERVATIONS),
    "local_steps": COUNT,
    "local_lr": Optional(POSITIVE),
    "lbfgs_max_iter": COUNT,
    "lbfgs_history": COUNT,
    "lbfgs_tolerance_grad": NON_NEGATIVE,
    "lbfgs_tolerance_change": NON_NEGATIVE,
    "chunk": Optional(COUNT),
}
"""What each setting must be (``auditkit.validation``): ``invert`` checks the preset with its overrides."""


def _detach(t: Tensor | None) -> Tensor | None:
    return None if t is None else t.detach()
