"""CEPAM's privacy claims (paper 003): Lemma 9 / Theorem 12 (Gaussian) and Theorem 13 (Laplace).

One round of CEPAM: each client runs tau local steps on samples drawn uniformly *with replacement*
from its n_k = |D_k| records, clips its update to l2 norm gamma (`clip`) and adds per-coordinate
noise; the server averages K clients. With

    p     = 1 - (1 - 1/n_k)^tau                          (a record is used at least once)
    eps   = ln(1 + p (e^eps_tilde - 1))                   (amplification by subsampling)
    w_j   = C(tau, j) n_k^-j (1 - 1/n_k)^(tau - j)        (the record is used j times)
    g_j   = (e^eps_tilde - 1) / (e^(eps_tilde / j) - 1)    (group privacy, j copies)
    A     = tau gamma / (sqrt(K) sigma),   B_j = sqrt(K) eps_tilde sigma / (2 j tau gamma)

Theorem 12 (eq. 16): the average is (eps, delta)-DP in one round with

    delta = sum_{j=1..tau} w_j g_j [Phi(A - B_j) - e^(eps_tilde/j) Phi(-A - B_j)].

Everything is computed in log space (gammaln, log_ndtr, logsumexp) so that tiny and huge terms
do not overflow. As sigma -> 0 the bracket tends to 1 and delta saturates at the *floor*
sum_j w_j g_j, which depends on the sampling only: a target delta at or above the floor holds
with no noise at all, and is flagged ``vacuous``.

Theorem 13 (Laplace, b = `scale`): delta = 0 once eps_tilde >= 2 tau gamma / b, and eps follows from
the same amplification step. The theorem takes the l1 sensitivity to be 2 tau gamma, but CEPAM clips
in l2: an l2 clip bounds the l1 norm only by sqrt(m) times gamma, so the stated bound is sound only
for an l1 clip (what the `laplace` mechanisms of this toolkit do); the caveat says so.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln, log_ndtr, logsumexp

from auditkit.accounting.report import FLOptions, claim_solver, paper_claim
from auditkit.mechanisms import Param
from auditkit.mechanisms.base import choice
from auditkit.mechanisms.guarantee import REPLACE_ONE, PrivacyGuarantee
from auditkit.validation import Integer, Number

FORMULAS = ("exact", "paper003")  # how Theorem 12 is evaluated: as derived, or as 003 printed it

_SAMPLING = (
    "each local step samples one record uniformly with replacement from the client's data "
    "(003 Lemma 9: subsampling with replacement)"
)
_ROUND_CAVEAT = "one round only: the paper composes nothing over rounds"


def _log_expm1(x: np.ndarray | float) -> np.ndarray:
    """log(e^x - 1) for x > 0 without overflow."""
    x = np.asarray(x, dtype=float)
    big = x > 30
    safe = np.where(big, 1.0, x)
    return np.where(big, x + np.log1p(-np.exp(-np.where(big, x, 30.0))), np.log(np.expm1(safe)))


def _check(tau: int, dataset_size: int, clients: int, clip: float) -> None:
    for name, count in (("tau", tau), ("dataset_size", dataset_size), ("clients", clients)):
        _COUNT.check(count, name)
    _POSITIVE.check(clip, "clip")


_COUNT, _POSITIVE = Integer(low=1), Number(low=0, low_open=True)


def sampling_probability(tau: int, dataset_size: int) -> float:
    """p = 1 - (1 - 1/n_k)^tau: the chance a given record is drawn in tau steps with replacement."""
    return -math.expm1(tau * math.log1p(-1.0 / dataset_size)) if dataset_size > 1 else 1.0


def amplified_epsilon(eps_tilde: float, *, tau: int, dataset_size: int) -> float:
    """eps = ln(1 + p (e^eps_tilde - 1)), computed as eps_tilde + ln(p + (1 - p) e^-eps_tilde)."""
    p = sampling_probability(tau, dataset_size)
    return eps_tilde + math.log(p + (1 - p) * math.exp(-eps_tilde))


def base_epsilon(eps: float, *, tau: int, dataset_size: int) -> float:
    """The inverse of `amplified_epsilon`: eps_tilde = ln(1 + (e^eps - 1) / p)."""
    _POSITIVE.check(eps, "eps")
    p = sampling_probability(tau, dataset_size)
    return float(np.logaddexp(0.0, _log_expm1(eps) - math.log(p)))


def _log_group_weights(eps_tilde: float, tau: int, dataset_size: int) -> tuple[np.ndarray, np.ndarray]:
    j = np.arange(1, tau + 1)
    log_w = (
        gammaln(tau + 1) - gammaln(j + 1) - gammaln(tau - j + 1)
        - j * math.log(dataset_size) + (tau - j) * math.log1p(-1.0 / dataset_size)
    ) if dataset_size > 1 else np.where(j == tau, 0.0, -np.inf)
    return j, log_w + _log_expm1(eps_tilde) - _log_expm1(eps_tilde / j)


def gaussian_delta(
    sigma: float, eps_tilde: float, *, tau: int, dataset_size: int, clients: int, clip: float = 1.0
) -> float:
    """delta of 003 Theorem 12, eq. (16), exactly as written."""
    _check(tau, dataset_size, clients, clip)
    _POSITIVE.check(sigma, "sigma")
    _POSITIVE.check(eps_tilde, "eps_tilde")
    j, log_wg = _log_group_weights(eps_tilde, tau, dataset_size)
    a = tau * clip / (math.sqrt(clients) * sigma)
    b = math.sqrt(clients) * eps_tilde * sigma / (2 * j * tau * clip)
    log_first, log_second = log_ndtr(a - b), eps_tilde / j + log_ndtr(-a - b)
    with np.errstate(divide="ignore"):  # a bracket of exactly 0 contributes log 0 = -inf
        log_bracket = log_first + np.log1p(-np.exp(np.minimum(log_second - log_first, 0.0)))
    return float(np.exp(logsumexp(log_wg + log_bracket)))


def delta_floor(eps_tilde: float, *, tau: int, dataset_size: int) -> float:
    """lim_{sigma -> 0} of eq. (16): sum_j w_j g_j. A target delta at or above it needs no noise."""
    _POSITIVE.check(eps_tilde, "eps_tilde")
    _, log_wg = _log_group_weights(eps_tilde, tau, dataset_size)
    return float(np.exp(logsumexp(log_wg)))


def cepam_gaussian(
    *,
    sigma: float,
    eps_tilde: float,
    tau: int,
    dataset_size: int,
    clients: int,
    clip: float = 1.0,
    formula: str = "exact",
) -> PrivacyGuarantee:
    """CEPAM-Gaussian's one-round (eps, delta) claim (003 Theorem 12).

    ``formula="paper003"`` reproduces the numbers 003 prints (delta = 2.48e-2 at sigma = 0.001 and
    its sigma lists), which only come out of eq. (16) with sigma <-> eps_tilde and n_k <-> K swapped
    in the call; the guarantee is then flagged ``paper-compat``: it is the paper's number, not a
    bound this toolkit stands behind.
    """
    if formula not in FORMULAS:
        raise ValueError(f"formula must be one of {', '.join(FORMULAS)}; got {formula!r}")
    _check(tau, dataset_size, clients, clip)
    eps = amplified_epsilon(eps_tilde, tau=tau, dataset_size=dataset_size)
    flags, caveats = set(), [_ROUND_CAVEAT]
    if formula == "paper003":
        delta = gaussian_delta(eps_tilde, sigma, tau=tau, dataset_size=clients, clients=dataset_size, clip=clip)
        flags.add("paper-compat")
        caveats.append("formula paper003: sigma<->eps_tilde and n_k<->K swapped in eq. (16), as the printed numbers imply")
    else:
        delta = gaussian_delta(sigma, eps_tilde, tau=tau, dataset_size=dataset_size, clients=clients, clip=clip)
        floor = delta_floor(eps_tilde, tau=tau, dataset_size=dataset_size)
        if delta >= floor * (1 - 1e-9):
            flags.add("vacuous")
            caveats.append(
                f"vacuous: delta is at the floor {floor:.6g} that subsampling alone gives; "
                "the claim holds with no noise at all"
            )
    return PrivacyGuarantee(
        epsilon=eps,
        delta=min(delta, 1.0),
        relation=REPLACE_ONE,
        unit="record (one training sample of a client)",
        scope="one round",
        threat_model="server sees the average of K clients (trusted aggregation of noisy updates)",
        sensitivity=f"l2 clip {clip:g}, sensitivity 2 tau gamma / K = {2 * tau * clip / clients:.4g}",
        assumptions=(
            _SAMPLING,
            f"each update clipped to l2 norm gamma = {clip:g}; per-coordinate noise std sigma = {sigma:g}",
            f"tau = {tau}, n_k = {dataset_size}, K = {clients}, eps_tilde = {eps_tilde:g}",
        ),
        caveats=tuple(caveats),
        flags=frozenset(flags),
    )


def solve_sigma(
    *, eps: float, delta: float, tau: int, dataset_size: int, clients: int, clip: float = 1.0,
    formula: str = "exact",
) -> float:
    """The smallest sigma meeting (eps, delta) under eq. (16) (bisection on log sigma).

    Returns 0.0 when the target is vacuous (delta at or above the no-noise floor). Raises
    ValueError when no sigma meets the target (only possible with ``formula="paper003"``).
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    eps_tilde = base_epsilon(eps, tau=tau, dataset_size=dataset_size)
    if formula == "paper003":
        f = lambda ls: gaussian_delta(  # noqa: E731
            eps_tilde, math.exp(ls), tau=tau, dataset_size=clients, clients=dataset_size, clip=clip) - delta
        lo, hi = math.log(1e-12), math.log(eps_tilde * 0.999999)  # swapped: sigma plays eps_tilde
    else:
        if delta >= delta_floor(eps_tilde, tau=tau, dataset_size=dataset_size):
            return 0.0
        f = lambda ls: gaussian_delta(  # noqa: E731
            math.exp(ls), eps_tilde, tau=tau, dataset_size=dataset_size, clients=clients, clip=clip) - delta
        lo, hi = math.log(1e-12), math.log(1e6)
    if f(lo) * f(hi) > 0:
        raise ValueError(f"no sigma reaches (eps={eps:g}, delta={delta:g}) under eq. (16) with these settings")
    root = brentq(f, lo, hi, xtol=1e-14, rtol=1e-12)
    return math.exp(root)


def cepam_laplace(
    *, scale: float, tau: int, dataset_size: int, clip: float = 1.0, eps_tilde: float | None = None
) -> PrivacyGuarantee:
    """CEPAM-Laplace's one-round eps claim (003 Theorem 13).

    delta = 0 requires eps_tilde >= 2 tau gamma / b; by default eps_tilde is that minimum. A
    smaller `eps_tilde` is refused: the theorem says nothing about it.
    """
    _check(tau, dataset_size, 1, clip)
    _POSITIVE.check(scale, "scale")
    minimum = 2 * tau * clip / scale
    if eps_tilde is None:
        eps_tilde = minimum
    _POSITIVE.check(eps_tilde, "eps_tilde")
    if eps_tilde < minimum:
        raise ValueError(
            f"eps_tilde must be >= 2 tau gamma / b = {minimum:g} for Theorem 13 to give delta = 0, got {eps_tilde:g}"
        )
    return PrivacyGuarantee(
        epsilon=amplified_epsilon(eps_tilde, tau=tau, dataset_size=dataset_size),
        delta=0.0,
        relation=REPLACE_ONE,
        unit="record (one training sample of a client)",
        scope="one round",
        threat_model="server sees each client's decoded update",
        sensitivity=f"l1 sensitivity 2 tau gamma = {2 * tau * clip:g}",
        assumptions=(_SAMPLING, f"tau = {tau}, n_k = {dataset_size}, b = {scale:g}, eps_tilde = {eps_tilde:g}"),
        caveats=(
            _ROUND_CAVEAT,
            "Theorem 13 needs l1 sensitivity 2 tau gamma, but CEPAM clips in l2: an l2 clip leaves the l1 "
            "sensitivity up to sqrt(m) times larger; the bound holds as stated only for an l1 clip",
        ),
    )


FL_OPTIONS = (  # the FL settings 003's record-level claims read (``auditkit account`` options)
    Param("tau", None, "local steps per round tau (003's record-level claim)", _COUNT),
    Param("dataset_size", None, "records per client n_k (003's record-level claim)", _COUNT),
    Param("clients", None, "clients K averaged per round (003 Theorem 12)", _COUNT),
    Param("eps_tilde", None, "CEPAM's base epsilon (003 Theorem 12)", _POSITIVE),
    choice("formula", FORMULAS, "exact",
           "how 003's Theorem 12 is evaluated: exact, or paper003 (the swapped arguments that reproduce its "
           "printed numbers)"),
)


@paper_claim("cepam-gaussian", "cepam-laplace", options=FL_OPTIONS)
def cepam_paper_claim(mechanism: Any, fl: FLOptions) -> PrivacyGuarantee | None:
    """003's record-level claim for a configured CEPAM mechanism: Theorem 12 (Gaussian: needs tau, dataset_size,
    clients and eps_tilde) or Theorem 13 (Laplace: tau and dataset_size); None without tau and dataset_size."""
    tau, dataset_size, eps_tilde = fl.get("tau"), fl.get("dataset_size"), fl.get("eps_tilde")
    if tau is None or dataset_size is None:
        return None
    params = mechanism.params
    if mechanism.name == "cepam-gaussian":
        if eps_tilde is None or fl.get("clients") is None:
            raise ValueError("cepam-gaussian's Theorem 12 needs eps_tilde, tau, dataset_size and clients")
        return cepam_gaussian(sigma=params["sigma"], eps_tilde=eps_tilde, tau=tau, dataset_size=dataset_size,
                              clients=fl["clients"], clip=params["clip"], formula=fl.get("formula", "exact"))
    return cepam_laplace(scale=params["scale"], tau=tau, dataset_size=dataset_size, clip=params["clip"],
                         eps_tilde=eps_tilde)


def _fl_needs(fl: FLOptions, solver: str, *names: str) -> None:
    missing = [f"--{n.replace('_', '-')}" for n in names if fl.get(n) is None]
    if missing:
        raise ValueError(f"--solve {solver} needs {' and '.join(missing)}")


@claim_solver("eps-tilde", mechanisms=("cepam-gaussian", "cepam-laplace"),
              help="CEPAM's base epsilon that amplifies to --target-eps (003 Lemma 9; needs --tau, --dataset-size)")
def solve_eps_tilde(mechanism: str, params: Mapping[str, Any], target_eps: float, target_delta: float | None,
                    fl: FLOptions) -> str:
    """eps_tilde = ``base_epsilon(target_eps)``: the base epsilon whose amplification by record sampling is the
    target."""
    _fl_needs(fl, "eps-tilde", "tau", "dataset_size")
    found = base_epsilon(target_eps, tau=fl["tau"], dataset_size=fl["dataset_size"])
    return f"eps_tilde = {found:.6g}  (amplifies to eps = {target_eps:g}; 003 Lemma 9)"


@claim_solver("sigma", mechanisms=("cepam-gaussian",),
              help="cepam-gaussian's sigma meeting (--target-eps, --target-delta) under 003 Theorem 12 "
                   "(needs --tau, --dataset-size, --clients)")
def solve_cepam_sigma(mechanism: str, params: Mapping[str, Any], target_eps: float, target_delta: float | None,
                      fl: FLOptions) -> str:
    """The smallest sigma meeting the target under eq. (16) (``solve_sigma``)."""
    if target_delta is None:
        raise ValueError("--solve sigma needs --target-delta")
    _fl_needs(fl, "sigma", "tau", "dataset_size", "clients")
    formula = fl.get("formula", "exact")
    found = solve_sigma(eps=target_eps, delta=target_delta, tau=fl["tau"], dataset_size=fl["dataset_size"],
                        clients=fl["clients"], clip=params.get("clip", 1.0), formula=formula)
    return ("sigma = 0 (vacuous: the target delta holds with no noise at all)" if found == 0
            else f"sigma = {found:.6g}  (003 Theorem 12, formula {formula})")
