"""The worst case a claim must cover: probe clients at a checkpoint round, inverted and identified.

An FL-faithful view (``auditkit.stages.inversion``) shows what the server learns from clients as they really
train (tau momentum steps over many examples). A per-round DP claim must hold for *every* client, including one
whose update is as revealing as possible. The probe measures that case, at the checkpoint round's global model:

* **inversion probe** (:func:`run_probe`): N probe clients each hold B real training examples (client i takes them
  from the data of FL client i mod K) and compute ``local_steps`` full-batch SGD steps (the round's learning rate
  and momentum) from the global model; each update goes through the mechanism (encode -> bytes -> decode, the
  server's view) and the server inverts it. The same attack runs on the clean updates. The reconstructions are
  scored against the client's examples (SSIM, MSE, PSNR) and, as the identification attack scores its picks,
  matched to the nearest of M candidates (the client's example and M - 1 other real examples).
* **identification** (:func:`identification_pool` + ``auditkit.attacks.identify``): the informed adversary's M-ary test on
  the same updates; ``auditkit.rero_verdicts`` turns its success rate and the claim's ReRo bound into a verdict. The
  pool's updates are held where they fit half the memory free when the stage starts, else written once to a
  temporary file and read back block by block, else recomputed block by block for each group of trials
  (:class:`TrainedPool`, :func:`candidate_pool`): never pool x P in memory at once.

Shared randomness is keyed by the seed: which examples, which candidates, the mechanism's shared seeds.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import dataclasses
import hashlib
import math
import tempfile

import numpy as np
import torch
from torch import nn

from auditkit import attacks
from auditkit import mechanisms
from auditkit.attacks import metrics
from auditkit.fl.local_training import LocalSteps, LocalTraining, train_clients_batched
from auditkit.fl.optimizers import LocalOptimizer
from auditkit.fl.spec import ClientMode, Optimizer
from auditkit.fl.simulation import FederatedData
from auditkit.config import AuditConfig, ConfigError
from auditkit.fl.memory import (STAGE_MEMORY, client_chunk, client_memory, disk_room, free_memory, model_device,
                                 size)
from auditkit.fl.params import trained_size
from auditkit.stage_store import stage_key
from auditkit.stages.base import GridFigure
from auditkit.mechanisms.randomness import derive_seed
from auditkit.stages.identification import claim_bound, identification_tests, matched_entry
from auditkit.attacks.budget import budget_entry
from auditkit.attacks.gradient_matching import attack_memory, default_chunk
from auditkit.stages.inversion import (PROBE_ITERATIONS, PROBE_STAGE_SECONDS, AttackBudget, as_the_clients_ran, attack_budget,
                                       budget_settings, check_attack_layers, clean_reference, halfway_ssim)
from auditkit.fl.params import load_flat_parameters
from auditkit.models import build_model
from auditkit.stages.setting import prepare_data
from auditkit.attacks.identification import (SCORING_BYTES, CandidateUpdates, HeldUpdates, SpilledUpdates,
                                            output_scorer, score_candidates)
from auditkit.mechanisms.densities import pair_log_densities

__all__ = ["ProbeClients", "SWEEP_GRID", "TrainedPool", "block_memory", "candidate_pool", "check_probe_inputs",
           "check_probe_memory", "defended_updates", "identification_pool", "probe_budget", "probe_chunk", "probe_memory",
           "matched_identification", "probe_clients", "probe_stage", "probe_updates", "reconstruction_sweep", "run_probe",
           "scaled_to_clip", "sweep_group", "targets_memory"]


@dataclass(frozen=True)
class ProbeClients:
    """N probe clients' examples (N x B x C x H x W) and labels (N x B), and their indices in the training split."""

    images: torch.Tensor
    labels: torch.Tensor
    indices: torch.Tensor


def check_probe_inputs(config: AuditConfig, data: FederatedData) -> None:
    """Raise ValueError (one line naming the key) when the probe or the identification test cannot run on ``data``:
    a probe batch larger than a client's data, more candidates than training examples."""
    smallest = min(len(ix) for ix in data.client_indices)
    if (config.probe.enabled or config.identification.enabled) and config.probe.batch_size > smallest:
        raise ValueError(f"probe.batch_size must be at most the {smallest} examples of the smallest client, "
                         f"got {config.probe.batch_size}")
    available = len(data.train.y) - (config.probe.batch_size - 1)
    if config.identification.enabled and max(config.identification.candidates) > available:
        raise ValueError(f"identification.candidates must be at most the {available} training examples available, "
                         f"got {max(config.identification.candidates)}")


def probe_chunk(model: nn.Module, images: torch.Tensor) -> int:
    """The probe clients trained at once (``client_chunk`` of their batches, K x B x C x H x W): a fixed budget, not
    the free memory, since the chunk changes a client's bits (``auditkit.fl.local_training``)."""
    return client_chunk(model, tuple(images.shape[2:]), images.shape[1], model_device(model))


def pool_size(config: AuditConfig, data: FederatedData) -> int:
    """How many training examples the identification pool holds: ``identification.pool``, else twice the largest
    candidate count and at least 200 (never more than the training examples beside the probe batch's companions)."""
    probe, ident = config.probe, config.identification
    if ident.pool is not None:
        wanted = ident.pool
    else:
        wanted = max(2 * max(ident.candidates), 200) if ident.enabled else max(probe.targets, 200)
    return min(wanted, len(data.train.y) - (probe.batch_size - 1))


PROBE_BYTES_PER_PARAMETER = 12  # a probe client's update (float32), its defended copy and one sweep point's
SCORED_BYTES_PER_PARAMETER = 20  # a pool row being scored: float32, its float64 copy and the clipped centres
POOL_DTYPE = torch.bfloat16  # the pool's rows are kept rounded to bfloat16, held or recomputed (``TrainedPool``)
HELD_BYTES_PER_PARAMETER = 2  # a pool row held (bfloat16)
OUTPUT_BYTES_PER_PARAMETER = 12  # an identification trial's output (float64) and its target (float32)
STAGE_SHARE = 0.5  # the share of the free memory the stage takes: the rest is left to what runs beside it
HOLD_GROUP = 8  # the pool is held when it leaves room for this many trials' outputs, else recomputed per group
SPILL_MARGIN = 2  # a pool not held is written to disk when twice its bytes are free there: the rest left to others


def probe_memory(config: AuditConfig, model: nn.Module, data: FederatedData) -> tuple[int, str]:
    """The least memory the probe and identification need, and what it is: one pool block in training or scored
    (``TrainedPool``, ``score_candidates``: ``block_memory``), and the larger of one trial's output (while the
    identification runs) and the probe clients' updates (``targets_memory``: after it). The pool itself is never
    needed whole: it is held when it fits, else recomputed block by block for each group of trials."""
    params = trained_size(model)
    block, needed = block_memory(config, model, data)
    needed += _beside_block(config, model)
    return needed, (f"{config.probe.targets:,} probe clients' and a pool block of {block:,} updates x {params:,} "
                    "parameters")


def block_memory(config: AuditConfig, model: nn.Module, data: FederatedData) -> tuple[int, int]:
    """The pool's block (rows trained at once) and what one block holds in training or scored."""
    example = data.train.x[:1].expand(config.probe.batch_size, *data.train.x.shape[1:])
    block = min(pool_size(config, data), probe_chunk(model, example[None]))
    per_client = client_memory(model, tuple(data.train.x.shape[1:]), config.probe.batch_size)
    return block, block * max(per_client, trained_size(model) * SCORED_BYTES_PER_PARAMETER)


def _beside_block(config: AuditConfig, model: nn.Module) -> int:
    """The least the stage holds beside a pool block: the larger of one trial's output and the probe clients'
    updates (never at once)."""
    return max(trained_size(model) * OUTPUT_BYTES_PER_PARAMETER, targets_memory(config, model))


def targets_memory(config: AuditConfig, model: nn.Module) -> int:
    """What the probe clients' updates (``PROBE_BYTES_PER_PARAMETER`` each) and the attack on them hold
    (``attack_memory``: its problems, at most the preset's restarts per client, a ``default_chunk`` at a time), once
    the identification is done."""
    params = trained_size(model)
    problems = config.probe.targets * attacks.preset_settings(config.probe.attack)["restarts"]
    attack = attack_memory(params, problems, default_chunk(params, model_device(model)))
    return config.probe.targets * params * PROBE_BYTES_PER_PARAMETER + attack


def check_probe_memory(config: AuditConfig, model: nn.Module, data: FederatedData) -> None:
    """Refuse, in one line before any stage runs, a probe and identification whose least memory (``probe_memory``)
    exceeds what is free (``free_memory``: MemAvailable, a cgroup's limit, ``[limits] max_memory_gib``)."""
    if not (config.probe.enabled or config.identification.enabled):
        return
    needed, what = probe_memory(config, model, data)
    limit, source = free_memory(config.limits.max_memory_gib)
    if limit is not None and needed > limit:
        raise ConfigError(f"the probe and identification need at least {size(needed)} ({what}) but {size(limit)} is "
                          f"free ({source}); lower probe.targets or training.client_chunk, or free memory")


def stage_memory(config: AuditConfig, model: nn.Module, data: FederatedData) -> int:
    """What the stage may hold beyond a pool block (``block_memory``): the pool when held, and first the trials'
    outputs, then the probe clients' updates and the outputs of the adversary's picks (the identification's outputs
    are gone by then). The stage takes ``STAGE_SHARE`` of what is free when it starts (``free_memory``), the rest
    left to what runs beside it; at least the larger of one trial's output and the probe clients' updates."""
    free, _ = free_memory(config.limits.max_memory_gib)
    _, block = block_memory(config, model, data)
    return max(_beside_block(config, model), int((STAGE_MEMORY if free is None else free) * STAGE_SHARE) - block)


@dataclass(frozen=True)
class TrainedPool:
    """The identification pool (``auditkit.attacks.identification.CandidateUpdates``): row i the update of a probe
    client holding pool example i and the target's companions (``images``: P x B x C x H x W), clip-scaled under
    ``scale = "clip"``, trained ``block`` rows at a time and rounded to ``dtype`` (``POOL_DTYPE``: half the memory
    of float32, ResNet-18's 200 rows in 4.5 GB). A row is always trained in the same block and rounded the same
    way, so recomputing it gives the same bits. The rounding is part of the game, not an approximation of it: the
    target's update is drawn from the same rounded rows the adversary scores, and a claim's bound holds for any
    candidates within its sensitivity (the mechanism clips what it is sent)."""

    model: nn.Module
    weights: torch.Tensor
    images: torch.Tensor
    labels: torch.Tensor
    mechanism: mechanisms.Mechanism
    local_steps: int
    lr: float
    momentum: float
    scale: str
    block: int
    dtype: torch.dtype = POOL_DTYPE

    @property
    def dimension(self) -> int:
        return int(self.weights.numel())

    def __len__(self) -> int:
        return len(self.images)

    def _trained(self, start: int) -> torch.Tensor:
        rows = slice(start, start + self.block)
        updates = probe_updates(self.model, self.weights, self.images[rows], self.labels[rows],
                                local_steps=self.local_steps, lr=self.lr, momentum=self.momentum, chunk=self.block)
        return (scaled_to_clip(self.mechanism, updates) if self.scale == "clip" else updates).to(self.dtype)

    def blocks(self) -> Iterator[tuple[int, torch.Tensor]]:
        for start in range(0, len(self), self.block):
            yield start, self._trained(start)

    def rows(self, indices: np.ndarray) -> torch.Tensor:
        indices = np.asarray(indices, dtype=np.int64)
        out = torch.empty(len(indices), self.dimension, dtype=self.dtype)
        for start in np.unique(indices // self.block * self.block):
            chosen = np.flatnonzero(indices // self.block * self.block == start)
            out[chosen] = self._trained(int(start))[torch.from_numpy(indices[chosen] - start)]
        return out

    def held(self) -> HeldUpdates:
        """Every row, trained once and held (the same bits as the blocks)."""
        held = torch.empty(len(self), self.dimension, dtype=self.dtype)
        for start, rows in self.blocks():
            held[start:start + len(rows)] = rows
        return HeldUpdates(held, self.block)


def candidate_pool(config: AuditConfig, mechanism: mechanisms.Mechanism, model: nn.Module, weights: torch.Tensor,
                   data: FederatedData, pool_rows: torch.Tensor, companions: torch.Tensor, *, lr: float,
                   memory: int) -> tuple[CandidateUpdates, int]:
    """The pool's updates (``TrainedPool``) and what is left of ``memory`` bytes beside it: held when that leaves
    room for ``HOLD_GROUP`` trials' outputs and for the probe clients' updates; else written once to a temporary
    file where the temporary folder's disk has room for it (``SpilledUpdates``: ``TMPDIR``, not a file system in
    memory: ``disk_room``) and read back block by block; else recomputed block by block for each group of trials."""
    batch = torch.cat([pool_rows[:, None], companions.expand(len(pool_rows), -1)], dim=1)
    images, labels = data.train.x[batch].cpu(), data.train.y[batch].cpu()
    pool = TrainedPool(model, weights, images, labels, mechanism, config.probe.local_steps, lr,
                       config.training.momentum, config.probe.scale, min(len(images), probe_chunk(model, images)))
    held = len(pool) * HELD_BYTES_PER_PARAMETER * pool.dimension
    beside = max(HOLD_GROUP * OUTPUT_BYTES_PER_PARAMETER * pool.dimension, targets_memory(config, model)
                 + OUTPUT_BYTES_PER_PARAMETER * pool.dimension)
    if held + beside <= memory:
        return pool.held(), memory - held
    folder = tempfile.gettempdir()
    if disk_room(folder) >= SPILL_MARGIN * held:
        return SpilledUpdates(pool, folder), memory
    return pool, memory


def probe_clients(data: FederatedData, count: int, batch_size: int, *, seed: int) -> ProbeClients:
    """``count`` probe clients, client i holding ``batch_size`` distinct examples of FL client i mod K's data."""
    generator = torch.Generator().manual_seed(derive_seed(seed, "probe-clients") % 2**63)
    rows = []
    for i in range(count):
        own = data.client_indices[i % len(data.client_indices)]
        if batch_size > len(own):
            raise ValueError(f"probe.batch_size must be at most the {len(own)} examples of the smallest client, "
                             f"got {batch_size}")
        rows.append(own[torch.randperm(len(own), generator=generator)[:batch_size]])
    indices = torch.stack(rows)
    return ProbeClients(data.train.x[indices].cpu(), data.train.y[indices].cpu(), indices)


def probe_updates(model: nn.Module, weights: torch.Tensor, images: torch.Tensor, labels: torch.Tensor, *,
                  local_steps: int, lr: float, momentum: float, chunk: int | None = None) -> torch.Tensor:
    """K x P updates w_after - w_before of K clients, each running ``local_steps`` full-batch momentum-SGD steps
    on its own B examples (``images``: K x B x C x H x W) from the global ``weights``, ``chunk`` clients at a time
    (default ``probe_chunk``)."""
    steps_in = images.unsqueeze(1).expand(-1, local_steps, *images.shape[1:])
    steps_y = labels.unsqueeze(1).expand(-1, local_steps, labels.shape[1])
    mode = ClientMode.TRAIN if model.training else ClientMode.EVAL  # as the clients ran (``as_the_clients_ran``)
    chunk = chunk or probe_chunk(model, images)
    training = LocalTraining(LocalOptimizer(Optimizer.SGD, lr, momentum), mode, chunk=chunk)
    after = train_clients_batched(model, weights, LocalSteps.gathered(steps_in, steps_y), training).params
    return (after - weights).detach()


def scaled_to_clip(mechanism: mechanisms.Mechanism, updates: torch.Tensor) -> torch.Tensor:
    """Each row rescaled to the mechanism's clipping norm ``clip`` in its ``clip_norm`` (l1 or l2): the largest
    update the claim's sensitivity covers. Unchanged for a mechanism without such a clip."""
    clip, norm = mechanism.params.get("clip"), mechanism.clip_norm
    if not clip or norm not in ("l1", "l2"):
        return updates
    lengths = torch.linalg.vector_norm(updates, 1 if norm == "l1" else 2, dim=1, keepdim=True)
    return updates * (clip / lengths.clamp(min=1e-30))


def defended_updates(mechanism: mechanisms.Mechanism, updates: torch.Tensor, *, seed: int) -> tuple[torch.Tensor, list[int]]:
    """Row i: decode(from_bytes(to_bytes(encode(u_i, s_i))), s_i), s_i keyed by (seed, i): the server's view of
    each probe client's real message; and each message's size in bits."""
    decoded, bits = [], []
    for i, row in enumerate(updates.float()):
        shared = derive_seed(seed, "probe-client", i)
        message = mechanism.encode(row, shared)
        decoded.append(mechanism.decode(type(message).from_bytes(message.to_bytes()), shared).float())
        bits.append(int(message.num_bits))
    return torch.stack(decoded), bits


def identification_pool(data: FederatedData, size: int, companions: torch.Tensor, *, seed: int) -> torch.Tensor:
    """Indices of ``size`` distinct training examples (the identification candidates), none of ``companions``."""
    taken = set(companions.flatten().tolist())
    free = torch.tensor([i for i in range(len(data.train.y)) if i not in taken])
    if size > len(free):
        raise ValueError(f"identification.candidates must be at most the {len(free)} training examples available, "
                         f"got {size}")
    generator = torch.Generator().manual_seed(derive_seed(seed, "identification-pool") % 2**63)
    return free[torch.randperm(len(free), generator=generator)[:size]]


def matched_identification(reconstructions: torch.Tensor, truth: torch.Tensor, others: torch.Tensor,
                           candidates: Sequence[int], *, seed: int) -> dict[int, int]:
    """For each M: how many reconstructions are nearer (pixel MSE) to their own example than to each of M - 1 other
    real examples drawn from ``others`` (the same test as the identification attack, on reconstructions)."""
    rng = np.random.default_rng(derive_seed(seed, "probe-matching"))
    flat_others = others.flatten(1).double()
    wins = dict.fromkeys(candidates, 0)
    for rec, own in zip(reconstructions.flatten(1).double(), truth.flatten(1).double()):
        drawn = rng.choice(len(flat_others), size=max(candidates) - 1, replace=False)
        distances = torch.cat([((rec - own) ** 2).sum()[None], ((flat_others[drawn] - rec) ** 2).sum(dim=1)]).numpy()
        for m in candidates:
            best = np.flatnonzero(distances[:m] == distances[:m].min())
            wins[m] += int(rng.choice(best) == 0)
    return wins


def run_probe(mechanism: mechanisms.Mechanism, model: nn.Module, weights: torch.Tensor, clients: ProbeClients, *,
              attack: str, local_steps: int, lr: float, momentum: float, settings: dict[str, Any],
              seed: int, scale: str = "clip") -> dict[str, Any]:
    """The inversion probe: clean and defended updates of the probe clients, both inverted with ``attack``.

    ``scale="clip"`` rescales the updates to the mechanism's clip (``scaled_to_clip``) before they are sent; the
    analytic and unrolled attacks read the update's direction, so the rescaling changes nothing for them but the
    noise's relative size. Returns the updates' message bits, and per run ("clean", "defended") the scores against each
    client's example that the clean reconstruction matches best (one assignment for both runs), the
    reconstructions, that example, and the labels recovered.
    """
    updates = probe_updates(model, weights, clients.images, clients.labels, local_steps=local_steps, lr=lr,
                            momentum=momentum)
    if scale == "clip":
        updates = scaled_to_clip(mechanism, updates)
    defended, bits = defended_updates(mechanism, updates, seed=seed)
    load_flat_parameters(model, weights.clone())
    shape = tuple(clients.images.shape[2:])
    options = {"seed": seed, **settings, "observation": "update", "local_steps": local_steps, "local_lr": lr}
    runs: dict[str, Any] = {"bits": bits, "updates": updates, "defended_updates": defended}
    truth = None
    for name, observed in (("clean", updates), ("defended", defended)):
        result = attacks.invert(attack, model, observed, input_shape=shape, **options)
        if truth is None:  # the clean run's matches are both runs' ground truth (one assignment)
            truth = _best_own(result.images, clients.images)
        runs[name] = {
            "scores": metrics.score(result.images, truth, labels=result.labels,
                                    true_labels=_labels_of(truth, clients)),
            "reconstructions": result.images, "truth": truth, "wall_time": result.wall_time,
            "ssim_at_half": halfway_ssim(result, truth),
        }
    return runs


def _best_own(reconstructions: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
    """Each client's example that its reconstruction resembles most (SSIM): itself for batch size 1."""
    if images.shape[1] == 1:
        return images[:, 0]
    best = []
    for rec, own in zip(reconstructions, images):
        best.append(own[int(np.argmax(metrics.ssim(rec[None].expand_as(own), own)))])
    return torch.stack(best)


def _labels_of(truth: torch.Tensor, clients: ProbeClients) -> torch.Tensor:
    """The label of each client's matched example."""
    labels = []
    for t, own, y in zip(truth, clients.images, clients.labels):
        labels.append(y[int(((own - t[None]) ** 2).flatten(1).sum(dim=1).argmin())])
    return torch.stack(labels)


# ------------------------------------------------------------------ where reconstruction begins

SWEEP_GRID = tuple(10 ** (k / 2) for k in range(-4, 15))  # half decades, 0.01 to 1e7
SWEEP_MIN_POINTS = 8
SWEEP_CLEAN_GAP = 0.02  # the defended mean SSIM "reaches" the clean one within this
RECONSTRUCTION_SSIM = 0.5  # mean SSIM from which a reconstruction counts as recognisable: the sweep's crossing


def _mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """The mean and its two-sided Student-t interval at ``confidence`` (the mean twice for one value)."""
    from scipy import stats

    array = np.asarray(values, dtype=np.float64)
    mean = float(array.mean())
    if len(array) < 2:
        return mean, mean, mean
    half = float(stats.t.ppf((1 + confidence) / 2, len(array) - 1) * array.std(ddof=1) / math.sqrt(len(array)))
    return mean, mean - half, mean + half


def _crossing(points: Sequence[dict[str, Any]], level: float) -> float | None:
    """The epsilon at which the mean SSIM first reaches ``level``, interpolated linearly in log epsilon between the
    grid points around it (the first point itself when it is already there); None when it never does."""
    for before, after in zip([None, *points[:-1]], points):
        if after["ssim"] >= level:
            if before is None:
                return after["eps"]
            fraction = (level - before["ssim"]) / (after["ssim"] - before["ssim"])
            return float(math.exp(math.log(before["eps"]) + fraction * math.log(after["eps"] / before["eps"])))
    return None


def sweep_group(mechanism: mechanisms.Mechanism) -> str:
    """The name of the settings that share a sweep: the mechanism with its parameters but the one recalibrated
    (those at their defaults left out, its clip kept), e.g. "cepam-gaussian (n=2, clip=0.1)"."""
    noise = type(mechanism).noise_param
    defaults = {spec.name: spec.default for spec in mechanism.params_spec}
    fixed = {k: v for k, v in mechanism.params.items()
             if k not in (noise, "eps", "delta") and (k == "clip" or v != defaults.get(k))}
    shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in fixed.items())
    return f"{mechanism.name} ({shown})" if shown else mechanism.name


def reconstruction_sweep(mechanism: mechanisms.Mechanism, model: nn.Module, weights: torch.Tensor,
                         truth: torch.Tensor, updates: torch.Tensor, clean_ssim: float, *, attack: str,
                         settings: dict[str, Any], seed: int, lr: float, local_steps: int, start: float,
                         candidates: Sequence[int]) -> dict[str, Any] | None:
    """Where reconstruction from one update begins: the probe's ``attack`` on the same (clip-scaled) ``updates``
    sent through ``mechanism`` recalibrated to each epsilon of ``SWEEP_GRID`` from ``start`` (the smallest audited
    claim) upwards (``auditkit.mechanisms.at_epsilon``), scored against ``truth`` (each probe client's example the clean
    reconstruction matched, N x C x H x W). The grid stops once
    the defended mean SSIM is within ``SWEEP_CLEAN_GAP`` of the clean attack's (``clean_ssim``) and at least
    ``SWEEP_MIN_POINTS`` points are in, or where the mechanism refuses the epsilon (``stopped`` says why).

    Per point: eps, the recalibrated parameters, mean SSIM and MSE with 95 % Student-t intervals over the
    clients, and the identification success the claim at that eps allows among each M of ``candidates`` (its
    ReRo bound, ``auditkit.stages.identification.claim_bound``). ``crossing_eps``: where mean SSIM crosses
    ``RECONSTRUCTION_SSIM`` (0.5; None if it never does). None when the mechanism cannot be recalibrated. No point
    is run where the clean attack itself stays below ``RECONSTRUCTION_SSIM``: noise does not help the attack, so no
    epsilon can reach the level, and on a large model each point costs a whole run (``stopped`` says so)."""
    if type(mechanism).noise_param is None and "eps" not in mechanism.params:
        return None  # its claim is not set by a parameter: nothing to recalibrate
    if clean_ssim < RECONSTRUCTION_SSIM:
        return {"group": sweep_group(mechanism), "attack": attack, "targets": len(truth), "clean_ssim": clean_ssim,
                "level": RECONSTRUCTION_SSIM, "crossing_eps": None, "reaches_clean_eps": None,
                "stopped": (f"not run: the clean attack's mean SSIM ({clean_ssim:.2g}) is below {RECONSTRUCTION_SSIM:g} "
                            "at this budget, so no ε can reach it (a larger [probe] iterations might)"),
                "points": []}
    below = [eps for eps in SWEEP_GRID if eps <= start * (1 + 1e-9)]
    grid = [eps for eps in SWEEP_GRID if eps >= (below[-1] if below else SWEEP_GRID[0])]
    shape = tuple(truth.shape[1:])
    options = {"seed": seed, **settings, "observation": "update", "local_steps": local_steps, "local_lr": lr}
    points: list[dict[str, Any]] = []
    stopped = None
    for eps in grid:
        try:
            at = mechanisms.at_epsilon(mechanism, eps)
        except ValueError as err:
            stopped = f"stopped at ε = {eps:.4g}: {err}"
            break
        defended, _ = defended_updates(at, updates, seed=seed)
        load_flat_parameters(model, weights.clone())
        result = attacks.invert(attack, model, defended, input_shape=shape, **options)
        scores = metrics.score(result.images, truth)
        ssim, ssim_low, ssim_high = _mean_interval(scores["ssim"])
        mse, mse_low, mse_high = _mean_interval(scores["mse"])
        points.append({
            "eps": float(eps), "params": {k: v for k, v in at.params.items() if v != mechanism.params.get(k)},
            "ssim": ssim, "ssim_interval": [ssim_low, ssim_high], "mse": mse, "mse_interval": [mse_low, mse_high],
            "rero_bound": {str(m): claim_bound(at, m, updates.shape[1])[0] for m in candidates},
        })
        if len(points) >= SWEEP_MIN_POINTS and ssim >= clean_ssim - SWEEP_CLEAN_GAP:
            break
    reached = next((p["eps"] for p in points if p["ssim"] >= clean_ssim - SWEEP_CLEAN_GAP), None)
    return {"group": sweep_group(mechanism), "attack": attack, "targets": len(truth), "clean_ssim": clean_ssim,
            "level": RECONSTRUCTION_SSIM, "crossing_eps": _crossing(points, RECONSTRUCTION_SSIM),
            "reaches_clean_eps": reached, "stopped": stopped, "points": points}


# ------------------------------------------------------------------ the audit's probe stage

_KEEP = ("ssim_mean", "mse_mean", "psnr_mean", "ssim", "mse", "psnr", "label_accuracy")


def probe_stage(config: AuditConfig, mechanism: mechanisms.Mechanism, saved: dict[str, Any], *, figure_id: str,
                label: str, per_test_confidence: float, sweep_start: float | None = None,
                sweeps: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[GridFigure]]:
    """What the audit's ``probe`` stage stores for one setting: its ``probe`` and ``identification`` sections
    (either null when disabled), and the probe's grids for ``figures/``, the defended reconstructions and the clean
    reference (the caller draws them: ``auditkit.figure_files.write_grid``). With
    ``probe.sweep`` and a claim, the probe section carries the reconstruction sweep from ``sweep_start`` (the
    smallest claim audited for this mechanism; default its own); ``sweeps`` caches sweeps by their inputs, so
    settings that differ only in their epsilon compute one."""
    probe, ident, seed = config.probe, config.identification, config.seed
    data, shape, classes, _ = prepare_data(config)
    model = build_model(config.training, shape, classes)
    normalisation = as_the_clients_ran(model, saved.get("buffers", {}), config.training.client_mode, tuple(shape))
    if probe.enabled:
        check_attack_layers(probe.attack, model, classes, where="probe.attack", model_name=config.training.model)
    weights, lr, momentum = saved["weights"], float(saved["lr"]), config.training.momentum
    clients = probe_clients(data, probe.targets, probe.batch_size, seed=seed)
    companions = clients.indices[0, 1:]  # the informed adversary knows the rest of the target's batch
    pool_rows = identification_pool(data, pool_size(config, data), companions, seed=seed)
    if ident.enabled and max(ident.candidates) > len(pool_rows):
        raise ValueError(f"identification.candidates must be at most the {len(pool_rows)} training examples "
                         f"available, got {max(ident.candidates)}")
    pool_updates, memory = candidate_pool(config, mechanism, model, weights, data, pool_rows, companions, lr=lr,
                                          memory=stage_memory(config, model, data))
    identification = None
    if ident.enabled and mechanism.guarantee().epsilon is not None:
        identification = identification_tests(mechanism, pool_updates, candidates=ident.candidates,
                                              trials=ident.trials, per_test_confidence=per_test_confidence,
                                              confidence=config.distinguish.confidence, seed=seed,
                                              memory_bytes=memory)
    section, figures = None, []
    if probe.enabled:
        section, run, grids = _probe_section(config, mechanism, model, weights, clients, pool_rows, pool_updates,
                                             data, lr=lr, momentum=momentum, figure_id=figure_id, label=label,
                                             memory=max(memory - targets_memory(config, model),
                                                        trained_size(model) * OUTPUT_BYTES_PER_PARAMETER))
        figures.extend(grids)
        section["normalisation"] = normalisation
        claimed = mechanism.guarantee().epsilon
        budget = budget_settings(probe.attack, probe_budget(config, model, shape))
        if probe.sweep and claimed is not None:
            start = claimed if sweep_start is None else sweep_start
            key = stage_key({"group": sweep_group(mechanism), "weights": hashlib.sha256(
                weights.numpy().tobytes()).hexdigest(), "probe": dataclasses.asdict(probe), "seed": seed,
                "lr": lr, "start": start, "candidates": list(ident.candidates)})
            cache = {} if sweeps is None else sweeps
            if key not in cache:
                cache[key] = reconstruction_sweep(
                    mechanism, model, weights, run["clean"]["truth"], run["updates"], section["clean"]["ssim_mean"],
                    attack=probe.attack, settings=budget, seed=seed,
                    lr=lr, local_steps=probe.local_steps, start=start, candidates=ident.candidates)
            if cache[key] is not None:
                section["sweep"] = cache[key]
    return {"probe": section, "identification": identification}, figures


PROBE_RUNS = 2 + SWEEP_MIN_POINTS  # the probe's runs at the default budget: clean, defended, the sweep's points


def probe_budget(config: AuditConfig, model: nn.Module, input_shape: tuple[int, ...]) -> AttackBudget:
    """The probe attack's budget (``auditkit.stages.inversion.attack_budget``): ``probe.iterations``, else the
    device's default, on a CPU within ``PROBE_STAGE_SECONDS`` for its runs together."""
    probe = config.probe
    runs = PROBE_RUNS if probe.sweep else 2
    return attack_budget(probe.attack, probe.iterations, None, cpu_default=PROBE_ITERATIONS, model=model,
                         input_shape=input_shape, targets=probe.targets, seconds=PROBE_STAGE_SECONDS / runs)


def _probe_section(config: AuditConfig, mechanism: mechanisms.Mechanism, model: nn.Module, weights: torch.Tensor,
                   clients: ProbeClients, pool_rows: torch.Tensor, pool_updates: CandidateUpdates, data: FederatedData,
                   *, lr: float, momentum: float, figure_id: str, label: str,
                   memory: int) -> tuple[dict[str, Any], dict[str, Any], tuple[GridFigure, GridFigure]]:
    """The probe section, the probe's run (its clip-scaled updates, for the sweep) and its grids: the defended
    reconstructions (rows ground truth, defended, the adversary's picks) and the clean reference
    (``auditkit.stages.inversion.clean_reference``: shared by the settings whose clean probe is the same);
    ``memory``: what the adversary's picks may hold of the scored outputs."""
    probe, seed = config.probe, config.seed
    candidates = list(config.identification.candidates)
    budget = probe_budget(config, model, tuple(clients.images.shape[2:]))
    run = run_probe(mechanism, model, weights, clients, attack=probe.attack, local_steps=probe.local_steps, lr=lr,
                    momentum=momentum, settings=budget_settings(probe.attack, budget), seed=seed,
                    scale=probe.scale)
    others = data.train.x[pool_rows].cpu()
    fit = [m for m in candidates if m - 1 <= len(others)]
    matched = {name: matched_identification(run[name]["reconstructions"], run[name]["truth"], others, fit, seed=seed)
               for name in ("clean", "defended")}
    confidence = config.distinguish.confidence
    truth = run["defended"]["truth"].numpy()
    rows = {"truth": truth, "defended": run["defended"]["reconstructions"].numpy()}
    captions = {"defended": [f"SSIM {v:.2f}" for v in run["defended"]["scores"]["ssim"]]}
    if probe.batch_size == 1 and mechanism.guarantee().epsilon is not None:
        picked, hits = _adversary_picks(mechanism, run["defended_updates"], run["updates"], run["defended"]["truth"],
                                        pool_updates, others, max(candidates), seed=seed, memory_bytes=memory)
        rows[f"picked of {max(candidates)}"] = picked.numpy()
        captions[f"picked of {max(candidates)}"] = ["target" if h else "wrong" for h in hits]
    figure = f"figures/probe-{figure_id}.png"
    attacked = (f"probe: {probe.attack}, {probe.targets} clients x {probe.batch_size} example(s), "
                f"{probe.local_steps} step(s), round {config.probe_round}")
    title = f"{attacked}: {label}"
    clean = clean_reference("probe", truth, run["clean"]["reconstructions"].numpy(), run["clean"]["scores"]["ssim"],
                            f"{attacked}{_scaled(mechanism, probe.scale)}: clean reference (no mechanism)")
    bits = float(np.mean(run["bits"])) / run["updates"].shape[1]
    return {
        "attack": probe.attack, "round": config.probe_round, "targets": probe.targets,
        "batch_size": probe.batch_size, "local_steps": probe.local_steps, "model": config.training.model,
        "observation": (f"one probe client's update ({probe.local_steps} full-batch step(s) on {probe.batch_size} "
                        "example(s)" + (", rescaled to the mechanism's clip" if probe.scale == "clip" else "")
                        + ") through the mechanism, decoded by the server"),
        "ssim_variant": run["defended"]["scores"]["ssim_variant"],
        "clean": {k: run["clean"]["scores"][k] for k in _KEEP},
        "defended": {k: run["defended"]["scores"][k] for k in _KEEP},
        "bits_per_coordinate": bits,
        "matched": {name: matched_entry(mechanism, matched[name], probe.targets, confidence, run["updates"].shape[1])
                    for name in matched},
        "figure": figure,
        "clean_figure": clean.path,
        "budget": budget_entry(budget_settings(probe.attack, budget), targets=probe.targets,
                               estimated_seconds=budget.estimated_seconds,
                               clean=(run["clean"]["ssim_at_half"], run["clean"]["scores"]["ssim_mean"]),
                               defended=(run["defended"]["ssim_at_half"], run["defended"]["scores"]["ssim_mean"])),
    }, run, (GridFigure(figure, rows, captions, title), clean)


def _scaled(mechanism: mechanisms.Mechanism, scale: str) -> str:
    """How the probe's updates were sent (``scaled_to_clip``): the clean attack differs between clips."""
    clip = mechanism.params.get("clip")
    if scale != "clip" or not clip or mechanism.clip_norm not in ("l1", "l2"):
        return ", updates as computed"
    return f", updates rescaled to {mechanism.clip_norm} norm {clip:g}"


def _adversary_picks(mechanism: mechanisms.Mechanism, defended: torch.Tensor, own: torch.Tensor,
                     own_images: torch.Tensor, pool_updates: CandidateUpdates, others: torch.Tensor, m: int, *,
                     seed: int, memory_bytes: int = SCORING_BYTES) -> tuple[torch.Tensor, list[bool]]:
    """For each probe client: the candidate the identification adversary picks among its own example and m - 1
    pool examples, given the client's defended update; the picked images and whether each pick was right. Column 0
    of the score table is the client's own update, the pool's columns are streamed (``score_candidates``), for
    groups of clients whose outputs and own updates in float64 fit ``memory_bytes``."""
    rng = np.random.default_rng(derive_seed(seed, "probe-picks"))
    count = len(defended)
    drawn = np.stack([rng.choice(len(pool_updates), size=m - 1, replace=False) for _ in range(count)])
    _, log_density = output_scorer(mechanism)
    group = max(1, memory_bytes // (16 * defended.shape[1]))
    table = np.empty((count, m), dtype=np.float64)
    for start in range(0, count, group):
        chosen = np.arange(start, min(start + group, count))
        ys = defended[chosen].double().numpy()
        mine = pair_log_densities(log_density, ys, own[chosen].double().numpy(), np.arange(len(chosen)),
                                  np.arange(len(chosen)))
        table[chosen] = np.concatenate([mine[:, None], score_candidates(log_density, ys, pool_updates,
                                                                        drawn[chosen])], axis=1)
        del ys  # as ``identify``: the next group's outputs are not built beside these
    picked, hits = [], []
    for i, s in enumerate(table):
        choice = int(rng.choice(np.flatnonzero(s == s.max())))
        hits.append(choice == 0)
        picked.append(others[drawn[i, choice - 1]] if choice else own_images[i])
    return torch.stack(picked), hits
