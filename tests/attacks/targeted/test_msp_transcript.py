"""MSP-FL's transcript (``auditkit.attacks.targeted.msp_transcript``), at 3,000 trials per view: MSP+Lap's alpha_0 alone
stays below eps_dp = 1, the transcript's reconstruction reaches the cap.
"""

import pytest

from auditkit import mechanisms
from auditkit.attacks.targeted.msp_transcript import msp_transcript
from auditkit.attacks.verdicts import NO_CLAIM, VIOLATED

TRIALS = 3_000


def test_msp_transcript_cancels_the_laplace_noise_of_alpha_0():
    result = msp_transcript(mechanisms.create("msp-laplace", eps=1.0, private_seed=0), trials=TRIALS, seed=0)
    alpha0, transcript = result.estimates
    assert alpha0.epsilon_lower_bound < 1.0  # Proposition 1 holds for the first upload alone
    assert transcript.epsilon_lower_bound > 0.95 * transcript.max_certifiable > 1.0  # perfect test on the transcript
    assert result.verdict == VIOLATED
    assert msp_transcript("msp", trials=200, seed=0).verdict == NO_CLAIM  # MSP-FL states no epsilon
    with pytest.raises(ValueError, match="consensus_rounds >= 2"):
        msp_transcript(mechanisms.create("msp", consensus_rounds=1), trials=200)
