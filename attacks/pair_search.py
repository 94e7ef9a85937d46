"""Worst-pair search: one audit's whole budget spent where the claim is weakest, and the choice certified.

Without the search, ``auditkit.attacks.audit_mechanism`` gives each of its K neighbouring pairs ``trials`` outputs and
judges each at the Bonferroni confidence 1 - (1 - confidence)/K. With it (``search_worst_pair``), the pairs share
the same budget of K x trials outputs; a share ``selection`` of it chooses, the rest certifies:

1. candidates: each pair draws selection/2 x trials outputs (half per side) and chooses its test -- statistic,
   threshold, share of the confidence between the two error rates -- for the held-out size
   (``auditkit.attacks.distinguish.choose_test``), which predicts its bound;
2. refinement: the pair with the largest predicted bound draws the rest of the selection budget and chooses its
   test again on all its selection outputs (a threshold far in a tail needs many outputs to place);
3. held out: that pair draws the remaining K x trials x (1 - selection) outputs afresh and its test is applied
   once.

Only one held-out test is judged, so the confidence needs no factor K, and the certified pair gets about
(1 - selection) K times the held-out outputs one pair gets without the search. The held-out outputs play no
part in choosing the pair or the test, so the bound holds at ``confidence`` whatever the search did. This is
dp-auditorium's search over neighbouring inputs (which tests every candidate on the data it was chosen on),
made certified by the held-out step. The candidates' predicted bounds are reported, marked as not certified.

Measured (``benchmarks/bench_tightness.py``, 16 seeds): the half-noise example plugin (true eps 4.38, 6 pairs,
10^5 outputs per pair) is certified 2.93 on average (2.70 .. 3.11) with the search, against 2.47 (2.19 .. 2.74)
before it; a threshold test told the best threshold, on the 2.4 x 10^5 held-out outputs per side at their
expected rates, would certify 3.04.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from auditkit import mechanisms
from auditkit.attacks.bulk_sampling import BatchedMechanism, BulkSampler
from auditkit.attacks.distinguish import (
    MIN_TRIALS,
    SELECTION,
    ChosenTest,
    EpsilonEstimate,
    check_test_inputs,
    choose_test,
    held_out_estimate,
    resolve_claim_and_density,
)
from auditkit.attacks.distinguishing_statistics import STATISTICS
from auditkit.attacks.neighbouring_pairs import NeighbouringPair
from auditkit.mechanisms import LogDensity, Mechanism

__all__ = ["PairCandidate", "PairSearch", "search_worst_pair"]


@dataclass(frozen=True)
class PairCandidate:
    """One pair of the search: the test it chose on its selection outputs and the held-out bound it predicted."""

    pair: NeighbouringPair
    statistic: str
    predicted_bound: float
    selection_trials: int

    def to_dict(self) -> dict[str, Any]:
        return {"pair": self.pair.label, "statistic": self.statistic, "predicted_bound": self.predicted_bound,
                "selection_trials": self.selection_trials}


@dataclass(frozen=True)
class PairSearch:
    """Every candidate, the index of the chosen one, and the certified estimate of its held-out test."""

    candidates: tuple[PairCandidate, ...]
    chosen: int
    estimate: EpsilonEstimate

    def to_dict(self) -> dict[str, Any]:
        return {"candidates": [c.to_dict() for c in self.candidates], "chosen": self.chosen}


def _draw(sampler: BulkSampler, pair: NeighbouringPair, per_side: tuple[int, int], streams: tuple[int, int]) -> tuple:
    return tuple(sampler(x, n, stream).numpy() for x, n, stream in zip((pair.x0, pair.x1), per_side, streams))


def search_worst_pair(
    mechanism: Mechanism | BatchedMechanism,
    pairs: Sequence[NeighbouringPair],
    *,
    trials: int,
    confidence: float,
    delta: float,
    claimed_eps: float | None,
    statistics: Sequence[str] = STATISTICS,
    log_density: LogDensity | None = None,
    selection: float = SELECTION,
    seed: int = 0,
) -> PairSearch:
    """The search of the module docstring over ``pairs`` with a budget of ``trials`` outputs per pair.

    mechanism: a ``Mechanism`` or batched callable; its declared output density serves the likelihood ratio unless
    ``log_density`` is given (as in ``auditkit.attacks.distinguish``); the claim compared with is ``claimed_eps``. Pair i
    is sampled with seed ``derive_seed(seed, "pair", i)``: streams 0 and 1 for its candidate outputs, 2 and 3 for
    the chosen pair's refinement, 4 and 5 for its held-out outputs.
    """
    check_test_inputs(trials, confidence, delta, claimed_eps, statistics, selection)
    mechanism, _, log_density = resolve_claim_and_density(mechanism, claimed_eps, log_density, statistics, seed)
    start = time.perf_counter()
    budget = len(pairs) * trials
    per_pair = max(4, round(trials * selection / 2))
    refine = max(4, round(budget * selection) - len(pairs) * per_pair)
    held_total = budget - len(pairs) * per_pair - refine
    if held_total < MIN_TRIALS // 2:
        raise ValueError(f"trials = {trials} leaves fewer than {MIN_TRIALS // 2} held-out outputs after a selection "
                         f"share of {selection}: give more trials or a smaller selection")
    halves = lambda n: (n // 2, n - n // 2)  # noqa: E731
    samplers = [BulkSampler(mechanism, seed=mechanisms.derive_seed(seed, "pair", i)) for i in range(len(pairs))]
    choose = lambda pair, y0, y1: choose_test(  # noqa: E731
        y0, y1, pair.x0.numpy(), pair.x1.numpy(), held_out=halves(held_total), confidence=confidence, delta=delta,
        statistics=statistics, log_density=log_density, seed=seed)
    candidates, selected = [], []
    for pair, sampler in zip(pairs, samplers):
        y0, y1 = _draw(sampler, pair, halves(per_pair), (0, 1))
        test: ChosenTest = choose(pair, y0, y1)
        selected.append((y0, y1))
        candidates.append(PairCandidate(pair, test.statistic, test.predicted_bound, per_pair))
    chosen = max(range(len(pairs)), key=lambda i: candidates[i].predicted_bound)  # the first wins a tie
    # the chosen pair re-chooses its test on more outputs (streams 2, 3): a threshold for the held-out size
    more0, more1 = _draw(samplers[chosen], pairs[chosen], halves(refine), (2, 3))
    y0, y1 = selected[chosen]
    test = choose(pairs[chosen], np.concatenate([y0, more0]), np.concatenate([y1, more1]))
    sampling_start = time.perf_counter()
    h0, h1 = _draw(samplers[chosen], pairs[chosen], halves(held_total), (4, 5))
    estimate = held_out_estimate(
        test, h0, h1, pair=pairs[chosen], trials=budget, confidence=confidence, delta=delta,
        claimed_eps=claimed_eps, sampler=samplers[chosen], start=start,
        sampling_seconds=time.perf_counter() - sampling_start,
    )
    return PairSearch(tuple(candidates), chosen, estimate)

