"""One mechanism's privacy, as its paper states it and over T rounds of FL.

`account` gathers, for a configured mechanism:

* ``per_round`` — the mechanism's own one-round claim (``mechanism.guarantee()``: client-level,
  the whole update is the unit);
* ``paper_claim`` — the paper's record-level FL claim where the paper makes one and the FL
  settings are given (CEPAM: 003 Theorem 12 / 13);
* ``composed`` — the client-level claim over `rounds` rounds from an existing accountant, or
  ``refusal``, the reason no sound number exists;
* ``composed_actual`` — for a claim flagged "claim-exceeded" (JoPEQ's moment-matched noise, a t pair
  set by hand): the realised noise's pure epsilon (``true_epsilon``) over `rounds` rounds, beside
  the claim's.

The noise a mechanism adds decides the accountant: Gaussian noise of std sigma on an update whose
replace-one l2 sensitivity is 2 clip is a Gaussian event with noise multiplier sigma / (2 clip);
Laplace noise of scale b with l1 sensitivity 2 clip is a Laplace event with multiplier b / (2 clip);
any other pure eps-DP round composes by basic composition (T eps).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from auditkit.accounting.cepam import cepam_gaussian, cepam_laplace
from auditkit.accounting.composition import (
    ComposedEpsilon,
    UnsupportedEvent,
    gaussian_over_rounds,
    laplace_over_rounds,
)
from mechanisms.guarantee import CLAIM_EXCEEDED, PrivacyGuarantee

GAUSSIAN_NOISE = ("gaussian", "gaussian+sdq", "cepam-gaussian")
LAPLACE_NOISE = ("laplace", "laplace+sdq", "cepam-laplace")


@dataclass(frozen=True)
class AccountReport:
    mechanism: str
    per_round: PrivacyGuarantee
    paper_claim: PrivacyGuarantee | None
    composed: ComposedEpsilon | None
    refusal: str | None
    composed_actual: ComposedEpsilon | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "per_round": self.per_round.to_dict(),
            "paper_claim": None if self.paper_claim is None else self.paper_claim.to_dict(),
            "composed": None if self.composed is None else vars(self.composed),
            "refusal": self.refusal,
            "composed_actual": None if self.composed_actual is None else vars(self.composed_actual),
        }


def account(
    mechanism,
    *,
    rounds: int = 1,
    delta: float = 1e-5,
    backend: str = "opacus-prv",
    tau: int | None = None,
    dataset_size: int | None = None,
    clients: int | None = None,
    eps_tilde: float | None = None,
    compat: str = "none",
) -> AccountReport:
    """Account a configured mechanism (see the module docstring); `delta` is the target of the composition."""
    name, params = mechanism.name, mechanism.params
    per_round = mechanism.guarantee()
    paper_claim = _paper_claim(name, params, tau, dataset_size, clients, eps_tilde, compat)
    composed, refusal = None, None
    try:
        composed = _compose(name, params, per_round, rounds, delta, backend)
    except UnsupportedEvent as err:
        refusal = str(err)
    return AccountReport(name, per_round, paper_claim, composed, refusal, _compose_actual(mechanism, rounds))


def _compose_actual(mechanism, rounds: int) -> ComposedEpsilon | None:
    """T times the realised noise's pure epsilon, for a claim its own noise exceeds (else None)."""
    if CLAIM_EXCEEDED not in mechanism.guarantee().flags or not hasattr(mechanism, "true_epsilon"):
        return None
    actual = mechanism.true_epsilon()
    return ComposedEpsilon(rounds * actual, 0.0, rounds, "basic composition",
                           f"{mechanism.name} realised noise, pure eps {actual:.6g} per round x {rounds}")


def _paper_claim(name, params, tau, dataset_size, clients, eps_tilde, compat) -> PrivacyGuarantee | None:
    if name not in ("cepam-gaussian", "cepam-laplace") or tau is None or dataset_size is None:
        return None
    if name == "cepam-gaussian":
        if eps_tilde is None or clients is None:
            raise ValueError("cepam-gaussian's Theorem 12 needs eps_tilde, tau, dataset_size and clients")
        return cepam_gaussian(sigma=params["sigma"], eps_tilde=eps_tilde, tau=tau, dataset_size=dataset_size,
                              clients=clients, clip=params["clip"], compat=compat)
    return cepam_laplace(scale=params["scale"], tau=tau, dataset_size=dataset_size, clip=params["clip"],
                         eps_tilde=eps_tilde)


def _compose(name, params, per_round: PrivacyGuarantee, rounds, delta, backend) -> ComposedEpsilon:
    if per_round.epsilon is None:
        raise UnsupportedEvent(f"{name} claims no privacy: there is nothing to compose")
    if params.get("compat") == "paper000":
        raise UnsupportedEvent("compat=paper000 scales the noise with ||x||: no per-round bound to compose")
    if name in GAUSSIAN_NOISE:
        multiplier = params["sigma"] / (2 * params["clip"])
        try:
            composed = gaussian_over_rounds(multiplier, rounds, delta=delta, backend=backend)
        except UnsupportedEvent as err:
            if backend != "opacus-prv" or "numerical grid" not in str(err):
                raise
            # PRV's grid cannot resolve very small noise; RDP can (a looser bound), and is named as the backend.
            composed = gaussian_over_rounds(multiplier, rounds, delta=delta, backend="opacus-rdp")
            composed = dataclasses.replace(composed, event=f"{composed.event} (opacus-prv could not evaluate it)")
        if not math.isfinite(composed.epsilon):
            raise UnsupportedEvent(
                f"{backend} gives no finite epsilon for {composed.event} at delta {delta:g}: the noise is too small"
            )
        return composed
    if name in LAPLACE_NOISE:
        return laplace_over_rounds(params["scale"] / (2 * params["clip"]), rounds, delta=delta)
    if per_round.delta == 0:
        return ComposedEpsilon(rounds * per_round.epsilon, 0.0, rounds, "basic composition",
                               f"{name} pure eps-DP round x {rounds}")
    raise UnsupportedEvent(f"no accountant here composes {name}'s (eps, delta) rounds")
