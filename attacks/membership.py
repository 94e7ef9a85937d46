"""Membership-inference scores from logits, ROC summaries and a certified epsilon bound from one ROC point.

Inputs are logits, never models: target logits (N, C) of N candidate records with labels (N,), reference logits
(R, N, C) of R reference models with ``reference_in`` (R, N) (True: the record was in model r's training set), and
for RMIA population logits of Z non-member samples z, the target's (Z, C) and the references' (R, Z, C). Every score
is "higher = more likely a member". All arithmetic is float64.

* Loss (Yeom, Giacomelli, Fredrikson & Jha, CSF 2018): score = -CE(f(x), y) = log softmax(f(x))_y.
* Logit-scaled confidence (Carlini, Chien, Nasr, Song, Terzis & Tramer, S&P 2022, "Membership Inference Attacks
  From First Principles", Sec. IV, "logit scaling"): phi = log(p_y / (1 - p_y)) = z_y - logsumexp_{c != y} z_c.
* LiRA (ibid., Alg. 1). Per record, Gaussians fitted to phi over the IN and OUT references:
      online:  score = log N(phi; mu_in, s_in^2) - log N(phi; mu_out, s_out^2);
      offline, ``offline_score="one_sided"`` (Alg. 1, offline line): Lambda = Pr[Z <= phi], Z ~ N(mu_out, s_out^2);
               reported as -log Pr[Z > phi] = -log(1 - Lambda) (same ranking, no saturation at 1);
      offline, ``offline_score="density"``: -log N(phi; mu_out, s_out^2), what the reference code computes
               (tensorflow/privacy research/mi_lira_2021/plot.py, ``generate_ours_offline`` returns
               ``norm.logpdf(sc, mean_out, std_out)`` and ``sweep`` ranks by its negative: a two-sided score).
  ``fixed_variance`` (the paper's "fixed variance" variant, for few references): one pooled within-record variance
  for IN and one for OUT, s^2 = sum_i sum_{r} (phi_ri - mean_i)^2 / (number of terms). The reference code instead takes
  ``np.std`` of all phi values together (between-record spread included; online it uses the IN std for OUT too).
  ``center``: "mean" (the Gaussian fit of the paper) or "median" (the reference code's ``np.median``).
* RMIA (Zarifzadeh, Liu, Cheng & Shokri, ICML 2024, "Low-Cost High-Power Membership Inference Attacks", Sec. 2,
  and ML Privacy Meter's ``run_rmia``): Pr(x | theta) = softmax(f_theta(x))_y;
      Pr(x) = mean_r Pr(x | theta_r)  (online: all references),
      Pr(x) = ((1 + a) mean_{r OUT} Pr(x | theta_r) + (1 - a)) / 2  (offline, a = ``offline_a``: the paper's
              linear approximation of Pr(x) from OUT references),
      LR(x, z) = (Pr(x | theta) / Pr(x)) / (Pr(z | theta) / Pr(z)),  score(x) = |{z : LR(x, z) >= gamma}| / Z.
* ROC (``auditkit.attacks.roc``): "member when score >= t"; FPR among non-members, TPR among members. A certified
  bound from one threshold (Kairouz, Oh & Viswanath 2015, Thm. 2.1): for (eps, delta)-DP, TPR <= e^eps FPR + delta and
  1 - FPR <= e^eps (1 - TPR) + delta, hence with one-sided Clopper-Pearson bounds
      eps >= max{ log((TPR_lo - delta) / FPR_hi),  log((1 - FPR_hi - delta) / (1 - TPR_lo)) }
  (``auditkit.attacks.epsilon_bounds.epsilon_lower_bound``; the two bounds share 1 - confidence by a union bound),
  the threshold chosen on a selection half and certified on the held-out half.

Methodology and the agreement with the peers' code: docs/methodology/membership.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from auditkit.attacks.epsilon_bounds import epsilon_lower_bound, epsilon_lower_bounds
from auditkit.attacks.roc import TprAtFpr, auc, checked_scores, roc_curve, tpr_at_fpr

__all__ = [
    "LOG_ROC_POINTS",
    "OFFLINE_SCORES",
    "RocBound",
    "TprAtFpr",
    "auc",
    "lira_scores",
    "log_roc_points",
    "logit_scaled_confidence",
    "loss_scores",
    "rmia_scores",
    "roc_curve",
    "roc_epsilon_lower_bound",
    "tpr_at_fpr",
    "true_label_probability",
]

OFFLINE_SCORES = ("one_sided", "density")
CENTERS = ("mean", "median")
LOG_ROC_POINTS = 60
_STD_FLOOR = 1e-30  # the reference code's "+1e-30": a zero spread stays finite


# --- checks -----------------------------------------------------------------------------------------------------
def _logits_labels(logits: np.ndarray, labels: np.ndarray, name: str = "logits",
                   label_name: str = "labels") -> tuple[np.ndarray, np.ndarray]:
    logits = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels)
    if logits.ndim < 2 or logits.shape[-1] < 2:
        raise ValueError(f"{name} must have shape (..., C) with C >= 2 classes, got {logits.shape}")
    if not np.all(np.isfinite(logits)):
        raise ValueError(f"{name} must be finite")
    if labels.ndim == 0 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"{label_name} must be an integer array, got dtype {labels.dtype} shape {labels.shape}")
    if labels.shape != logits.shape[-1 - labels.ndim:-1]:
        raise ValueError(f"{label_name} must have shape {logits.shape[-1 - labels.ndim:-1]} (the trailing leading "
                         f"dims of {name} {logits.shape}), got {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= logits.shape[-1]):
        raise ValueError(f"{label_name} must be class indices in 0..{logits.shape[-1] - 1}")
    return logits, labels


def _true_and_rest(logits: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """z_y, logsumexp over the other classes, logsumexp over all classes."""
    index = np.broadcast_to(labels, logits.shape[:-1])[..., None]
    true = np.take_along_axis(logits, index, axis=-1)[..., 0]
    others = logits.copy()
    np.put_along_axis(others, index, -np.inf, axis=-1)
    return true, special.logsumexp(others, axis=-1), special.logsumexp(logits, axis=-1)


def _reference_set(target_logits: np.ndarray, labels: np.ndarray, reference_logits: np.ndarray,
                   reference_in: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    target_logits, labels = _logits_labels(target_logits, labels, "target_logits")
    if target_logits.ndim != 2:
        raise ValueError(f"target_logits must have shape (N, C), got {target_logits.shape}")
    reference_logits = np.asarray(reference_logits, dtype=np.float64)
    n, c = target_logits.shape
    if reference_logits.ndim != 3 or reference_logits.shape[1:] != (n, c):
        raise ValueError(f"reference_logits must have shape (R, {n}, {c}), got {reference_logits.shape}")
    reference_in = np.asarray(reference_in)
    if reference_in.dtype != np.bool_ or reference_in.shape != reference_logits.shape[:2]:
        raise ValueError(f"reference_in must be a boolean array of shape {reference_logits.shape[:2]}, got "
                         f"{reference_in.dtype} {reference_in.shape}")
    return target_logits, labels, reference_logits


# --- per-record signals ---------------------------------------------------------------------------------------

def logit_scaled_confidence(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """phi = log(p_y / (1 - p_y)) = z_y - logsumexp_{c != y} z_c (Carlini et al. 2022, Sec. IV), exact in float64
    even where p_y rounds to 1. ``logits`` (..., C), ``labels`` the trailing leading dims (e.g. (N,) for
    (R, N, C)); returns the leading shape."""
    logits, labels = _logits_labels(logits, labels)
    true, rest, _ = _true_and_rest(logits, labels)
    return true - rest


def loss_scores(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """-CE = log softmax(z)_y = z_y - logsumexp_c z_c (Yeom et al. 2018), the loss attack's score."""
    logits, labels = _logits_labels(logits, labels)
    true, _, total = _true_and_rest(logits, labels)
    return true - total


def true_label_probability(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Pr(x | theta) = softmax(z)_y, RMIA's signal (ML Privacy Meter's ``get_softmax`` at temperature 1)."""
    return np.exp(loss_scores(logits, labels))


# --- LiRA ---------------------------------------------------------------------------------------------------

def _fit(phi: np.ndarray, mask: np.ndarray, *, fixed_variance: bool, center: str, which: str
         ) -> tuple[np.ndarray, np.ndarray]:
    """Per-record location and spread of phi (R, N) over the references where ``mask`` (R, N)."""
    counts = mask.sum(axis=0)
    need = 1 if fixed_variance else 2
    if np.any(counts < need):
        first = int(np.argmax(counts < need))
        raise ValueError(f"reference_in: every record needs >= {need} {which} reference(s)"
                         f"{'' if fixed_variance else ' (or fixed_variance=True)'}; record {first} has {counts[first]}")
    masked = np.where(mask, phi, np.nan)
    mean = np.nanmean(masked, axis=0)
    location = mean if center == "mean" else np.nanmedian(masked, axis=0)
    squares = np.where(mask, (phi - mean) ** 2, 0.0)
    if fixed_variance:
        spread = np.full(phi.shape[1], math.sqrt(squares.sum() / counts.sum()))
    else:
        spread = np.sqrt(squares.sum(axis=0) / counts)  # np.std, ddof 0, as the reference code
    return location, np.maximum(spread, _STD_FLOOR)


def lira_scores(target_logits: np.ndarray, labels: np.ndarray, reference_logits: np.ndarray,
                reference_in: np.ndarray, *, online: bool = True, fixed_variance: bool = False,
                offline_score: str = "one_sided", center: str = "mean") -> np.ndarray:
    """LiRA (Carlini et al. 2022, Alg. 1) from logits; (N,) scores, higher = member. Module docstring:

    online:  log N(phi; mu_in, s_in^2) - log N(phi; mu_out, s_out^2);
    offline: ``"one_sided"`` -log Pr[Z > phi] (monotone in the paper's Lambda = Pr[Z <= phi], Z ~ N(mu_out,
             s_out^2)) or ``"density"`` -log N(phi; mu_out, s_out^2) (the reference code's two-sided score).

    phi: ``logit_scaled_confidence``. s: ddof-0 standard deviations around the record's mean (floored at 1e-30);
    ``fixed_variance``: pooled over records (separately for IN and OUT). ``center``: mu as "mean" or "median".
    """
    target_logits, labels, reference_logits = _reference_set(target_logits, labels, reference_logits, reference_in)
    if offline_score not in OFFLINE_SCORES:
        raise ValueError(f"offline_score must be one of {', '.join(OFFLINE_SCORES)}, got {offline_score!r}")
    if center not in CENTERS:
        raise ValueError(f"center must be one of {', '.join(CENTERS)}, got {center!r}")
    reference_in = np.asarray(reference_in)
    phi = logit_scaled_confidence(target_logits, labels)
    ref_phi = logit_scaled_confidence(reference_logits, labels)
    mu_out, s_out = _fit(ref_phi, ~reference_in, fixed_variance=fixed_variance, center=center, which="OUT")
    if not online:
        if offline_score == "one_sided":
            return -stats.norm.logsf(phi, mu_out, s_out)
        return -stats.norm.logpdf(phi, mu_out, s_out)
    mu_in, s_in = _fit(ref_phi, reference_in, fixed_variance=fixed_variance, center=center, which="IN")
    return stats.norm.logpdf(phi, mu_in, s_in) - stats.norm.logpdf(phi, mu_out, s_out)


# --- RMIA ---------------------------------------------------------------------------------------------------

def rmia_scores(target_logits: np.ndarray, labels: np.ndarray, reference_logits: np.ndarray,
                reference_in: np.ndarray, population_logits: np.ndarray, population_labels: np.ndarray,
                population_reference_logits: np.ndarray, *, offline_a: float | None, gamma: float = 1.0,
                tie_break: bool = False) -> np.ndarray:
    """RMIA (Zarifzadeh et al. 2024, Sec. 2); (N,) scores in [0, 1], the fraction of population samples z with
    LR(x, z) >= ``gamma`` (module docstring).

    ``offline_a`` None: online, Pr(x) = mean over all R references; a in [0, 1]: offline, Pr(x) = ((1 + a) P_out(x)
    + (1 - a)) / 2 with P_out the mean over the record's OUT references. The population z is OUT for every
    reference: Pr(z) is the mean over all of them, corrected the same way offline. Ties LR = gamma count as in (the
    paper's ">="; ML Privacy Meter counts "> 1"). ``tie_break``: within a level, the larger Pr(x | theta) / Pr(x)
    scores higher (+ its rank / (N Z), below one level's step), so a low-FPR threshold can split the records
    that beat every z.
    """
    target_logits, labels, reference_logits = _reference_set(target_logits, labels, reference_logits, reference_in)
    reference_in = np.asarray(reference_in)
    population_logits, population_labels = _logits_labels(population_logits, population_labels,
                                                          "population_logits", "population_labels")
    z, c = population_logits.shape if population_logits.ndim == 2 else (-1, -1)
    r = reference_logits.shape[0]
    if population_logits.ndim != 2 or c != target_logits.shape[1]:
        raise ValueError(f"population_logits must have shape (Z, {target_logits.shape[1]}), got "
                         f"{population_logits.shape}")
    population_reference_logits = np.asarray(population_reference_logits, dtype=np.float64)
    if population_reference_logits.shape != (r, z, c):
        raise ValueError(f"population_reference_logits must have shape ({r}, {z}, {c}), got "
                         f"{population_reference_logits.shape}")
    if not (math.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be a finite number > 0, got {gamma!r}")
    p_x = true_label_probability(target_logits, labels)
    p_x_refs = true_label_probability(reference_logits, labels)
    p_z = true_label_probability(population_logits, population_labels)
    p_z_refs = true_label_probability(population_reference_logits, population_labels)
    if offline_a is None:
        prior_x, prior_z = p_x_refs.mean(axis=0), p_z_refs.mean(axis=0)
    else:
        if not 0 <= offline_a <= 1:
            raise ValueError(f"offline_a must be None (online) or in [0, 1], got {offline_a!r}")
        out = ~reference_in
        if np.any(out.sum(axis=0) == 0):
            raise ValueError(f"reference_in: offline RMIA needs >= 1 OUT reference per record; record "
                             f"{int(np.argmax(out.sum(axis=0) == 0))} has none")
        mean_out_x = np.where(out, p_x_refs, 0.0).sum(axis=0) / out.sum(axis=0)
        prior_x = (1 + offline_a) / 2 * mean_out_x + (1 - offline_a) / 2
        prior_z = (1 + offline_a) / 2 * p_z_refs.mean(axis=0) + (1 - offline_a) / 2
    ratio_x, ratio_z = p_x / prior_x, np.sort(p_z / prior_z)
    # LR(x, z) >= gamma  <=>  ratio_z <= ratio_x / gamma (exact for gamma = 1: division is monotone)
    limit = ratio_x if gamma == 1.0 else ratio_x / gamma
    scores = np.searchsorted(ratio_z, limit, side="right") / z
    if tie_break:
        # within one of the Z + 1 levels, the larger ratio first: + rank / (N Z) < 1 / Z never crosses a level
        # (every record above all z ties at 1 otherwise, and a low-FPR threshold cannot split them)
        scores = scores + np.argsort(np.argsort(ratio_x, kind="stable"), kind="stable") / (len(ratio_x) * z)
    return scores


# --- ROC (roc_curve, auc, tpr_at_fpr: auditkit.attacks.roc) -----------------------------------------------------

def log_roc_points(scores: np.ndarray, members: np.ndarray, points: int = LOG_ROC_POINTS
                   ) -> dict[str, np.ndarray]:
    """The ROC at ``points`` FPRs log-spaced from 1 / (number of non-members) to 1 (plus 1), for a log-log figure:
    each TPR the largest at an empirical FPR <= that FPR (as ``tpr_at_fpr``). {"fpr": ..., "tpr": ...}."""
    scores, members = np.asarray(scores, dtype=np.float64), np.asarray(members, dtype=bool)
    if isinstance(points, bool) or not isinstance(points, int | np.integer) or points < 2:
        raise ValueError(f"points must be an integer >= 2, got {points!r}")
    if scores.shape != members.shape or scores.ndim != 1:
        raise ValueError(f"scores and members must be 1-d of the same length, got {scores.shape} and {members.shape}")
    positives, negatives = np.sort(scores[members])[::-1], np.sort(scores[~members])[::-1]
    if len(positives) == 0 or len(negatives) == 0:
        return {"fpr": np.zeros(0), "tpr": np.zeros(0)}
    fprs = np.unique(np.concatenate([np.logspace(np.log10(1 / len(negatives)), 0, points), [1.0]]))
    allowed = np.floor(fprs * len(negatives) + 1e-9).astype(int)  # false positives allowed
    # the threshold just above the (allowed+1)-th highest non-member: every member strictly above it counts
    cut = np.where(allowed < len(negatives), negatives[np.minimum(allowed, len(negatives) - 1)], -np.inf)
    above = len(positives) - np.searchsorted(positives[::-1], cut, side="right")
    return {"fpr": fprs, "tpr": above / len(positives)}


# --- certified bound ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RocBound:
    """``roc_epsilon_lower_bound``'s result: the bound certified on the held-out half at ``threshold`` (chosen on
    the selection half, where it gave ``selection_epsilon``), its counts, and ``max_certifiable`` (the bound had
    the held-out half been separated perfectly)."""

    epsilon_lower_bound: float
    threshold: float
    false_positives: int
    non_members: int
    true_positives: int
    members: int
    selection_epsilon: float
    max_certifiable: float
    confidence: float
    delta: float


def roc_epsilon_lower_bound(scores: np.ndarray, members: np.ndarray, *, delta: float, confidence: float = 0.95,
                            rng: np.random.Generator, selection_fraction: float = 0.5,
                            fp_share: float = 0.5) -> RocBound:
    """Certified eps >= max{log((TPR_lo - delta) / FPR_hi), log((1 - FPR_hi - delta) / (1 - TPR_lo))} at
    ``confidence`` (module docstring; ``epsilon_lower_bound`` with FNR_hi = 1 - TPR_lo).

    Members and non-members are each split at random by ``rng`` (independent of the scores): a
    ``selection_fraction`` part picks the threshold "score >= t" maximising the same bound on its counts; the rest
    certifies it. The one-sided Clopper-Pearson levels share 1 - confidence by a union bound, ``fp_share`` to the
    FPR; the threshold is fixed before the held-out counts are seen, so no further correction is due. Assumes the
    records' (score, membership) pairs are exchangeable across the split (independent records).
    """
    scores, members = checked_scores(scores, members)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    if not 0 < selection_fraction < 1:
        raise ValueError(f"selection_fraction must be in (0, 1), got {selection_fraction!r}")
    for name, value, low in (("confidence", confidence, 0), ("fp_share", fp_share, 0), ("delta", delta, None)):
        if not ((0 <= value < 1) if low is None else (0 < value < 1)):
            raise ValueError(f"{name} must be in {'[0, 1)' if low is None else '(0, 1)'}, got {value!r}")
    select = np.zeros(len(scores), dtype=bool)
    for group in (np.flatnonzero(members), np.flatnonzero(~members)):
        take = math.floor(selection_fraction * len(group))
        if take < 1 or take >= len(group):
            raise ValueError("members: each class needs >= 2 records so both halves hold some "
                             f"(got {np.count_nonzero(members)} members, {np.count_nonzero(~members)} non-members)")
        select[rng.permutation(group)[:take]] = True
    alpha = 1 - confidence
    fpr, tpr, thresholds = roc_curve(scores[select], members[select])
    n1, n0 = np.count_nonzero(members[select]), np.count_nonzero(~members[select])
    per_threshold = epsilon_lower_bounds(np.round(fpr * n0), n0, np.round((1 - tpr) * n1), n1,
                                         alpha_fp=fp_share * alpha, alpha_fn=(1 - fp_share) * alpha, delta=delta)
    best = int(np.argmax(per_threshold))
    threshold = float(thresholds[best])
    held_scores, held_members = scores[~select], members[~select]
    guess = held_scores >= threshold
    h1, h0 = int(np.count_nonzero(held_members)), int(np.count_nonzero(~held_members))
    tp, fp = int(np.count_nonzero(guess & held_members)), int(np.count_nonzero(guess & ~held_members))
    bound = epsilon_lower_bound(fp, h0, h1 - tp, h1, confidence=confidence, delta=delta, fp_share=fp_share)
    cap = epsilon_lower_bound(0, h0, 0, h1, confidence=confidence, delta=delta, fp_share=fp_share)
    return RocBound(bound, threshold, fp, h0, tp, h1, float(per_threshold[best]), cap, float(confidence),
                    float(delta))
