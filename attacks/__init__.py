"""What an adversary does with what it observes: gradient inversion and empirical DP tests.

Attacks treat a mechanism as a black box (a registered ``Mechanism`` or a batched callable) and a model as
a ``torch.nn.Module``; they never import ``auditkit``.

* gradient inversion: ``dlg``, ``idlg``, ``inverting_gradients`` (``gradient_inversion``, with
  ``batched_lbfgs``, ``gradient_matching``, ``label_extraction``, ``observations``) and ``metrics``;
* informed-adversary identification: ``identify`` (which of M candidates was the input?), judged against the
  claim's reconstruction-robustness bound by ``auditkit``;
* empirical DP: ``distinguish`` (bulk sampling, statistics, held-out Clopper-Pearson bounds in
  ``epsilon_bounds``), one-run bounds on canaries (``one_run``: Steinke et al., f-DP), ``neighbouring_pairs``, ``audit_settings``, ``audit_mechanism``, ``verdicts``, and the
  registry of ``adaptive_tests``;
* membership inference: loss, LiRA and RMIA scores from logits, ROC, TPR at low FPR and a held-out certified
  epsilon bound (``membership``);
* ROC summaries: the AUROC with DeLong's interval and the TPR at low FPR with Clopper-Pearson's (``roc``);
* attacks on specific mechanisms: ``targeted`` (JoPEQ's side channel and overload, CEPAM's normalisation,
  DP-SQ's cross-cell test, MSP-FL's transcript reconstruction), registered for the mechanisms they target.

The generic code knows a mechanism only through the ``auditkit.mechanisms.Mechanism`` protocol and what it declares
(``auditkit.mechanisms.capabilities``); it imports no mechanism class.
"""

# --- gradient inversion (issue 5): attacks, label extraction, observations, metrics ---
from auditkit.attacks import metrics
from auditkit.attacks.analytic_inversion import analytic
from auditkit.attacks.gradient_inversion import (
    INVERSION_ATTACKS,
    InversionResult,
    dlg,
    idlg,
    invert,
    inverting_gradients,
    preset_settings,
)
from auditkit.attacks.gradient_matching import per_image_gradients
from auditkit.attacks.label_extraction import extract_labels
from auditkit.attacks.observations import update_estimator, update_estimator_for, update_to_gradient
# --- end gradient inversion ---

# --- empirical DP distinguishing (issue 6): epsilon bounds, bulk sampling, tests, pairs, verdicts ---
from auditkit.attacks.adaptive_tests import (
    AdaptiveTestResult,
    adaptive_test,
    adaptive_tests_for,
    message_side_channel,
    registered_adaptive_tests,
    resolve_for,
    run_views,
)
from auditkit.attacks.audit_mechanism import MechanismAudit, audit_mechanism
from auditkit.attacks.audit_settings import AuditSetting, audit_setting, setting_pairs
from auditkit.attacks.bulk_sampling import BatchedMechanism, BulkSampler, bulk_sampler
from auditkit.attacks.distinguish import EpsilonEstimate, distinguish
from auditkit.attacks.distinguishing_statistics import STATISTICS
from auditkit.attacks.identification import IdentificationResult, identify
from auditkit.attacks.epsilon_bounds import (
    clopper_pearson_upper,
    distinguishing_p_value,
    epsilon_lower_bound,
    max_certifiable,
    one_run_epsilon_lower_bound,
    one_run_p_value,
)
from auditkit.attacks.neighbouring_pairs import NeighbouringPair, neighbouring_pairs
from auditkit.attacks.one_run import OneRunBound, fdp_refuted, fdp_scale_lower_bound, one_run_bound
from auditkit.attacks.pair_search import PairCandidate, PairSearch, search_worst_pair
from auditkit.attacks.soundness import SoundnessRow, allowed_false_alarms, soundness_sweep
from auditkit.attacks.verdicts import (
    CONSISTENT, DECISIVE_P, INCONCLUSIVE, NO_CLAIM, VACUOUS, VERDICTS, VIOLATED, adjusted_p_value, bonferroni_confidence,
    evidence, holm, verdict,
)
# --- end empirical DP distinguishing ---

# --- membership inference (issue 42): scores from logits, ROC, a certified bound from one ROC point ---
from auditkit.attacks.membership import (
    RocBound,
    TprAtFpr,
    auc,
    lira_scores,
    log_roc_points,
    logit_scaled_confidence,
    loss_scores,
    rmia_scores,
    roc_curve,
    roc_epsilon_lower_bound,
    tpr_at_fpr,
    true_label_probability,
)
# --- end membership inference ---

# --- ROC summaries (issue 43): AUROC with DeLong's interval, TPR at low FPR (distinguishing tests, canaries) ---
from auditkit.attacks.roc import RocSummary, auc_interval, delong_variance, roc_summary
# --- end ROC summaries ---

# --- attacks on specific mechanisms (registered for the mechanisms they target) ---
from auditkit.attacks.targeted.cepam import cepam_normalisation
from auditkit.attacks.targeted.dpsq import dpsq_cross_cell
from auditkit.attacks.targeted.jopeq import jopeq_overload, jopeq_scale_side_channel
from auditkit.attacks.targeted.msp_reconstruction import (
    MSPReconstruction,
    first_residual_direction,
    msp_update_estimates,
    reconstruct_from_split_support,
    reconstruct_msp,
)
from auditkit.attacks.targeted.msp_transcript import msp_transcript
