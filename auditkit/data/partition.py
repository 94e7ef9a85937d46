"""Split a dataset's samples among federated clients, and carve a validation set off a training set.

Every function here is a deterministic function of its arguments: randomness comes only from
``numpy.random.default_rng(seed)``, never from global RNG state.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
import torch

PARTITION_SCHEMES = ("iid", "dirichlet", "shards")


def _is_int(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _check_seed(seed: object) -> None:
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")


def _as_labels(labels: torch.Tensor | np.ndarray) -> np.ndarray:
    array = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if array.ndim != 1 or not (np.issubdtype(array.dtype, np.integer) or array.dtype == bool):
        raise ValueError(f"labels must be a 1-D array of integer class labels, got {array.dtype} {array.shape}")
    return array.astype(np.int64)


def partition(
    labels: torch.Tensor | np.ndarray,
    clients: int,
    scheme: str = "iid",
    *,
    seed: int,
    alpha: float = 0.5,
    shards_per_client: int = 2,
) -> list[np.ndarray]:
    """Assign sample indices ``0..N-1`` to ``clients`` clients; one sorted int64 index array per client.

    The arrays are pairwise disjoint, together hold every index exactly once, no client is empty, and the
    result is a deterministic function of (labels, clients, scheme, seed, alpha, shards_per_client).

    * ``iid``: a random permutation cut into equal shares (sizes differ by at most one), as in the papers.
    * ``dirichlet``: label skew (Hsu et al. 2019): each class's samples are divided among the clients in
      proportions drawn from Dirichlet(``alpha``); small ``alpha`` gives few classes per client. A client
      the draw leaves empty receives one random sample moved from the currently largest client.
    * ``shards``: McMahan et al. 2017: samples sorted by label, cut into ``clients * shards_per_client``
      contiguous shards (sizes differ by at most one), each client getting ``shards_per_client`` random shards.
    """
    y = _as_labels(labels)
    n = len(y)
    if not _is_int(clients) or not 1 <= clients <= n:
        raise ValueError(f"clients must be an integer between 1 and the number of samples ({n}), got {clients!r}")
    _check_seed(seed)
    rng = np.random.default_rng(seed)
    if scheme == "iid":
        parts = np.array_split(rng.permutation(n), clients)
    elif scheme == "dirichlet":
        if not isinstance(alpha, Real) or isinstance(alpha, bool) or not (math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
        parts = _dirichlet_parts(y, clients, float(alpha), rng)
    elif scheme == "shards":
        if not _is_int(shards_per_client) or not 1 <= shards_per_client * clients <= n:
            raise ValueError(
                f"shards_per_client must be an integer >= 1 with clients * shards_per_client <= the number of "
                f"samples ({n}), got {shards_per_client!r} with clients={clients}"
            )
        shards = np.array_split(np.argsort(y, kind="stable"), clients * shards_per_client)
        order = rng.permutation(len(shards)).reshape(clients, shards_per_client)
        parts = [np.concatenate([shards[s] for s in row]) for row in order]
    else:
        raise ValueError(f"scheme must be one of {', '.join(PARTITION_SCHEMES)}, got {scheme!r}")
    return [np.sort(part).astype(np.int64) for part in parts]


def _dirichlet_parts(y: np.ndarray, clients: int, alpha: float, rng: np.random.Generator) -> list[np.ndarray]:
    """Per class, Dirichlet(alpha) shares over clients; then top up empty clients from the largest one."""
    owner = np.empty(len(y), dtype=np.int64)
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        shares = rng.dirichlet(np.full(clients, alpha))
        cuts = np.round(np.cumsum(shares)[:-1] * len(members)).astype(np.int64)
        for client, part in enumerate(np.split(members, cuts)):
            owner[part] = client
    counts = np.bincount(owner, minlength=clients)
    # clients <= N, so while a client is empty the largest one holds at least two samples.
    for empty in np.flatnonzero(counts == 0):
        donor = int(np.argmax(counts))
        owner[rng.choice(np.flatnonzero(owner == donor))] = empty
        counts[donor] -= 1
        counts[empty] += 1
    return [np.flatnonzero(owner == client) for client in range(clients)]


def train_validation_split(n: int, fraction: float, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split indices ``0..n-1`` at random into (train, validation), both sorted int64.

    The validation part holds ``round(fraction * n)`` indices (``fraction`` in [0, 1)); e.g. 10k of 60k is
    ``fraction=1/6``. Deterministic in (n, fraction, seed).
    """
    if not _is_int(n) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not isinstance(fraction, Real) or isinstance(fraction, bool) or not 0 <= fraction < 1:
        raise ValueError(f"fraction must be a number in [0, 1), got {fraction!r}")
    _check_seed(seed)
    n_validation = round(fraction * n)
    if n_validation >= n:
        raise ValueError(f"fraction must leave at least one training index, got {fraction!r} of n={n}")
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[n_validation:]).astype(np.int64), np.sort(order[:n_validation]).astype(np.int64)
