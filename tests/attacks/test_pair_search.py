"""Worst-pair search: the budget arithmetic, the choice, its soundness under the null, and its gain."""

import numpy as np
import pytest
import torch

from auditkit import mechanisms
from auditkit.attacks import audit_mechanism, audit_setting
from auditkit.attacks.audit_settings import setting_pairs
from auditkit.attacks.neighbouring_pairs import NeighbouringPair
from auditkit.attacks.pair_search import Relation, search_worst_pair


def _gaussian(seed: int) -> mechanisms.Mechanism:
    return mechanisms.create("gaussian", sigma=1.0, clip=0.5, private_seed=seed)  # true eps 4.38 at delta 1e-5


def test_the_pairs_share_one_budget_and_the_chosen_pair_gets_the_held_out_rest():
    m = _gaussian(0)
    pairs = setting_pairs(audit_setting(m))
    found = search_worst_pair(m, pairs, trials=10_000, confidence=0.95, delta=1e-5, claimed_eps=None, seed=1)
    assert len(found.candidates) == len(pairs) == 6
    predicted = [c.predicted_bound for c in found.candidates]
    assert found.chosen == int(np.argmax(predicted)) and found.estimate.pair is pairs[found.chosen]
    # 20% of 6 x 10^4 chooses: 1,000 outputs per candidate, 6,000 more for the chosen one; 48,000 held out
    assert all(c.selection_trials == 1_000 for c in found.candidates)
    assert (found.estimate.n0, found.estimate.n1, found.estimate.trials) == (24_000, 24_000, 60_000)
    assert found.candidates[pairs.index(next(p for p in pairs if p.label == "zero-vs-axis"))].predicted_bound < max(
        predicted)  # the half-shift pair is never the worst case of a Gaussian


def test_the_audit_judges_one_held_out_test_at_the_full_confidence():
    audit = audit_mechanism(_gaussian(0), trials=10_000, search=True, proposals=3, seed=2)
    assert audit.tests == 1 and audit.per_test_confidence == audit.confidence == 0.95
    assert audit.estimates == (audit.worst,) and audit.worst is audit.search.estimate
    # the mechanism's declared output density serves the likelihood ratio, as in distinguish
    assert set(audit.worst.selection_bounds) == {"projection", "llr", "classifier", "atoms", "histogram"}
    record = audit.to_dict()
    # the 6 pairs of the setting, then the 3 proposed near the best within its l2 ball
    assert record["search"]["chosen"] == audit.search.chosen and len(record["search"]["candidates"]) == 9
    assert [c["parent"] is None for c in record["search"]["candidates"]] == [True] * 6 + [False] * 3
    with pytest.raises(ValueError, match=r"tests must be an integer >= 1 \(one held-out test with search\)"):
        audit_mechanism(_gaussian(0), trials=10_000, search=True, tests=0)
    with pytest.raises(ValueError, match="leaves fewer than 10 held-out outputs"):
        audit_mechanism(_gaussian(0), trials=20, pairs=setting_pairs(audit_setting(_gaussian(0)))[:1], search=True,
                        selection=0.95)
    with pytest.raises(ValueError, match=r"selection must be a share in \[0.05, 0.95\]"):
        audit_mechanism(_gaussian(0), trials=10_000, search=True, selection=1.0)


def test_a_search_over_many_pairs_of_an_input_blind_mechanism_certifies_nothing_more_often_than_allowed():
    """Soundness: the outputs ignore the input (eps = 0 exactly), so a bound above 0 is a false alarm, allowed with
    probability <= 5% per audit, whichever of the 8 pairs or 4 proposals the search picked on its selection outputs
    and whichever refined test went on. 60 audits
    (fixed seeds): 3 expected at the worst, at most 6 accepted (P[Binomial(60, 0.05) > 6] = 0.04)."""
    def blind(x, seed):
        return torch.randn(x.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)

    rng = np.random.default_rng(0)
    pairs = [NeighbouringPair(f"p{i}", torch.tensor(rng.normal(size=2)), torch.tensor(rng.normal(size=2)))
             for i in range(8)]
    searches = [search_worst_pair(blind, pairs, trials=2_000, confidence=0.95, delta=0.0, claimed_eps=0.0,
                                  relation=Relation("l2", 10.0, 2), proposals=4, seed=seed) for seed in range(60)]
    # 4 proposals too: their choice costs no confidence
    assert all(len(s.candidates) == 12 for s in searches)
    assert sum(s.estimate.epsilon_lower_bound > 0 for s in searches) <= 6


def test_the_search_certifies_more_than_every_pair_tested_on_its_own():
    """Same budget (2 x 10^4 per pair, 6 pairs), 4 seeds: the search's bound beats the worst pair of the
    Bonferroni audit by more than 0.3 on average (measured: 0.57)."""
    gains = []
    for seed in range(4):
        searched = audit_mechanism(_gaussian(seed), trials=20_000, search=True, seed=seed)
        separate = audit_mechanism(_gaussian(seed), trials=20_000, search=False, seed=seed)
        gains.append(searched.worst.epsilon_lower_bound - separate.worst.epsilon_lower_bound)
    assert np.mean(gains) > 0.3, gains


def test_the_refined_test_with_the_larger_prediction_goes_on_to_the_held_out_test():
    """The chosen pair's candidate test, re-thresholded on fresh outputs, competes with the refit: the one with the
    larger predicted bound is the held-out test, and the record says which (over seeds, both happen)."""
    kept = []
    for seed in range(6):
        audit = audit_mechanism(_gaussian(seed), trials=10_000, search=True, seed=seed)
        r = audit.search.refinement
        assert r.kept_candidate_test == (r.kept_bound > r.refit_bound)
        statistic = audit.search.candidates[audit.search.chosen].statistic if r.kept_candidate_test \
            else r.refit_statistic
        assert audit.worst.statistic == statistic
        kept.append(r.kept_candidate_test)
    assert any(kept) and not all(kept), kept
