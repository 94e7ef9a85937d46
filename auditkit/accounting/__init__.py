"""Analytic privacy accounting: each paper's claim as it states it, checked, and composed over rounds.

* `cepam` — CEPAM-Gaussian (003 Lemma 9 / Theorem 12) and CEPAM-Laplace (Theorem 13), their inverses,
  the no-noise delta floor, and ``formula="paper003"``, which reproduces 003's printed numbers; registered
  as the CEPAM mechanisms' paper claim.
* `report` — `account(mechanism, rounds=T, ...)`: a mechanism's own claim, its paper's FL claim (functions
  registered with ``@paper_claim``), and its one-round event composed over T rounds (or the reason there is none),
  checked against its recomputation from the run's client sampling (``check_sampling``).
* `additive` — the analytic Gaussian, Laplace and multivariate-t claims (and the t mechanism's
  (nu, s2) for a target eps), callable without building a mechanism.
* `jopeq` — JoPEQ's claims as the paper states them, flagged against the realised noise's epsilon.
* `composition` — a mechanism's ``dp_accounting`` event over T rounds through Opacus (RDP, PRV) and Google's
  dp_accounting (PLD, RDP), with the accountant named in every result and a refusal for events no accountant supports.
* `tradeoff` — `composed_tradeoff(event, rounds, relation)`: the whole run's claim as an f-DP curve (exact GDP,
  or dp_accounting's privacy-loss distribution), the curve a one-run canary audit refutes.
* `dp_sgd` — the example-level claim of DP-SGD in the clients (``[dp_sgd]``): Poisson-subsampled Gaussian steps
  composed over rounds x tau at the worst client's rate, reported beside (never combined with) the client-level claim.

    from auditkit import accounting
    accounting.cepam_gaussian(sigma=0.1, eps_tilde=5.9, tau=15, dataset_size=1666, clients=30, clip=1.0)
"""
from auditkit.accounting.report import (
    AccountingCheck,
    AccountReport,
    Sampling,
    account,
    check_sampling,
    claim_options,
    claim_solver,
    client_sampling,
    paper_claim,
    solvers,
)
from auditkit.accounting.cepam import (
    amplified_epsilon,
    base_epsilon,
    cepam_gaussian,
    cepam_laplace,
    delta_floor,
    gaussian_delta,
    sampling_probability,
    solve_sigma,
)
from auditkit.accounting.additive import gaussian, laplace, solve_t, t_mechanism
from auditkit.accounting.jopeq import jopeq_laplace, jopeq_t, true_epsilon
from auditkit.accounting.composition import (
    ACCOUNTANTS,
    FALLBACK_REASONS,
    ComposedEpsilon,
    Fallback,
    UnsupportedEvent,
    compose,
    gaussian_over_rounds,
    laplace_over_rounds,
    refuse_sampling_with_replacement,
)
from auditkit.accounting.dp_sgd import ExampleLevelClaim, dp_sgd_epsilon, example_level_claim
from auditkit.accounting.tradeoff import composed_tradeoff
from auditkit.accounting.rero import (
    claim_rero_bound,
    gaussian_rero_bound,
    gdp_rero_bound,
    laplace_rero_bound,
    rero_bound,
)

__all__ = [
    "composed_tradeoff",
    "AccountingCheck",
    "AccountReport",
    "Sampling",
    "check_sampling",
    "client_sampling",
    "ACCOUNTANTS",
    "claim_options",
    "claim_solver",
    "account",
    "compose",
    "paper_claim",
    "solvers",
    "ComposedEpsilon",
    "FALLBACK_REASONS",
    "Fallback",
    "UnsupportedEvent",
    "amplified_epsilon",
    "base_epsilon",
    "cepam_gaussian",
    "cepam_laplace",
    "delta_floor",
    "gaussian",
    "gaussian_delta",
    "jopeq_laplace",
    "jopeq_t",
    "laplace",
    "solve_t",
    "t_mechanism",
    "true_epsilon",
    "gaussian_over_rounds",
    "laplace_over_rounds",
    "refuse_sampling_with_replacement",
    "ExampleLevelClaim",
    "dp_sgd_epsilon",
    "example_level_claim",
    "sampling_probability",
    "solve_sigma",
    "claim_rero_bound",
    "gaussian_rero_bound",
    "gdp_rero_bound",
    "laplace_rero_bound",
    "rero_bound",
]
