"""Which clients take part in a round, and which samples each local step uses.

All draws come from generators keyed by (seed, round, purpose), so a round's choices do not
depend on how many random numbers earlier rounds consumed.
"""
from __future__ import annotations

import math

import torch

from auditkit.mechanisms.base import Param, choice
from auditkit.mechanisms.randomness import derive_seed, generator
from auditkit.validation import Number

PARTICIPATION = ("full", "uniform", "replacement", "poisson")

ACCOUNTED_PARTICIPATION_OPTIONS = (
    choice("participation", PARTICIPATION, "full",
           "who takes part in a round; 'poisson' (each client with probability --sample-rate) is the sampling the "
           "accountants amplify, where the mechanism's claim covers it"),
    Param("sample_rate", None, "q, each client's probability of taking part in a round (participation 'poisson')",
          Number(0, 1, low_open=True)),
)
"""The rounds' client sampling as ``auditkit account`` takes it (``--participation``, ``--sample-rate``)."""


def select_clients(
    clients: int,
    round_: int,
    *,
    seed: int,
    participation: str = "full",
    clients_per_round: int | None = None,
    sample_rate: float | None = None,
) -> list[int]:
    """Client ids (sorted) that train in round `round_`.

    * ``full``: every client.
    * ``uniform``: `clients_per_round` clients uniformly without replacement (FedAvg's C*K).
    * ``replacement``: `clients_per_round` draws uniformly *with* replacement (MSP-FL's M of N, paper 004 Sec. III):
      a client drawn twice appears twice (it trains once per draw, with the same data and shared randomness, so
      its update counts twice in the mean).
    * ``poisson``: each client independently with probability `sample_rate` (the sampling that
      DP accountants support); a round may select nobody.
    """
    if participation == "full":
        return list(range(clients))
    g = generator(seed, f"participation/{round_}")
    if participation == "uniform":
        if clients_per_round is None:
            raise ValueError("clients_per_round is required when participation is 'uniform'")
        return sorted(torch.randperm(clients, generator=g)[:clients_per_round].tolist())
    if participation == "replacement":
        if clients_per_round is None:
            raise ValueError("clients_per_round is required when participation is 'replacement'")
        return sorted(torch.randint(clients, (clients_per_round,), generator=g).tolist())
    if participation == "poisson":
        if sample_rate is None:
            raise ValueError("sample_rate is required when participation is 'poisson'")
        return torch.nonzero(torch.rand(clients, generator=g) < sample_rate).flatten().tolist()
    raise ValueError(f"participation must be one of {', '.join(PARTICIPATION)}; got {participation!r}")


CANARY_STREAM = "canary-clients"  # the canary clients' streams: derive_seed(seed, CANARY_STREAM)


def canary_rate(participation: str, clients: int, sample_rate: float | None, clients_per_round: int | None) -> float:
    """The probability that a canary client takes part in a round: q (``poisson``), 1 (``full``), or
    clients_per_round / K (``uniform``, ``replacement``: the real clients' mean rate, an approximation)."""
    if participation == "poisson":
        return float(sample_rate)
    if participation == "full":
        return 1.0
    return min(1.0, clients_per_round / clients)


def canary_coins(seed: int, canaries: int, rate: float, round_: int) -> torch.Tensor:
    """Which of ``canaries`` canary clients toss heads in round ``round_`` (bool): each its own coin at ``rate``,
    from the stream keyed by (derive_seed(seed, CANARY_STREAM), round), whoever else takes part."""
    return torch.rand(canaries, generator=generator(derive_seed(seed, CANARY_STREAM), f"participation/{round_}")) < rate


def draw_batches(
    client_indices: list[torch.Tensor],
    clients: list[int],
    round_: int,
    *,
    seed: int,
    tau: int,
    batch_size: int,
) -> torch.Tensor:
    """Dataset indices (len(clients), tau, batch_size) for each local step.

    Every sample of every step is drawn uniformly *with replacement* from the client's own
    data (the sampling CEPAM's privacy analysis assumes, 003 Lemma 9). Client k's draws use
    the stream keyed by (seed, round, k), independent of which other clients were selected.
    """
    rows = []
    for k in clients:
        g = generator(seed, f"batches/{round_}/{k}")
        own = client_indices[k]
        positions = torch.randint(len(own), (tau, batch_size), generator=g)
        rows.append(own[positions])
    return torch.stack(rows)


def draw_epoch_batches(
    client_indices: list[torch.Tensor],
    clients: list[int],
    round_: int,
    *,
    seed: int,
    epochs: int,
    batch_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dataset indices (len(clients), T, batch_size) of ``epochs`` passes over each client's data, and which of
    the T steps each client takes (len(clients), T) bool.

    Each epoch of client k shuffles its n_k examples (the stream keyed by ``epochs/{round_}/{k}``) and cuts the
    permutation into ceil(n_k / B) batches of B; the last batch is filled up from the start of the same permutation
    (cyclically when n_k < B), so every batch holds B examples and BatchNorm's batch statistics never see padding.
    Client k takes E ceil(n_k / B) steps; T is the round's largest, the rest of a row repeats its first batch and
    is inactive (the client idles through it).
    """
    rows = []
    for k in clients:
        g = generator(seed, f"epochs/{round_}/{k}")
        own = client_indices[k]
        per_epoch = math.ceil(len(own) / batch_size)
        passes = []
        for _ in range(epochs):
            order = torch.randperm(len(own), generator=g)
            order = order.repeat(math.ceil(per_epoch * batch_size / len(own)))[:per_epoch * batch_size]
            passes.append(own[order].reshape(per_epoch, batch_size))
        rows.append(torch.cat(passes))
    steps = max(len(r) for r in rows)
    indices = torch.stack([torch.cat([r, r[:1].expand(steps - len(r), -1)]) for r in rows])
    active = torch.arange(steps)[None, :] < torch.tensor([len(r) for r in rows])[:, None]
    return indices, active


def draw_poisson_batches(
    client_indices: list[torch.Tensor],
    clients: list[int],
    round_: int,
    *,
    seed: int,
    tau: int,
    batch_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """DP-SGD's Poisson batches (Abadi et al. 2016): dataset indices and a 0/1 mask, both (len(clients), tau, Bmax).

    In each of its tau local steps client k takes each of its n_k examples independently with probability
    q_k = batch_size / n_k, so its realised batch is Binomial(n_k, q_k) with mean batch_size (the sampling
    the accountants' ``PoissonSampledDpEvent`` and Opacus's ``history = [(z, q, steps)]`` assume). Client k's
    draws come from the stream keyed by ``dp-sgd/{round_}/{k}``, independent of which other clients were selected.
    Every step is padded to Bmax, the largest realised batch of the round (at least 1), so the clients train as one
    fixed-shape tensor program; ``mask`` is 1 for a sampled example and 0 for padding. A padding position repeats
    an example the client sampled in that round (its first own example if it sampled none), so every index is one
    of the client's own examples and ``indices`` stays the ground truth of what it trained on.
    """
    chosen = []
    for k in clients:
        own = client_indices[k]
        if len(own) < batch_size:
            raise ValueError(f"DP-SGD needs batch_size <= every client's example count; client {k} has {len(own)}, "
                             f"batch_size is {batch_size}")
        g = generator(seed, f"dp-sgd/{round_}/{k}")
        taken = torch.rand(tau, len(own), generator=g) < batch_size / len(own)
        chosen.append([own[row] for row in taken])
    width = max([1, *(len(step) for steps in chosen for step in steps)])
    indices = torch.zeros(len(clients), tau, width, dtype=torch.long)
    mask = torch.zeros(len(clients), tau, width)
    for i, (k, steps) in enumerate(zip(clients, chosen)):
        used = torch.cat(steps)
        fill = used[0] if len(used) else client_indices[k][0]
        for s, step in enumerate(steps):
            indices[i, s] = fill
            indices[i, s, :len(step)] = step
            mask[i, s, :len(step)] = 1.0
    return indices, mask
