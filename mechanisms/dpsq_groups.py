"""The DP-SQ federated system of paper 001 ("Privacy-Preserving Quantized FL with Diverse Precision",
Sec. III-IV): device groups with different bit widths, per-group clusters, noisy links, SNR-optimal fusion.

* M groups; group m has g_m devices quantizing with b_m bits (b_1 <= ... <= b_M). Clients are numbered group
  by group: group 0 is clients 0..g_0 - 1, group 1 the next g_1, and so on.
* Each round the server samples a cluster of c_m devices uniformly without replacement from each group
  (Alg. 1 step 3), sum c_m = N, under the uplink budget sum c_m b_m <= B (eq. 9).
* A device l1-clips its update to C and quantizes it with its group's mechanism (``dpsq`` with bits = b_m,
  Alg. 1 steps 10-12; any mechanism whose ``protocol`` is "device-groups"); the channel adds
  n ~ N(0, sigma_m^2 I) (Sec. III-B).
* Fusion (Alg. 1 step 15): w_{t+1} = w_t + sum_{m,u} omega_{m,u} (q_{m,u} + n_{m,u}), sum omega = 1, with the
  SNR-optimal weights of eq. (14), omega = theta / sum theta, theta = 1 / (E||Q(v) - v||^2 + d sigma^2).
* Cluster sizes (CSO, eq. 27): the integer program minimising the learning-error term of eq. (25).

Registered as the round protocol "device-groups" (``auditkit.mechanisms.protocol``) of ``dpsq`` and
``laplace-sq``: its config table is ``[groups]`` (``GroupsTable``), its options on a mechanism setting ``fusion``
and ``clusters``. Without a ``[groups]`` table those mechanisms train with one upload per client, all alike.
"""
from __future__ import annotations

import functools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.optimize import Bounds, LinearConstraint, milp

from auditkit.mechanisms.base import Param, choice
from auditkit.mechanisms.protocol import ProtocolContext, RoundOutcome, register_protocol
from auditkit.mechanisms.registry import create, mechanism_class, names
from auditkit.mechanisms.randomness import shared_seed
from auditkit.mechanisms.randomness import derive_seed, generator
from auditkit.mechanisms.views import View
from auditkit.validation import Choice

__all__ = [
    "GroupsTable",
    "DeviceGroups",
    "DeviceGroupProtocol",
    "FUSION_MODES",
    "CLUSTER_MODES",
    "cluster_sizes",
    "random_cluster_sizes",
    "fusion_weights",
]

FUSION_MODES = ("central-cell", "oracle", "bound", "resolution", "mean")
CLUSTER_MODES = ("random", "optimal", "proportional")


@dataclass(frozen=True)
class GroupsTable:
    """The ``[groups]`` config table: DP-SQ's devices of diverse precision (paper 001).
    Group m has ``sizes[m]`` clients quantizing with ``bits[m]`` bits over a link with noise std
    ``link_sigma[m]``; each round ``clients_per_round`` devices (N) are heard, within ``bandwidth`` (B) bits per
    coordinate when the cluster sizes are optimised."""

    sizes: tuple[int, ...] = ()
    bits: tuple[int, ...] = ()
    link_sigma: tuple[float, ...] = ()
    clients_per_round: int = 0
    bandwidth: int | None = None

    def check(self, clients: int) -> None:
        """The table must describe the run's K ``clients`` exactly; ``ValueError`` naming the key."""
        if not self.sizes:
            raise ValueError("groups.sizes must list the number of devices of each group, e.g. [50, 50]")
        if len(self.bits) != len(self.sizes) or len(self.link_sigma) not in (0, len(self.sizes)):
            raise ValueError(
                f"groups.bits (and groups.link_sigma, if given) must have one entry per group: {len(self.sizes)} groups"
            )
        if sum(self.sizes) != clients:
            raise ValueError(f"groups.sizes must add up to training.clients = {clients}, got {sum(self.sizes)}")
        if any(s < 0 for s in self.link_sigma):
            raise ValueError(f"groups.link_sigma must be numbers >= 0, got {list(self.link_sigma)}")
        if not len(self.sizes) <= self.clients_per_round <= clients:
            raise ValueError(
                f"groups.clients_per_round must be an integer in [{len(self.sizes)}, {clients}] (at least one device per "
                f"group), got {self.clients_per_round}"
            )
        if self.bandwidth is not None and self.bandwidth < 1:
            raise ValueError(f"groups.bandwidth must be an integer >= 1, got {self.bandwidth}")

    @property
    def devices(self) -> "DeviceGroups":
        return DeviceGroups(sizes=self.sizes, bits=self.bits,
                            link_sigma=self.link_sigma or tuple(0.0 for _ in self.sizes))


@dataclass(frozen=True)
class DeviceGroups:
    """The device groups G_1..G_M of Sec. III-A.

    sizes:      g_m, the number of devices of each group (integers >= 1).
    bits:       b_m, the quantizer bits of each group (integers in 1..16, non-decreasing as in the paper).
    link_sigma: sigma_m, the standard deviation of the link noise N(0, sigma_m^2 I) of every device of the group
                (finite, >= 0; the paper's per-device sigma_{m,u} enter eq. (27) only through their group mean).
    """

    sizes: tuple[int, ...]
    bits: tuple[int, ...]
    link_sigma: tuple[float, ...]

    def __post_init__(self) -> None:
        sizes, bits, sigma = tuple(self.sizes), tuple(self.bits), tuple(self.link_sigma)
        if not sizes or not all(_is_int(g) and g >= 1 for g in sizes):
            raise ValueError(f"sizes must be a non-empty sequence of integers >= 1, got {self.sizes!r}")
        if len(bits) != len(sizes) or not all(_is_int(b) and 1 <= b <= 16 for b in bits):
            raise ValueError(f"bits must be {len(sizes)} integers in 1..16 (one per group), got {self.bits!r}")
        if any(b1 > b2 for b1, b2 in zip(bits, bits[1:])):
            raise ValueError(f"bits must be non-decreasing (b_1 <= ... <= b_M), got {self.bits!r}")
        if len(sigma) != len(sizes) or not all(_is_real(s) and math.isfinite(s) and s >= 0 for s in sigma):
            raise ValueError(
                f"link_sigma must be {len(sizes)} finite numbers >= 0 (one per group), got {self.link_sigma!r}"
            )
        object.__setattr__(self, "sizes", tuple(int(g) for g in sizes))
        object.__setattr__(self, "bits", tuple(int(b) for b in bits))
        object.__setattr__(self, "link_sigma", tuple(float(s) for s in sigma))

    @property
    def total(self) -> int:
        """K = sum g_m, the number of clients."""
        return sum(self.sizes)

    @property
    def offsets(self) -> tuple[int, ...]:
        """The first client of each group."""
        return tuple(int(o) for o in np.cumsum((0, *self.sizes[:-1])))

    def group_of(self, client: int) -> int:
        """The group of client ``client`` (clients are numbered group by group)."""
        if not 0 <= client < self.total:
            raise ValueError(f"client must be in 0..{self.total - 1}, got {client}")
        return int(np.searchsorted(np.cumsum(self.sizes), client, side="right"))


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _kappa(groups: DeviceGroups, bound: float) -> np.ndarray:
    """kappa_m = 8 C^2 / (2^{b_m} - 1)^2 + sigma_m^2: the per-device, per-coordinate cost of eq. (25)/(27a)."""
    bits = np.asarray(groups.bits, dtype=np.float64)
    return 8 * bound**2 / (2**bits - 1) ** 2 + np.asarray(groups.link_sigma) ** 2


def _check_cluster_inputs(groups: DeviceGroups, total: int, bandwidth: float | None) -> None:
    """``ValueError`` unless some integer c with 1 <= c_m <= g_m, sum c = N, sum b c <= B exists."""
    m = len(groups.sizes)
    if not _is_int(total) or not m <= total <= groups.total:
        raise ValueError(
            f"total must be an integer in {m}..{groups.total} (at least one device per group, at most all), "
            f"got {total!r}"
        )
    if bandwidth is None:
        return
    if not _is_real(bandwidth) or not bandwidth > 0:
        raise ValueError(f"bandwidth must be a number > 0 (bits per round) or None, got {bandwidth!r}")
    # The cheapest clusters: one device per group, the rest to the lowest-bit groups first.
    needed, left = sum(groups.bits), total - m
    for size, bits in zip(groups.sizes, groups.bits):
        extra = min(left, size - 1)
        needed, left = needed + extra * bits, left - extra
    if needed > bandwidth:
        raise ValueError(
            f"no cluster sizes satisfy sum c_m = {total} with sum b_m c_m <= {bandwidth:g}: "
            f"the smallest bandwidth needed is {needed}"
        )


def cluster_sizes(groups: DeviceGroups, *, total: int, bandwidth: float, bound: float) -> tuple[int, ...]:
    """The optimal cluster sizes of the integer program (27) (CSO), solved with ``scipy.optimize.milp``:

        minimise   sum_m kappa_m c_m,   kappa_m = 8 C^2 / (2^{b_m} - 1)^2 + mean_u sigma_{m,u}^2
        subject to sum_m b_m c_m <= B  (27d, eq. 9),   1 <= c_m <= g_m,   sum_m c_m = N,   c integer.

    (27a) is sum_m (c_m / g_m) sum_{u in G_m} (8C^2/(2^{b_m}-1)^2 + sigma_{m,u}^2), i.e. kappa_m c_m. The paper's
    setting g = (50, 50), b = (2, 4), N = 10, B = 30, C = 10, sigma = (6.25e-4, 0.125) gives (5, 5): the 4-bit
    devices are far cheaper, and the budget 2 c_1 + 4 c_2 <= 30 with c_1 + c_2 = 10 forces c_1 >= 5.
    ``ValueError`` with the smallest sufficient bandwidth when no c is feasible.
    """
    if not _is_real(bound) or not (math.isfinite(bound) and bound > 0):
        raise ValueError(f"bound must be a finite number > 0 (C of the range [-C, C]), got {bound!r}")
    if bandwidth is None:
        raise ValueError("bandwidth must be a number > 0 (bits per round), got None")
    _check_cluster_inputs(groups, total, bandwidth)
    m = len(groups.sizes)
    result = milp(
        c=_kappa(groups, bound),
        constraints=[
            LinearConstraint(np.asarray(groups.bits, dtype=np.float64)[None, :], -np.inf, bandwidth),
            LinearConstraint(np.ones((1, m)), total, total),
        ],
        integrality=np.ones(m),
        bounds=Bounds(np.ones(m), np.asarray(groups.sizes, dtype=np.float64)),
    )
    if not result.success:  # feasibility was checked above, so this is a solver failure
        raise RuntimeError(f"milp failed on the cluster-size program: {result.message}")
    return tuple(int(round(c)) for c in result.x)


def random_cluster_sizes(
    groups: DeviceGroups, *, total: int, bandwidth: float | None, rng: random.Random
) -> tuple[int, ...]:
    """Cluster sizes drawn uniformly among all integer c with 1 <= c_m <= g_m, sum c_m = N and sum b_m c_m <= B
    (B = None: no budget). This is the paper's Alg. 1 without CSO: "cluster sizes are randomly selected to satisfy
    (27d)" (Sec. V-C1). Exact: group by group, c_m is drawn in proportion to the number of feasible completions.
    """
    _check_cluster_inputs(groups, total, bandwidth)
    bits, sizes = groups.bits, groups.sizes
    budget = sum(b * g for b, g in zip(bits, sizes)) if bandwidth is None else int(math.floor(bandwidth))

    @functools.cache
    def completions(m: int, devices: int, bits_left: int) -> int:
        """The number of feasible (c_m, ..., c_M) with sum devices and sum b c <= bits_left."""
        if m == len(sizes):
            return int(devices == 0)
        return sum(
            completions(m + 1, devices - c, bits_left - bits[m] * c)
            for c in range(1, min(sizes[m], devices) + 1)
            if bits[m] * c <= bits_left
        )

    chosen, devices, bits_left = [], total, budget
    for m in range(len(sizes)):
        options = [c for c in range(1, min(sizes[m], devices) + 1) if bits[m] * c <= bits_left]
        counts = [completions(m + 1, devices - c, bits_left - bits[m] * c) for c in options]
        pick = rng.randrange(sum(counts))
        for c, count in zip(options, counts):
            if pick < count:
                break
            pick -= count
        chosen.append(c)
        devices, bits_left = devices - c, bits_left - bits[m] * c
    return tuple(chosen)


def fusion_weights(
    mode: str,
    groups: DeviceGroups,
    group_ids: Sequence[int],
    *,
    dimension: int,
    bound: float,
    noise_variance: float = 0.0,
    oracle_distortions: Sequence[float] | None = None,
) -> torch.Tensor:
    """Fusion weights omega (float64, sum 1) of the selected devices, device u of group m = ``group_ids[u]``.

    SNR-optimal weights (eq. 14, the minimiser of the bound (12) under sum omega = 1):

        omega_u = theta_u / sum theta,   theta_u = 1 / (D_u + d (sigma_m^2 + noise_variance)),

    D_u = E||Q(v) - v||^2 the quantizer distortion, which the server cannot measure (it never sees v):

    * "oracle": the measured ||Q(v_u) - v_u||^2 in ``oracle_distortions`` (simulation only);
    * "central-cell" (default): d Delta_m^2 / 4, Delta_m = 2C / (2^{b_m} - 1) (the literal range), the
      distortion of an input at a cell centre -- eq. (7) at x = Delta/2, whatever eps1; with the literal range
      and updates much smaller than C every coordinate sits near the centre of the central cell, so this is
      also what the oracle measures;
    * "bound": 4 d C^2 / (2^{b_m} - 1)^2 = d Delta_m^2, since |Q(a) - a| <= Delta (the paper's Lemma 5 carries
      8 d C^2 / (2^b - 1)^2, twice this, which leaves the weights unchanged only when sigma = 0);
    * "resolution": omega_u proportional to 1 / Delta_m, "inversely-proportional to quantization resolution", the
      fusion of the paper's reference [28] (Chen, Shen, Zhang & Tang 2021) that its LaplaceSQ-FL baseline adopts
      (Sec. V-A); it ignores the noise;
    * "mean": omega = 1/N, Alg. 1 without fusion-weight optimisation (FWO).

    ``noise_variance``: per-coordinate variance of noise the mechanism itself adds (LaplaceSQ: 2 rho^2 / eps1^2;
    0 for ``dpsq``), part of E||L(v) - v||^2; stochastic rounding's own error at a cell centre is also Delta^2/4.
    """
    Choice(FUSION_MODES).check(mode, "mode")
    ids = np.asarray(group_ids, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0 or ids.min() < 0 or ids.max() >= len(groups.sizes):
        raise ValueError(f"group_ids must be a non-empty sequence of group indices in 0..{len(groups.sizes) - 1}")
    if not _is_int(dimension) or dimension < 1:
        raise ValueError(f"dimension must be an integer >= 1, got {dimension!r}")
    if mode == "mean":
        return torch.full((ids.size,), 1.0 / ids.size, dtype=torch.float64)
    bits = np.asarray(groups.bits, dtype=np.float64)[ids]
    if mode == "resolution":
        inverse_step = (2**bits - 1) / (2 * bound)
        return torch.from_numpy(inverse_step / inverse_step.sum())
    step_sq = (2 * bound / (2**bits - 1)) ** 2
    if mode == "oracle":
        if oracle_distortions is None or len(oracle_distortions) != ids.size:
            raise ValueError(f"oracle_distortions must hold one measured ||Q(v) - v||^2 per device ({ids.size})")
        distortion = np.asarray(oracle_distortions, dtype=np.float64)
    else:
        distortion = dimension * step_sq * (0.25 if mode == "central-cell" else 1.0)
    sigma_sq = np.asarray(groups.link_sigma, dtype=np.float64)[ids] ** 2
    theta = 1.0 / (distortion + dimension * (sigma_sq + noise_variance))
    return torch.from_numpy(theta / theta.sum())


@register_protocol
class DeviceGroupProtocol:
    """Alg. 1 of paper 001 as a ``RoundProtocol`` with its own client selection.

    Args:
        mechanism: "dpsq" (Alg. 1), "laplace-sq" (the LaplaceSQ-FL baseline), or any registered mechanism
            whose ``protocol`` is "device-groups" (its ``range_bound``, ``added_noise_variance`` and
            ``clip_update``).
        groups: the device groups; the simulation must have ``groups.total`` clients.
        seed: the experiment seed; keys the clusters, the shared seeds, the link noise and the device coins.
        params: the mechanism's parameters (eps, clip, ...) except ``bits``, which is b_m in group m.
        cluster_sizes: how many devices of each group are heard per round (``CLUSTER_MODES`` or a tuple):
            a tuple c: the same c every round;
            "optimal": CSO, the solution of the program (27) (``cluster_sizes``), every round;
            "random" (default): Alg. 1 without CSO as the paper runs it (Sec. V-C1: "cluster sizes are randomly
                selected to satisfy (27d)"): every round a uniform draw among the feasible c
                (``random_cluster_sizes``; without a bandwidth only 1 <= c_m <= g_m and sum c_m = N bind);
            "proportional": N devices uniformly without replacement among all K, ignoring the groups (plain
                FedAvg participation): c_m is hypergeometric with mean N g_m / K, may be 0, and the bandwidth is
                not enforced.
        total: N, devices heard per round (needed by every mode but a tuple).
        bandwidth: B, the budget sum_m b_m c_m (bits per coordinate over the round's devices, eq. 9); needed by
            "optimal", enforced by "random" and checked for a tuple when given.
        fusion: one of ``FUSION_MODES`` (see ``fusion_weights``); "mean" with "random" sizes is plain Alg. 1.

    The FedAvg ``weights`` the loop passes are ignored: fusion uses omega. The device coins are keyed by
    ``derive_seed(seed, "device-private")`` and the shared seed of (client, round): deterministic for the
    simulation, and unknown to the modelled server, which only uses the bytes it receives.
    """

    name = "device-groups"  # the protocol's name in results
    table = "groups"  # its config table (``GroupsTable``)
    table_type = GroupsTable
    options: tuple[Param, ...] = (
        choice("fusion", FUSION_MODES, "central-cell",
               "with [groups]: how the server fuses the devices' updates: plain mean, or DP-SQ's SNR weights (FWO, "
               "eq. 14) from the central-cell, bound, oracle or resolution distortion"),
        choice("clusters", CLUSTER_MODES, "random",
               "with [groups]: devices heard per group each round: random (Alg. 1), optimal (CSO, the integer "
               "program (27)) or proportional (N among all K)"),
    )

    @staticmethod
    def check_table(table: GroupsTable, clients: int) -> None:
        """``GroupsTable.check``."""
        table.check(clients)

    @staticmethod
    def check_options(options: Mapping[str, Any], table: GroupsTable | None) -> None:
        """``fusion`` and ``clusters`` need a ``[groups]`` table, and ``clusters = "optimal"`` its bandwidth."""
        if table is None:
            for key in ("fusion", "clusters"):
                if key in options:
                    raise ValueError(f"{key} needs a [groups] table (devices of diverse precision)")
        elif options.get("clusters") == "optimal" and table.bandwidth is None:
            raise ValueError("clusters = 'optimal' needs groups.bandwidth (B, bits per coordinate)")

    @classmethod
    def build(cls, mechanism, context: ProtocolContext) -> "DeviceGroupProtocol | None":
        """The device groups of the ``[groups]`` table, group m running ``mechanism`` with ``bits`` = b_m; None
        (the plain uplink) without a table."""
        table: GroupsTable | None = context.table
        if table is None:
            return None
        params = {k: v for k, v in mechanism.params.items() if k != "bits"}
        return cls(mechanism.name, table.devices, seed=context.seed, params=params,
                   cluster_sizes=context.options.get("clusters", "random"), total=table.clients_per_round,
                   bandwidth=table.bandwidth, fusion=context.options.get("fusion", "central-cell"))

    def __init__(
        self,
        mechanism: str,
        groups: DeviceGroups,
        *,
        seed: int,
        params: Mapping[str, Any] | None = None,
        cluster_sizes: tuple[int, ...] | str = "random",
        total: int | None = None,
        bandwidth: float | None = None,
        fusion: str = "central-cell",
    ) -> None:
        if mechanism_class(mechanism).protocol != self.name:
            grouped = [n for n in names() if mechanism_class(n).protocol == self.name]
            raise ValueError(f"mechanism must run the {self.name} protocol ({', '.join(grouped)}), got {mechanism!r}")
        Choice(FUSION_MODES).check(fusion, "fusion")
        params = dict(params or {})
        if "bits" in params:
            raise ValueError("params must not set bits: group m quantizes with groups.bits[m]")
        private = derive_seed(seed, "device-private")
        self.mechanisms = [create(mechanism, bits=b, private_seed=private, **params) for b in groups.bits]
        self.groups = groups
        self.seed = seed
        self.fusion = fusion
        self.total = total
        self.bandwidth = bandwidth
        self.bound: float = self.mechanisms[0].range_bound
        self.noise_variance: float = self.mechanisms[0].added_noise_variance
        self.cluster_mode = cluster_sizes if isinstance(cluster_sizes, str) else "fixed"
        self.fixed_sizes = self._resolve_sizes(cluster_sizes)

    def _resolve_sizes(self, sizes: tuple[int, ...] | str) -> tuple[int, ...] | None:
        """The cluster sizes of every round, or None where each round draws its own."""
        if isinstance(sizes, str):
            if sizes not in CLUSTER_MODES:
                raise ValueError(
                    f"cluster_sizes must be one of {', '.join(CLUSTER_MODES)} or a tuple of integers, got {sizes!r}"
                )
            if self.total is None:
                raise ValueError(f'cluster_sizes="{sizes}" needs total (N)')
            if sizes == "optimal":
                if self.bandwidth is None:
                    raise ValueError('cluster_sizes="optimal" needs bandwidth (B)')
                return cluster_sizes(self.groups, total=self.total, bandwidth=self.bandwidth, bound=self.bound)
            _check_cluster_inputs(self.groups, self.total, self.bandwidth if sizes == "random" else None)
            return None
        sizes = tuple(sizes)
        if len(sizes) != len(self.groups.sizes) or not all(
            _is_int(c) and 1 <= c <= g for c, g in zip(sizes, self.groups.sizes)
        ):
            raise ValueError(
                f"cluster_sizes must be one integer 1 <= c_m <= g_m per group {self.groups.sizes}, got {sizes!r}"
            )
        used = sum(c * b for c, b in zip(sizes, self.groups.bits))
        if self.bandwidth is not None and used > self.bandwidth:
            raise ValueError(
                f"cluster_sizes {sizes} use {used} bits per coordinate, more than bandwidth {self.bandwidth:g}"
            )
        return tuple(int(c) for c in sizes)

    def select_clients(self, round_: int) -> list[int]:
        """The devices heard in round ``round_`` (Alg. 1 step 3), sorted: c_m devices of group m uniformly
        without replacement (or N among all for "proportional"), from the stream ``derive_seed(seed, "clusters",
        round_)``; "random" draws the c_m from ``derive_seed(seed, "cluster-sizes", round_)``."""
        gen = generator(derive_seed(self.seed, "clusters", round_), "select")
        if self.cluster_mode == "proportional":
            return sorted(torch.randperm(self.groups.total, generator=gen)[: self.total].tolist())
        sizes = self.fixed_sizes
        if sizes is None:
            rng = random.Random(derive_seed(self.seed, "cluster-sizes", round_))
            sizes = random_cluster_sizes(self.groups, total=self.total, bandwidth=self.bandwidth, rng=rng)
        chosen: list[int] = []
        for size, offset, c in zip(self.groups.sizes, self.groups.offsets, sizes):
            chosen += (offset + torch.randperm(size, generator=gen)[:c]).tolist()
        return sorted(chosen)

    def received(self, updates: torch.Tensor, clients: list[int]) -> torch.Tensor:
        """The clients' updates (S, P) as their groups' mechanisms receive them, after the clipping (the SNR's
        signal)."""
        return torch.stack([self.mechanisms[self.groups.group_of(c)].clip_update(u.detach().cpu())
                            for u, c in zip(updates, clients)]).to(updates.dtype)

    def communicate(
        self, updates: torch.Tensor, clients: list[int], weights: torch.Tensor, round_: int,
        *, global_params: torch.Tensor | None = None,
    ) -> RoundOutcome:
        """Encode each update with its group's mechanism, send the bytes, decode, add the link noise
        N(0, sigma_m^2 I), fuse: aggregate = sum omega_u (q_u + n_u) (Alg. 1 steps 12-15)."""
        group_ids = [self.groups.group_of(c) for c in clients]
        received, payloads, distortions = [], [], []
        for update, client, m in zip(updates, clients, group_ids):
            mechanism, seed = self.mechanisms[m], shared_seed(self.seed, client, round_)
            message = mechanism.encode(update.detach().cpu(), seed)
            payload = message.to_bytes()
            decoded = mechanism.decode(type(message).from_bytes(payload), seed).to(torch.float64)
            distortions.append(float(((decoded - mechanism.clip_update(update.detach().cpu())) ** 2).sum()))
            noise_gen = generator(derive_seed(self.seed, "link", client, round_), "noise")
            noise = self.groups.link_sigma[m] * torch.randn(decoded.numel(), generator=noise_gen, dtype=torch.float64)
            received.append(decoded + noise)
            payloads.append(payload)
        server_view = torch.stack(received)
        omega = fusion_weights(
            self.fusion, self.groups, group_ids, dimension=updates.shape[1], bound=self.bound,
            noise_variance=self.noise_variance, oracle_distortions=distortions,
        )
        stats = {
            "fusion_weight_min": float(omega.min()),
            "fusion_weight_max": float(omega.max()),
            "distortion_per_coordinate": float(np.mean(distortions)) / updates.shape[1],
        }
        for m in range(len(self.groups.sizes)):
            members = [u for u, g in enumerate(group_ids) if g == m]
            stats[f"cluster_size_{m}"] = float(len(members))
            stats[f"fusion_weight_group_{m}"] = float(omega[members].sum())
        return RoundOutcome(
            aggregate=(omega @ server_view).to(updates.device, updates.dtype),
            bits=[8 * len(p) for p in payloads],
            views={View.SERVER: server_view.to(updates.device, updates.dtype), View.EAVESDROPPER: payloads},
            stats=stats,
        )
