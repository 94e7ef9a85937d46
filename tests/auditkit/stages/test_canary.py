"""Canary audits inside FL, on the embedded quickstart run (mnist-5k, MLP, 10 clients) cut to 1-2 rounds.

One run: with ``none`` every canary is scored exactly +1 (in) or -1 (out), so all 200 guesses are right and
the bound is the cap 3.81 for m = 200 (Bonferroni over the grid 200, 100, 50, 25, delta 0). The Gaussian
mechanism with clip 0.1, sigma 0.4 claims eps = 1.99 per round (shift 0.2 = sigma / 2, delta 1e-5); its
canaries' scores are N(+-1, 4^2): the bound stays below the claim on every seed ("consistent": 400 canaries
could certify 4.4), typically far below (1 in ~300 seeds gets its top 25 guesses all right, as seed 0 does here). Repeated training: with ``none`` the canary client's decoded update separates D from D'
perfectly, 40 trials certify their cap 0.81.
"""

import dataclasses
import json

import pytest
import torch

from auditkit.attacks.epsilon_bounds import one_run_epsilon_lower_bound
from auditkit.attacks.verdicts import CONSISTENT, NO_CLAIM, VIOLATED
from auditkit.stages.canary import guess_grid, one_run_canary_audit, repeated_training_audit
from auditkit.config import from_dict, merge, preset_dict

GAUSSIAN = {"name": "gaussian", "sigma": 0.4, "clip": 0.1}  # eps 1.99 per round at delta 1e-5


def quickstart(mechanism=None, seed=0, **training):
    overrides = {"seed": seed, "device": "cpu", "training": {"checkpoints": [1], **training}}
    if mechanism is not None:
        overrides["mechanism"] = mechanism
    return from_dict(merge(preset_dict("quickstart", mechanisms=False), overrides))


def test_none_gives_a_nontrivial_bound_with_every_guess_right():
    audit = one_run_canary_audit(quickstart(), canaries=200, rounds=2)
    assert audit.grid == (200, 100, 50, 25) and audit.per_guess_confidence == pytest.approx(1 - 0.05 / 4)
    assert audit.guesses == audit.correct == 200 and audit.canaries_per_round == 100
    assert audit.epsilon_lower_bound == audit.max_certifiable > 3.5
    assert audit.verdict == NO_CLAIM and audit.claimed_epsilon is None and audit.delta == 0.0
    assert sorted(set(audit.scores)) == pytest.approx([-1.0, 1.0])  # decoded exactly: <+-c, c> / ||c||^2
    record = json.loads(json.dumps(audit.to_dict()))
    assert record["bounds"]["200"] == audit.epsilon_lower_bound and "scores" not in record


def test_a_dp_mechanism_is_never_violated_over_seeds():
    bounds, scores, signs = [], [], []
    for seed in range(3):
        audit = one_run_canary_audit(quickstart(GAUSSIAN, seed=seed), canaries=400, rounds=2)
        assert audit.claimed_epsilon == pytest.approx(1.99, abs=0.01) and audit.delta == 1e-5
        assert audit.verdict == CONSISTENT != VIOLATED, seed
        assert audit.epsilon_lower_bound < audit.claimed_epsilon < audit.max_certifiable - 2
        bounds.append(audit.epsilon_lower_bound)
        scores += audit.scores
        signs += [1.0 if bit else -1.0 for bit in audit.inserted]
    assert sorted(bounds)[1] < 1.0  # the median seed: far below the claim
    # the scores are +-1 + N(0, 4^2) (1200 of them: mean within 3 standard errors, sd within ~4)
    residual = torch.tensor(scores, dtype=torch.float64) - torch.tensor(signs, dtype=torch.float64)
    assert abs(float(residual.mean())) < 0.35 and 3.7 < float(residual.std()) < 4.3


def test_same_seed_same_result_and_a_fixed_k_needs_no_correction():
    first = one_run_canary_audit(quickstart(), canaries=60, rounds=1, guesses=60, pair="add")
    again = one_run_canary_audit(quickstart(), canaries=60, rounds=1, guesses=60, pair="add")
    assert dataclasses.replace(first, seconds=0) == dataclasses.replace(again, seconds=0)
    assert first.grid == (60,) and first.per_guess_confidence == 0.95 and first.correct == 60
    assert first.epsilon_lower_bound == one_run_epsilon_lower_bound(60, 60, 60, confidence=0.95)
    assert sorted(set(first.scores)) == pytest.approx([0.0, 1.0])  # "add": the zero update when out
    other = one_run_canary_audit(quickstart(seed=1), canaries=60, rounds=1, guesses=60, pair="add")
    assert other.inserted != first.inserted


def test_guess_grid_halves_down_to_twenty():
    assert guess_grid(1000) == [1000, 500, 250, 125, 62, 31]
    assert guess_grid(39) == [39] and guess_grid(1) == [1]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"canaries": 0}, "canaries must be an integer >= 1, got 0"),
        ({"canaries": 10, "guesses": 11}, r"guesses must be an integer in 1\.\.10, got 11"),
        ({"confidence": 1.5}, r"confidence must be in \(0, 1\), got 1.5"),
        ({"confidence": 0.0}, r"confidence must be in \(0, 1\)"),
        ({"rounds": 0}, "rounds must be an integer >= 1"),
        ({"pair": "swap"}, "pair must be one of replace, add"),
        ({"canary_norm": -1.0}, "canary_norm must be None or a finite number > 0"),
        ({"delta": 1.0}, r"delta must be None or in \[0, 1\)"),
    ],
)
def test_bad_input_is_a_one_line_error_naming_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        one_run_canary_audit(quickstart(), **kwargs)
    assert "\n" not in str(info.value)


def test_repeated_training_separates_the_canary_client_for_none_and_not_beyond_a_claim():
    small = {"model": "linear", "rounds": 2, "tau": 5}
    none = repeated_training_audit(quickstart(**small), trials=40, view="server")
    assert none.estimate.fp == none.estimate.fn == 0
    assert none.epsilon_lower_bound == none.estimate.max_certifiable > 0.8 and none.verdict == NO_CLAIM
    dp = repeated_training_audit(quickstart(GAUSSIAN, **small), trials=40, view="public")
    assert dp.verdict != VIOLATED and dp.canary_round == 2 and dp.claimed_epsilon == pytest.approx(1.99, abs=0.01)
    assert json.loads(json.dumps(dp.to_dict()))["view"] == "public"
    with pytest.raises(ValueError, match="view must be one of public, server"):
        repeated_training_audit(quickstart(**small), trials=40, view="peer")
    with pytest.raises(ValueError, match=r"canary_round must be an integer in 1\.\.2, got 3"):
        repeated_training_audit(quickstart(**small), trials=40, canary_round=3)
