"""One mechanism's privacy, as its paper states it and over T rounds of FL.

`account` gathers, for a configured mechanism:

* ``per_round`` — the mechanism's own one-round claim (``mechanism.guarantee()``: client-level,
  the whole update is the unit);
* ``paper_claim`` — the paper's record-level FL claim, where a paper makes one (a function registered for the
  mechanism with ``@paper_claim("name", options=...)``, which declares the FL settings it reads; CEPAM: 003
  Theorem 12 / 13, ``auditkit.accounting.cepam``) when the FL settings it needs are given;
* ``composed`` — the client-level claim over `rounds` rounds: the mechanism's one-round event
  (``mechanism.dp_event()``) composed by an existing accountant (``auditkit.accounting.composition``), or
  ``refusal``, the reason no sound number exists;
* ``sampling`` — how client participation entered ``composed``: amplified (``PoissonSampledDpEvent(q, event)``
  per round) only where the mechanism's claim covers it (``client_sampling``: the server adds the noise to a sum,
  so who took part stays hidden, DP-FedAvg); a local mechanism's server sees who sent what, so its rounds compose
  unamplified whatever the participation;
* ``composed_actual`` — for a claim flagged "claim-exceeded" (JoPEQ's moment-matched noise, a t pair
  set by hand): the realised noise's pure epsilon (``mechanism.true_epsilon()``) over `rounds` rounds, beside
  the claim's;
* ``check`` — ``composed`` recomputed from the run (``check_sampling``): client sampling is the run's, so a
  one-round event that is already Poisson-sampled (an accountant that assumes a sampling rate of its own, whatever
  the run's participation) is stripped of it, amplified only by the run's participation where the claim covers
  it, and composed over the same rounds; "violated" when the claim's composed epsilon is below that.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import dp_accounting

from auditkit import mechanisms
from auditkit.accounting.composition import ComposedEpsilon, UnsupportedEvent, compose
from auditkit.attacks.verdicts import Verdict
from auditkit.mechanisms import Param, PrivacyGuarantee

__all__ = ["AccountReport", "AccountingCheck", "Sampling", "check_sampling", "client_sampling", "ClaimEntry",
           "FLOptions", "Solver", "account", "claim_options", "claim_solver", "paper_claim", "paper_claim_for",
           "solvers"]

CLAIM_EXCEEDED = "claim-exceeded"
UNDERSTATED_TOLERANCE = 1e-6  # a composed epsilon this far (relative) below its recomputation is understated


FLOptions = Mapping[str, Any]
"""The FL settings a paper's record-level claim needs, by the names its registration declares (``options``);
a setting not given is absent."""

PaperClaim = Callable[[mechanisms.Mechanism, FLOptions], PrivacyGuarantee | None]
"""claim(mechanism, fl) -> the paper's FL claim, or None when ``fl`` lacks what it needs."""


@dataclass(frozen=True)
class ClaimEntry:
    """A registered paper claim and the FL settings it reads (``Param`` specs; ``auditkit account`` has one option
    per name, generated from them)."""

    claim: PaperClaim
    options: tuple[Param, ...]


@dataclass(frozen=True)
class Solver:
    """``auditkit account --solve NAME``: ``solve(mechanism, params, target_eps, target_delta, fl)`` returns the
    line to print (the parameter that meets the target); ``mechanisms`` it applies to (empty: any)."""

    name: str
    solve: Callable[[str, Mapping[str, Any], float, float | None, FLOptions], str]
    mechanisms: tuple[str, ...]
    help: str


_PAPER_CLAIMS: dict[str, ClaimEntry] = {}
_SOLVERS: dict[str, Solver] = {}


def paper_claim(*mechanism_names: str, options: tuple[Param, ...] = ()) -> Callable[[PaperClaim], PaperClaim]:
    """Decorator registering the function that states a paper's FL claim for the mechanisms named, with the FL
    settings it reads (``options``)."""

    def register(claim: PaperClaim) -> PaperClaim:
        for name in mechanism_names:
            _PAPER_CLAIMS[name] = ClaimEntry(claim, tuple(options))
        return claim

    return register


def paper_claim_for(name: str) -> PaperClaim | None:
    """The paper-claim function registered for mechanism ``name``, or None."""
    entry = _PAPER_CLAIMS.get(name)
    return None if entry is None else entry.claim


def claim_options() -> list[Param]:
    """Every FL setting any registered paper claim reads, once per name, sorted by name."""
    by_name: dict[str, Param] = {}
    for entry in _PAPER_CLAIMS.values():
        for spec in entry.options:
            by_name.setdefault(spec.name, spec)
    return [by_name[name] for name in sorted(by_name)]


def claim_solver(name: str, *, mechanisms: tuple[str, ...] = (), help: str) -> Callable[[Callable], Callable]:
    """Decorator registering ``solve`` as ``auditkit account --solve NAME`` (see ``Solver``)."""

    def register(solve: Callable) -> Callable:
        _SOLVERS[name] = Solver(name, solve, tuple(mechanisms), help)
        return solve

    return register


def solvers() -> dict[str, Solver]:
    """The registered solvers by name, in registration order."""
    return dict(_SOLVERS)


@dataclass(frozen=True)
class Sampling:
    """How the rounds' client participation entered the composition: ``participation`` and its Poisson
    ``sample_rate`` (None otherwise), whether the rounds were ``amplified`` by it, and why (``note``)."""

    participation: str
    sample_rate: float | None
    amplified: bool
    note: str


@dataclass(frozen=True)
class AccountingCheck:
    """The claim's composed epsilon against its recomputation from the run (``check_sampling``): ``verdict``
    "violated" (the composed epsilon is below ``independent_epsilon``: the claim's accounting understates it) or
    "consistent", the words of a test's verdict; ``reason`` says why, in one line."""

    verdict: Verdict
    independent_epsilon: float
    reason: str


@dataclass(frozen=True)
class AccountReport:
    mechanism: str
    per_round: PrivacyGuarantee
    paper_claim: PrivacyGuarantee | None
    composed: ComposedEpsilon | None
    refusal: str | None
    composed_actual: ComposedEpsilon | None = None
    sampling: Sampling | None = None
    check: AccountingCheck | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "per_round": self.per_round.to_dict(),
            "paper_claim": None if self.paper_claim is None else self.paper_claim.to_dict(),
            "composed": _composed_dict(self.composed),
            "refusal": self.refusal,
            "composed_actual": _composed_dict(self.composed_actual),
            "sampling": None if self.sampling is None else vars(self.sampling),
            "check": None if self.check is None else vars(self.check),
        }


def _composed_dict(composed: ComposedEpsilon | None) -> dict[str, Any] | None:
    """``composed`` as JSON types (its fallbacks a list of their names); None stays None."""
    return None if composed is None else {**vars(composed), "fallbacks": [str(f) for f in composed.fallbacks]}


def client_sampling(mechanism: mechanisms.Mechanism, participation: str, sample_rate: float | None) -> Sampling:
    """How ``participation`` (``auditkit.fl.sampling.PARTICIPATION``) enters ``mechanism``'s composed claim.

    Amplified only where the mechanism's claim covers the participation (``client_sampling`` capability) and it is
    Poisson sampling of rate q, the sampling the accountants amplify. ``ValueError`` (one line) for a mechanism
    that claims sampling but not this participation, or for Poisson participation without a rate in (0, 1].
    """
    if participation == "poisson" and sample_rate is None:
        raise ValueError("participation 'poisson' needs sample_rate, a number in (0, 1]")
    if participation == "poisson" and not 0 < sample_rate <= 1:
        raise ValueError(f"sample_rate must be in (0, 1] with participation 'poisson', got {sample_rate}")
    covered = mechanisms.capability(mechanism, "client_sampling")
    rate = sample_rate if participation == "poisson" else None
    if not covered:
        return Sampling(participation, rate, False, "no amplification by client sampling: the server sees who "
                                                     "sent what, so every round composes whoever took part")
    if participation not in covered:
        raise ValueError(f"{mechanism.name}'s claim covers participation {' or '.join(map(repr, covered))}; "
                         f"{participation!r} has no sampling claim")
    if participation == "poisson" and sample_rate < 1:
        return Sampling(participation, rate, True, f"each round Poisson-samples clients with q = {sample_rate:g} "
                                                   "and the server noises their sum: amplified by sampling")
    return Sampling(participation, rate, False, "every client takes part in every round: nothing to amplify")


def check_sampling(event: dp_accounting.DpEvent, composed: ComposedEpsilon, sampling: Sampling, *,
                   relation: dp_accounting.NeighboringRelation, accountant: str) -> AccountingCheck:
    """``composed`` (T rounds of the mechanism's one-round ``event``, amplified as ``sampling`` says) recomputed
    from the run: client sampling is the run's participation, which ``account`` applies where the claim covers it
    (``client_sampling``), so the round event R is ``event`` stripped of any ``PoissonSampledDpEvent(q', .)`` of
    its own, and the recomputation composes ``PoissonSampledDpEvent(q, R)`` (the run's q, where amplified) or R
    over the same T rounds, at the same delta, relation and ``accountant``.

    An event without sampling of its own is its own round event: the recomputation is ``composed`` itself
    ("consistent"). With sampling of its own, the accountant assumed a rate q' whatever the run did (full
    participation, or another q): "violated" when ``composed`` is below the recomputation by more than the
    relative ``UNDERSTATED_TOLERANCE``, e.g. z = 1 over 100 rounds at delta 1e-5: q' = 1e-3 composes to eps 0.065,
    the run's full participation to 91.8 (opacus-prv)."""
    own_rates = []
    round_event = event
    while isinstance(round_event, dp_accounting.PoissonSampledDpEvent):
        own_rates.append(round_event.sampling_probability)
        round_event = round_event.event
    if not own_rates:
        return AccountingCheck(Verdict.CONSISTENT, composed.epsilon, "the one-round event samples no clients of its own: "
                                                               "only the run's participation amplifies it")
    run_event = (dp_accounting.PoissonSampledDpEvent(sampling.sample_rate, round_event) if sampling.amplified
                 else round_event)
    independent = compose(run_event, composed.rounds, delta=composed.delta, relation=relation, accountant=accountant)
    run = f"participation {sampling.participation!r}" + (
        "" if sampling.sample_rate is None else f" at q = {sampling.sample_rate:g}")
    amplified = "amplified by it" if sampling.amplified else "not amplified"
    own = f"its one-round event is Poisson-sampled at q' = {', '.join(f'{q:g}' for q in own_rates)} of its own"
    recomputed = (f"recomputed from the run ({run}, {amplified}) over {composed.rounds} rounds: "
                  f"eps = {independent.epsilon:.4g}")
    if composed.epsilon < independent.epsilon * (1 - UNDERSTATED_TOLERANCE):
        return AccountingCheck(Verdict.VIOLATED, independent.epsilon,
                               f"the accountant ignores the run's client sampling: {own}; {recomputed}, "
                               f"not {composed.epsilon:.4g}")
    return AccountingCheck(Verdict.CONSISTENT, independent.epsilon,
                           f"{own}; {recomputed}, at most the claim's {composed.epsilon:.4g}")


def account(
    mechanism: mechanisms.Mechanism,
    *,
    rounds: int = 1,
    composition_delta: float = 1e-5,
    accountant: str = "opacus-prv",
    fl: FLOptions | None = None,
    participation: str = "full",
    sample_rate: float | None = None,
) -> AccountReport:
    """Account a configured mechanism (see the module docstring); `composition_delta` is the delta at which the
    composed epsilon is stated; ``participation`` and ``sample_rate`` are the rounds' client sampling
    (``client_sampling``)."""
    per_round = mechanism.guarantee()
    sampling = client_sampling(mechanism, participation, sample_rate)
    claim = paper_claim_for(mechanism.name)
    paper = None if claim is None or fl is None else claim(mechanism, fl)
    own_event = mechanisms.capability(mechanism, "dp_event")
    event = dp_accounting.PoissonSampledDpEvent(sampling.sample_rate, own_event) if sampling.amplified else own_event
    composed, refusal, check = None, None, None
    try:
        composed = compose(event, rounds, delta=composition_delta, relation=per_round.relation, accountant=accountant)
    except UnsupportedEvent as err:
        refusal = str(err)
    if composed is not None:
        check = check_sampling(own_event, composed, sampling, relation=per_round.relation, accountant=accountant)
    return AccountReport(mechanism.name, per_round, paper, composed, refusal, _compose_actual(mechanism, rounds),
                         sampling, check)


def _compose_actual(mechanism: mechanisms.Mechanism, rounds: int) -> ComposedEpsilon | None:
    """T rounds of the realised noise's pure epsilon, for a claim its own noise exceeds (else None)."""
    if CLAIM_EXCEEDED not in mechanism.guarantee().flags:
        return None
    actual = mechanisms.capability(mechanism, "true_epsilon")
    if actual is None:
        return None
    event = mechanisms.pure_epsilon_event(actual)
    return compose(event, rounds, delta=0.0, relation=mechanism.guarantee().relation, accountant="dp_accounting-pld")
