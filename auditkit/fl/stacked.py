"""Several FL runs of one architecture trained together: each round, the clients of every run are one batched
local-training program (``train_clients_batched`` with per-client starts), then each run goes on alone (its own
protocol, aggregation, evaluation, schedule).

What membership inference's reference runs need (``auditkit.stages.membership``): R runs of the same config on
re-drawn memberships cost about one run's kernel launches instead of R runs'. Every run keeps its own keyed
randomness (selection, batches, mechanism), so a run trained here gives the numbers it gives alone, up to the
rounding of a differently batched matrix product; only dropout's draws differ (one stream per round, the first
run's). DP-SGD's Poisson batches are not stacked: such runs are trained one after another. The runs train on
the first run's model, so they must hold the same frozen parameters (``auditkit.fl.params``; ``build_model`` builds
every run's the same).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import groupby

import torch

from auditkit.fl.local_training import LocalResult, LocalSteps, LocalTraining, train_clients_batched
from auditkit.fl.params import frozen_parameters
from auditkit.fl.simulation import FederatedSimulation, RoundRecord, RoundStart, SimulationResult
from auditkit.mechanisms.randomness import derive_seed

__all__ = ["run_stacked"]


def run_stacked(simulations: Sequence[FederatedSimulation],
                on_round: Callable[[int, RoundRecord], None] | None = None) -> list[SimulationResult]:
    """Train ``simulations`` (one architecture, one number of rounds) together; ``on_round(run, record)`` after each
    run's round. Returns each run's result, in order."""
    if not simulations:
        return []
    rounds = {sim.training.rounds for sim in simulations}
    if len(rounds) != 1:
        raise ValueError(f"stacked runs must train the same number of rounds, got {sorted(rounds)}")
    if any(sim.dp_sgd is not None and sim.dp_sgd.enabled for sim in simulations):
        return [sim.run(None if on_round is None else (lambda record, r=r: on_round(r, record)))
                for r, sim in enumerate(simulations)]
    if not all(_same_frozen(simulations[0], sim) for sim in simulations[1:]):
        raise ValueError("stacked runs must hold the same frozen parameters (requires_grad=False): they all train "
                         "on the first run's model")
    records: list[list[RoundRecord]] = [[] for _ in simulations]
    observations: list[list] = [[] for _ in simulations]
    for round_ in range(1, rounds.pop() + 1):
        starts = [sim.begin_round(round_) for sim in simulations]
        taking = [r for r, start in enumerate(starts) if start.clients]
        local = _train_together(simulations, starts, taking, round_)
        for r, (sim, start) in enumerate(zip(simulations, starts)):
            exchanged = (sim.deliver(start.clients, local[r], round_, start.before) if r in local else None)
            record, observation = sim.end_round(start, exchanged)
            records[r].append(record)
            if observation is not None:
                observations[r].append(observation)
            if on_round is not None:
                on_round(r, record)
    return [SimulationResult(records[r], sim.params.detach().cpu(), observations[r], sim.layout.size)
            for r, sim in enumerate(simulations)]


def _same_frozen(a: FederatedSimulation, b: FederatedSimulation) -> bool:
    ours, theirs = frozen_parameters(a.model), frozen_parameters(b.model)
    return ([n for n, _ in ours] == [n for n, _ in theirs]
            and all(torch.equal(p, q.to(p.device)) for (_, p), (_, q) in zip(ours, theirs)))


def _train_together(simulations: Sequence[FederatedSimulation], starts: list[RoundStart], taking: list[int],
                    round_: int) -> dict[int, LocalResult]:
    """Local training of the clients of runs ``taking``, one batched program per learning rate (plateau schedules
    may part the runs); keyed by the run's index."""
    out: dict[int, LocalResult] = {}
    order = sorted(taking, key=lambda i: starts[i].lr)
    for _, group in groupby(order, key=lambda i: starts[i].lr):
        members = list(group)
        results = _train_group([simulations[i] for i in members], [starts[i] for i in members], round_)
        out.update(zip(members, results))
    return out


def _train_group(simulations: list[FederatedSimulation], starts: list[RoundStart],
                 round_: int) -> list[LocalResult]:
    first = simulations[0]
    inputs = [sim.client_inputs(start.clients, start.batches) for sim, start in zip(simulations, starts)]
    sizes = [len(start.clients) for start in starts]
    steps = _stack_steps([steps for steps, _, _ in inputs])
    state = _cat([state for _, state, _ in inputs])
    buffers = _cat([_per_client(first, buffers, size) for (_, _, buffers), size in zip(inputs, sizes)])
    begin = torch.cat([start.before.expand(size, -1) for start, size in zip(starts, sizes)])
    training: LocalTraining = first.local_training(starts[0].lr)
    device = first.device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(derive_seed(first.seed, "dropout", round_))  # only dropout draws from it
        local = train_clients_batched(first.model, begin, steps, training, state=state, buffers=buffers)
    return _split(local, sizes)


def _stack_steps(parts: list[LocalSteps]) -> LocalSteps:
    """The steps of several runs' clients as one ``LocalSteps``: shared examples once, indices shifted, shorter
    runs padded with inactive steps."""
    pools: list[LocalSteps] = []
    offsets = []
    for part in parts:
        known = next((i for i, pool in enumerate(pools) if pool.x is part.x and pool.y is part.y), None)
        if known is None:
            pools.append(part)
            known = len(pools) - 1
        offsets.append(sum(len(pool.y) for pool in pools[:known]))
    longest = max(part.steps for part in parts)
    indices, active = [], []
    for part, offset in zip(parts, offsets):
        pad = longest - part.steps
        taken = (torch.ones(part.clients, part.steps, dtype=torch.bool, device=part.indices.device)
                 if part.active is None else part.active.to(torch.bool))
        indices.append(torch.nn.functional.pad(part.indices + offset, (0, 0, 0, pad)))
        active.append(torch.nn.functional.pad(taken, (0, pad)))
    uniform = all(part.active is None for part in parts) and all(part.steps == longest for part in parts)
    x = pools[0].x if len(pools) == 1 else torch.cat([pool.x for pool in pools])
    y = pools[0].y if len(pools) == 1 else torch.cat([pool.y for pool in pools])
    return LocalSteps(x, y, torch.cat(indices), None if uniform else torch.cat(active))


def _per_client(simulation: FederatedSimulation, buffers: dict[str, torch.Tensor],
                size: int) -> dict[str, torch.Tensor]:
    """Buffers shared by a run's clients (the model's shapes) repeated per client (size, ...)."""
    own = dict(simulation.model.named_buffers())
    return {k: v if v.dim() != own[k].dim() else v.expand(size, *v.shape) for k, v in buffers.items()}


def _cat(parts: list[dict[str, torch.Tensor] | None]) -> dict[str, torch.Tensor] | None:
    if parts[0] is None or not parts[0]:
        return parts[0]
    return {k: torch.cat([part[k] for part in parts]) for k in parts[0]}


def _split(local: LocalResult, sizes: list[int]) -> list[LocalResult]:
    pieces = lambda t: torch.split(t, sizes)  # noqa: E731
    state = {k: pieces(v) for k, v in local.state.items()}
    buffers = {k: pieces(v) for k, v in local.buffers.items()}
    return [LocalResult(params, {k: v[i] for k, v in state.items()}, {k: v[i] for k, v in buffers.items()}, loss)
            for i, (params, loss) in enumerate(zip(pieces(local.params), pieces(local.loss)))]
