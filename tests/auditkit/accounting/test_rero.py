"""Reconstruction-robustness bounds (auditkit.accounting.rero), each checked against an independent computation.

* closed forms at hand-computed points, against scipy's distributions, and their order (monotone, nested);
* the Laplace trade-off function against the Neyman-Pearson tests of Lap(0, 1) vs Lap(eps, 1), and the
  privacy-loss distribution of pairs whose l1 difference is spread over two coordinates (exact quadrature);
* Monte Carlo of the maximum-likelihood attack: a hand-built Gaussian experiment with candidates on a regular
  simplex of edge Delta (the bound is MET), and the REAL ``gaussian`` / ``laplace`` mechanisms (encode, decode)
  on candidate sets inside their clip balls (the bound HOLDS; met for the antipodal Gaussian pair).

Monte Carlo verdicts use Clopper-Pearson intervals at 1e-3 per side, fixed seeds.
"""
from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
import torch
from scipy import stats
from scipy.integrate import quad, trapezoid
from scipy.special import ndtr

from auditkit import mechanisms
from auditkit.attacks.epsilon_bounds import clopper_pearson_upper
from auditkit import accounting
from auditkit.accounting.rero import (
    GAUSSIAN_M_POINT,
    GENERIC_DP,
    LAPLACE_F_DP,
    claim_rero_bound,
    gaussian_rero_bound,
    gdp_rero_bound,
    laplace_rero_bound,
    rero_bound,
)
from auditkit.mechanisms.additive import analytic_gaussian_epsilon

ALPHA = 1e-3  # per side of every Clopper-Pearson interval
TRIALS = 20_000
MUS = (0.5, 1.0, 2.0, 4.0)
EPSS = (0.5, 1.0, 2.0, 4.0)
MS = (2, 10, 100)


def cp_lower(k: int, n: int, alpha: float = ALPHA) -> float:
    return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))


def cp_interval(k: int, n: int) -> tuple[float, float]:
    return cp_lower(k, n), float(clopper_pearson_upper(k, n, ALPHA))


# --- closed forms ---------------------------------------------------------------------------------------------


def test_exports():
    for name in ("rero_bound", "gdp_rero_bound", "laplace_rero_bound", "gaussian_rero_bound", "claim_rero_bound"):
        assert name in accounting.__all__ and getattr(accounting, name) is globals()[name]


def test_generic_bound_at_hand_computed_points():
    assert rero_bound(eps=0, delta=0, kappa=0.1) == pytest.approx(0.1, abs=1e-15)
    assert rero_bound(eps=0, delta=0.05, kappa=0.1) == pytest.approx(0.15)
    # eps = 1, delta = 0.01, kappa = 0.1: min(0.01 + e * 0.1, 1 - (0.89) / e) = 0.28183
    assert rero_bound(eps=1, delta=0.01, kappa=0.1) == pytest.approx(0.01 + math.e * 0.1, rel=1e-12)
    # kappa = 1/2: min(e / 2, 1 - 1/(2e)) = 0.81606
    assert rero_bound(eps=1, delta=0, kappa=0.5) == pytest.approx(1 - 0.5 / math.e, rel=1e-12)
    assert rero_bound(eps=0.3, delta=0.2, kappa=1.0) == 1.0
    for eps in (50.0, 1e4, 1e300, math.inf):  # saturates, no OverflowError
        assert rero_bound(eps=eps, delta=0.0, kappa=1e-12) == 1.0
    assert rero_bound(eps=20.0, delta=0.0, kappa=1e-12) == pytest.approx(math.exp(20) * 1e-12, rel=1e-12)


def test_gdp_bound_at_hand_computed_points():
    for kappa in (1e-6, 0.01, 0.1, 0.5, 1.0):
        assert gdp_rero_bound(mu=0, kappa=kappa) == kappa
    assert gdp_rero_bound(mu=1.0, kappa=0.5) == pytest.approx(0.8413447460685429, abs=1e-15)
    assert gdp_rero_bound(mu=stats.norm.ppf(0.95), kappa=0.05) == pytest.approx(0.5, abs=1e-12)
    assert gdp_rero_bound(mu=math.inf, kappa=0.01) == 1.0 and gdp_rero_bound(mu=3.0, kappa=1.0) == 1.0


def test_laplace_bound_at_hand_computed_points():
    for kappa in (1e-6, 0.1, 0.5, 0.9):
        assert laplace_rero_bound(eps=0, kappa=kappa) == pytest.approx(kappa, abs=1e-15)
    e = math.e  # eps = 1: the pieces change at kappa = 1/(2e) = 0.184 and 1/2
    assert laplace_rero_bound(eps=1, kappa=0.1) == pytest.approx(0.1 * e, rel=1e-12)
    assert laplace_rero_bound(eps=1, kappa=0.3) == pytest.approx(1 - 1 / (1.2 * e), rel=1e-12)
    assert laplace_rero_bound(eps=1, kappa=0.5) == pytest.approx(1 - 1 / (2 * e), rel=1e-12)
    assert laplace_rero_bound(eps=1, kappa=0.8) == pytest.approx(1 - 0.2 / e, rel=1e-12)
    assert laplace_rero_bound(eps=1e4, kappa=1e-9) == 1.0 and laplace_rero_bound(eps=math.inf, kappa=0.2) == 1.0
    # continuous at the breakpoints
    for eps in (0.3, 2.0):
        for a in (math.exp(-eps) / 2, 0.5):
            assert laplace_rero_bound(eps=eps, kappa=a * (1 - 1e-12)) == pytest.approx(
                laplace_rero_bound(eps=eps, kappa=a * (1 + 1e-12)), abs=1e-9
            )


@pytest.mark.parametrize("eps", [0.1, 0.7, 2.0, 5.0])
def test_laplace_trade_off_against_neyman_pearson(eps):
    """1 - f(a) against the optimal (threshold) test of Lap(0, 1) vs Lap(eps, 1): the likelihood ratio is monotone
    in x, so the most powerful level-a test rejects for x > t with P0(X > t) = a, power P1(X > t)."""
    lap = stats.laplace
    for a in np.concatenate([np.geomspace(1e-4, 0.999, 60), [math.exp(-eps) / 2, 0.5]]):
        t = lap.isf(a)
        assert laplace_rero_bound(eps=eps, kappa=float(a)) == pytest.approx(lap.sf(t, loc=eps), abs=1e-12)


def test_gaussian_m_point_closed_forms_and_independent_quadrature():
    for mu in (0.0, 0.01, 0.5, 1.0, 2.0, 4.0, 8.0, 30.0):
        assert gaussian_rero_bound(mu=mu, candidates=2) == pytest.approx(ndtr(mu / 2), abs=1e-12)
    for m in (2, 3, 17, 10**6):
        assert gaussian_rero_bound(mu=0, candidates=m) == pytest.approx(1 / m, rel=1e-12)
    assert gaussian_rero_bound(mu=math.inf, candidates=5) == 1.0
    # M = 3: P(a + Z1 > Z2, a + Z1 > Z3), a = mu/sqrt2, is a bivariate normal orthant with correlation 1/2.
    for mu in (0.5, 1.0, 2.0, 4.0):
        a = mu / math.sqrt(2)
        expected = stats.multivariate_normal.cdf([a / math.sqrt(2)] * 2, mean=[0, 0], cov=[[1, 0.5], [0.5, 1]],
                                                 abseps=1e-10, releps=1e-10)
        assert gaussian_rero_bound(mu=mu, candidates=3) == pytest.approx(expected, abs=1e-7)
    # Any M: a plain trapezoid on a fine grid of the same integral (independent of quad).
    z = np.linspace(-15, 25, 400_001)
    for mu in MUS:
        for m in (10, 100, 10_000):
            y = stats.norm.pdf(z - mu / math.sqrt(2)) * np.exp((m - 1) * stats.norm.logcdf(z))
            assert gaussian_rero_bound(mu=mu, candidates=m) == pytest.approx(trapezoid(y, z), abs=1e-9)


def test_monotone_in_privacy_parameter_and_kappa():
    grid = np.linspace(0, 10, 101)
    kappas = np.geomspace(1e-5, 1, 60)
    for kappa in (0.001, 0.1, 0.5):
        for series in (
            [rero_bound(eps=e, delta=1e-5, kappa=kappa) for e in grid],
            [gdp_rero_bound(mu=e, kappa=kappa) for e in grid],
            [laplace_rero_bound(eps=e, kappa=kappa) for e in grid],
        ):
            assert np.all(np.diff(series) >= -1e-15)
    for m in (2, 10, 1000):
        assert np.all(np.diff([gaussian_rero_bound(mu=mu, candidates=m) for mu in grid]) >= -1e-13)
    for p in (0.5, 2.0):
        for series in (
            [rero_bound(eps=p, delta=1e-3, kappa=k) for k in kappas],
            [gdp_rero_bound(mu=p, kappa=k) for k in kappas],
            [laplace_rero_bound(eps=p, kappa=k) for k in kappas],
        ):
            assert np.all(np.diff(series) >= -1e-15)
        assert np.all(np.diff([gaussian_rero_bound(mu=p, candidates=m) for m in range(2, 60)]) <= 1e-15)
    assert rero_bound(eps=1, delta=0.2, kappa=0.1) > rero_bound(eps=1, delta=0.0, kappa=0.1)


def test_laplace_below_pure_dp_and_equal_on_the_outer_pieces():
    for eps in (0.1, 0.5, 1.0, 3.0, 8.0):
        for kappa in np.geomspace(1e-5, 1, 80):
            lap, pure = laplace_rero_bound(eps=eps, kappa=kappa), rero_bound(eps=eps, delta=0, kappa=kappa)
            assert lap <= pure + 1e-15
            if kappa < math.exp(-eps) / 2 or kappa >= 0.5:
                assert lap == pytest.approx(pure, rel=1e-12)
            elif kappa > math.exp(-eps) / 2 * 1.1:
                assert 1 - lap > (1 - pure) * (1 + 1e-4)  # f_Laplace(kappa) > f_pure(kappa), relative


@pytest.mark.parametrize("delta", [1e-2, 1e-5, 1e-9])
def test_gaussian_bounds_below_the_analytic_gaussian_claim(delta):
    for mu in (0.1, 0.5, 1.0, 2.0, 4.0, 8.0):
        eps = analytic_gaussian_epsilon(mu, 1.0, delta)  # sensitivity mu, sigma 1
        for m in (2, 10, 100, 10_000):
            generic = rero_bound(eps=eps, delta=delta, kappa=1 / m)
            gdp = gdp_rero_bound(mu=mu, kappa=1 / m)
            assert gaussian_rero_bound(mu=mu, candidates=m) <= gdp <= generic + 1e-12


def test_m_point_below_gdp_below_one():
    """The prior-specific bound is strictly tighter than mu-GDP at kappa = 1/M for every mu > 0 (they never
    cross; at mu = 0 both are 1/M), and both are below 1 for finite mu."""
    for m in (2, 3, 10, 100, 10**4, 10**8):
        assert gaussian_rero_bound(mu=0, candidates=m) == gdp_rero_bound(mu=0, kappa=1 / m)
        for mu in np.linspace(0.05, 12, 60):
            g, d = gaussian_rero_bound(mu=mu, candidates=m), gdp_rero_bound(mu=mu, kappa=1 / m)
            assert g < d or g == d == 1.0  # equal only when both round to 1
            if mu <= 6:
                assert d < 1.0
    assert gaussian_rero_bound(mu=2.0, candidates=10) < gdp_rero_bound(mu=2.0, kappa=0.1) - 0.1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rero_bound(eps=-0.1, delta=0, kappa=0.5), "eps must be a number >= 0"),
        (lambda: rero_bound(eps=float("nan"), delta=0, kappa=0.5), r"eps must be a number >= 0 \(inf allowed\), got nan"),
        (lambda: rero_bound(eps=1, delta=1.5, kappa=0.5), r"delta must be a number in \[0, 1\]"),
        (lambda: rero_bound(eps=1, delta=0, kappa=0.0), r"kappa must be a number in \(0, 1\]"),
        (lambda: rero_bound(eps=1, delta=0, kappa=1.2), r"kappa must be a number in \(0, 1\]"),
        (lambda: gdp_rero_bound(mu=-1, kappa=0.5), "mu must be a number >= 0"),
        (lambda: gdp_rero_bound(mu=True, kappa=0.5), "mu must be a number >= 0"),
        (lambda: laplace_rero_bound(eps=-1, kappa=0.5), "eps must be a number >= 0"),
        (lambda: laplace_rero_bound(eps=1, kappa=-0.5), "kappa must be a number in"),
        (lambda: gaussian_rero_bound(mu=1, candidates=1), "candidates must be an integer >= 2"),
        (lambda: gaussian_rero_bound(mu=1, candidates=2.0), "candidates must be an integer >= 2"),
        (lambda: gaussian_rero_bound(mu=-1, candidates=2), "mu must be a number >= 0"),
        (lambda: claim_rero_bound(None, candidates=0, eps=1, delta=0), "candidates must be an integer >= 2"),
        (lambda: claim_rero_bound(None, candidates=4, eps=1, delta=2), "delta must be a number in"),
    ],
)
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --- the claim's bound ----------------------------------------------------------------------------------------


def test_claim_bound_for_the_gaussian_mechanism():
    g = mechanisms.create("gaussian", sigma=1.0, clip=0.5)  # mu = 2 clip / sigma = 1
    claim = g.guarantee()
    for m in (2, 10, 100):
        value, name = claim_rero_bound(g.dp_event(), candidates=m, eps=claim.epsilon, delta=claim.delta)
        assert name == GAUSSIAN_M_POINT and value == gaussian_rero_bound(mu=1.0, candidates=m)
    # a claim smaller than the noise supports is taken at its word
    value, name = claim_rero_bound(g.dp_event(), candidates=10, eps=0.01, delta=0.0)
    assert name == GENERIC_DP and value == pytest.approx(math.exp(0.01) * 0.1)
    assert claim_rero_bound(g.dp_event(), candidates=10, eps=None, delta=1e-5) == (1.0, "no claim")
    assert claim_rero_bound(dp_accounting.GaussianDpEvent(0.0), candidates=4, eps=3.0, delta=0.0)[1] == GENERIC_DP


def test_claim_bound_for_the_laplace_mechanism_and_others():
    lap = mechanisms.create("laplace", scale=1.0, clip=0.5)  # eps = 1
    claim = lap.guarantee()
    for m in (2, 3, 10, 100):  # M = 3 is on the middle piece; elsewhere the Laplace and pure-DP bounds tie
        value, name = claim_rero_bound(lap.dp_event(), candidates=m, eps=claim.epsilon, delta=claim.delta)
        assert name == LAPLACE_F_DP and value == laplace_rero_bound(eps=1.0, kappa=1 / m)
        assert value <= rero_bound(eps=1.0, delta=0, kappa=1 / m)
    value, _ = claim_rero_bound(lap.dp_event(), candidates=3, eps=1.0, delta=0.0)
    assert value < rero_bound(eps=1, delta=0, kappa=1 / 3)
    composed = [
        dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(2.0), 10),
        dp_accounting.ComposedDpEvent([dp_accounting.LaplaceDpEvent(2.0), dp_accounting.GaussianDpEvent(2.0)]),
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0)),
        None,
    ]
    for event in composed:
        assert claim_rero_bound(event, candidates=10, eps=2.0, delta=1e-5) == (
            rero_bound(eps=2.0, delta=1e-5, kappa=0.1),
            GENERIC_DP,
        )


# --- Laplace pairs spread over two coordinates: exact privacy-loss computation ---------------------------------


def _loss_parts(s: float, under: int):
    """Privacy loss L = |x - s| - |x| of one Laplace(1) coordinate shifted by s, under P0 (x ~ Lap(0)) or P1:
    atoms at +-s and a density on (-s, s), with the density's integral from -s to v in closed form."""
    if under == 0:
        atoms = ((s, 0.5), (-s, math.exp(-s) / 2))
        density = lambda v: math.exp(-(s - v) / 2) / 4
        integral = lambda v: 0.5 * (math.exp(-(s - v) / 2) - math.exp(-s))
    else:
        atoms = ((s, math.exp(-s) / 2), (-s, 0.5))
        density = lambda v: math.exp(-(s + v) / 2) / 4
        integral = lambda v: 0.5 * (1 - math.exp(-(s + v) / 2))
    return atoms, density, integral


def _cdf1(s: float, under: int, u: float) -> float:
    atoms, _, integral = _loss_parts(s, under)
    return sum(w for a, w in atoms if a < u) + integral(min(max(u, -s), s))


def _cdf2(s1: float, s2: float, under: int, t: float) -> float:
    """P(L1 + L2 < t) for independent coordinates shifted by s1 and s2, by quadrature over L2."""
    atoms, density, _ = _loss_parts(s2, under)
    kinks = [v for v in (t - s1, t + s1) if -s2 < v < s2]
    value, _ = quad(lambda v: density(v) * _cdf1(s1, under, t - v), -s2, s2, points=kinks or None,
                    epsabs=1e-14, epsrel=1e-12, limit=200)  # fmt: skip
    return sum(w * _cdf1(s1, under, t - a) for a, w in atoms) + value


def _spread_curve(s1: float, s2: float, thresholds) -> np.ndarray:
    """(alpha, beta) of the likelihood-ratio tests 'reject x0 when L < t': alpha = P0(L < t), beta = P1(L >= t)."""
    return np.array([(_cdf2(s1, s2, 0, t), 1 - _cdf2(s1, s2, 1, t)) for t in thresholds])


def _laplace_f(eps: float, alpha: float) -> float:
    return 1 - laplace_rero_bound(eps=eps, kappa=alpha) if alpha > 0 else 1.0


def test_spread_quadrature_reproduces_the_one_dimensional_curve():
    # Sanity of the computation below: with nearly all the shift on one coordinate it gives the 1-D curve.
    curve = _spread_curve(1e-7, 1.0 - 1e-7, np.linspace(-0.99, 0.99, 25))
    for alpha, beta in curve:
        assert beta == pytest.approx(_laplace_f(1.0, alpha), abs=1e-6)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_spread_laplace_pairs_never_beat_the_one_dimensional_trade_off(eps):
    """f_a (x) f_b >= f_{a+b}: a pair whose l1 difference is split over two coordinates is at least as private as
    the 1-D pair (so, by induction, over any number of coordinates): ``laplace_rero_bound`` stays valid. The
    curve touches the 1-D one only on the outer, pure-DP pieces and lies strictly above it in the middle."""
    for frac in (0.1, 0.3, 0.5):
        thresholds = np.linspace(-eps * (1 - 1e-9), eps * (1 - 1e-9), 121)
        curve = _spread_curve(frac * eps, (1 - frac) * eps, thresholds)
        gaps = np.array([beta - _laplace_f(eps, alpha) for alpha, beta in curve])
        assert gaps.min() >= -1e-12
        # Between the points the curve is continuous, or (at an atom of L) the chord of two points above the
        # convex 1-D curve, hence above it too.
        middle = (curve[:, 0] > math.exp(-eps) / 2 * 1.2) & (curve[:, 0] < 0.45)
        assert np.all(gaps[middle] > 1e-5) and gaps.max() > 1e-3


# --- Monte Carlo: hand-built Gaussian simplex of edge Delta (the bound is met) ----------------------------------


def _regular_simplex(m: int, edge: float, rng: np.random.Generator) -> np.ndarray:
    """M points in R^M, pairwise distance ``edge``, centred at 0, randomly rotated."""
    points = np.eye(m) - 1.0 / m
    points *= edge / math.sqrt(2.0)
    rotation, _ = np.linalg.qr(rng.standard_normal((m, m)))
    return points @ rotation


def _ml_success_numpy(cands: np.ndarray, sigma: float, trials: int, rng: np.random.Generator) -> int:
    targets = rng.integers(len(cands), size=trials)
    y = cands[targets] + sigma * rng.standard_normal((trials, cands.shape[1]))
    score = y @ cands.T - 0.5 * (cands**2).sum(axis=1)  # ln-likelihood up to a constant
    return int((score.argmax(axis=1) == targets).sum())


@pytest.mark.parametrize("m", MS)
@pytest.mark.parametrize("mu", MUS)
def test_gaussian_m_point_bound_is_met_on_the_simplex(mu, m):
    rng = np.random.default_rng(1000 * m + int(10 * mu))
    delta_, sigma = 1.0, 1.0 / mu
    cands = _regular_simplex(m, delta_, rng)
    assert np.allclose(np.linalg.norm(cands[:, None] - cands[None], axis=2)[~np.eye(m, dtype=bool)], delta_)
    k = _ml_success_numpy(cands, sigma, TRIALS, rng)
    low, high = cp_interval(k, TRIALS)
    bound = gaussian_rero_bound(mu=mu, candidates=m)
    print(f"ROW gaussian-M-point(hand) M={m} mu={mu} bound={bound:.4f} mc={k / TRIALS:.4f} ci=[{low:.4f},{high:.4f}]")
    assert low <= bound <= high


# --- Monte Carlo on the real mechanisms -------------------------------------------------------------------------


def _ml_success_mechanism(mech, cands: np.ndarray, trials: int, seed: int) -> int:
    """Uniform target among ``cands``, one output of the REAL mechanism each (encode then decode), and the
    maximum-likelihood guess under the mechanism's own output density (which clips the candidates as the
    mechanism does). The n trials of candidate i come from one encode call on n copies laid end to end, the
    mechanism's declared ``tiling()`` (iid noise per coordinate, clip rescaled to n^(1/p) clip)."""
    rng = np.random.default_rng(seed)
    targets = rng.integers(len(cands), size=trials)
    tiling, d = mech.tiling(), cands.shape[1]
    outputs, truth = [], []
    for i, cand in enumerate(cands):
        n = int((targets == i).sum())
        if n == 0:
            continue
        copy = tiling.for_copies(n)
        call_seed = seed * 1000 + i
        message = copy.encode(torch.from_numpy(np.tile(cand, n)), call_seed)
        outputs.append(copy.decode(message, call_seed).numpy().astype(np.float64).reshape(n, d))
        truth.append(np.full(n, i))
    y, truth = np.concatenate(outputs), np.concatenate(truth)
    log_density = mech.output_log_density()
    ll = np.stack([log_density(y, c) for c in cands], axis=1)
    return int((ll.argmax(axis=1) == truth).sum())


def _gaussian_configurations(m: int, clip: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    d = max(m, 4)
    def on_sphere(v):
        return clip * v / np.linalg.norm(v, axis=1, keepdims=True)
    common = rng.standard_normal(d)
    line = np.zeros((m, d))
    line[:, 0] = np.linspace(-clip, clip, m)
    inscribed = np.zeros((m, d))
    inscribed[:, :m] = np.eye(m) - 1.0 / m
    return {
        "random-directions": on_sphere(rng.standard_normal((m, d))),
        "correlated": on_sphere(common + 0.3 * rng.standard_normal((m, d))),
        "collinear": line,
        "over-norm(clipped)": 3 * on_sphere(rng.standard_normal((m, d))),
        "inscribed-simplex": on_sphere(inscribed),
    }


@pytest.mark.parametrize("m", MS)
@pytest.mark.parametrize("mu", MUS)
def test_real_gaussian_mechanism_never_beats_the_bound(mu, m):
    clip = 1.0
    sigma = 2 * clip / mu
    mech = mechanisms.create("gaussian", sigma=sigma, clip=clip, private_seed=7)
    bound = gaussian_rero_bound(mu=mu, candidates=m)
    rng = np.random.default_rng(17 * m + int(10 * mu))
    trials = TRIALS if m < 100 else TRIALS // 2  # M = 100: the margins are wide, the likelihoods costly
    for j, (label, cands) in enumerate(_gaussian_configurations(m, clip, rng).items()):
        k = _ml_success_mechanism(mech, cands, trials, seed=100 * m + 10 * j + int(mu * 4))
        low, high = cp_interval(k, trials)
        print(f"ROW gaussian-real {label} M={m} mu={mu} bound={bound:.4f} mc={k / trials:.4f} "
              f"ci=[{low:.4f},{high:.4f}]")  # fmt: skip
        assert low <= bound, label
        if label == "inscribed-simplex":
            # edge clip sqrt(2M/(M-1)) <= 2 clip: the M-point formula at that edge is met; M = 2 is the
            # antipodal pair at distance 2 clip, where the bound itself is met.
            edge = clip * math.sqrt(2 * m / (m - 1))
            assert low <= gaussian_rero_bound(mu=edge / sigma, candidates=m) <= high
            if m == 2:
                assert low <= bound <= high


def test_real_gaussian_per_call_encode_decode_meets_the_two_point_bound():
    """No tiling: one encode/decode per trial, antipodal pair +-clip e1, mu = 2."""
    clip, mu, trials = 0.5, 2.0, 4000
    mech = mechanisms.create("gaussian", sigma=2 * clip / mu, clip=clip, private_seed=11)
    cands = np.zeros((2, 3))
    cands[:, 0] = (clip, -clip)
    targets = np.random.default_rng(5).integers(2, size=trials)
    y = np.stack([mech.decode(mech.encode(torch.from_numpy(cands[t]), s), s).numpy() for s, t in enumerate(targets)])
    ll = np.stack([mech.output_log_density()(y.astype(np.float64), c) for c in cands], axis=1)
    k = int((ll.argmax(axis=1) == targets).sum())
    low, high = cp_interval(k, trials)
    bound = gaussian_rero_bound(mu=mu, candidates=2)
    print(f"ROW gaussian-real per-call antipodal M=2 mu={mu} bound={bound:.4f} mc={k / trials:.4f} "
          f"ci=[{low:.4f},{high:.4f}]")  # fmt: skip
    assert low <= bound <= high


def _laplace_configurations(m: int, clip: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    d = max(m // 2, 4)
    def on_l1_sphere(v):
        return clip * v / np.abs(v).sum(axis=1, keepdims=True)
    cross = np.zeros((m, d))
    for i in range(m):
        cross[i, (i // 2) % d] = clip if i % 2 == 0 else -clip
    sparse = np.zeros((m, d))
    for i in range(m):
        idx = rng.choice(d, size=3, replace=False)
        sparse[i, idx] = rng.dirichlet(np.ones(3)) * rng.choice([-1, 1], size=3)
    return {
        "cross-polytope": cross,
        "sparse": on_l1_sphere(sparse),
        "dense": on_l1_sphere(rng.laplace(size=(m, d))),
        "over-norm(clipped)": 3 * on_l1_sphere(rng.standard_normal((m, d))),
    }


@pytest.mark.parametrize("m", MS)
@pytest.mark.parametrize("eps", EPSS)
def test_real_laplace_mechanism_never_beats_the_bound(eps, m):
    clip = 1.0
    mech = mechanisms.create("laplace", scale=2 * clip / eps, clip=clip, private_seed=3)
    bound = laplace_rero_bound(eps=eps, kappa=1 / m)
    rng = np.random.default_rng(31 * m + int(10 * eps))
    trials = TRIALS if m < 100 else TRIALS // 2  # M = 100: the margins are wide, the likelihoods costly
    for j, (label, cands) in enumerate(_laplace_configurations(m, clip, rng).items()):
        k = _ml_success_mechanism(mech, cands, trials, seed=200 * m + 10 * j + int(eps * 4))
        low, high = cp_interval(k, trials)
        print(f"ROW laplace-real {label} M={m} eps={eps} bound={bound:.4f} mc={k / trials:.4f} "
              f"ci=[{low:.4f},{high:.4f}]")  # fmt: skip
        assert low <= bound, label


@pytest.mark.parametrize("eps", EPSS)
def test_real_laplace_two_point_attack_does_not_reach_the_bound(eps):
    """M = 2 at l1 distance 2 clip. Axis-aligned (+-clip e1): the ML attack succeeds with 1 - e^(-eps/2)/2, below
    the bound 1 - e^-eps/2 (1 - f(1/2) is not attained by a two-point prior). Spread (clip e1 vs clip e2): success
    (1 + TV)/2 with TV from the exact two-coordinate privacy-loss computation, also below the bound."""
    clip, trials = 1.0, TRIALS
    mech = mechanisms.create("laplace", scale=2 * clip / eps, clip=clip, private_seed=23)
    bound = laplace_rero_bound(eps=eps, kappa=0.5)
    assert bound == pytest.approx(1 - math.exp(-eps) / 2)
    axis = np.array([[clip, 0.0], [-clip, 0.0]])
    spread = np.array([[clip, 0.0], [0.0, clip]])
    half = eps / 2  # each coordinate of the spread pair moves by clip = (eps/2) scales
    tv = _cdf2(half, half, 1, 0.0) - _cdf2(half, half, 0, 0.0)  # P1(L < 0) - P0(L < 0)
    exact = {"axis": 1 - math.exp(-eps / 2) / 2, "spread": (1 + tv) / 2}
    for j, (label, cands) in enumerate((("axis", axis), ("spread", spread))):
        k = _ml_success_mechanism(mech, cands, trials, seed=900 + 10 * j + int(4 * eps))
        low, high = cp_interval(k, trials)
        print(f"ROW laplace-real {label}-pair M=2 eps={eps} bound={bound:.4f} exact-ML={exact[label]:.4f} "
              f"mc={k / trials:.4f} ci=[{low:.4f},{high:.4f}]")  # fmt: skip
        assert low <= exact[label] <= high
        assert high < bound
    assert exact["spread"] <= exact["axis"]


def test_real_laplace_per_call_encode_decode():
    """No tiling: one encode/decode per trial, axis pair +-clip e1, eps = 2."""
    clip, eps, trials = 0.5, 2.0, 4000
    mech = mechanisms.create("laplace", scale=2 * clip / eps, clip=clip, private_seed=13)
    cands = np.zeros((2, 3))
    cands[:, 0] = (clip, -clip)
    targets = np.random.default_rng(6).integers(2, size=trials)
    y = np.stack([mech.decode(mech.encode(torch.from_numpy(cands[t]), s), s).numpy() for s, t in enumerate(targets)])
    ll = np.stack([mech.output_log_density()(y.astype(np.float64), c) for c in cands], axis=1)
    k = int((ll.argmax(axis=1) == targets).sum())
    low, high = cp_interval(k, trials)
    exact = 1 - math.exp(-eps / 2) / 2
    print(f"ROW laplace-real per-call axis-pair M=2 eps={eps} bound={laplace_rero_bound(eps=eps, kappa=0.5):.4f} "
          f"exact-ML={exact:.4f} mc={k / trials:.4f} ci=[{low:.4f},{high:.4f}]")  # fmt: skip
    assert low <= exact <= high < laplace_rero_bound(eps=eps, kappa=0.5)
