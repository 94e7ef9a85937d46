"""The example-level claim of DP-SGD inside the clients (``[dp_sgd]``, ``auditkit.fl.dp_sgd``).

Each local step of client k is a Gaussian mechanism of noise multiplier z on a Poisson sample of rate
q_k = B / n_k of its n_k examples (Abadi et al. 2016). An example lives on one client, so over R rounds of tau local
steps it is in at most T = R tau sampled steps, and its privacy loss is T self-compositions of the Poisson-subsampled
Gaussian (z, q_k) under adding or removing one example: Opacus's ``RDPAccountant`` / ``PRVAccountant`` with
``history = [(z, q_k, T)]``, or dp_accounting's ``SelfComposedDpEvent(PoissonSampledDpEvent(q_k,
GaussianDpEvent(z)), T)`` (``auditkit.accounting.composition.gaussian_over_rounds``). epsilon grows with q, so the
claim is stated at the worst client, the one with the fewest examples (largest q_k), and names it. With partial
participation a client trains in fewer than R rounds, so T = R tau is an upper bound on any example's steps.

This claim protects one training example of a client. It is reported beside the uplink mechanism's client-level
claim (a whole client's update), never combined with it: they bound different neighbouring datasets.
Reference value (delta 1e-5): z = 1.1, q = 0.05, 200 steps gives 4.4430 (Opacus RDP) and 3.9719 (Opacus PRV).
"""
from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from auditkit.accounting.composition import ComposedEpsilon, gaussian_over_rounds

__all__ = ["ExampleLevelClaim", "dp_sgd_epsilon", "example_level_claim"]


def dp_sgd_epsilon(noise_multiplier: float, sample_rate: float, steps: int, *, delta: float,
                   accountant: str = "opacus-prv") -> ComposedEpsilon:
    """epsilon at ``delta`` of ``steps`` DP-SGD steps, each the Gaussian mechanism of multiplier ``noise_multiplier``
    on a Poisson sample of rate ``sample_rate`` (add/remove one example), by ``accountant``. dp_accounting's RDP
    accountant logs (through absl) every order whose series fails to converge; those orders are left out of its
    minimum, so the log lines are silenced here."""
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Opacus's RDP: "optimal order is the smallest alpha" at weak noise
            return gaussian_over_rounds(noise_multiplier, steps, delta=delta, sample_rate=sample_rate,
                                        accountant=accountant)
    finally:
        absl.setLevel(level)


@dataclass(frozen=True)
class ExampleLevelClaim:
    """DP-SGD's claim about one training example: (``epsilon``, ``delta``) over ``steps`` = rounds x tau local steps
    at the worst client's sampling rate ``sample_rate`` = ``batch_size`` / ``client_examples`` (client ``client``),
    by ``accountant`` (``event`` names what was composed)."""

    epsilon: float
    delta: float
    noise_multiplier: float
    max_grad_norm: float
    batch_size: int
    sample_rate: float
    client: int
    client_examples: int
    steps: int
    accountant: str
    event: str
    note: str

    def to_dict(self) -> dict[str, Any]:
        """The results' ``accounting["example_level"]`` entry."""
        return asdict(self)


def example_level_claim(
    noise_multiplier: float,
    max_grad_norm: float,
    *,
    batch_size: int,
    client_sizes: Sequence[int],
    rounds: int,
    tau: int,
    delta: float,
    accountant: str = "opacus-prv",
) -> ExampleLevelClaim:
    """The example-level claim of ``rounds`` rounds of ``tau`` DP-SGD steps (z = ``noise_multiplier``, C =
    ``max_grad_norm``, expected batch ``batch_size``) on clients holding ``client_sizes`` examples: composed at
    q = max_k B / n_k over T = rounds x tau steps (module docstring)."""
    if not client_sizes or min(client_sizes) < batch_size:
        raise ValueError(f"batch_size must be at most every client's example count; got {batch_size} with client "
                         f"sizes down to {min(client_sizes, default=0)}")
    client = min(range(len(client_sizes)), key=lambda k: client_sizes[k])
    steps = rounds * tau
    composed = dp_sgd_epsilon(noise_multiplier, batch_size / client_sizes[client], steps, delta=delta,
                              accountant=accountant)
    note = (f"one training example, over {rounds} rounds x tau = {tau} local steps (an upper bound on the steps of a "
            f"client that skips rounds) at the smallest client's sampling rate; separate from the client-level claim")
    return ExampleLevelClaim(composed.epsilon, delta, noise_multiplier, max_grad_norm, batch_size,
                             batch_size / client_sizes[client], client, int(client_sizes[client]), steps,
                             composed.accountant, composed.event, note)
