"""Worst-pair search: one audit's whole budget spent where the claim is weakest, and the choice certified.

Without the search, ``auditkit.attacks.audit_mechanism`` gives each of its K neighbouring pairs ``trials`` outputs and
judges each at the Bonferroni confidence 1 - (1 - confidence)/K. With it (``search_worst_pair``), the pairs share
the same budget of K x trials outputs; a share ``selection`` of it chooses, the rest certifies:

1. candidates: each pair draws selection/2 x trials outputs (half per side) and chooses its test -- statistic,
   threshold, share of the confidence between the two error rates -- for the held-out size
   (``auditkit.attacks.distinguish.choose_test``), which predicts its bound;
2. optimisation (given the relation the pairs come from, ``Relation``, and ``proposals`` > 0; off by default,
   measured to cost more than it found): ``proposals`` more pairs, each as costly as a candidate, in ``ROUNDS``
   rounds of a (1 + lambda) evolution strategy: each round proposes pairs near the best so far
   (``auditkit.attacks.neighbouring_pairs.nearby_pairs``, keyed by ``derive_seed(seed, "proposal", round)``),
   at a step halved every round, and keeps the best predicted bound; dp-auditorium's black-box search over
   neighbouring datasets, within the claim's relation;
3. refinement: the pair with the largest predicted bound draws the rest of the selection budget (what the
   proposals left). Two tests compete: every statistic re-fitted on all its selection outputs, and every statistic
   as the candidate fitted it, its threshold re-chosen on the fresh refinement outputs alone -- so a strong
   candidate is never dropped for a re-fit that happens to be weaker; ``Refinement`` records both predictions and
   which was kept;
4. held out: that pair draws the remaining outputs afresh and its test is applied once.

Only one held-out test is judged, so the confidence needs no factor for the K candidates or the proposals: their
cost is paid in outputs (the proposals come out of the refinement's share), not in confidence. The held-out
outputs play no part in choosing the pair or the test, so the bound holds at ``confidence`` whatever the search
did. The candidates' predicted bounds are reported, marked as not certified.

Measured (``benchmarks/bench_tightness.py``, 16 seeds): the half-noise example plugin (true eps 4.38, 6 pairs,
10^5 outputs per pair) is certified 2.93 on average (2.70 .. 3.11) with the search, against 2.47 (2.19 .. 2.74)
before it; a threshold test told the best threshold, on the 2.4 x 10^5 held-out outputs per side at their
expected rates, would certify 3.04.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
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
    rethreshold,
)
from auditkit.attacks.distinguishing_statistics import STATISTICS
from auditkit.attacks.neighbouring_pairs import NeighbouringPair, nearby_pairs
from auditkit.mechanisms import LogDensity, Mechanism

__all__ = ["ROUNDS", "PairCandidate", "PairSearch", "Refinement", "Relation", "search_worst_pair"]


ROUNDS = 2  # of the optimisation; the step halves each round


@dataclass(frozen=True)
class Relation:
    """The neighbouring relation the search's proposals stay in: pairs inside the ``norm`` ball of ``radius``,
    differing in the first ``block`` coordinates (``auditkit.mechanisms.AuditSetting``'s terms)."""

    norm: str
    radius: float
    block: int


@dataclass(frozen=True)
class PairCandidate:
    """One pair of the search: the test it chose on its selection outputs and the held-out bound it predicted;
    ``parent``: the pair it was proposed near (None for a given pair)."""

    pair: NeighbouringPair
    statistic: str
    predicted_bound: float
    selection_trials: int
    parent: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"pair": self.pair.label, "statistic": self.statistic, "predicted_bound": self.predicted_bound,
                "selection_trials": self.selection_trials, "parent": self.parent}


@dataclass(frozen=True)
class Refinement:
    """Step 3 of the module docstring: the bound predicted by every statistic re-fitted on all the chosen pair's
    selection outputs (``refit_bound``, its statistic ``refit_statistic``) and by the candidate's own test
    re-thresholded on the fresh refinement outputs (``kept_bound``); ``kept_candidate_test``: whether the
    candidate's own test went on to the held-out test (its prediction was the larger)."""

    refit_statistic: str
    refit_bound: float
    kept_bound: float
    kept_candidate_test: bool

    def to_dict(self) -> dict[str, Any]:
        return {"refit_statistic": self.refit_statistic, "refit_bound": self.refit_bound,
                "kept_bound": self.kept_bound, "kept_candidate_test": self.kept_candidate_test}


@dataclass(frozen=True)
class PairSearch:
    """Every candidate (given pairs first, then proposals), the index of the chosen one, the refinement, and the
    certified estimate of its held-out test."""

    candidates: tuple[PairCandidate, ...]
    chosen: int
    estimate: EpsilonEstimate
    refinement: Refinement | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"candidates": [c.to_dict() for c in self.candidates], "chosen": self.chosen,
                "refinement": None if self.refinement is None else self.refinement.to_dict()}


def _draw(sampler: BulkSampler, pair: NeighbouringPair, per_side: tuple[int, int], streams: tuple[int, int]) -> tuple:
    return tuple(sampler(x, n, stream).numpy() for x, n, stream in zip((pair.x0, pair.x1), per_side, streams))


def _halves(n: int) -> tuple[int, int]:
    return n // 2, n - n // 2


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
    relation: Relation | None = None,
    proposals: int = 0,
    seed: int = 0,
) -> PairSearch:
    """The search of the module docstring over ``pairs`` with a budget of ``trials`` outputs per pair.

    mechanism: a ``Mechanism`` or batched callable; its declared output density serves the likelihood ratio unless
    ``log_density`` is given (as in ``auditkit.attacks.distinguish``); the claim compared with is ``claimed_eps``.
    relation:  where proposals may go (None: no optimisation); proposals: how many (default none: measured, they
    cost more than they found, docs/methodology/distinguishing.md; at most what half the refinement's share pays
    for). Pair i is sampled with seed ``derive_seed(seed, "pair", i)``
    (proposals continue the numbering): streams 0 and 1 for its candidate outputs, 2 and 3 for the chosen pair's
    refinement, 4 and 5 for its held-out outputs.
    """
    check_test_inputs(trials, confidence, delta, claimed_eps, statistics, selection)
    if isinstance(proposals, bool) or not isinstance(proposals, int) or proposals < 0:
        raise ValueError(f"proposals must be an integer >= 0, got {proposals!r}")
    mechanism, _, log_density = resolve_claim_and_density(mechanism, claimed_eps, log_density, statistics, seed)
    start = time.perf_counter()
    budget = len(pairs) * trials
    per_pair = max(4, round(trials * selection / 2))
    spare = max(4, round(budget * selection) - len(pairs) * per_pair)
    affordable = (spare // 2) // per_pair if relation is not None else 0
    proposals = min(proposals, affordable)
    held_total = budget - len(pairs) * per_pair - spare
    if held_total < MIN_TRIALS // 2:
        raise ValueError(f"trials = {trials} leaves fewer than {MIN_TRIALS // 2} held-out outputs after a selection "
                         f"share of {selection}: give more trials or a smaller selection")

    def choose(pair: NeighbouringPair, y0: np.ndarray, y1: np.ndarray) -> ChosenTest:
        return choose_test(y0, y1, pair.x0.numpy(), pair.x1.numpy(), held_out=_halves(held_total),
                           confidence=confidence, delta=delta, statistics=statistics, log_density=log_density,
                           seed=seed)

    samplers: list[BulkSampler] = []
    candidates: list[PairCandidate] = []
    tests: list[ChosenTest] = []
    selected: list[tuple[np.ndarray, np.ndarray]] = []

    def try_pair(pair: NeighbouringPair, parent: str | None) -> None:
        sampler = BulkSampler(mechanism, seed=mechanisms.derive_seed(seed, "pair", len(samplers)))
        y0, y1 = _draw(sampler, pair, _halves(per_pair), (0, 1))
        test = choose(pair, y0, y1)
        samplers.append(sampler)
        selected.append((y0, y1))
        tests.append(test)
        candidates.append(PairCandidate(pair, test.statistic, test.predicted_bound, per_pair, parent))

    for pair in pairs:
        try_pair(pair, None)
    _optimise(candidates, try_pair, relation, proposals, seed)
    chosen = max(range(len(candidates)), key=lambda i: candidates[i].predicted_bound)  # the first wins a tie
    pair = candidates[chosen].pair
    refine = spare - (len(candidates) - len(pairs)) * per_pair  # what the proposals left (none near beyond-clip)
    more0, more1 = _draw(samplers[chosen], pair, _halves(refine), (2, 3))
    y0, y1 = selected[chosen]
    refit = choose(pair, np.concatenate([y0, more0]), np.concatenate([y1, more1]))
    kept = rethreshold(tests[chosen], more0, more1, held_out=_halves(held_total), confidence=confidence, delta=delta)
    test = kept if kept.predicted_bound > refit.predicted_bound else refit
    sampling_start = time.perf_counter()
    h0, h1 = _draw(samplers[chosen], pair, _halves(held_total), (4, 5))
    estimate = held_out_estimate(
        test, h0, h1, pair=pair, trials=budget, confidence=confidence, delta=delta,
        claimed_eps=claimed_eps, sampler=samplers[chosen], start=start,
        sampling_seconds=time.perf_counter() - sampling_start,
    )
    refinement = Refinement(refit.statistic, refit.predicted_bound, kept.predicted_bound, test is kept)
    return PairSearch(tuple(candidates), chosen, estimate, refinement)


def _optimise(candidates: list[PairCandidate], try_pair: Callable[[NeighbouringPair, str | None], None],
              relation: Relation | None, proposals: int, seed: int) -> None:
    """Step 2 of the module docstring: ``proposals`` pairs near the best candidate so far, over ``ROUNDS`` rounds."""
    if relation is None or proposals == 0:
        return
    given = len(candidates)
    per_round = [proposals // ROUNDS + (r < proposals % ROUNDS) for r in range(ROUNDS)]
    for r, count in enumerate(per_round):
        best = max(candidates, key=lambda c: c.predicted_bound)
        rng = np.random.default_rng(mechanisms.derive_seed(seed, "proposal", r))
        for pair in nearby_pairs(best.pair, count, norm=relation.norm, radius=relation.radius, block=relation.block,
                                 step=0.5**r, rng=rng):
            # "<given pair>~<n>": the n-th proposal of the search, near the pair it names first
            label = f"{pair.label.split('~')[0]}~{len(candidates) - given + 1}"
            try_pair(NeighbouringPair(label, pair.x0, pair.x1), best.pair.label)
