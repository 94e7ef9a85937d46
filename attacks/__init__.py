"""What an adversary does with what it observes: gradient inversion and empirical DP tests.

Attacks treat a mechanism as a black box (a registered ``Mechanism`` or a batched callable) and a model as
a ``torch.nn.Module``; they never import ``auditkit``.

* gradient inversion: ``dlg``, ``idlg``, ``inverting_gradients`` (``gradient_inversion``, with
  ``batched_lbfgs``, ``gradient_matching``, ``label_extraction``, ``observations``) and ``metrics``;
* empirical DP: ``distinguish`` (bulk sampling, statistics, held-out Clopper-Pearson bounds in
  ``epsilon_bounds``), ``neighbouring_pairs``, ``audit_mechanism``, ``verdicts``, and the
  mechanism-specific ``adaptive_tests``.
"""

# --- gradient inversion (issue 5): attacks, label extraction, observations, metrics ---
from attacks import metrics
from attacks.gradient_inversion import (
    INVERSION_ATTACKS,
    InversionResult,
    dlg,
    idlg,
    invert,
    inverting_gradients,
    preset_settings,
)
from attacks.gradient_matching import per_image_gradients
from attacks.label_extraction import extract_labels
from attacks.observations import update_to_gradient
# --- end gradient inversion ---

# --- empirical DP distinguishing (issue 6): epsilon bounds, bulk sampling, tests, pairs, verdicts ---
from attacks.adaptive_tests import (
    ADAPTIVE_TESTS,
    AdaptiveTestResult,
    adaptive_tests_for,
    cepam_normalisation,
    jopeq_overload,
    jopeq_scale_side_channel,
)
from attacks.audit_mechanism import MechanismAudit, audit_mechanism
from attacks.audit_settings import AuditSetting, audit_setting
from attacks.bulk_sampling import BatchedMechanism, BulkSampler, bulk_sampler
from attacks.distinguish import EpsilonEstimate, distinguish
from attacks.distinguishing_statistics import STATISTICS
from attacks.epsilon_bounds import (
    clopper_pearson_upper,
    distinguishing_p_value,
    epsilon_lower_bound,
    max_certifiable,
    one_run_epsilon_lower_bound,
    one_run_p_value,
)
from attacks.neighbouring_pairs import NeighbouringPair, neighbouring_pairs
from attacks.output_density import LogDensity, output_log_density
from attacks.verdicts import CONSISTENT, INCONCLUSIVE, VACUOUS, VERDICTS, VIOLATED, bonferroni_confidence, holm, verdict
# --- end empirical DP distinguishing ---

# --- model splitting (seed 004): the adaptive server's reconstruction from the consensus transcript ---
from attacks.msp_reconstruction import (
    MSPReconstruction,
    first_residual_direction,
    reconstruct_from_split_support,
    reconstruct_msp,
)
