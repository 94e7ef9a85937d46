"""The FL runs membership inference attacks: a target run and ``references`` reference runs of the same config on
re-drawn memberships, trained together (``auditkit.fl.stacked``), and each run's final global model's logits on
the candidates' records and on a held-out population (what ``auditkit.attacks.membership`` scores).

The game (Carlini et al. 2022, Sec. IV; Zarifzadeh et al. 2024, Sec. 2), in FL:

* record level: ``records`` records of the partitioned training data, drawn once; in a run each is in its
  client's data (``members[r, i]``) or removed from it;
* client level: every client of the federation is a candidate; the clients out of a run are absent from it (the
  federation has the others).

The view attacked: ``public``, each run's final global model (what ships); ``server`` (record level, full
participation), the model each client sent in the last round as the server decodes it, the global model it started
from plus its decoded update, a record read in its owner's model (and the population in each client's).

``mislabelled`` record candidates carry a wrong label, drawn once from the stream (seed, "membership-mislabel"), in
every run: records a model fits only by memorising them, the canaries of DP audits (ML Privacy Meter's DP audit).

In every run every candidate is in with probability 1/2, independently: what the one-run bound needs of the target,
and what keeps the pooled ROC honest. (Carlini et al.'s reference code puts each candidate in exactly half of the
runs; taking each run as the target in turn, the others then hold one IN run fewer exactly when the target is IN,
and with few runs LiRA's fitted spreads follow that count: with no signal at all, 8 references gave AUCs of 0.45.)

Run 0 is the target: the audit's seed, its training and mechanism randomness. Reference run r >= 1 trains with the
seed ``derive_seed(seed, "membership-reference", r)``. The memberships come from the stream keyed by
(seed, "membership-split"), the record candidates from (seed, "membership-candidates"), the population from
(seed, "membership-population"), each unrelated to the rest (SHA-256 domain separation): the same config and seed
give the same runs. Everything but the memberships and the runs' randomness is shared: the data, its split into
train / validation / test and the partition of the records that are not candidates.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import functional_call

from auditkit.config import AuditConfig, ConfigError
from auditkit.data import Split
from auditkit.fl.simulation import FederatedData, FederatedSimulation, RoundRecord, SimulationResult
from auditkit.mechanisms.views import View
from auditkit.fl.stacked import run_stacked
from auditkit.mechanisms.randomness import derive_seed
from auditkit.models import build_model
from auditkit.stages.setting import build_mechanism, build_protocol, prepare_data, resolve_device

__all__ = ["MembershipRuns", "membership_runs", "reference_seed"]


@dataclass(frozen=True)
class MembershipRuns:
    """The runs' memberships and their final models' outputs (float64 logits), run 0 the target.

    members (R + 1, N): candidate i in run r; logits (R + 1, M, C) on the candidates' M records, labels (M,);
    owner (M,): the candidate each record belongs to (record level: M = N, owner i = i); population_logits
    (R + 1, G, Z, C) on Z held-out records never trained on, read in G models per run (the public view: one; the
    server view: each client's), population_labels (Z,), group (M,): the model each record is read in;
    test_accuracy per run; seconds: the training time of all runs together."""

    members: np.ndarray
    logits: np.ndarray
    labels: np.ndarray
    owner: np.ndarray
    population_logits: np.ndarray
    population_labels: np.ndarray
    group: np.ndarray
    test_accuracy: np.ndarray
    seconds: float

    @property
    def record_members(self) -> np.ndarray:
        """(R + 1, M): whether each candidate record was trained on in each run."""
        return self.members[:, self.owner]


def reference_seed(seed: int, run: int) -> int:
    """The seed of run ``run`` (0: the target, the audit's own seed)."""
    return seed if run == 0 else derive_seed(seed, "membership-reference", run)


def membership_runs(config: AuditConfig, *, stacked: bool = True,
                    on_round: Callable[[int, RoundRecord], None] | None = None) -> MembershipRuns:
    """Train the target and the reference runs of ``config``'s ``[membership]`` game (module docstring), together
    (``stacked``) or one after another, and read their final models' logits."""
    m = config.membership
    device = resolve_device(config.device)
    data, input_shape, classes, _ = prepare_data(config)
    runs = m.references + 1
    if m.level == "record":
        candidates = _record_candidates(data, m.records, derive_seed(config.seed, "membership-candidates"))
        owner = np.arange(len(candidates))
        if m.mislabelled:
            data = _mislabelled(data, candidates, classes, derive_seed(config.seed, "membership-mislabel"))
    else:
        candidates, owner = _client_records(data)
    count = len(candidates) if m.level == "record" else len(data.client_indices)
    split = np.random.default_rng(derive_seed(config.seed, "membership-split"))
    members = split.random((runs, count)) < 0.5
    population = _population(data, m.population, derive_seed(config.seed, "membership-population"))
    if m.view == View.SERVER:  # the server's view of the last round is recorded
        config = dataclasses.replace(config, training=dataclasses.replace(config.training,
                                                                          checkpoints=(config.training.rounds,)))
    simulations = [_simulation(config, data, members[r], candidates, m.level, r, input_shape, classes, device)
                   for r in range(runs)]
    start = time.perf_counter()
    if stacked:
        results = run_stacked(simulations, on_round)
    else:
        results = [sim.run(None if on_round is None else (lambda record, r=r: on_round(r, record)))
                   for r, sim in enumerate(simulations)]
    seconds = time.perf_counter() - start
    pool, z = data.train, data.test.x[population]
    if m.view == View.SERVER:
        holder = _holders(data, candidates)
        read = [_server_models(sim, result, len(data.client_indices)) for sim, result in zip(simulations, results)]
        logits = np.stack([_logits_in(sim, models, pool.x[candidates], holder)
                           for sim, models in zip(simulations, read)])
        population_logits = np.stack([np.stack([_logits_in(sim, models, z, np.full(len(z), k))
                                                for k in range(len(models))], axis=0)
                                      for sim, models in zip(simulations, read)])
        group = holder
    else:
        logits = np.stack([_logits(sim, pool.x[candidates]) for sim in simulations])
        population_logits = np.stack([_logits(sim, z) for sim in simulations])[:, None]
        group = np.zeros(len(candidates), dtype=int)
    accuracy = np.array([result.rounds[-1].test_accuracy for result in results])
    return MembershipRuns(members, logits, pool.y[candidates].numpy(), owner, population_logits,
                          data.test.y[population].numpy(), group, accuracy, seconds)


def _record_candidates(data: FederatedData, count: int, seed: int) -> torch.Tensor:
    """``count`` distinct records held by some client, in a keyed random order."""
    held = torch.cat(data.client_indices)
    if count > len(held):
        raise ConfigError(f"membership.records must be at most the {len(held)} records the clients hold, got {count}")
    order = torch.randperm(len(held), generator=torch.Generator().manual_seed(seed % 2**63))
    return held[order[:count]]


def _mislabelled(data: FederatedData, candidates: torch.Tensor, classes: int, seed: int) -> FederatedData:
    """The data with every candidate's label moved to another class, uniformly at random (keyed), in every run."""
    labels = data.train.y.clone()
    shift = torch.randint(1, classes, (len(candidates),), generator=torch.Generator().manual_seed(seed % 2**63))
    labels[candidates] = (labels[candidates] + shift.to(labels.device)) % classes
    return FederatedData(Split(data.train.x, labels), data.validation, data.test, data.client_indices)


def _client_records(data: FederatedData) -> tuple[torch.Tensor, np.ndarray]:
    """Every client's records, in client order, and the client each belongs to."""
    owner = np.concatenate([np.full(len(ix), k) for k, ix in enumerate(data.client_indices)])
    return torch.cat(data.client_indices), owner


def _population(data: FederatedData, count: int, seed: int) -> torch.Tensor:
    """``count`` test records (never trained on), in a keyed random order."""
    if count > len(data.test.y):
        raise ConfigError(f"membership.population must be at most the {len(data.test.y)} test records, got {count}")
    return torch.randperm(len(data.test.y), generator=torch.Generator().manual_seed(seed % 2**63))[:count]


def _simulation(config: AuditConfig, data: FederatedData, members: np.ndarray, candidates: torch.Tensor, level: str,
                run: int, input_shape: tuple[int, int, int], classes: int, device: torch.device) -> FederatedSimulation:
    """Run ``run`` of the game: the shared data with this run's memberships, its own seed."""
    run_config = dataclasses.replace(config, seed=reference_seed(config.seed, run))
    if level == "record":
        out = candidates[torch.as_tensor(~members)]
        indices = [ix[~torch.isin(ix, out)] for ix in data.client_indices]
        empty = [k for k, ix in enumerate(indices) if len(ix) == 0]
        if empty:
            raise ConfigError(f"membership.records leaves client {empty[0]} without records in run {run}; "
                              "test fewer records")
    else:
        indices = [ix for ix, member in zip(data.client_indices, members) if member]
        if not indices:
            raise ConfigError(f"membership run {run} drew no client into the federation; use more training.clients")
        training = dataclasses.replace(config.training, clients=len(indices))
        run_config = dataclasses.replace(run_config, training=training)
    run_data = FederatedData(data.train, data.validation, data.test, indices)
    mechanism = build_mechanism(run_config)
    model = build_model(run_config.training, input_shape, classes, dp_sgd=config.dp_sgd.enabled)
    return FederatedSimulation(model, run_data, build_protocol(mechanism, run_config), run_config.training,
                               seed=run_config.seed, device=device, dp_sgd=config.dp_sgd)


def _holders(data: FederatedData, candidates: torch.Tensor) -> np.ndarray:
    """The client whose data holds each candidate record (in the partition)."""
    holder = torch.empty(len(data.train.y), dtype=torch.long)
    for k, ix in enumerate(data.client_indices):
        holder[ix] = k
    return holder[candidates].numpy()


def _server_models(simulation: FederatedSimulation, result: SimulationResult, clients: int) -> list[torch.Tensor]:
    """Each client's model as the server decodes it in the last round: the global model it started from plus its
    decoded update (``ConfigError`` where the protocol gives no decoded update per client)."""
    observation = result.observations[-1]
    server = observation.views.get(View.SERVER)
    if not isinstance(server, torch.Tensor) or server.shape[0] != len(observation.clients) or \
            sorted(observation.clients) != list(range(clients)):
        raise ConfigError("membership.view = 'server' needs a round protocol whose server view is one decoded update "
                          f"per client and every client in the last round; {simulation.protocol.name} gives "
                          f"{type(server).__name__} (use membership.view = 'public')")
    by_client = dict(zip(observation.clients, server))
    return [observation.global_before + by_client[k].to(observation.global_before.dtype) for k in range(clients)]


@torch.no_grad()
def _logits_in(simulation: FederatedSimulation, models: list[torch.Tensor], x: torch.Tensor,
               which: np.ndarray) -> np.ndarray:
    """Logits of ``x[i]`` in model ``models[which[i]]``, eval mode with the global buffers, float64."""
    rows = []
    for k in np.unique(which):
        at = np.flatnonzero(which == k)
        params = simulation.layout.unflatten(models[k].to(simulation.device))
        logits = functional_call(simulation.model.eval(), (params, simulation.evaluation_buffers()),
                                 (x[torch.as_tensor(at)].to(simulation.device),)).double().cpu().numpy()
        rows.append((at, logits))
    out = np.empty((len(x), rows[0][1].shape[1]))
    for at, logits in rows:
        out[at] = logits
    return out


@torch.no_grad()
def _logits(simulation: FederatedSimulation, x: torch.Tensor, batch_size: int = 4096) -> np.ndarray:
    """The final global model's logits on ``x`` in eval mode (the model that ships), float64."""
    model = simulation.model.eval()
    params = simulation.layout.unflatten(simulation.params)
    buffers = simulation.evaluation_buffers()
    out = [functional_call(model, (params, buffers), (x[i:i + batch_size].to(simulation.device),)).double().cpu()
           for i in range(0, len(x), batch_size)]
    return torch.cat(out).numpy()
