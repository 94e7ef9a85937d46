"""DP-SQ's cell-local claim (``auditkit.attacks.targeted.dpsq``), at 3,000 trials per pair: at eps1 = 1 the in-cell pair
stays below 1 (consistent) while the range ends, with disjoint output supports, reach the cap (5.1 > 1): "claim
holds only cell-locally"; b = 1 has one cell and stays consistent.
"""

import pytest

from auditkit import mechanisms
from auditkit.attacks.targeted.dpsq import dpsq_cross_cell
from auditkit.attacks.verdicts import CELL_LOCAL_ONLY, CONSISTENT

TRIALS = 3_000


@pytest.mark.parametrize(("name", "params"), [("dpsq", {"eps": 1.0}), ("laplace-sq", {"eps": 1.0, "rho": 20 / 15})])
def test_dpsq_claim_holds_in_one_cell_only(name, params):
    m = mechanisms.create(name, private_seed=0, **params)
    result = dpsq_cross_cell(m, trials=TRIALS, seed=0)
    in_cell, _, ends = result.estimates
    assert in_cell.epsilon_lower_bound < 1.0 < ends.epsilon_lower_bound  # the claim's pair vs the range ends
    assert ends.epsilon_lower_bound > 4.0  # far above eps1: disjoint supports (dpsq), eps1 2C/rho = 15 (LSQ)
    assert result.verdict == CELL_LOCAL_ONLY


@pytest.mark.parametrize(("name", "params"), [("dpsq", {"eps": 1.0, "bits": 1}), ("laplace-sq", {"eps": 1.0})])
def test_dpsq_claim_over_the_whole_range_is_consistent(name, params):
    result = dpsq_cross_cell(mechanisms.create(name, private_seed=0, **params), trials=TRIALS, seed=0)
    assert result.verdict == CONSISTENT and result.epsilon_lower_bound < 1.0  # b = 1 / rho = 2C: no cross-cell gap
