"""The output log-density ln p(y | x) of registered mechanisms whose output law is known in closed form.

Used by the "llr" statistic of ``attacks.distinguish``: the log-likelihood ratio ln p(y | x1) - ln p(y | x0)
is the most powerful test between x0 and x1 (Neyman-Pearson). The density is a *model* of the mechanism,
taken from its claim: a wrong model only weakens the test, it never invalidates the certified bound,
which is counted on held-out outputs whatever statistic produced the test. Additive constants that do not
depend on x are dropped.

A log-density is ``f(y, x) -> ln p(y | x)`` with y of shape (B, d_out) and x of shape (d,) (NumPy float64),
returning shape (B,). Known laws (c = the clipped x, as the mechanism clips it):

* ``gaussian``, ``cepam-gaussian`` (compat none): y - c ~ N(0, sigma^2 I): -||y - c||^2 / (2 sigma^2).
* ``laplace``, ``cepam-laplace`` (compat none): iid Laplace(b): -||y - c||_1 / b.
* ``gaussian+sdq``: per coordinate N(0, sigma^2) + Unif(+-Delta/2) (no overload): ln[Phi((Delta/2 - |z|)/sigma)
  - Phi((-Delta/2 - |z|)/sigma)], z = y - c.
* ``laplace+sdq``: Laplace(b) + Unif(+-Delta/2) (``mechanisms.jopeq.laplace_uniform_logpdf``).
* ``t-dist``: per pair t_nu(0, s2 I_2): -(nu + 2)/2 ln(1 + ||z||^2 / (nu s2)); a lone last coordinate is
  univariate t_nu(0, s2): -(nu + 1)/2 ln(1 + z^2 / (nu s2)).
* ``jopeq-laplace``: in the scaled domain z = zeta (y - x) (zeta = ``jopeq_scaling(x)``), per coordinate
  Laplace(b') + Unif(+-Delta/2) (no overload), plus the Jacobian d ln zeta.
* ``jopeq-exact``: z = zeta (y - x) is exactly Laplace(b) or t_nu(0, s2 I_n) per block, plus d ln zeta.

``none``, ``sdq``, ``sdq-hex`` (point mass / uniform cells: the projection already separates them), the
hexagonal-dither convolutions (``jopeq-t``, ``t-dist+sdq``) and unknown mechanisms have no entry: the
classifier statistic covers them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from scipy.special import log_ndtr

from mechanisms.additive import Gaussian, Laplace, clip_l1, clip_l2
from mechanisms.base import Mechanism
from mechanisms.cepam import CEPAMGaussian, CEPAMLaplace
from mechanisms.jopeq import JoPEQLaplace, jopeq_scaling, laplace_uniform_logpdf
from mechanisms.jopeq_exact import JoPEQExact
from mechanisms.noisy_sdq import GaussianSDQ, LaplaceSDQ
from mechanisms.rsuq import LaplaceTarget
from mechanisms.tdist import TDist

__all__ = ["LogDensity", "gaussian_uniform_logpdf", "output_log_density"]

LogDensity = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""f(y, x): outputs y (B, d_out) and input x (d,) -> ln p(y | x) of shape (B,), up to a constant in x."""


def gaussian_uniform_logpdf(z: np.ndarray, sigma: float, width: float) -> np.ndarray:
    """ln of the density of N(0, sigma^2) + Unif(-w/2, w/2) at z, up to -ln w: ln[Phi(a) - Phi(b)] with
    a = (w/2 - |z|)/sigma > b = (-w/2 - |z|)/sigma (symmetry puts both in the lower tail, where
    ``log_ndtr`` is accurate), written ln Phi(a) + ln(1 - exp(ln Phi(b) - ln Phi(a)))."""
    z = np.abs(z)
    log_a = log_ndtr((width / 2 - z) / sigma)
    log_b = log_ndtr((-width / 2 - z) / sigma)
    return log_a + np.log(-np.expm1(log_b - log_a))


def _clipped(x: np.ndarray, clip: float, norm: int) -> np.ndarray:
    clip_fn = clip_l2 if norm == 2 else clip_l1
    return clip_fn(torch.from_numpy(x), clip).numpy()


def _t_blocks_logpdf(z: np.ndarray, nu: float, s2: float, block: int) -> np.ndarray:
    """Sum over contiguous blocks of ``block`` coordinates of the t_nu(0, s2 I) log-density (a shorter last
    block is the marginal of the same law: t of its own dimension)."""
    total = np.zeros(z.shape[0])
    for start in range(0, z.shape[1], block):
        part = z[:, start : start + block]
        dim = part.shape[1]
        total -= (nu + dim) / 2 * np.log1p((part**2).sum(axis=1) / (nu * s2))
    return total


def _zeta(x: np.ndarray, block: int) -> float:
    return jopeq_scaling(torch.from_numpy(x), -(-x.size // block))


def _gaussian(sigma: float, clip: float) -> LogDensity:
    return lambda y, x: -((y - _clipped(x, clip, 2)) ** 2).sum(axis=1) / (2 * sigma**2)


def _laplace(scale: float, clip: float) -> LogDensity:
    return lambda y, x: -np.abs(y - _clipped(x, clip, 1)).sum(axis=1) / scale


def _jopeq_laplace(m: JoPEQLaplace) -> LogDensity:
    def log_density(y: np.ndarray, x: np.ndarray) -> np.ndarray:
        zeta = _zeta(x, 1)
        z = zeta * (y - x)
        return laplace_uniform_logpdf(z, m.ppn_scale, m.step).sum(axis=1) + x.size * math.log(zeta)

    return log_density


def _jopeq_exact(m: JoPEQExact) -> LogDensity:
    target = m.target

    def log_density(y: np.ndarray, x: np.ndarray) -> np.ndarray:
        zeta = _zeta(x, target.n)
        z = zeta * (y - x)
        if isinstance(target, LaplaceTarget):
            core = -np.abs(z).sum(axis=1) / target.scale
        else:
            core = _t_blocks_logpdf(z, target.nu, target.s2, target.n)
        return core + x.size * math.log(zeta)

    return log_density


def output_log_density(mechanism: Mechanism) -> LogDensity | None:
    """The output log-density of ``mechanism`` (exact class match, module docstring), or None if unknown."""
    p = getattr(mechanism, "params", {})
    kind = type(mechanism)
    if kind in (Gaussian, CEPAMGaussian) and p.get("compat", "none") == "none":
        return _gaussian(p["sigma"], p["clip"])
    if kind in (Laplace, CEPAMLaplace) and p.get("compat", "none") == "none":
        return _laplace(p["scale"], p["clip"])
    if kind is GaussianSDQ:
        step = mechanism.quantizer.step
        return lambda y, x: gaussian_uniform_logpdf(y - _clipped(x, p["clip"], 2), p["sigma"], step).sum(axis=1)
    if kind is LaplaceSDQ:
        step = mechanism.quantizer.step
        return lambda y, x: laplace_uniform_logpdf(y - _clipped(x, p["clip"], 1), p["scale"], step).sum(axis=1)
    if kind is TDist:
        return lambda y, x: _t_blocks_logpdf(y - _clipped(x, p["clip"], 2), mechanism.nu, mechanism.s2, 2)
    if kind is JoPEQLaplace:
        return _jopeq_laplace(mechanism)
    if kind is JoPEQExact:
        return _jopeq_exact(mechanism)
    return None
