"""CEPAM 000's normalisation (``auditkit.attacks.targeted.cepam``), at 3,000 trials per view: the decoded update alone
certifies ~5.1 against claims of 4.38 (Gaussian) and 1 (Laplace); with ``compat=none`` the same pair gives ~0.
"""

import pytest

from auditkit import mechanisms
from auditkit.attacks.targeted.cepam import cepam_normalisation
from auditkit.attacks.verdicts import CONSISTENT, VIOLATED

TRIALS = 3_000
CEPAM_REFERENCE = {
    "cepam-gaussian": {"sigma": 1.0, "clip": 0.5, "n": 3},  # claims 4.38 at delta 1e-5
    "cepam-laplace": {"scale": 1.0, "clip": 0.5},  # claims 1
}


@pytest.mark.parametrize("name", ["cepam-gaussian", "cepam-laplace"])
def test_paper000_normalisation_reveals_the_norm_and_compat_none_does_not(name):
    normalised = mechanisms.create(name, compat="paper000", private_seed=3, **CEPAM_REFERENCE[name])
    result = cepam_normalisation(normalised, trials=TRIALS, seed=1)
    decoded, message = result.estimates
    assert result.verdict == VIOLATED
    assert decoded.epsilon_lower_bound > result.claimed_epsilon + 0.5  # within the claim's threat model
    assert message.epsilon_lower_bound == message.max_certifiable  # ||x|| in clear
    clipped = cepam_normalisation(mechanisms.create(name, private_seed=3, **CEPAM_REFERENCE[name]), trials=TRIALS)
    assert len(clipped.estimates) == 1 and clipped.verdict == CONSISTENT
