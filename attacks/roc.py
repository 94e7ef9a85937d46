"""ROC summaries of scores against two classes ("positives": members, included canaries, outputs of M(x1)):
the empirical ROC, the AUROC with DeLong's interval and the TPR at a fixed low FPR with Clopper-Pearson's.

* ROC: "positive when score >= t"; FPR among the negatives, TPR among the positives.
* AUROC = P[s+ > s-] + P[s+ = s-] / 2 = Mann-Whitney U / (n1 n0). DeLong, DeLong & Clarke-Pearson (Biometrics
  1988) estimate its variance from the structural components V10_i = (share of negatives below positive i, ties
  half) and V01_j = (share of positives above negative j, ties half):
      Var(AUROC) = S10 / n1 + S01 / n0,   S10, S01 the sample variances (ddof 1) of V10 and V01;
  computed from midranks in O(n log n) as Sun & Xu (IEEE Signal Process. Lett. 21(11), 2014, "Fast
  implementation of DeLong's algorithm"): with T the midranks among all scores, T1 among the positives and T0
  among the negatives, V10_i = (T_i - T1_i) / n0 and V01_j = 1 - (T_j - T0_j) / n1. The interval is
  AUROC +- z_{1-a/2} sqrt(Var), clipped to [0, 1] (asymptotic; it collapses to a point at AUROC 0 or 1).
* TPR at FPR <= f: the threshold with the largest TPR among those with empirical FPR <= f, and a two-sided
  Clopper-Pearson interval on the TPR at it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from auditkit.attacks.epsilon_bounds import clopper_pearson_upper

__all__ = [
    "LOW_FPRS",
    "ROC_CONFIDENCE",
    "RocSummary",
    "TprAtFpr",
    "auc",
    "auc_interval",
    "checked_scores",
    "delong_variance",
    "roc_curve",
    "roc_summary",
    "tpr_at_fpr",
]

LOW_FPRS = (1e-2, 1e-3)  # the fixed low FPRs reported (the peers' 1 % and 0.1 %)
ROC_CONFIDENCE = 0.95  # of a summary's intervals: descriptive, outside any family-wise claim


def checked_scores(scores: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``scores`` as float64 and ``members`` (True: positive), 1-d of one length with both classes, else a
    ValueError."""
    scores = np.asarray(scores, dtype=np.float64)
    members = np.asarray(members)
    if scores.ndim != 1 or members.shape != scores.shape:
        raise ValueError(f"scores and members must be 1-d of the same length, got {scores.shape} and {members.shape}")
    if members.dtype != np.bool_:
        raise ValueError(f"members must be a boolean array, got dtype {members.dtype}")
    if np.any(np.isnan(scores)):
        raise ValueError("scores must not be NaN (+-inf is allowed)")
    if members.all() or not members.any():
        raise ValueError("members must contain both members (True) and non-members (False)")
    return scores, members


def roc_curve(scores: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fpr, tpr, thresholds) of "member when score >= t" for t = +inf and every distinct score, decreasing:
    the full empirical ROC from (0, 0) to (1, 1) (tied scores move together, as sklearn's ``roc_curve`` with
    ``drop_intermediate=False``)."""
    scores, members = checked_scores(scores, members)
    order = np.argsort(-scores, kind="stable")
    sorted_scores, sorted_members = scores[order], members[order]
    last = np.r_[np.flatnonzero(np.diff(sorted_scores) != 0), len(scores) - 1]  # last index of each tie group
    tp = np.cumsum(sorted_members)[last]
    fp = (last + 1) - tp
    fpr = np.r_[0.0, fp / np.count_nonzero(~members)]
    tpr = np.r_[0.0, tp / np.count_nonzero(members)]
    return fpr, tpr, np.r_[np.inf, sorted_scores[last]]


def auc(scores: np.ndarray, members: np.ndarray) -> float:
    """Area under ``roc_curve`` (trapezoids) = P[s_member > s_non-member] + P[tie] / 2 (Mann-Whitney U / n1 n0)."""
    scores, members = checked_scores(scores, members)
    ranks = stats.rankdata(scores)
    n1, n0 = np.count_nonzero(members), np.count_nonzero(~members)
    return float((ranks[members].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _delong(scores: np.ndarray, members: np.ndarray) -> tuple[float, float]:
    """(AUROC, DeLong's variance) from the structural components V10 (positives) and V01 (negatives), computed
    from midranks (Sun & Xu 2014, module docstring)."""
    scores, members = checked_scores(scores, members)
    n1, n0 = int(np.count_nonzero(members)), int(np.count_nonzero(~members))
    if min(n1, n0) < 2:
        raise ValueError(f"members: DeLong's variance needs >= 2 members and >= 2 non-members, got {n1} and {n0}")
    everyone = stats.rankdata(scores)
    v10 = (everyone[members] - stats.rankdata(scores[members])) / n0
    v01 = 1.0 - (everyone[~members] - stats.rankdata(scores[~members])) / n1
    return float(v10.mean()), float(np.var(v10, ddof=1) / n1 + np.var(v01, ddof=1) / n0)


def delong_variance(scores: np.ndarray, members: np.ndarray) -> float:
    """DeLong et al. (1988)'s variance of the empirical AUROC, S10 / n1 + S01 / n0 (module docstring); needs >= 2
    members and >= 2 non-members."""
    return _delong(scores, members)[1]


def auc_interval(scores: np.ndarray, members: np.ndarray, *, confidence: float = ROC_CONFIDENCE
                 ) -> tuple[float, float, float]:
    """(AUROC, low, high): the empirical AUROC (mean of V10 = U / (n1 n0)) and DeLong's two-sided interval at
    ``confidence``, AUROC +- z_{(1+confidence)/2} sqrt(``delong_variance``), clipped to [0, 1]."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    area, variance = _delong(scores, members)
    half = float(stats.norm.ppf((1 + confidence) / 2)) * variance ** 0.5
    return area, max(0.0, area - half), min(1.0, area + half)


@dataclass(frozen=True)
class TprAtFpr:
    """TPR at the threshold with the largest TPR among those with empirical FPR <= ``target_fpr``; ``tpr_low``,
    ``tpr_high``: two-sided Clopper-Pearson interval at ``confidence`` on the TPR at that threshold."""

    target_fpr: float
    threshold: float
    fpr: float
    tpr: float
    tpr_low: float
    tpr_high: float
    true_positives: int
    members: int
    false_positives: int
    non_members: int
    confidence: float


def tpr_at_fpr(scores: np.ndarray, members: np.ndarray, fpr: float, *, confidence: float = 0.95) -> TprAtFpr:
    """TPR at FPR <= ``fpr``: among the thresholds of ``roc_curve`` with empirical FPR <= ``fpr`` the one with the
    largest TPR (the lowest such threshold), with a two-sided Clopper-Pearson interval [B(a/2; k, n-k+1),
    B(1-a/2; k+1, n-k)], a = 1 - ``confidence``. The threshold depends on the non-members' scores only, so given
    it the count of members above it is binomial when the records' scores are independent."""
    scores, members = checked_scores(scores, members)
    return _tpr_at(roc_curve(scores, members), np.count_nonzero(members), np.count_nonzero(~members), fpr,
                   confidence)


def _tpr_at(curve: tuple[np.ndarray, np.ndarray, np.ndarray], n1: int, n0: int, fpr: float,
            confidence: float) -> TprAtFpr:
    """``tpr_at_fpr`` on a computed ``roc_curve`` of ``n1`` members and ``n0`` non-members."""
    if not (0 <= fpr <= 1):
        raise ValueError(f"fpr must be in [0, 1], got {fpr!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    fprs, tprs, thresholds = curve
    n1, n0 = int(n1), int(n0)
    at = int(np.flatnonzero(fprs <= fpr + 1e-12)[-1])  # the fprs grow, tprs too: the last is the largest TPR
    k = round(float(tprs[at]) * n1)
    alpha = (1 - confidence) / 2
    high = float(clopper_pearson_upper(k, n1, alpha))
    low = 1.0 - float(clopper_pearson_upper(n1 - k, n1, alpha))
    return TprAtFpr(float(fpr), float(thresholds[at]), float(fprs[at]), float(tprs[at]), low, high, k, n1,
                    round(float(fprs[at]) * n0), n0, float(confidence))


@dataclass(frozen=True)
class RocSummary:
    """The AUROC with DeLong's interval [``auc_low``, ``auc_high``] and the TPR at each low FPR of ``tpr_at`` with
    Clopper-Pearson's, all at ``confidence`` (two-sided), from ``positives`` and ``negatives`` scores."""

    auc: float
    auc_low: float
    auc_high: float
    confidence: float
    positives: int
    negatives: int
    tpr_at: tuple[TprAtFpr, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (a threshold of +inf, no threshold reaching the FPR, stays a float)."""
        return {"auc": self.auc, "auc_low": self.auc_low, "auc_high": self.auc_high, "confidence": self.confidence,
                "positives": self.positives, "negatives": self.negatives,
                "tpr_at": [dict(vars(point)) for point in self.tpr_at]}


def roc_summary(scores: np.ndarray, members: np.ndarray, *, fprs: Sequence[float] = LOW_FPRS,
                confidence: float = ROC_CONFIDENCE) -> RocSummary:
    """``auc_interval`` and ``tpr_at_fpr`` at each of ``fprs``, at ``confidence``, in one ``RocSummary``."""
    scores, members = checked_scores(scores, members)
    area, low, high = auc_interval(scores, members, confidence=confidence)
    n1, n0 = int(np.count_nonzero(members)), int(np.count_nonzero(~members))
    curve = roc_curve(scores, members)
    return RocSummary(area, low, high, float(confidence), n1, n0,
                      tuple(_tpr_at(curve, n1, n0, f, confidence) for f in fprs))
