"""Privacy over T rounds: a mechanism's one-round ``dp_accounting`` event composed by an existing accountant.

``compose(event, rounds, ...)`` asks the chosen accountant (Opacus PRV / RDP, ``dp_accounting`` PLD / RDP) for
``SelfComposedDpEvent(event, rounds)`` under the claim's relation and names the accountant; an event no accountant
supports raises ``UnsupportedEvent`` with its reason. Events follow dp_accounting's convention: a noise multiplier
is the noise scale over ``clip``, and ``REPLACE_ONE`` inputs may differ by 2 clip. Library gaps bridged exactly:

* an unsampled ``REPLACE_ONE`` Gaussian / Laplace round with multiplier z is composed as ``ADD_OR_REMOVE_ONE`` with
  z / 2 (Opacus takes only add/remove; dp_accounting's RDP does not double the sensitivity, issue #378);
* T pure-eps rounds (``RandomizedResponseDpEvent``) are a ``ComposedDpEvent`` of T copies (dp_accounting 0.6's
  PLD ignores a ``SelfComposedDpEvent``'s count);
* Poisson-sampled Gaussian rounds: ``ADD_OR_REMOVE_ONE`` only; nested sampling at q1, q2 is one at q1 q2;
* above ``PLD_MAX_ROUND_EPSILON`` per round, basic composition T eps.

Why each rewriting is exact: docs/guide/accounting.md (#library-gaps).
"""
from __future__ import annotations

import dataclasses
import enum
import math
import re
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import dp_accounting
from dp_accounting import NeighboringRelation

__all__ = [
    "ACCOUNTANTS",
    "FALLBACK_REASONS",
    "PLD_MAX_ROUND_EPSILON",
    "ComposedEpsilon",
    "Fallback",
    "UnsupportedEvent",
    "compose",
    "describe_event",
    "gaussian_over_rounds",
    "laplace_over_rounds",
    "refuse_sampling_with_replacement",
]

ACCOUNTANTS = ("opacus-prv", "opacus-rdp", "dp_accounting-pld", "dp_accounting-rdp")
PLD_MAX_ROUND_EPSILON = 20.0  # one round's pure eps above which its PLD is not built (~2 eps / 1e-4 grid points)
# Opacus's PRV grid fails for weak noise (nm 0.25, 80 rounds: inf after 2 s; nm 0.05: inf after 2 minutes): below
# this add/remove multiplier (one round's eps > 6 at delta 1e-5) RDP, a looser bound, is used and named instead
PRV_MIN_NOISE_MULTIPLIER = 0.5

_REPLACE, _ADD_OR_REMOVE = NeighboringRelation.REPLACE_ONE, NeighboringRelation.ADD_OR_REMOVE_ONE


class Fallback(enum.StrEnum):
    """Why ``compose`` named an accountant other than the one asked for (``FALLBACK_REASONS`` says it in words)."""

    OPACUS_GAUSSIAN_ONLY = "opacus-gaussian-only"
    PRV_WEAK_NOISE = "prv-weak-noise"
    PRV_NOT_FINITE = "prv-not-finite"
    PURE_AT_DELTA_ZERO = "pure-at-delta-zero"
    PURE_ROUND_ABOVE_PLD = "pure-round-above-pld"
    BASIC_TIGHTER = "basic-composition-tighter"


FALLBACK_REASONS = {
    Fallback.OPACUS_GAUSSIAN_ONLY: "Opacus composes Gaussian rounds only",
    Fallback.PRV_WEAK_NOISE: f"PRV cannot evaluate a noise multiplier below {PRV_MIN_NOISE_MULTIPLIER:g}",
    Fallback.PRV_NOT_FINITE: "PRV gave no finite ε",
    Fallback.PURE_AT_DELTA_ZERO: "at δ = 0, T pure-ε rounds compose to exactly T ε",
    Fallback.PURE_ROUND_ABOVE_PLD: f"one round's pure ε is above {PLD_MAX_ROUND_EPSILON:g}, too large for a PLD grid",
    Fallback.BASIC_TIGHTER: "basic composition (T ε) was below the accountant's bound",
}


class UnsupportedEvent(ValueError):
    """No accountant here supports the event; the message says why and what would be supported."""


@dataclass(frozen=True)
class ComposedEpsilon:
    """epsilon after `rounds` compositions at `delta`, and where it came from: the ``accountant`` that gave it, the
    one ``requested`` and, where they differ, the ``fallbacks`` that led from one to the other, in order."""

    epsilon: float
    delta: float
    rounds: int
    accountant: str
    event: str
    requested: str | None = None
    fallbacks: tuple[Fallback, ...] = ()


_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d+(?:e[-+]?\d+)?")


def _short_float(value: float) -> str:
    """``value`` to 4 significant digits, still written as a float (2.0, not 2)."""
    text = f"{value:.4g}"
    return text if any(c in text for c in ".einf") else f"{text}.0"


def describe_event(event: dp_accounting.DpEvent, relation: NeighboringRelation | None = None) -> str:
    """The event as text, its numbers to 4 significant digits (a label, not a value to compute with), e.g.
    "GaussianDpEvent(noise_multiplier=0.6884) under REPLACE_ONE"."""
    text = _FLOAT.sub(lambda m: _short_float(float(m.group())), repr(event))
    return text if relation is None else f"{text} under {relation.name}"


def _check(rounds: int, delta: float) -> None:
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")


def _as_add_or_remove(event: dp_accounting.DpEvent, relation: NeighboringRelation) -> dp_accounting.DpEvent | None:
    """The ADD_OR_REMOVE_ONE event with the same privacy loss as an unsampled Gaussian or Laplace round under
    ``relation`` (module docstring); None for any other event."""
    halve = 2.0 if relation is _REPLACE else 1.0
    if isinstance(event, dp_accounting.GaussianDpEvent):
        return dp_accounting.GaussianDpEvent(event.noise_multiplier / halve)
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        return dp_accounting.LaplaceDpEvent(event.noise_multiplier / halve)
    return None


def _pure_epsilon(event: dp_accounting.DpEvent) -> float | None:
    """The pure eps of one pure-DP round (Laplace add/remove event, or binary randomized response); else None."""
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        return math.inf if event.noise_multiplier == 0 else 1.0 / event.noise_multiplier
    if isinstance(event, dp_accounting.RandomizedResponseDpEvent) and event.num_buckets == 2:
        p = event.noise_parameter
        return math.inf if p == 0 else math.log(2.0 / p - 1.0)
    return None


def _refusal(event: dp_accounting.DpEvent) -> str | None:
    """The reason no accountant composes ``event``, or None."""
    if isinstance(event, dp_accounting.NonPrivateDpEvent):
        return "the mechanism claims no privacy: there is nothing to compose"
    if isinstance(event, dp_accounting.UnsupportedDpEvent):
        return getattr(event, "reason", None) or "the mechanism's event is unsupported by every accountant"
    return None


def compose(
    event: dp_accounting.DpEvent,
    rounds: int,
    *,
    delta: float,
    relation: NeighboringRelation | None = _REPLACE,
    accountant: str = "opacus-prv",
) -> ComposedEpsilon:
    """eps of ``rounds`` rounds of ``event`` (one round of a claim under ``relation``) at ``delta``, by ``accountant``.

    Opacus accountants compose Gaussian rounds only; any other event goes to dp_accounting's PLD accountant and the
    result names it, the accountant ``requested`` and why it differs (``fallbacks``). ``UnsupportedEvent`` (with
    the reason) when no accountant supports the event.
    """
    composed = _compose(event, rounds, delta=delta, relation=relation, accountant=accountant)
    return dataclasses.replace(composed, requested=accountant)


def _compose(event: dp_accounting.DpEvent, rounds: int, *, delta: float, relation: NeighboringRelation | None,
             accountant: str) -> ComposedEpsilon:
    _check(rounds, delta)
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {', '.join(ACCOUNTANTS)}; got {accountant!r}")
    refusal = _refusal(event)
    if refusal is not None:
        raise UnsupportedEvent(refusal)
    relation = relation or _REPLACE
    if isinstance(event, dp_accounting.PoissonSampledDpEvent) and relation is not _ADD_OR_REMOVE:
        raise UnsupportedEvent(
            "a Poisson-sampled round composes under ADD_OR_REMOVE_ONE only: under REPLACE_ONE dp_accounting does not "
            "double the sensitivity (google/differential-privacy issue #378), and doubling does not commute with "
            "amplification by sampling")
    label = describe_event(event, relation)
    flat = _flat_sampling(event)
    if flat is not event:
        label += f", composed as {describe_event(flat, relation)}"
        event = flat
    unsampled = _as_add_or_remove(event, relation)
    if unsampled is not None:
        if relation is not _ADD_OR_REMOVE:
            label += f", composed as {describe_event(unsampled, _ADD_OR_REMOVE)}"
        event, relation = unsampled, _ADD_OR_REMOVE
    sampled = _sampled_gaussian(event, relation)
    if accountant.startswith("opacus") and sampled is not None:
        return _opacus(sampled[0], rounds, delta, accountant, f"{label} x {rounds}", sample_rate=sampled[1])
    fallbacks: tuple[Fallback, ...] = ()
    if accountant.startswith("opacus"):
        accountant, fallbacks = "dp_accounting-pld", (Fallback.OPACUS_GAUSSIAN_ONLY,)
    one_round = _pure_epsilon(event)
    if one_round is not None and (delta == 0 or one_round > PLD_MAX_ROUND_EPSILON):
        why = Fallback.PURE_AT_DELTA_ZERO if delta == 0 else Fallback.PURE_ROUND_ABOVE_PLD
        return ComposedEpsilon(rounds * one_round, delta, rounds, "basic composition",
                               f"{label} x {rounds}: {rounds} x pure eps {one_round:.6g}", fallbacks=(*fallbacks, why))
    return _dp_accounting(event, relation, rounds, delta, accountant, f"{label} x {rounds}", fallbacks)


def _dp_accounting(event: dp_accounting.DpEvent, relation: NeighboringRelation, rounds: int, delta: float,
                   accountant: str, label: str, fallbacks: tuple[Fallback, ...]) -> ComposedEpsilon:
    if accountant == "dp_accounting-pld":
        library = dp_accounting.pld.PLDAccountant(neighboring_relation=relation)
    else:
        library = dp_accounting.rdp.RdpAccountant(neighboring_relation=relation)
    if isinstance(event, dp_accounting.RandomizedResponseDpEvent):
        composed = dp_accounting.ComposedDpEvent([event] * rounds)  # PLD ignores a SelfComposedDpEvent's count
    else:
        composed = dp_accounting.SelfComposedDpEvent(event, rounds)
    if not library.supports(composed):
        raise UnsupportedEvent(f"{accountant} does not support {label} (dp_accounting refuses the event)")
    if delta == 0 and isinstance(event, dp_accounting.GaussianDpEvent):
        raise UnsupportedEvent("a Gaussian mechanism has no finite epsilon at delta = 0; give delta > 0")
    with _quiet_accountants():
        library.compose(composed)
        epsilon = float(library.get_epsilon(delta))
    if not math.isfinite(epsilon):
        raise UnsupportedEvent(f"{accountant} gives no finite epsilon for {label} at delta {delta:g}: the noise is too small")
    one_round = _pure_epsilon(event)
    if one_round is not None and rounds * one_round < epsilon:  # never worse than basic composition
        return ComposedEpsilon(rounds * one_round, delta, rounds, "basic composition", label,
                               fallbacks=(*fallbacks, Fallback.BASIC_TIGHTER))
    return ComposedEpsilon(epsilon, delta, rounds, accountant, label, fallbacks=fallbacks)


def _flat_sampling(event: dp_accounting.DpEvent) -> dp_accounting.DpEvent:
    """Nested Poisson sampling as the one sampling it equals, PoissonSampledDpEvent(q1 q2, E) (module docstring);
    any other event unchanged."""
    if not (isinstance(event, dp_accounting.PoissonSampledDpEvent)
            and isinstance(event.event, dp_accounting.PoissonSampledDpEvent)):
        return event
    inner = _flat_sampling(event.event)
    return dp_accounting.PoissonSampledDpEvent(event.sampling_probability * inner.sampling_probability, inner.event)


def _sampled_gaussian(event: dp_accounting.DpEvent, relation: NeighboringRelation) -> tuple[float, float] | None:
    """(noise multiplier, sample rate) of an add/remove Gaussian round, Poisson-sampled or not (rate 1); else
    None. These are the rounds Opacus's accountants compose (``history = [(z, q, T)]``)."""
    if relation is not _ADD_OR_REMOVE:
        return None
    rate = 1.0
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        rate, event = event.sampling_probability, event.event
    if isinstance(event, dp_accounting.GaussianDpEvent):
        return event.noise_multiplier, rate
    return None


@contextmanager
def _quiet_accountants() -> Iterator[None]:
    """dp_accounting's RDP accountant logs (through absl) "_compute_log_a_frac failed to converge" for some
    fractional orders of a sampled Gaussian; the order it then skips leaves the bound sound (the epsilon is a
    minimum over the orders), so the message is noise on a user's terminal."""
    loggers = [logging.getLogger(name) for name in ("absl", "opacus")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _opacus(noise_multiplier: float, rounds: int, delta: float, accountant: str, label: str, *,
            sample_rate: float = 1.0) -> ComposedEpsilon:
    """Opacus's ``accountant`` (PRV or RDP) on ``rounds`` add/remove Gaussian rounds, each on a Poisson sample of rate
    ``sample_rate`` (Opacus's ``history = [(noise_multiplier, sample_rate, rounds)]``)."""
    if delta == 0:
        raise UnsupportedEvent("a Gaussian mechanism has no finite epsilon at delta = 0; give delta > 0")
    if accountant == "opacus-prv" and noise_multiplier < PRV_MIN_NOISE_MULTIPLIER:
        composed = _opacus(noise_multiplier, rounds, delta, "opacus-rdp", label, sample_rate=sample_rate)
        return dataclasses.replace(composed, event=f"{composed.event} (opacus-prv could not evaluate it: noise "
                                                   f"multiplier below {PRV_MIN_NOISE_MULTIPLIER:g})",
                                   fallbacks=(Fallback.PRV_WEAK_NOISE,))
    from opacus.accountants import PRVAccountant, RDPAccountant

    library = PRVAccountant() if accountant == "opacus-prv" else RDPAccountant()
    library.history = [(noise_multiplier, sample_rate, rounds)]
    with warnings.catch_warnings(), _quiet_accountants():  # PRV's grid logs 0 where the mass is 0; harmless
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            epsilon = float(library.get_epsilon(delta))
        except (MemoryError, RuntimeError):  # PRV's grid grows as 1/noise_multiplier^2 and loses accuracy
            epsilon = math.nan
    if accountant == "opacus-prv" and not math.isfinite(epsilon):
        # PRV's grid cannot resolve very small noise; RDP can (a looser bound), and is named as the accountant.
        composed = _opacus(noise_multiplier, rounds, delta, "opacus-rdp", label, sample_rate=sample_rate)
        return dataclasses.replace(composed, event=f"{composed.event} (opacus-prv could not evaluate it)",
                                   fallbacks=(Fallback.PRV_NOT_FINITE,))
    if not math.isfinite(epsilon):
        raise UnsupportedEvent(f"{accountant} gives no finite epsilon for {label} at delta {delta:g}: the noise is too small")
    return ComposedEpsilon(epsilon, delta, rounds, accountant, label)


def gaussian_over_rounds(
    noise_multiplier: float,
    rounds: int,
    *,
    delta: float,
    sample_rate: float = 1.0,
    accountant: str = "opacus-prv",
) -> ComposedEpsilon:
    """eps of `rounds` Gaussian mechanisms with std = noise_multiplier * sensitivity (add/remove), each applied
    to a Poisson sample of rate `sample_rate` (1 = everyone, every round)."""
    _check(rounds, delta)
    if not noise_multiplier > 0:
        raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier!r}")
    if not 0 < sample_rate <= 1:
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {', '.join(ACCOUNTANTS)}; got {accountant!r}")
    if delta == 0:
        raise UnsupportedEvent("a Gaussian mechanism has no finite epsilon at delta = 0; give delta > 0")
    single = dp_accounting.GaussianDpEvent(noise_multiplier)
    event = single if sample_rate == 1 else dp_accounting.PoissonSampledDpEvent(sample_rate, single)
    return compose(event, rounds, delta=delta, relation=_ADD_OR_REMOVE, accountant=accountant)


def laplace_over_rounds(
    noise_multiplier: float,
    rounds: int,
    *,
    delta: float = 0.0,
) -> ComposedEpsilon:
    """eps of `rounds` Laplace mechanisms with scale = noise_multiplier * l1 sensitivity (add/remove): the PLD
    accountant at delta > 0, never above basic composition T / noise_multiplier (``compose``)."""
    if not noise_multiplier > 0:
        raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier!r}")
    return compose(dp_accounting.LaplaceDpEvent(noise_multiplier), rounds, delta=delta, relation=_ADD_OR_REMOVE,
                   accountant="dp_accounting-pld")


def refuse_sampling_with_replacement(rounds: int) -> None:
    """CEPAM's local steps sample records with replacement; no accountant composes that event."""
    raise UnsupportedEvent(
        f"no accountant supports subsampling with replacement composed over {rounds} rounds "
        "(Opacus and dp_accounting implement Poisson sampling and sampling without replacement); "
        "use Poisson sampling of local steps to get an accountable T-round guarantee"
    )
