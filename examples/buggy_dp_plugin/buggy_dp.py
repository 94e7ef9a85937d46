"""An example auditkit plugin: DP-FedAvg with the bugs deployed central DP has, each claiming what ``dp-fedavg`` claims.

``dp-fedavg`` (``auditkit.mechanisms.dp_fedavg``, McMahan et al. 2018) clips each client's update to l2 norm C,
adds N(0, (z C)^2 I) to the *sum* of the round's clipped updates and divides by the expected count m = q K. Its
claim: one round, add/remove one client, eps = ``analytic_gaussian_epsilon(C, z C, delta)`` (4.38 at z = 1,
delta = 1e-5), one round's accounting event ``GaussianDpEvent(z)``, amplified by the run's Poisson client sampling.
Each mechanism here states that same claim and gets one thing wrong:

* ``dp-fedavg-mean-noise``: the noise is calibrated to the *mean*'s sensitivity C / m but added to the *sum*, so
  its std on the sum is z C / m, m times too small (``clients_per_round`` = m). Its round is ``dp-fedavg``'s own
  protocol, "central-noise", run with that noise. At z = 1, m = 10 the real one-round eps is 91.8, not 4.38.
* ``dp-fedavg-clip-after-noise``: the noise is added to the raw update and the result clipped,
  clip_C(x + N(0, (z C)^2 I)): the clip no longer bounds what one client contributes (an update far beyond C
  keeps its direction while the clip shrinks the noise), so no finite eps holds. Its round protocol,
  "central-noise-clip-after-noise", noises each received update and clips it before summing.
* ``dp-fedavg-ignores-sampling``: the noise is right, the accountant wrong: its one-round event is already
  amplified by a Poisson sampling rate of its own, ``assumed_rate`` q' = 1e-3, whatever the run samples. Over
  100 rounds at z = 1 (delta 1e-5) it composes to eps 0.065 under full participation (0.013 at q = 0.1, the run's
  sampling applied on top), where the run's own participation gives 91.8 (full) or 7.06 (q = 0.1).
  ``auditkit.accounting`` recomputes the composition from the run's participation with the event's own sampling
  stripped and flags the claim (``check_sampling``, the accounting section's ``check``).
* ``dp-fedavg-ignores-rounds``: the noise is right, the accountant wrong: its one-round event is
  ``GaussianDpEvent(z sqrt(T'))``, so that T' = ``run_rounds`` rounds compose to what one round costs. Nothing
  in one round is wrong, so no per-round test can see it and the accounting check has no sampling to recompute;
  only the whole-run canary audit (``[canary]``) tests the composed claim itself.

As mechanisms, the first two sample what their claim covers, one client as the round's noisy sum reveals it to an
adversary who knows the other summands (``view = "aggregate"``): the distinguishing audit catches both, the
identification test the mean noise. The third samples correctly: only the accounting check catches it. The
fourth is caught by the canary clients of the whole-run audit, which also flag the third.

Load the plugin with ``--plugin examples/buggy_dp_plugin/buggy_dp.py``, with ``plugins = ["buggy_dp.py"]`` in a
config beside it, or install this folder (``pip install examples/buggy_dp_plugin``, the entry-point group
``auditkit.mechanisms``).
"""

from __future__ import annotations

from typing import Any

import dp_accounting
import numpy as np
import torch

from auditkit import mechanisms
from auditkit.mechanisms import BatchSampling, FloatMessage, LogDensity, RoundOutcome
from auditkit.mechanisms.additive import analytic_gaussian_epsilon
from auditkit.mechanisms.base import as_update, int_range, open_unit_interval
from auditkit.mechanisms.dp_fedavg import CentralNoiseProtocol, DPFedAvg
from auditkit.mechanisms.guarantee import PrivacyGuarantee
from auditkit.mechanisms.randomness import private_generator


def _honest(mechanism: DPFedAvg, **pinned: Any) -> DPFedAvg:
    """The correct ``dp-fedavg`` with the buggy mechanism's shared parameters: the claim the variants state."""
    shared = {p.name for p in DPFedAvg.params_spec}
    params = {k: v for k, v in mechanism.params.items() if k in shared}
    return DPFedAvg(private_seed=mechanism.private_seed, **{**params, **pinned})


@mechanisms.register
class MeanNoise(DPFedAvg):
    """Noise std z C / m on the sum (the bug), claimed as z C: the informed adversary sees
    clip(x) + N(0, (z C / m)^2 I)."""

    name = "dp-fedavg-mean-noise"
    summary = "example plugin (buggy): DP-FedAvg whose noise is calibrated to the mean (C / m) but added to the sum"
    params_spec = (
        *DPFedAvg.params_spec,
        int_range("clients_per_round", 1, 1_000_000, 10,
                  "m: the expected clients per round q K whose mean's sensitivity C / m the noise is calibrated to "
                  "(the bug: it is added to the sum)"),
    )

    @property
    def sigma(self) -> float:
        """The noise really added to the sum: z C / m (BUG: the sum's sensitivity is C, so z C is needed)."""
        return self.params["noise_multiplier"] * self.params["clip"] / self.params["clients_per_round"]

    def guarantee(self) -> PrivacyGuarantee:
        """``dp-fedavg``'s claim: noise z C on the sum."""
        return _honest(self).guarantee()

    def output_log_density(self) -> LogDensity:
        """The author's model, from the claim: y - clip(x) ~ N(0, (z C)^2 I)."""
        return _honest(self).output_log_density()

    def true_epsilon(self) -> float:
        """The noise really added: ``analytic_gaussian_epsilon(C, z C / m, delta)`` (91.8 at z = 1, m = 10)."""
        return analytic_gaussian_epsilon(self.params["clip"], self.sigma, self.params["delta"])

    tiling = DPFedAvg.tiling
    audit_setting = DPFedAvg.audit_setting
    dp_event = DPFedAvg.dp_event
    client_sampling = DPFedAvg.client_sampling


@mechanisms.register
class ClipAfterNoise(DPFedAvg):
    """clip_C(x + N(0, (z C)^2 I)): noise on the raw update, then the clip (the bug: clip first, then noise)."""

    name = "dp-fedavg-clip-after-noise"
    protocol = "central-noise-clip-after-noise"
    summary = "example plugin (buggy): DP-FedAvg that adds the noise to the raw update and clips after it"
    params_spec = tuple(p for p in DPFedAvg.params_spec if p.name != "clipping")  # the server receives raw updates

    def clip_update(self, x: torch.Tensor) -> torch.Tensor:
        """The update as the noise receives it: unclipped (the bug)."""
        return as_update(x)

    def noised_and_clipped(self, x: torch.Tensor, count: int, seed: int) -> torch.Tensor:
        """``count`` rows clip_C(x + N(0, (z C)^2 I)), float64, the noise from the "noise" stream keyed ``seed``
        (count = 1: the draw ``encode`` makes)."""
        x = as_update(x)
        noise = torch.randn(count, x.numel(), generator=private_generator(self.private_seed, seed, "noise"),
                            dtype=torch.float64)
        noisy = x + self.sigma * noise
        return noisy / (noisy.norm(dim=1, keepdim=True) / self.params["clip"]).clamp(min=1.0)

    def encode(self, x: torch.Tensor, seed: int) -> FloatMessage:
        return FloatMessage(self.noised_and_clipped(x, 1, seed)[0].numpy().astype(np.float32))

    def guarantee(self) -> PrivacyGuarantee:
        """``dp-fedavg``'s claim (server-side clipping: the server receives the raw updates)."""
        return _honest(self, clipping="server").guarantee()

    def batch_sampling(self) -> BatchSampling:
        """Not tileable (the clip couples the coordinates of one call): ``noised_and_clipped`` on ``count`` rows,
        each rounded to float32 as its message is."""
        return BatchSampling(lambda x, count, seed: self.noised_and_clipped(x, count, seed).float().double(),
                             why="each row draws its own noise and is clipped on its own, as one encode")

    audit_setting = DPFedAvg.audit_setting
    output_log_density = DPFedAvg.output_log_density
    dp_event = DPFedAvg.dp_event
    client_sampling = DPFedAvg.client_sampling


@mechanisms.register_protocol
class ClipAfterNoiseProtocol(CentralNoiseProtocol):
    """The clip-after-noise round: the server adds N(0, (z C)^2 I) to each raw update it receives, clips the
    result to C, sums and divides by m = q K (the bug: the clip must come before the noise)."""

    name = "central-noise-clip-after-noise"

    def communicate(
        self, updates: torch.Tensor, clients: list[int], weights: torch.Tensor, round_: int,
        *, global_params: torch.Tensor | None = None,
    ) -> RoundOutcome:
        payloads = [FloatMessage(row.detach().cpu().numpy().astype(np.float32)).to_bytes() for row in updates]
        server = torch.stack([FloatMessage.from_bytes(p).to_tensor() for p in payloads]) if payloads else \
            torch.zeros(0, updates.shape[1])
        signal = server.to(torch.float64)
        noisy = signal + self.noise(server.numel(), round_).view(server.shape)
        clip = self.mechanism.params["clip"]
        released = (noisy / (noisy.norm(dim=1, keepdim=True) / clip).clamp(min=1.0)).sum(0)
        error = released - signal.sum(0)
        like = dict(device=updates.device, dtype=updates.dtype)
        return RoundOutcome(
            aggregate=(released / self.denominator).to(**like),
            bits=[8 * len(p) for p in payloads],
            views={"server": server.to(**like), "eavesdropper": payloads, "aggregate": released.to(**like)},
            # the SNR of the released sum against the sum of the updates it stands for
            stats={"sampled": float(len(clients)),
                   "snr": float(signal.sum(0).square().sum() / error.square().sum().clamp(min=1e-300))},
        )


class _RightNoise(DPFedAvg):
    """A variant whose noise is dp-fedavg's own (only its accountant is wrong): it keeps dp-fedavg's capabilities
    (a private base declares them for its subclasses, ``auditkit.mechanisms.capabilities``)."""

    tiling = DPFedAvg.tiling
    audit_setting = DPFedAvg.audit_setting
    output_log_density = DPFedAvg.output_log_density
    client_sampling = DPFedAvg.client_sampling


@mechanisms.register
class IgnoresSampling(_RightNoise):
    """The right noise; its accounting event amplified by a sampling rate q' of its own (the bug)."""

    name = "dp-fedavg-ignores-sampling"
    summary = "example plugin (buggy): DP-FedAvg whose accountant assumes its own client sampling rate"
    params_spec = (
        *DPFedAvg.params_spec,
        open_unit_interval("assumed_rate", 1e-3,
                           "q': the Poisson sampling rate its accountant assumes whatever the run samples (the bug)"),
    )

    def dp_event(self) -> dp_accounting.DpEvent:
        """``PoissonSampledDpEvent(q', GaussianDpEvent(z))`` (BUG: one round of the claim is ``GaussianDpEvent(z)``;
        sampling is the run's, amplified by ``auditkit.accounting`` where the claim covers it)."""
        return dp_accounting.PoissonSampledDpEvent(self.params["assumed_rate"],
                                                   dp_accounting.GaussianDpEvent(self.params["noise_multiplier"]))


@mechanisms.register
class IgnoresRounds(_RightNoise):
    """The right noise; its accountant spreads one round's claim over the whole run (the bug)."""

    name = "dp-fedavg-ignores-rounds"
    summary = "example plugin (buggy): DP-FedAvg whose accountant states one round's privacy for the whole run"
    params_spec = (
        *DPFedAvg.params_spec,
        int_range("run_rounds", 1, 100_000, 5,
                  "T': the rounds its accountant spreads one round's claim over (the bug)"),
    )

    def dp_event(self) -> dp_accounting.DpEvent:
        """``GaussianDpEvent(z sqrt(T'))`` (BUG: T' such rounds compose to one round's privacy, as if the run's T'
        rounds cost what one does; one round of the claim is ``GaussianDpEvent(z)``)."""
        return dp_accounting.GaussianDpEvent(self.params["noise_multiplier"] * self.params["run_rounds"] ** 0.5)

    tradeoff = DPFedAvg.tradeoff
