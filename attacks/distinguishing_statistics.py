"""Test statistics for distinguishing M(x0) from M(x1), and the threshold that maximises the epsilon bound.

Scores s(y), larger meaning "more like x1", fitted on the selection outputs only: ``projection`` <y, x1 - x0>;
``llr`` ln p(y | x1) - ln p(y | x0) (Neyman-Pearson), rounded to 1e-9 so its plateaus are exact ties; ``classifier``
a logistic regression (DP-Sniper, Bichsel et al., IEEE S&P 2021); ``atoms`` the exact-value test, the log ratio
of the two sides' counts of an output repeated exactly (a point mass: an output value, or a whole vector of flags,
one side produces and the other does not); ``histogram`` the log ratio of the two sides' counts in the cells of
the joint output -- the pattern of its discrete coordinates times quantile bins of the projection of the others
(Koskela & Mohammadi 2024's histogram estimate of the hockey-stick divergence; a threshold on the ratio is the
event {ratio > e^eps} that maximises P1(S) - e^eps P0(S)). ``atoms`` and ``histogram`` count on the first half of
the selection outputs (``FITTED_ON_HALF``), so that the threshold is chosen on outputs they did not
see. Ties are broken by the projection (the key
(score, projection) compared lexicographically). ``best_threshold`` picks the cut and confidence share for the
bound the HELD-OUT outputs will give: each selection rate is replaced by its Clopper-Pearson upper bound at 0.95
(pessimistic, against the winner's curse of a maximum over ~1,000 cuts), scaled to the held-out counts, and the
hypothesis-test bound of those counts maximised; with no positive prediction, the cut of least FPR + FNR.
Features, cut grid and the measured gain over the previous rule: docs/methodology/distinguishing.md (#statistics).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from auditkit.attacks.epsilon_bounds import clopper_pearson_upper, epsilon_lower_bounds
from auditkit.mechanisms import LogDensity

__all__ = [
    "FP_SHARES",
    "STATISTICS",
    "Scorer",
    "ThresholdChoice",
    "best_threshold",
    "dense_ranks",
    "fit_scorer",
    "projection_direction",
]

STATISTICS = ("projection", "llr", "classifier", "atoms", "histogram")
FITTED_ON_HALF = frozenset({"atoms", "histogram"})  # counts overfit: their threshold is chosen on the other half

Scorer = Callable[[np.ndarray], np.ndarray]
"""Outputs (B, d_out) -> scores (B,), larger = more like x1."""

_LLR_DECIMALS = 9
_CLASSIFIER_ROWS = 50_000  # per side
_CLASSIFIER_MAX_COORDINATES = 64
_TAIL_GRID = 400
_MIDDLE_GRID = 200
_MIN_ATOM = 3  # an exact value seen this often in the pooled fitting outputs is a cell of the histogram
_MAX_ATOMS = 1 << 16
_DISCRETE_VALUES = 16  # a coordinate with at most this many distinct values is part of the histogram's pattern
_PER_CELL = 50  # the histogram's bins: about this many fitting outputs per cell
_MAX_BINS = 256
_PREDICTION_ALPHA = 0.05  # a selection rate predicts the held-out rate by its upper bound at this level
FP_SHARES = (0.1, 0.25, 0.5, 0.75, 0.9)  # shares of 1 - confidence given to the false-positive rate


def projection_direction(x0: np.ndarray, x1: np.ndarray, y0: np.ndarray, y1: np.ndarray) -> np.ndarray:
    """x1 - x0 when outputs have the input's dimension, else the difference of the mean outputs."""
    if y0.shape[1] == x0.size:
        return x1 - x0
    return y1.mean(axis=0) - y0.mean(axis=0)


def _features(y: np.ndarray, direction: np.ndarray) -> np.ndarray:
    if y.shape[1] <= _CLASSIFIER_MAX_COORDINATES:
        return np.hstack([y, y**2, np.abs(y)])
    return np.stack([y @ direction, np.linalg.norm(y, axis=1), np.abs(y).sum(axis=1), np.abs(y).max(axis=1)], axis=1)


def _classifier(y0: np.ndarray, y1: np.ndarray, direction: np.ndarray, rng: np.random.Generator) -> Scorer:
    y0 = y0[rng.permutation(len(y0))[:_CLASSIFIER_ROWS]]
    y1 = y1[rng.permutation(len(y1))[:_CLASSIFIER_ROWS]]
    features = _features(np.concatenate([y0, y1]), direction)
    mean, std = features.mean(axis=0), features.std(axis=0)
    std[~(std > 0)] = 1.0
    labels = np.concatenate([np.zeros(len(y0)), np.ones(len(y1))])
    model = LogisticRegression(max_iter=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit((features - mean) / std, labels)
    weights, intercept = model.coef_[0], model.intercept_[0]
    return lambda y: ((_features(y, direction) - mean) / std) @ weights + intercept


def _row_keys(y: np.ndarray) -> np.ndarray:
    """One int64 per row, equal for rows equal bit for bit (after -0.0 -> 0.0): the float64 words mixed by fixed
    odd multipliers (a collision of two different rows has probability about 2^-64)."""
    words = np.ascontiguousarray(np.asarray(y, dtype=np.float64) + 0.0).view(np.uint64)
    odd = np.random.default_rng(0x5EED).integers(1, 2**63, size=words.shape[1], dtype=np.uint64) | np.uint64(1)
    with np.errstate(over="ignore"):
        return (words * odd).sum(axis=1, dtype=np.uint64).view(np.int64)


def _log_ratio(c1: np.ndarray, n1: int, c0: np.ndarray, n0: int) -> np.ndarray:
    """ln[(c1 + 1/2) / n1] - ln[(c0 + 1/2) / n0]: the two sides' count ratio, smoothed so empty cells stay finite."""
    return np.log((c1 + 0.5) / n1) - np.log((c0 + 0.5) / n0)


class _CountTable:
    """Scores of keys from their counts on the two sides: a key in ``only`` (default: any key counted) scores its
    smoothed log count ratio, any other key ``other``."""

    def __init__(self, k0: np.ndarray, k1: np.ndarray, only: np.ndarray | None = None, other: float = 0.0) -> None:
        keys = np.unique(np.concatenate([k0, k1])) if only is None else np.unique(only)
        c0, c1 = (np.bincount(np.searchsorted(keys, k[np.isin(k, keys)]), minlength=keys.size) for k in (k0, k1))
        self.keys, self.scores, self.other = keys, _log_ratio(c1, k1.size, c0, k0.size), other

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        if self.keys.size == 0:
            return np.full(keys.size, self.other)
        at = np.minimum(np.searchsorted(self.keys, keys), self.keys.size - 1)
        return np.where(self.keys[at] == keys, self.scores[at], self.other)


def _frequent_rows(k0: np.ndarray, k1: np.ndarray, least: int) -> np.ndarray:
    """The row keys seen at least ``least`` times in the pooled fitting outputs (the ``_MAX_ATOMS`` most
    frequent)."""
    keys, counts = np.unique(np.concatenate([k0, k1]), return_counts=True)
    keep = counts >= least
    if np.count_nonzero(keep) > _MAX_ATOMS:
        keep &= counts >= np.sort(counts)[-_MAX_ATOMS]
    return keys[keep]


def _atoms(y0: np.ndarray, y1: np.ndarray) -> Scorer:
    """Exact-value test: every output value seen in the fitting outputs (``_frequent_rows``; once is enough: a
    value only one side can produce, as on a porous support, is evidence when it recurs in other outputs) scores
    its smoothed log count ratio; every other output the ratio of the rest of the mass. On a continuous output no
    value recurs and every held-out output scores the same: the projection orders them."""
    k0, k1 = _row_keys(y0), _row_keys(y1)
    atoms = _frequent_rows(k0, k1, 1)
    rest0, rest1 = (np.count_nonzero(~np.isin(k, atoms)) for k in (k0, k1))
    table = _CountTable(k0, k1, only=atoms, other=float(_log_ratio(rest1, k1.size, rest0, k0.size)))
    return lambda y: table(_row_keys(y))


def _histogram(y0: np.ndarray, y1: np.ndarray, direction: np.ndarray) -> Scorer:
    """Joint-output histogram: every atom (a value seen at least ``_MIN_ATOM`` times) is a cell of its own; any
    other output's cell is (its values on the discrete coordinates, at most ``_DISCRETE_VALUES`` distinct values
    each in the fitting outputs) x (the quantile bin of the projection of its other coordinates onto
    ``direction``), about ``_PER_CELL`` fitting outputs per cell. A cell scores its smoothed log count ratio, 0 if
    never seen."""
    pooled = np.concatenate([y0, y1])
    atoms = _frequent_rows(_row_keys(y0), _row_keys(y1), _MIN_ATOM)
    discrete = np.array([np.unique(pooled[:, j]).size <= _DISCRETE_VALUES for j in range(pooled.shape[1])])
    weights = np.where(discrete, 0.0, direction)
    patterns = np.unique(_row_keys(pooled[:, discrete])).size if discrete.any() else 1
    bins = int(np.clip(pooled.shape[0] // (_PER_CELL * patterns), 1, _MAX_BINS)) if (~discrete).any() else 1
    edges = np.unique(np.quantile(pooled @ weights, np.linspace(0, 1, bins + 1)[1:-1])) if bins > 1 else np.empty(0)

    def cells(y: np.ndarray) -> np.ndarray:
        binned = np.searchsorted(edges, y @ weights, side="right").astype(np.float64)[:, None]
        rows = _row_keys(y)
        tagged = np.hstack([y[:, discrete], binned, -np.ones_like(binned)])  # -1: a key apart from any row's
        return np.where(np.isin(rows, atoms), rows, _row_keys(tagged))

    table = _CountTable(cells(y0), cells(y1))
    return lambda y: table(cells(y))


def fit_scorer(
    name: str,
    y0: np.ndarray,
    y1: np.ndarray,
    x0: np.ndarray,
    x1: np.ndarray,
    *,
    log_density: LogDensity | None,
    seed: int,
) -> Scorer | None:
    """The statistic ``name`` fitted on the selection outputs y0 of M(x0) and y1 of M(x1); None for "llr"
    without a density."""
    direction = projection_direction(x0, x1, y0, y1)
    if name == "projection":
        return lambda y: y @ direction
    if name == "llr":
        if log_density is None:
            return None

        def llr(y: np.ndarray) -> np.ndarray:
            one, zero = (np.asarray(log_density(y, x), dtype=np.float64) for x in (x1, x0))
            with np.errstate(invalid="ignore"):
                ratio = one - zero
            return np.round(np.nan_to_num(ratio, nan=0.0), _LLR_DECIMALS)  # -inf - -inf: no evidence

        return llr
    if name == "classifier":
        return _classifier(y0, y1, direction, np.random.default_rng(seed))
    if name == "atoms":
        return _atoms(y0, y1)
    if name == "histogram":
        return _histogram(y0, y1, direction)
    raise ValueError(f"statistics must be among {', '.join(STATISTICS)}, got {name!r}")


def dense_ranks(primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """0-based dense ranks of the composite keys (primary, secondary) in lexicographic order: equal keys
    share a rank, so "rank > R" is exactly "key > key of rank R"."""
    order = np.argsort(primary)
    p = primary[order]
    tied = np.zeros(order.size, dtype=bool)  # members of runs of equal primary keys: order them by secondary
    tied[1:] = p[1:] == p[:-1]
    tied[:-1] |= tied[1:]
    if tied.any():
        members = order[tied]
        order[tied] = members[np.lexsort((secondary[members], primary[members]))]
    p, s = primary[order], secondary[order]
    new = np.ones(order.size, dtype=bool)
    new[1:] = (p[1:] != p[:-1]) | (s[1:] != s[:-1])
    ranks = np.empty(order.size, dtype=np.int64)
    ranks[order] = np.cumsum(new) - 1
    return ranks


@dataclass(frozen=True)
class ThresholdChoice:
    """The cut R (the test says x1 iff rank > R), the share of the confidence given to the false-positive rate,
    and the bound predicted for the held-out test (module docstring)."""

    rank: int
    bound: float
    fp_share: float


def best_threshold(
    ranks0: np.ndarray, ranks1: np.ndarray, *, alpha: float, delta: float, held_out: tuple[int, int] | None = None
) -> ThresholdChoice:
    """The cut over the composite ranks of the selection outputs of x0 (``ranks0``) and x1 (``ranks1``), and the
    share of ``alpha`` = 1 - confidence given to the false-positive rate, that maximise the predicted bound of a
    held-out test with ``held_out`` = (n0, n1) outputs (default: as many as the selection), over the grids of
    docs/methodology/distinguishing.md#statistics."""
    sorted0, sorted1 = np.sort(ranks0), np.sort(ranks1)
    n0, n1 = held_out or (sorted0.size, sorted1.size)
    pooled = np.sort(np.concatenate([ranks0, ranks1]))
    n = pooled.size
    tail = np.unique(np.geomspace(1, n, _TAIL_GRID).astype(np.int64)) - 1
    positions = np.unique(np.concatenate([tail, n - 1 - tail, np.linspace(0, n - 1, _MIDDLE_GRID).astype(np.int64)]))
    cuts = np.unique(pooled[positions])
    fp = sorted0.size - np.searchsorted(sorted0, cuts, side="right")
    fn = np.searchsorted(sorted1, cuts, side="right")
    predicted_fp = clopper_pearson_upper(fp, sorted0.size, _PREDICTION_ALPHA) * n0
    predicted_fn = clopper_pearson_upper(fn, sorted1.size, _PREDICTION_ALPHA) * n1
    best = ThresholdChoice(-1, -1.0, 0.5)
    for share in FP_SHARES:
        bounds = epsilon_lower_bounds(predicted_fp, n0, predicted_fn, n1, alpha_fp=share * alpha,
                                      alpha_fn=(1 - share) * alpha, delta=delta)
        i = int(np.argmax(bounds))
        if bounds[i] > best.bound:
            best = ThresholdChoice(int(cuts[i]), float(bounds[i]), share)
    if best.bound > 0:
        return best
    # too few selection outputs for any positive bound: the cut with the smallest balanced error
    return ThresholdChoice(int(cuts[int(np.argmin(fp / sorted0.size + fn / sorted1.size))]), 0.0, 0.5)
