"""The example plugin ``examples/dp_catalogue``: broken and correct DP mechanisms from the literature.

Checked here: the plugin loads (by file and as declared entry points); each mechanism's batch sampler has the law
of its encode/decode path (two-sample tests per coordinate, fixed seeds, 3,000 outputs each, and the same tests
shown to reject a sampler with the wrong noise); the samplers against closed forms where exact (SVT answer
probabilities by quadrature, the geometric pmf, atoms of clamps, roundings and data-dependent noise, the porous
support of the coarse Laplace sampler enumerated); the broken ones' true epsilons against an independent
quadrature (their "known-exceeded" class is honest); the SVT output densities (``output_log_density``, which the
likelihood-ratio statistic uses) against numerical integration and Monte-Carlo frequencies; and the soundness
criterion over 20 seeds at 10,000 trials per pair (``benchmarks/bench_catalogue.py`` prints the table): every
correct mechanism "violated" at most ``allowed_false_alarms`` times, every broken one "violated" in every seed (with
the atom and histogram statistics; the pre-atom statistics miss the coarse Laplace sampler), but for ``MISSED``.
"""

import functools
import itertools
import math
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from auditkit import mechanisms
from auditkit.attacks.audit_settings import audit_setting, setting_pairs
from auditkit.attacks.bulk_sampling import BulkSampler
from auditkit.attacks.soundness import allowed_false_alarms, classify, soundness_sweep

pytestmark = pytest.mark.soundness

CATALOGUE = Path(__file__).resolve().parents[2] / "examples" / "dp_catalogue"
MODULES = ("catalogue_svt", "catalogue_noise", "catalogue_float")
SEEDS, TRIALS = 20, 10_000  # the sweep: about 7 minutes for the whole catalogue on one core
BROKEN = {  # name -> true epsilon at the reference setting (claim 1)
    "cat-svt3-roth": 5.0, "cat-svt4-lee-clifton": 3.25, "cat-svt5-stoddard": math.inf, "cat-svt6-chen": 5.0,
    "cat-laplace-skip-zero": math.inf, "cat-laplace-norm-scaled": math.inf, "cat-laplace-atom": math.inf,
    "cat-laplace-clamped-noise": math.inf, "cat-laplace-coarse-uniform": math.inf,
}
CORRECT = ("cat-svt1-lyu", "cat-svt2-dwork-roth", "cat-laplace", "cat-laplace-clamped-output", "cat-laplace-rounded",
           "cat-geometric")
OUTPUTS = 3_000
P_FLOOR = 1e-4  # a two-sample test below this rejects "same law" (about 10 tests per mechanism)


def load() -> list[str]:
    return [n for m in MODULES for n in mechanisms.load_plugins([str(CATALOGUE / f"{m}.py")])]


@pytest.fixture
def catalogue() -> list[str]:
    """The plugin loaded in this process (``tests/conftest.py`` removes its mechanisms afterwards)."""
    return load()


def _create(name: str, **params) -> mechanisms.Mechanism:
    m = mechanisms.create(name, private_seed=mechanisms.derive_seed("dp-catalogue", name))
    return m.with_params(**{**m.reference_params, **params})


def _draw(m: mechanisms.Mechanism, x, count: int = 100_000, seed: int = 0) -> np.ndarray:
    return BulkSampler(m, seed=seed)(torch.as_tensor(x, dtype=torch.float64), count, 0).numpy()


def test_plugin_loads_every_mechanism_and_declares_them_as_entry_points(catalogue):
    assert sorted(catalogue) == sorted([*BROKEN, *CORRECT])
    project = tomllib.loads((CATALOGUE / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["auditkit.mechanisms"] == {m: m for m in MODULES}
    assert project["tool"]["setuptools"]["py-modules"] == list(MODULES)
    readme = (CATALOGUE / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in catalogue)  # the catalogue table lists each one


def test_truth_is_classified_as_declared(catalogue):
    kinds = classify()
    assert {n: kinds[n] for n in catalogue} == {**{n: "known-exceeded" for n in BROKEN},
                                                **{n: "correct" for n in CORRECT}}
    for name, true in BROKEN.items():
        m = _create(name)
        assert m.guarantee().epsilon == 1.0 and m.true_epsilon() == true


def _same_law_p(a: np.ndarray, b: np.ndarray) -> float:
    """Chi-square test of homogeneity on a coordinate with few values, else Kolmogorov-Smirnov."""
    values = np.union1d(a, b)
    if values.size <= 40:
        table = np.array([[np.sum(a == v) for v in values], [np.sum(b == v) for v in values]])
        return 1.0 if values.size == 1 else stats.chi2_contingency(table).pvalue
    return stats.ks_2samp(a, b).pvalue


def _law_p_values(fast_m, slow_m, x: torch.Tensor) -> list[float]:
    fast = BulkSampler(fast_m, seed=1)(x, OUTPUTS, 0).numpy()
    slow = BulkSampler(slow_m, seed=2, per_call=True)(x, OUTPUTS, 0).numpy()
    return [_same_law_p(fast[:, j], slow[:, j]) for j in range(fast.shape[1])]


@pytest.mark.parametrize("name", [*BROKEN, *CORRECT])
def test_batch_sampler_has_the_law_of_encode_decode(catalogue, name):
    m = _create(name)
    assert BulkSampler(m, seed=0).path == "mechanism batch"
    pairs = setting_pairs(audit_setting(m))
    for x in (pairs[0].x0, pairs[-1].x1):
        p = _law_p_values(m, m, x)
        assert min(p) > P_FLOOR, (name, x.tolist(), p)


@pytest.mark.parametrize(("name", "wrong"), [("cat-laplace", {"epsilon": 2.0}), ("cat-geometric", {"epsilon": 2.0}),
                                             ("cat-svt1-lyu", {"epsilon": 4.0})])
def test_the_law_check_rejects_a_sampler_with_the_wrong_noise(catalogue, name, wrong):
    m = _create(name)
    x = setting_pairs(audit_setting(m))[0].x1
    assert min(_law_p_values(m.with_params(**wrong), m, x)) < P_FLOOR


def _laplace_cdf(z, b):
    return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0) / b), 1 - 0.5 * np.exp(-np.maximum(z, 0) / b))


def _svt_pattern_probability(q, pattern, b_rho, b_nu, threshold=0.0) -> float:
    """P(answers = pattern | q) for one threshold noise rho and query noises nu, by quadrature over rho."""
    def integrand(r):
        p = np.exp(-abs(r) / b_rho) / (2 * b_rho)
        for qi, above in zip(q, pattern):
            below = _laplace_cdf(threshold + r - qi, b_nu)
            p *= (1 - below) if above else below
        return p

    return integrate.quad(integrand, -60 * b_rho, 60 * b_rho, points=[0.0, *q], limit=400)[0]


@pytest.mark.parametrize(("name", "b_rho", "b_nu"), [("cat-svt1-lyu", 2.0, 4.0), ("cat-svt4-lee-clifton", 4.0, 4 / 3)])
def test_svt_answers_have_their_closed_form_probabilities(catalogue, name, b_rho, b_nu):
    """Lyu et al.'s scales at eps = 1, c = 1: Alg. 1 rho ~ Lap(1 / eps_1), nu ~ Lap(2c / eps_2), eps_1 = eps_2 =
    1 / 2; Alg. 4 rho ~ Lap(4 / eps), nu ~ Lap(1 / (3 eps / 4))."""
    m = _create(name, queries=3, cutoff=1)
    q = np.array([0.5, -0.5, 0.5])
    y = _draw(m, q)
    n = len(y)
    cases = {(1, -1, -1): (1,), (0, 1, -1): (0, 1), (0, 0, 1): (0, 0, 1), (0, 0, 0): (0, 0, 0)}
    for row, pattern in cases.items():  # c = 1: after the first "above" the rest are -1 (unanswered)
        p = _svt_pattern_probability(q[:len(pattern)], pattern, b_rho, b_nu)
        seen = np.mean(np.all(y == row, axis=1))
        assert abs(seen - p) < 4.5 * math.sqrt(p * (1 - p) / n), (row, seen, p)


def test_svt_without_query_noise_gives_a_pattern_only_one_side_can_give(catalogue):
    m = _create("cat-svt5-stoddard")
    half = next(p for p in setting_pairs(audit_setting(m)) if p.label == "half-half")
    pattern = np.repeat([0.0, 1.0], 5)  # first half below, second half above: -1/2 < T + rho <= 1/2
    b_rho = 2 / m.params["epsilon"]
    p = 1 - math.exp(-0.5 / b_rho)
    from_x0 = np.mean(np.all(_draw(m, half.x0) == pattern, axis=1))
    assert abs(from_x0 - p) < 4.5 * math.sqrt(p * (1 - p) / 100_000)
    assert not np.any(np.all(_draw(m, half.x1) == pattern, axis=1))


def test_broken_svt_true_epsilons_are_reached_by_quadrature(catalogue):
    """Independent of the declared values: ln P(pattern | q1) / P(pattern | q0) at inputs 1 apart in every
    coordinate, far in the noise's tails, exceeds the 1.25 x claim that makes them "known-exceeded", and stays
    below the declared true epsilon (an upper bound on every such ratio)."""
    lee = _create("cat-svt4-lee-clifton")  # c = 2: "below" x 8 then "above" x 2; the belows fall by 1, the aboves rise
    b_rho, b_nu = 4.0, 4 / 3  # eps = 1: Lap(4 / eps), Lap(1 / (3 eps / 4))
    q0 = np.array([12.0] * 8 + [-22.0] * 2)
    pattern = [0] * 8 + [1] * 2
    ratio = math.log(_svt_pattern_probability(q0 + np.array([-1.0] * 8 + [1.0] * 2), pattern, b_rho, b_nu)
                     / _svt_pattern_probability(q0, pattern, b_rho, b_nu))
    assert lee.params["cutoff"] == 2 and ratio > 3.2  # (1 + 6c) / 4 = 3.25 is nearly reached
    assert 1.25 * lee.guarantee().epsilon < ratio <= lee.true_epsilon() * (1 + 1e-6)
    chen = _create("cat-svt6-chen")  # no cutoff: "above" on the first half (rising), "below" on the rest (falling)
    b_rho, b_nu = 2.0, 2.0  # eps = 1: Lap(1 / eps_1), Lap(1 / eps_2), eps_1 = eps_2 = 1 / 2
    q0 = np.repeat([-10.0, 10.0], 5)
    pattern = [1] * 5 + [0] * 5
    ratio = math.log(_svt_pattern_probability(q0 + np.repeat([1.0, -1.0], 5), pattern, b_rho, b_nu)
                     / _svt_pattern_probability(q0, pattern, b_rho, b_nu))
    assert 1.25 * chen.guarantee().epsilon < ratio <= chen.true_epsilon() * (1 + 1e-6)


def _pattern_density(q, roles, values, b_rho, b_nu, threshold, svt) -> float:
    """The probability (density, where values are released) of an SVT answer pattern, by scipy's adaptive
    quadrature over rho: p_rho(rho) times, per query, P[q_j + nu_j < T + rho] (below), P[q_j + nu_j >= T + rho]
    (above), p_nu(v_j - q_j) 1{v_j >= T + rho} (released) or 1 (unanswered)."""
    upper = min([v - threshold for v, role in zip(values, roles) if role == svt.RELEASED], default=80 * b_rho)

    def integrand(r):
        p = math.exp(-abs(r) / b_rho) / (2 * b_rho)
        for qi, role, v in zip(q, roles, values):
            below = float(_laplace_cdf(threshold + r - qi, b_nu))
            p *= {svt.BELOW: below, svt.ABOVE: 1 - below, svt.UNANSWERED: 1.0,
                  svt.RELEASED: math.exp(-abs(v - qi) / b_nu) / (2 * b_nu)}[role]
        return p

    lower = -80 * b_rho
    kinks = sorted(k for k in {0.0, *(qi - threshold for qi in q)} if lower < k < upper)
    return integrate.quad(integrand, lower, upper, points=kinks or None, limit=400, epsabs=0, epsrel=1e-10)[0]


def test_svt_density_matches_numerical_integration(catalogue):
    """``svt_log_integral`` (piecewise Gauss-Legendre) against scipy's adaptive quadrature at random inputs,
    patterns, scales and released values: within 1e-6 relative."""
    svt = sys.modules[type(_create("cat-svt1-lyu")).__module__]
    rng = np.random.default_rng(0)
    for _ in range(100):
        k = int(rng.integers(1, 7))
        q, threshold = rng.normal(0, 2, k), float(rng.normal())
        b_rho, b_nu = float(rng.choice([0.5, 2.0, 4.0])), float(rng.choice([0.5, 4 / 3, 4.0]))
        roles = rng.choice([svt.UNANSWERED, svt.BELOW, svt.ABOVE, svt.RELEASED], k)
        values = q + rng.laplace(0, b_nu, k)
        got = math.exp(svt.svt_log_integral(q, roles[None], values[None], b_rho, b_nu, threshold)[0])
        want = _pattern_density(q, roles, values, b_rho, b_nu, threshold, svt)
        assert want > 1e-30 and got == pytest.approx(want, rel=1e-6), (q, roles, values, b_rho, b_nu, threshold)


@pytest.mark.parametrize("name", ["cat-svt1-lyu", "cat-svt2-dwork-roth", "cat-svt4-lee-clifton"])
def test_svt_flag_densities_are_the_pattern_frequencies(catalogue, name):
    """Every answer pattern of 3 queries: exp(output_log_density) sums to 1 and matches the frequency in 100,000
    draws (4.5 sigma)."""
    m = _create(name, queries=3)
    density = mechanisms.capability(m, "output_log_density")
    q = np.array([0.5, -0.5, 0.5])
    y = _draw(m, q)
    patterns, counts = np.unique(y, axis=0, return_counts=True)
    p = np.exp(density(patterns, q))
    c = m.params["cutoff"]
    every = [r for r in itertools.product((-1.0, 0.0, 1.0), repeat=3) if _reachable(r, c)]
    assert math.fsum(np.exp(density(np.array(every), q))) == pytest.approx(1.0, abs=1e-9)
    assert np.all(np.abs(counts / len(y) - p) < 4.5 * np.sqrt(p * (1 - p) / len(y))), (patterns, counts, p)


def _reachable(row, cutoff: int) -> bool:
    """An SVT flag row: answered (0 / 1) until the c-th 1, unanswered (-1) after it, and only then."""
    aboves = np.cumsum(np.array(row) == 1)
    done_before = np.concatenate([[0], aboves[:-1]]) >= cutoff
    return bool(np.all((np.array(row) == -1) == done_before))


def test_roth_svt_density_integrates_to_the_released_frequencies(catalogue):
    """Alg. 3 (c = 1) outputs (flag, value) per query: its density integrated over the released value of the one
    "above" query, on [-inf, a] and [a, inf], against the frequency of (position, v < a) in 100,000 draws; the
    all-below atom against its frequency."""
    m = _create("cat-svt3-roth", queries=3)
    density = mechanisms.capability(m, "output_log_density")
    q = np.array([0.5, -0.5, 0.5])
    y = _draw(m, q)
    n = len(y)
    none = np.zeros(6)
    p_none = math.exp(density(none[None], q)[0])
    seen = np.mean(np.all(y == none, axis=1))
    assert abs(seen - p_none) < 4.5 * math.sqrt(p_none * (1 - p_none) / n)
    total = p_none
    for i in range(3):
        def at(v, i=i):
            row = np.array([[0.0, 0.0] * i + [1.0, v] + [-1.0, 0.0] * (2 - i)])
            return math.exp(density(row, q)[0])
        for lo, hi in ((-np.inf, 1.0), (1.0, np.inf)):
            p = integrate.quad(at, lo, hi, limit=200)[0]
            total += p
            hit = (y[:, 2 * i] == 1) & (y[:, 2 * i + 1] >= lo) & (y[:, 2 * i + 1] < hi)
            assert abs(np.mean(hit) - p) < 4.5 * math.sqrt(p * (1 - p) / n), (i, lo, hi, np.mean(hit), p)
    assert total == pytest.approx(1.0, abs=1e-6)


def test_svt_density_is_declared_where_one_threshold_noise_serves(catalogue):
    assert mechanisms.capability(_create("cat-svt5-stoddard"), "output_log_density") is None  # no query noise
    assert mechanisms.capability(_create("cat-svt2-dwork-roth", cutoff=2), "output_log_density") is None  # redrawn
    assert mechanisms.capability(_create("cat-svt2-dwork-roth"), "output_log_density") is not None


def test_geometric_mechanism_has_the_two_sided_geometric_pmf(catalogue):
    m = _create("cat-geometric")
    alpha = math.exp(-m.params["epsilon"] / 2)
    y = _draw(m, [0.8])[:, 0]  # rounds to 1
    z = np.arange(-12, 15)
    pmf = (1 - alpha) / (1 + alpha) * alpha ** np.abs(z - 1)
    observed = np.array([np.sum(y == v) for v in z] + [np.sum((y < z[0]) | (y > z[-1]))])
    expected = np.append(pmf, 1 - pmf.sum()) * len(y)
    assert observed.sum() == len(y) and np.all(y == np.round(y))
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_coarse_laplace_has_a_porous_support_that_tells_neighbours_apart(catalogue):
    """The attainable outputs enumerated (2^13 per input, float32 as sent): almost all of x1's are unattainable
    from x0, and every output drawn lies in its input's set."""
    m = _create("cat-laplace-coarse-uniform")
    b, grid = 2 * m.params["clip"] / m.params["epsilon"], 2 ** m.params["bits"]
    magnitudes = -b * np.log(np.arange(1, grid + 1) / grid)

    def attainable(x: float) -> np.ndarray:
        return np.concatenate([x + magnitudes, x - magnitudes]).astype(np.float32)  # each value has mass 2^-13

    s0, s1 = attainable(-0.5), attainable(0.5)
    unreachable_mass = np.mean(~np.isin(s1, s0))
    assert unreachable_mass > 0.99
    y0, y1 = _draw(m, [-0.5])[:, 0].astype(np.float32), _draw(m, [0.5])[:, 0].astype(np.float32)
    assert np.isin(y0, s0).all() and np.isin(y1, s1).all()
    seen = np.mean(~np.isin(y1, s0))
    assert abs(seen - unreachable_mass) < 4.5 * math.sqrt(unreachable_mass * (1 - unreachable_mass) / len(y1)) + 1e-4
    assert len(np.unique(y1)) < len(y1) / 10  # exact values repeat within an audit's budget


def test_data_dependent_noise_has_its_atoms(catalogue):
    n = 100_000
    for name in ("cat-laplace-skip-zero", "cat-laplace-norm-scaled"):
        m = _create(name)
        assert np.all(_draw(m, [0.0]) == 0.0) and not np.any(_draw(m, [0.5]) == 0.0)
    atom = _create("cat-laplace-atom")
    seen = np.mean(_draw(atom, [0.5]) == 0.0)
    assert abs(seen - 0.3) < 4.5 * math.sqrt(0.3 * 0.7 / n)
    assert not np.any(_draw(atom, [-0.5]) == 0.0)


def test_clamps_and_rounding_have_their_closed_form_atoms(catalogue):
    n = 100_000
    noise = _create("cat-laplace-clamped-noise")  # b = 1, t = 2: the noise's atoms at +-t have mass e^-2 / 2 each
    y = _draw(noise, [0.5])[:, 0]
    p = 0.5 * math.exp(-2.0)
    assert y.max() == np.float32(2.5) and y.min() == np.float32(-1.5)
    assert abs(np.mean(y == np.float32(2.5)) - p) < 4.5 * math.sqrt(p * (1 - p) / n)
    output = _create("cat-laplace-clamped-output")  # R = 1: P(y = 1 | x = 0.5) = e^-0.5 / 2
    y = _draw(output, [0.5])[:, 0]
    p = 0.5 * math.exp(-0.5)
    assert abs(np.mean(y == 1.0) - p) < 4.5 * math.sqrt(p * (1 - p) / n) and y.max() == 1.0
    rounded = _create("cat-laplace-rounded")  # g = 0.5: P(y = 0.5 | x = 0.5) = P(|Lap(1)| < 0.25)
    y = _draw(rounded, [0.5])[:, 0]
    p = 1 - math.exp(-0.25)
    assert np.all(y * 2 == np.round(y * 2))
    assert abs(np.mean(y == 0.5) - p) < 4.5 * math.sqrt(p * (1 - p) / n)


def test_bad_input_is_refused_with_the_parameter_named(catalogue):
    assert _create("cat-svt1-lyu")(torch.zeros(3, dtype=torch.float64), 0).shape == (3,)  # any length: FL updates
    with pytest.raises(ValueError, match="epsilon"):
        mechanisms.create("cat-laplace", epsilon=0.0)
    with pytest.raises(ValueError, match="bits"):
        mechanisms.create("cat-laplace-coarse-uniform", bits=0)


@functools.cache
def _sweep() -> dict:
    """The sweep over the catalogue, run once for every row's test (the plugin is loaded by the calling test)."""
    rows = soundness_sweep(trials=TRIALS, seeds=SEEDS, names=[*BROKEN, *CORRECT])
    return {row.name: row for row in rows}


MISSED = {  # broken ones not yet "violated" in every seed, and why (README.md, "Audited")
    "cat-svt3-roth": "its excess at the +-1/2 corners lies in events of probability ~0.5 % (the best llr threshold "
                     "test certifies ~1.8 on 24,000 held-out outputs per side), which the test's threshold, chosen "
                     "on 500 selection outputs per side, misses in some seeds",
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=MISSED[n]))
                                  if n in MISSED else n for n in [*BROKEN, *CORRECT]])
def test_soundness_over_20_seeds(catalogue, name):
    row = _sweep()[name]
    assert row.seeds == SEEDS, row.line()
    if name in BROKEN:
        assert row.violated == SEEDS, row.line()
        assert min(row.bounds) > row.claimed_epsilon, row.line()
    else:
        assert row.kind == "correct" and row.violated <= allowed_false_alarms(SEEDS, 0.95), row.line()


def test_the_catalogue_loads_in_the_command_line(tmp_path):
    """Every catalogue module through ``--plugin`` in a real ``auditkit`` process: the command line is built from
    the mechanisms' parameters, so a parameter named like an option of a command (``bound`` and ``auditkit canary
    --bound``) would refuse the plugin."""
    import subprocess

    plugins = [arg for m in MODULES for arg in ("--plugin", str(CATALOGUE / f"{m}.py"))]
    result = subprocess.run([sys.executable, "-m", "auditkit.cli", "mechanisms", *plugins], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "cat-laplace-clamped-output" in result.stdout and "cat-svt3-roth" in result.stdout
