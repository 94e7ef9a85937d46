"""The informed adversary's identification attack: which of M known candidates did the client hold?

Reconstruction robustness (Balle, Cherubin & Hayes, S&P 2022) measures reconstruction by an adversary who knows
everything but the target: here, the target example is one of M candidates (the target and M - 1 other real
examples, uniform prior), the adversary computes the update each candidate would produce at the same model (the
rows of ``pool``), observes the mechanism's output for the target's update (``decode(encode(u_target))``: the
server's view) and picks the most likely candidate:

* ``"likelihood"``: the candidate x maximising ln p(y | x) where the mechanism declares its output density
  (``output_log_density``): the Bayes-optimal pick under a uniform prior when the density is right;
* ``"nearest"``: otherwise the candidate nearest to y in l2 after the mechanism's own clipping (``clip`` in its
  ``clip_norm``), the maximum-likelihood pick for isotropic noise around the clipped update.

Ties are broken uniformly at random (a deterministic tie-break would credit a useless output to the candidate
listed first). The success rate over ``trials`` independent trials gets a Clopper-Pearson interval; a DP claim
bounds it (``auditkit.accounting.rero``), and :meth:`IdentificationResult.p_value` tests "success <= bound".

Each trial draws the target and the M - 1 others from the pool; for several M the smaller candidate sets are
prefixes of the largest (one mechanism call per trial serves every M, each M's trials stay independent).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from auditkit.mechanisms import Mechanism, capability
from auditkit.mechanisms.densities import nearest_density, pair_log_densities
from auditkit.mechanisms.randomness import derive_seed

__all__ = ["IdentificationResult", "STATISTICS", "Scorer", "candidate_scorer", "identify"]

STATISTICS = ("likelihood", "nearest")  # the score the adversary ranks candidates by


@dataclass(frozen=True)
class IdentificationResult:
    """How often the adversary picked the target among ``candidates`` (M) candidates in ``trials`` trials."""

    candidates: int
    trials: int
    successes: int
    statistic: str
    confidence: float

    @property
    def kappa(self) -> float:
        """The prior's own success, 1 / M: what guessing achieves."""
        return 1.0 / self.candidates

    @property
    def rate(self) -> float:
        return self.successes / self.trials

    @property
    def interval(self) -> tuple[float, float]:
        """The two-sided Clopper-Pearson interval of the success rate at ``confidence``."""
        return clopper_pearson(self.successes, self.trials, self.confidence)

    def lower(self, confidence: float) -> float:
        """The one-sided Clopper-Pearson lower limit of the success rate at ``confidence``."""
        if self.successes == 0:
            return 0.0
        return float(stats.beta.ppf(1 - confidence, self.successes, self.trials - self.successes + 1))

    def p_value(self, bound: float) -> float:
        """P[Binomial(trials, bound) >= successes]: the p-value of "the success probability is <= bound"."""
        if bound >= 1:
            return 1.0
        return float(stats.binom.sf(self.successes - 1, self.trials, bound))

    def exceeds(self, bound: float, confidence: float) -> bool:
        """Whether the success rate's lower limit at ``confidence`` is above ``bound`` (the claim is refuted)."""
        return self.lower(confidence) > bound

    def can_exceed(self, bound: float, confidence: float) -> bool:
        """Whether these trials could refute ``bound`` at all: a perfect record's lower limit is above it."""
        return (1 - confidence) ** (1 / self.trials) > bound


def clopper_pearson(successes: int, trials: int, confidence: float) -> tuple[float, float]:
    """The exact two-sided binomial interval (Clopper & Pearson 1934) at ``confidence``."""
    alpha = 1 - confidence
    low = 0.0 if successes == 0 else stats.beta.ppf(alpha / 2, successes, trials - successes + 1)
    high = 1.0 if successes == trials else stats.beta.ppf(1 - alpha / 2, successes + 1, trials - successes)
    return float(low), float(high)


Scorer = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""scores(ys, drawn): for outputs ys (n, d) of the mechanism and candidate rows drawn (n, M) of the pool, how likely
ys[t] is under candidate drawn[t, j] (higher: more likely), shape (n, M)."""

_CHUNK_ELEMENTS = 1 << 24  # output coordinates held at once in ``identify`` (128 MiB of float64)


def candidate_scorer(mechanism: Mechanism, pool: np.ndarray) -> tuple[str, Scorer]:
    """The statistic's name, and ``scores(ys, drawn)`` for the candidate rows of ``pool`` (P x d, float64): the
    likelihood ln p(y | pool[r]) where the mechanism declares it, else minus the squared distance from y to pool[r]
    after the mechanism's clipping (module docstring). Every (output, candidate) pair is scored in one call
    (``auditkit.mechanisms.densities.pair_log_densities``: one matrix product for a Gaussian density, a compiled loop for
    JoPEQ's, one call per candidate for a density of a plugin's own)."""
    log_density = capability(mechanism, "output_log_density")
    if log_density is None:
        log_density, statistic = nearest_density(mechanism), "nearest"  # ln p = -||y - clip(x)||^2
    else:
        statistic = "likelihood"

    def scores(ys: np.ndarray, drawn: np.ndarray) -> np.ndarray:
        rows = np.repeat(np.arange(len(ys)), drawn.shape[1])
        return pair_log_densities(log_density, ys, pool, rows, drawn.ravel()).reshape(drawn.shape)

    return statistic, scores


def identify(
    mechanism: Mechanism,
    pool: torch.Tensor,
    *,
    candidates: int | Sequence[int] = (10, 100),
    trials: int = 500,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[IdentificationResult]:
    """The identification attack of the module docstring on ``mechanism``, one result per M in ``candidates``.

    ``pool``: P x d, row i the update the client sends if it holds candidate example i (P >= max M). Trial t draws
    max M distinct rows uniformly; the first is the target, so it is uniform within every prefix of M rows (the
    candidate set for that M). The target's update goes through the mechanism once (encode -> bytes -> decode,
    shared randomness keyed by ``seed`` and t) and that output is scored against each prefix. ``confidence`` is
    that of the reported intervals.
    """
    sizes = [candidates] if isinstance(candidates, int) else list(candidates)
    if not sizes or any(isinstance(m, bool) or not isinstance(m, int) or m < 2 for m in sizes):
        raise ValueError(f"candidates must be integers >= 2, got {candidates!r}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be an integer >= 1, got {trials!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if pool.dim() != 2 or len(pool) < max(sizes):
        raise ValueError(f"candidates must be at most the {len(pool)} rows of pool, got {max(sizes)}")
    rows = pool.detach().cpu().double().numpy()
    statistic, scores = candidate_scorer(mechanism, rows)
    rng = np.random.default_rng(derive_seed(seed, "identification"))
    largest = max(sizes)
    drawn = np.stack([rng.choice(len(rows), size=largest, replace=False) for _ in range(trials)])  # [:, 0]: target
    table = np.empty(drawn.shape, dtype=np.float64)
    chunk = max(1, _CHUNK_ELEMENTS // rows.shape[1])
    for start in range(0, trials, chunk):
        ys = []
        for t in range(start, min(start + chunk, trials)):
            shared = derive_seed(seed, "identification-trial", t)
            message = mechanism.encode(torch.from_numpy(rows[drawn[t, 0]]).float(), shared)
            ys.append(mechanism.decode(type(message).from_bytes(message.to_bytes()), shared).double().numpy())
        table[start : start + len(ys)] = scores(np.stack(ys), drawn[start : start + len(ys)])
    wins = dict.fromkeys(sizes, 0)
    for s in table:
        for m in sizes:
            best = np.flatnonzero(s[:m] == s[:m].max())
            wins[m] += int(rng.choice(best) == 0)
    return [IdentificationResult(m, trials, wins[m], statistic, confidence) for m in sizes]
