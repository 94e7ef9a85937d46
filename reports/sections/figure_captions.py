"""The summary figures, in report order, with their captions (``auditkit.reports.figures`` draws them)."""
from __future__ import annotations

# the summary figures, in report order, with their captions
FIGURE_CAPTIONS = {
    "accuracy_vs_round": "Test accuracy (%) by round, one line per setting.",
    "privacy_utility": "Privacy against utility: final test accuracy (%, top) and test loss (bottom, logarithmic) "
                       "against the claimed one-round epsilon (left) and the strongest certified epsilon lower "
                       "bound (right; both x axes logarithmic), a line per mechanism (neutral colour, marker and "
                       "line style: not a verdict); solid black: the run without a mechanism (the ceiling); dotted "
                       "grey: chance (1 / classes). Mechanisms without a finite claim (no mechanism, quantizers "
                       "alone) have no place on an epsilon axis and are left out of the points (named in the "
                       "legend). The certified bound is what the tests proved about the claim, not how much "
                       "privacy the setting has; the table \"Privacy against utility\" lists every number.",
    "ssim_vs_epsilon": "Inversion SSIM on the view each claim covers (the server's; the aggregate for noise the server "
                       "adds) (defended, solid; clean attack, dashed) against the "
                       "one-round claimed epsilon; settings without a finite claim or without inversion are left out.",
    "ssim_vs_error_std": "Inversion SSIM against the standard deviation of the error in the server's view, one line "
                         "per mechanism; dashed: the clean attack.",
    "lower_bound_vs_epsilon": "Each setting's strongest certified epsilon lower bound (over all its distinguishing "
                              "and adaptive tests, or its idealized one-run canary audit) against its claimed "
                              "one-round epsilon, coloured by the verdict on the one-round claim (the badge's "
                              "colour; no other figure uses these colours), one marker per mechanism; both axes "
                              "logarithmic when the claims span more than a decade (a bound of 0 then sits on the "
                              "dash-dotted floor), both linear otherwise, so the line y = x is straight; points "
                              "above it refute the claim; dotted: the most a test with these trials could certify "
                              "(the cap). A claim refuted by computation (analytic, hollow markers) can sit below the "
                              "line: no test reached it, the mechanism's declared noise did. The whole run's claim "
                              "is judged in the privacy table, not here.",
    "bits_vs_accuracy": "Uplink bits per coordinate against final test accuracy (%), one point per setting.",
    "identification_vs_epsilon": "Identification success (the informed adversary picks the target among M real "
                                 "candidates; 95 % Clopper-Pearson bars) against the claimed one-round epsilon, one "
                                 "series per mechanism and M; dashed, same colour: the success the claim allows (its "
                                 "reconstruction-robustness bound); dotted: guessing, 1/M. A point whose bar lies above "
                                 "its bound exceeds the claim.",
    "probe_ssim_vs_epsilon": "Inversion probe (the claim's worst case: single-example updates at the checkpoint "
                             "model) mean SSIM on the view the claim covers against the claimed one-round epsilon, one "
                             "line per mechanism; dashed: the same attack on the clean updates.",
    "reconstruction_vs_epsilon": "Where reconstruction begins: the probe's attack on the same clip-scaled updates, "
                                 "the mechanism recalibrated to each epsilon (one panel per mechanism); solid: mean "
                                 "SSIM of the defended reconstructions with its 95 % interval; dashed: the clean "
                                 "attack; dotted: the identification success the claim allows at that epsilon "
                                 "(its reconstruction-robustness bound, M candidates); grey bands: the audited claims.",
    "tradeoff_vs_claim": "One-run canary audit: the canary guesses' empirical trade-off (solid: the share of included "
                         "canaries scored above a threshold, TPR, against the share of excluded ones above it, FPR; "
                         "both axes logarithmic), one panel per setting and a line per view (views with the same "
                         "scores share one: \"aggregate = public\"), against the most the claim allows at each FPR "
                         "(dashed: 1 - f(FPR), f the claim's trade-off curve: for an FL run, the "
                         "whole run's composed claim). A solid line above its dashed one in the low-FPR corner is what "
                         "a refutation looks like; the verdict is the certified test of the table, not this picture "
                         "(the curve's points are not corrected for noise).",
    "membership_roc": "Membership inference against the final model: each attack's ROC pooled over the target and "
                      "reference runs (the share of members flagged, TPR, against the share of non-members flagged, "
                      "FPR; both axes logarithmic, from one non-member to all), one panel per setting and a line "
                      "per attack; dotted grey: chance (TPR = FPR); dashed black: the most TPR the whole run's "
                      "claim allows at each FPR (1 - f(FPR)), where a claim is judged. A line above the dashed one "
                      "at low FPR is what a refutation looks like, but the pooled curve certifies nothing (its "
                      "trials share runs): the verdict is the one-run bound of the table. The curves measure these "
                      "attacks on these runs, not what other attacks could do.",
}
