"""Statistics and threshold search: composite ranks, the best cut, the classifier where projection fails."""

import numpy as np
import pytest
from scipy import stats
import torch

from auditkit.attacks.distinguishing_statistics import FP_SHARES, best_threshold, dense_ranks, fit_scorer
from auditkit.attacks.distinguish import distinguish
from auditkit.attacks.epsilon_bounds import max_certifiable


def test_dense_ranks_order_ties_by_the_secondary_key():
    rng = np.random.default_rng(0)
    primary = rng.integers(0, 5, size=2000).astype(float)
    secondary = rng.normal(size=2000)
    secondary[:10] = secondary[10:20]  # some full ties
    primary[:10] = primary[10:20]
    ranks = dense_ranks(primary, secondary)
    keys = sorted(set(zip(primary, secondary)))
    expected = {key: r for r, key in enumerate(keys)}
    assert ranks.tolist() == [expected[key] for key in zip(primary, secondary)]


def _predicted_bound(errors: int, selection: int, held_out: int, fp_share: float) -> float:
    """Written apart from the module: both rates' predicted held-out count is held_out * u, u the 95% upper
    Clopper-Pearson bound of errors / selection (the 0.95 quantile of Beta(errors + 1, selection - errors)); the
    bound of those counts at 95% is ln((1 - U1) / U0), U the Beta quantiles at the rates' shares of 5%."""
    count = held_out * stats.beta.ppf(0.95, errors + 1, selection - errors)
    upper0 = stats.beta.ppf(1 - 0.05 * fp_share, count + 1, held_out - count)
    upper1 = stats.beta.ppf(1 - 0.05 * (1 - fp_share), count + 1, held_out - count)
    return max(np.log((1 - upper1) / upper0), np.log((1 - upper0) / upper1))


def test_best_threshold_of_a_perfect_split_cuts_at_the_gap_and_predicts_the_held_out_bound():
    ranks0, ranks1 = np.arange(500), np.arange(500, 1000)
    choice = best_threshold(ranks0, ranks1, alpha=0.05, delta=0.0)
    assert choice.rank == 499
    assert choice.bound == pytest.approx(_predicted_bound(0, 500, 500, choice.fp_share), rel=1e-9)
    assert choice.bound == pytest.approx(max(_predicted_bound(0, 500, 500, w) for w in FP_SHARES), rel=1e-9)
    assert choice.bound < max_certifiable(1000)  # no errors seen still predicts a few: below a perfect test's cap
    larger = best_threshold(ranks0, ranks1, alpha=0.05, delta=0.0, held_out=(8_000, 8_000))
    assert larger.rank == 499
    assert larger.bound == pytest.approx(max(_predicted_bound(0, 500, 8_000, w) for w in FP_SHARES), rel=1e-9)
    assert larger.bound > choice.bound + 0.5


def test_the_rare_rate_gets_the_larger_share_of_the_confidence():
    rng = np.random.default_rng(0)  # a Gaussian shift: the best cut is far in x0's upper tail, FP rare
    scores = np.concatenate([rng.normal(-0.5, 1, 20_000), rng.normal(0.5, 1, 20_000)])
    ranks = dense_ranks(scores, scores)
    choice = best_threshold(ranks[:20_000], ranks[20_000:], alpha=0.05, delta=1e-5, held_out=(200_000, 200_000))
    fp = int(np.count_nonzero(ranks[:20_000] > choice.rank))
    fn = int(np.count_nonzero(ranks[20_000:] <= choice.rank))
    rare_is_fp = fp < fn
    assert min(fp, fn) < 200 < max(fp, fn)
    assert (choice.fp_share > 0.5) == rare_is_fp and choice.fp_share != 0.5


def test_best_threshold_of_identical_samples_is_no_evidence():
    ranks = np.arange(1000)
    assert best_threshold(ranks[::2], ranks[1::2], alpha=0.05, delta=0.0).bound < 0.05


def test_classifier_sees_a_variance_difference_the_projection_cannot():
    rng = np.random.default_rng(1)
    y0, y1 = rng.normal(size=(20_000, 2)), rng.normal(size=(20_000, 2)) * [1.0, 3.0]  # x1 - x0 along e1
    x0, x1 = np.zeros(2), np.array([1e-9, 0.0])
    results = {}
    for name in ("projection", "classifier"):
        scorer = fit_scorer(name, y0[:10_000], y1[:10_000], x0, x1, log_density=None, seed=0)
        scores = scorer(np.concatenate([y0[10_000:], y1[10_000:]]))
        ranks = dense_ranks(scores, scores)
        results[name] = best_threshold(ranks[:10_000], ranks[10_000:], alpha=0.05, delta=0.0).bound
    assert results["classifier"] > 1.0 > results["projection"] + 0.5


def test_llr_needs_a_density_and_unknown_statistics_are_refused():
    y, x = np.zeros((4, 1)), np.zeros(1)
    assert fit_scorer("llr", y, y, x, x, log_density=None, seed=0) is None
    with pytest.raises(ValueError, match="statistics"):
        fit_scorer("mmd", y, y, x, x, log_density=None, seed=0)


def _laplace(x, g, scale):
    u = torch.rand(x.shape, generator=g, dtype=torch.float64) - 0.5
    return x - scale * torch.sign(u) * torch.log1p(-2 * u.abs())


def _atom_mechanism(x, seed):
    """Laplace(2) noise, but when x[0] > 0 the output is exactly 0 with probability 0.3 (noise that vanishes on a
    data-dependent event): P[y = 0 | x1] = 0.3, P[y = 0 | x0] = 0, so no finite eps holds."""
    g = torch.Generator().manual_seed(seed)
    y = _laplace(x, g, 2.0)
    hit = (x[:, :1] > 0) & (torch.rand(x.shape[0], 1, generator=g, dtype=torch.float64) < 0.3)
    return torch.where(hit, torch.zeros_like(y), y)


def test_the_atom_test_certifies_a_point_mass_the_continuous_statistics_miss():
    """The issue's atom: the exact-value test certifies far more than the projection and classifier (a threshold
    on <y, x1 - x0> or on [y, y^2, |y|] cannot isolate y = 0 inside the noise's bulk; the histogram gives the atom a
    cell of its own). 10^5 outputs, 5 seeds; measured: 5.5 - 7.8 (the cap at these trials is 9.8), the others at
    most 3.7."""
    for seed in range(5):
        kw = {"trials": 100_000, "claimed_eps": 1.0, "seed": seed}
        old = distinguish(_atom_mechanism, [-0.5, 0.0], [0.5, 0.0], statistics=("projection", "classifier"), **kw)
        new = distinguish(_atom_mechanism, [-0.5, 0.0], [0.5, 0.0], **kw)
        assert new.statistic in ("atoms", "histogram")
        assert new.epsilon_lower_bound > max(5.0, old.epsilon_lower_bound + 1.5)


def _bump(x, seed):
    """N(0, 1) noise, but for x1 (x[0] > 0) with probability 0.3 the output is drawn from U(0.9, 1.1) instead: a
    bump inside the bulk, no point mass; a threshold on y or on a linear score of [y, y^2, |y|] cannot isolate it."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(x.shape, generator=g, dtype=torch.float64)
    bump = 0.9 + 0.2 * torch.rand(x.shape, generator=g, dtype=torch.float64)
    hit = (x[:, :1] > 0) & (torch.rand(x.shape[0], 1, generator=g, dtype=torch.float64) < 0.3)
    return torch.where(hit, bump, y)


def test_the_histogram_finds_an_event_no_threshold_on_a_linear_score_can():
    """The histogram's event is a union of cells (here the bins around 1), not a half-line. 10^5 outputs, 3
    seeds; measured: histogram 1.5 - 1.6, the projection and classifier at most 0.9."""
    for seed in range(3):
        kw = {"trials": 100_000, "claimed_eps": 1.0, "seed": seed}
        linear = distinguish(_bump, [-0.5], [0.5], statistics=("projection", "classifier"), **kw)
        cells = distinguish(_bump, [-0.5], [0.5], **kw)
        assert cells.statistic == "histogram", cells.selection_bounds
        assert cells.epsilon_lower_bound > linear.epsilon_lower_bound + 0.4, (cells, linear)


@pytest.mark.parametrize("statistic", ["atoms", "histogram"])
def test_the_counting_statistics_raise_no_more_false_alarms_than_allowed(statistic):
    """Soundness on outputs full of atoms with the same law on both sides (a rounded Laplace: every output an
    exact value seen many times): the counts are fitted on half the selection, the threshold chosen on the other
    half, the bound certified on held-out outputs, so a bound > 0 is a false alarm, at most 5% per test. 60 seeded
    tests: 3 expected, at most 6 accepted (P[Binomial(60, 0.05) > 6] = 0.04)."""
    def rounded(x, seed):
        return torch.round(_laplace(torch.zeros_like(x), torch.Generator().manual_seed(seed), 1.0) * 4) / 4

    alarms = sum(distinguish(rounded, [-0.5, 0.0], [0.5, 0.0], trials=4_000, statistics=(statistic,), seed=seed)
                 .epsilon_lower_bound > 0 for seed in range(60))
    assert alarms <= 6


def test_atoms_and_histogram_cells_are_keyed_by_exact_values():
    y0 = np.array([[0.0, 1.0]] * 6 + [[0.5, 1.0]] * 2)
    y1 = np.array([[-0.0, 1.0]] * 2 + [[0.5, 1.0]] * 6)  # -0.0 is the same output as 0.0
    scorer = fit_scorer("atoms", y0, y1, np.zeros(2), np.ones(2), log_density=None, seed=0)
    scores = scorer(np.array([[0.0, 1.0], [0.5, 1.0], [0.25, 1.0]]))
    assert scores[0] == pytest.approx(np.log(2.5 / 8) - np.log(6.5 / 8))
    assert scores[1] == pytest.approx(np.log(6.5 / 8) - np.log(2.5 / 8))
    assert scores[2] == pytest.approx(0.0)  # every fitting output was an atom: the rest of the mass is 0 and 0
