"""DP-FedAvg: user-level DP with the noise added by the server to the sum of clipped updates.

McMahan, Ramage, Talwar & Zhang, "Learning differentially private recurrent language models" (ICLR 2018,
arXiv 1710.06963), Algorithm 1 with the fixed-denominator estimator f_f; Geyer, Klein & Nabi 2017 (arXiv
1712.07557) is the same mechanism. Round t:

* each of K clients takes part independently with probability q (``participation = "poisson"``, the sampling
  the accountants amplify) or every client does (``"full"``, q = 1);
* a sampled client's update is clipped to l2 norm C, Delta_k min(1, C / ||Delta_k||_2), by the client
  (``clipping = "client"``: the server receives clipped updates) or by the server (``"server"``: the server
  receives the raw updates and clips them itself);
* the server releases  (sum_{k in S_t} clip(Delta_k) + N(0, (z C)^2 I)) / (q K): the noise is on the *sum*, whose
  add/remove-one-client sensitivity is C, and the denominator is the fixed expected count q K (not the realised
  |S_t|, which would leak the count and change the sensitivity). The std on the average is z C / (q K).

The claim (one round, ADD_OR_REMOVE_ONE, one client's whole update): the Gaussian mechanism with noise multiplier
z, eps = ``analytic_gaussian_epsilon(C, z C, delta)``; with Poisson participation each round is
``PoissonSampledDpEvent(q, GaussianDpEvent(z))``, composed over T rounds by ``auditkit.accounting``. It covers
what the released aggregate reveals (the ``aggregate`` view: a server under secure aggregation, Bonawitz et al.
2017, and everyone who sees the released models), **not** the server's view of each message, which carries a
clipped update in clear: the server view has no claim.

The mechanism object is what the claim covers: ``encode`` returns one client's update as the noisy sum reveals it
to an adversary who knows every other summand (the informed adversary, the worst case of add/remove), clip(x) +
N(0, (z C)^2 I). Distinguishing, identification and the probe audit that. In FL the client's real message is its
(clipped) update in float32 and the server draws the noise once per round: ``CentralNoiseProtocol``, registered
here as the round protocol "central-noise".
"""
from __future__ import annotations

import math

import numpy as np
import torch

import dp_accounting

from auditkit.mechanisms.additive import analytic_gaussian_epsilon, clip_l2
from auditkit.mechanisms.base import Mechanism, as_update, choice, open_unit_interval, positive_float
from auditkit.mechanisms.capabilities import AuditSetting, LogDensity, Tiling
from auditkit.mechanisms.densities import ClippedGaussian
from auditkit.mechanisms.guarantee import NeighboringRelation, PrivacyGuarantee
from auditkit.mechanisms.message import FloatMessage
from auditkit.mechanisms.protocol import ProtocolContext, RoundOutcome, register_protocol
from auditkit.mechanisms.randomness import generator, private_generator
from auditkit.mechanisms.registry import register
from auditkit.mechanisms.tradeoff import GaussianTradeOff
from auditkit.mechanisms.views import View

__all__ = ["CLIPPING", "INFORMED_VIEW", "SAMPLED_PARTICIPATION", "CentralNoiseProtocol", "DPFedAvg"]

CLIPPING = ("client", "server")
SAMPLED_PARTICIPATION = ("full", "poisson")  # the participations whose release the claim (and its accounting) covers
_ADD_OR_REMOVE = NeighboringRelation.ADD_OR_REMOVE_ONE
INFORMED_VIEW = "aggregate-informed"  # the round view of each client as the informed adversary of the sum sees it


@register
class DPFedAvg(Mechanism):
    """DP-FedAvg (McMahan et al. 2018, Alg. 1): l2 clip C per client, N(0, (z C)^2 I) added to the sum by the server.

    One round is the Gaussian mechanism on a sum of l2 sensitivity C under add/remove-one client:
    eps = ``analytic_gaussian_epsilon(C, z C, delta)`` (Balle & Wang 2018, Thm 8), 4.38 at z = 1, delta = 1e-5.
    ``encode`` samples the informed adversary's view of one client (module docstring): clip(x) + z C N(0, I).
    """

    name = "dp-fedavg"
    protocol = "central-noise"
    view = View.AGGREGATE
    noise_param = "noise_multiplier"
    clip_norm = "l2"
    message_type = FloatMessage
    summary = "DP-FedAvg: clients' updates l2-clipped, Gaussian noise added to their sum by the server (central DP)"
    reference_params = {"noise_multiplier": 1.0, "clip": 1.0}  # eps 4.38 at delta 1e-5: within an audit's reach
    params_spec = (
        positive_float("noise_multiplier", 1.0, "z: the server's noise std on the sum over the clip, z C"),
        positive_float("clip", 1.0, "C: the l2 norm each client's update is clipped to"),
        choice("clipping", CLIPPING, "client",
               "who clips: 'client' (the server receives clipped updates) or 'server' (it receives them raw)"),
        open_unit_interval("delta", 1e-5, "delta at which the epsilon of the one-round guarantee is stated"),
    )

    @property
    def sigma(self) -> float:
        """The std of the server's noise on the sum, z C."""
        return self.params["noise_multiplier"] * self.params["clip"]

    def encode(self, x: torch.Tensor, seed: int) -> FloatMessage:
        """The informed adversary's view of this client in the noisy sum: clip_C(x) + N(0, (z C)^2 I) as float32."""
        clipped = clip_l2(as_update(x), self.params["clip"])
        noise = self.sigma * torch.randn(clipped.numel(), generator=private_generator(self.private_seed, seed, "noise"),
                                         dtype=torch.float64)
        return FloatMessage((clipped + noise).numpy().astype(np.float32))

    def decode(self, enc: FloatMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        return enc.to_tensor()

    def guarantee(self) -> PrivacyGuarantee:
        z, clip, delta = self.params["noise_multiplier"], self.params["clip"], self.params["delta"]
        seen = ("the clipped updates in clear" if self.params["clipping"] == "client"
                else "the raw (unclipped) updates")
        return PrivacyGuarantee(
            epsilon=analytic_gaussian_epsilon(clip, self.sigma, delta),
            delta=delta,
            relation=_ADD_OR_REMOVE,
            unit="client update",
            scope="one round",
            threat_model="aggregate: the noisy sum and the released models (a server under secure aggregation)",
            sensitivity=f"l2 clip {clip:g} (add/remove one client)",
            assumptions=(f"the server adds N(0, ({z:g} x {clip:g})^2 I) to the sum of the round's clipped updates "
                         "and divides by the fixed expected count q K",),
            caveats=(f"the server's view of each message is not covered: it receives {seen}",
                     "one round only: client sampling and composition over rounds are accounted by "
                     "auditkit.accounting (participation 'poisson' or 'full')"),
        )

    def dp_event(self) -> dp_accounting.DpEvent:
        """One unsampled round: ``GaussianDpEvent(z)`` under ADD_OR_REMOVE_ONE (the sum's sensitivity is C)."""
        return dp_accounting.GaussianDpEvent(self.params["noise_multiplier"])

    def client_sampling(self) -> tuple[str, ...]:
        """The participations whose amplification the claim covers: the server adds the noise to the sum, so who
        was sampled stays hidden (Poisson: ``PoissonSampledDpEvent(q, GaussianDpEvent(z))`` per round)."""
        return SAMPLED_PARTICIPATION

    def tiling(self) -> Tiling:
        """B copies in one call on a copy with clip sqrt(B) C and noise multiplier z / sqrt(B): the clip scales
        every copy as one call would, and the noise std z C stays the same."""
        z, clip = self.params["noise_multiplier"], self.params["clip"]

        def for_copies(copies: int) -> DPFedAvg:
            scale = math.sqrt(copies)
            return self if copies == 1 else self.with_params(clip=clip * scale, noise_multiplier=z / scale)

        return Tiling(block=1, for_copies=for_copies,
                      why="iid noise per coordinate; B copies clipped at sqrt(B) C with the noise std z C kept")

    def audit_setting(self) -> AuditSetting:
        """Add/remove one client: pairs shift C apart in the clip ball, and 0 (absent) against an update beyond
        the clip."""
        clip = self.params["clip"]
        return AuditSetting(2, clip, "l2", clip, 2, beyond_clip=True, add_remove=True,
                            note=f"add/remove one client: shift clip {clip:g}, and 0 against an update beyond it")

    def tradeoff(self) -> GaussianTradeOff:
        """One round of the noisy sum, add/remove one client: (1 / z)-GDP (sensitivity C, noise z C)."""
        return GaussianTradeOff(1.0 / self.params["noise_multiplier"])

    def output_log_density(self) -> LogDensity:
        """y - clip(x) ~ N(0, (z C)^2 I)."""
        return ClippedGaussian(self.sigma, self.params["clip"], "l2")


@register_protocol
class CentralNoiseProtocol:
    """DP-FedAvg's round: the clients' (clipped) updates reach the server, which adds N(0, (z C)^2 I) to their
    sum and divides by the fixed expected count m = q K (K under full participation).

    The server's noise is keyed by (seed, "central-noise", round), so a run is reproducible. Client weights are
    not used (a plain sum): data-size weights p_k would make the sensitivity max_k p_k C, which the claim does
    not cover. A round that sampled nobody still releases N(0, (z C)^2 I) / m (``releases_empty_rounds``):
    skipping it would reveal that nobody took part, and the accountant composes every round.

    Views: ``server`` the messages as received (clipped or raw, by ``clipping``: outside the claim),
    ``eavesdropper`` their bytes, ``aggregate`` the noisy sum the server learns under secure aggregation, and
    ``aggregate-informed`` (``informed_aggregate``): row k is clip(Delta_k) + the noise, what an adversary who
    knows every other summand learns of client k (the worst case the claim covers).
    """

    name = "central-noise"
    options = ()
    table = None
    releases_empty_rounds = True

    def __init__(self, mechanism: DPFedAvg, seed: int, denominator: float) -> None:
        self.mechanism = mechanism
        self.seed = seed
        self.denominator = denominator

    @classmethod
    def check_participation(cls, participation: str, sample_rate: float | None) -> None:
        if participation not in SAMPLED_PARTICIPATION:
            raise ValueError(
                f"dp-fedavg's claim covers training.participation {' or '.join(map(repr, SAMPLED_PARTICIPATION))} "
                f"(Poisson sampling is what the accountants amplify); {participation!r} has no sampling claim")

    @classmethod
    def build(cls, mechanism: DPFedAvg, context: ProtocolContext) -> "CentralNoiseProtocol":
        cls.check_participation(context.participation, context.sample_rate)
        rate = context.sample_rate if context.participation == "poisson" else 1.0
        return cls(mechanism, context.seed, rate * context.clients)

    def clipped(self, updates: torch.Tensor) -> torch.Tensor:
        """The updates each clipped to C, as the noisy sum carries them: (S, P) float64 (S may be 0)."""
        rows = [self.mechanism.clip_update(u.detach().cpu()) for u in updates]
        return torch.stack(rows) if rows else torch.zeros(0, updates.shape[1], dtype=torch.float64)

    def received(self, updates: torch.Tensor, clients: list[int]) -> torch.Tensor:
        """The updates as the server receives them (the uplink's signal): clipped by the clients, or raw."""
        return self.clipped(updates) if self.mechanism.params["clipping"] == "client" else updates.detach().cpu().double()

    def noise(self, size: int, round_: int) -> torch.Tensor:
        """The server's noise of round ``round_``: N(0, (z C)^2 I_size), float64."""
        gen = generator(self.seed, f"central-noise/{round_}")
        return self.mechanism.sigma * torch.randn(size, generator=gen, dtype=torch.float64)

    def communicate(
        self, updates: torch.Tensor, clients: list[int], weights: torch.Tensor, round_: int,
        *, global_params: torch.Tensor | None = None,
    ) -> RoundOutcome:
        """Messages: each client's float32 update, clipped first by the client when ``clipping = "client"``; the
        server clips what it receives (a no-op for clipped messages), sums, adds the noise, divides by q K."""
        count, size = updates.shape
        server = torch.empty(count, size)  # one client at a time: the S x P float64 copies are never made at once
        payloads, total = [], torch.zeros(size, dtype=torch.float64)
        for k in range(count):
            sent = self.received(updates[k:k + 1], clients[k:k + 1])[0]
            payloads.append(FloatMessage(sent.numpy().astype(np.float32)).to_bytes())
            server[k] = FloatMessage.from_bytes(payloads[k]).to_tensor()
            total += self.mechanism.clip_update(server[k])
        noisy_sum = total + self.noise(size, round_)
        informed = torch.empty(count, size, dtype=updates.dtype, device=updates.device)
        for k in range(count):  # clip(Delta_k) + noise, as ``informed_aggregate`` writes it
            informed[k] = noisy_sum - (total - self.mechanism.clip_update(server[k]))
        like = dict(device=updates.device, dtype=updates.dtype)
        return RoundOutcome(
            aggregate=(noisy_sum / self.denominator).to(**like),
            bits=[8 * len(p) for p in payloads],
            views={View.SERVER: server.to(**like), View.EAVESDROPPER: payloads, View.AGGREGATE: noisy_sum.to(**like),
                   # row k: the noisy sum minus the others' clipped updates, clip(update_k) + noise
                   INFORMED_VIEW: informed},
            stats={"sampled": float(len(clients)), "noise_std_aggregate": self.mechanism.sigma / self.denominator},
        )
