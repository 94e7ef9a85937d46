"""Soundness of the audit itself: how often a correct claim is called "violated", and whether known-false claims
are caught, over every registered mechanism and many seeds.

``soundness_sweep(trials=N, seeds=S)`` runs ``auditkit.attacks.audit_mechanism`` (with the worst-pair search, as
``auditkit audit`` does, unless ``search=False``) on every registered mechanism at its ``reference_params`` (else
its defaults) for seeds 0..S-1. Seed s keys both the audit's shared randomness and the mechanism's private noise
(``private_seed = derive_seed("soundness", s)``), so the seeds are independent runs. Each mechanism is one row,
by the claim at its reference setting:

* ``correct``: an epsilon claim whose mechanism declares no ``true_epsilon()`` above it. Each audit may call it
  "violated" with probability at most 1 - confidence; only claims that are tight at the audited pair come near
  that rate.
* ``vacuous``: no claim (or a claim flagged "no-privacy" / "vacuous"): reported, not judged.
* ``known-exceeded``: the mechanism declares a ``true_epsilon()`` at least ``EXCEEDED_MARGIN`` (1.25) times its
  claim -- what it knows about itself, so a plugin is classified like a built-in (``jopeq-laplace``: 6.05 > 4;
  the example plugin's ``half-noise-*``: twice the claim, or 4.38 > 1.99). The sweep should call it "violated"
  in (nearly) every seed.
* ``exceeded-unjudged``: a declared true epsilon above the claim by less than that margin (``jopeq-t``: 4.78 > 4):
  run and reported, not judged (the excess may be below what the budget can certify).

``SoundnessRow.passes`` states each row's criterion: for a correct claim, the count of "violated" must not exceed
the 99.9% quantile of Binomial(S, 1 - confidence) (``allowed_false_alarms``: a sound audit shows more only in a
one-in-a-thousand fluke); a known-exceeded claim must be caught ("violated") in at least half the seeds. The same
quantile over all correct audits together judges the whole sweep.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scipy import stats

from auditkit import mechanisms
from auditkit.attacks.audit_mechanism import audit_mechanism
from auditkit.attacks.audit_settings import audit_setting, setting_pairs
from auditkit.attacks.verdicts import VIOLATED, Verdict

__all__ = ["EXCEEDED_MARGIN", "SoundnessRow", "allowed_false_alarms", "classify", "soundness_sweep"]

EXCEEDED_MARGIN = 1.25  # a declared true epsilon this many times the claim must be caught (module docstring)
_VACUOUS_FLAGS = {"no-privacy", "vacuous"}
_FLUKE = 1e-3  # the allowed count of false alarms is exceeded by a sound audit with at most this probability


def allowed_false_alarms(audits: int, confidence: float) -> int:
    """The 99.9% quantile of Binomial(audits, 1 - confidence): more "violated" verdicts than this on correct claims
    mean the audit's confidence does not hold (a sound audit shows more with probability < 1e-3)."""
    return int(stats.binom.ppf(1 - _FLUKE, audits, 1 - confidence))


def _create(name: str, seed: int) -> mechanisms.Mechanism:
    """The registered mechanism at the parameters it declares for audits (``reference_params``), its private
    noise keyed by the seed; attacks/ reaches it by name, never by class."""
    m = mechanisms.create(name, private_seed=mechanisms.derive_seed("soundness", seed))
    return m.with_params(**m.reference_params)


def classify() -> dict[str, str]:
    """Every registered name -> "correct", "vacuous", "known-exceeded" or "exceeded-unjudged", from what the
    mechanism declares at its reference setting: its claim and its ``true_epsilon()`` (module docstring)."""
    kinds = {}
    for name in mechanisms.names():
        m = _create(name, 0)
        claim, true = m.guarantee(), mechanisms.capability(m, "true_epsilon")
        if claim.epsilon is None or claim.flags & _VACUOUS_FLAGS:
            kinds[name] = "vacuous"
        elif true is None or true <= claim.epsilon * (1 + 1e-9):
            kinds[name] = "correct"
        elif true >= EXCEEDED_MARGIN * claim.epsilon:
            kinds[name] = "known-exceeded"
        else:
            kinds[name] = "exceeded-unjudged"
    return kinds


@dataclass
class SoundnessRow:
    """One mechanism over every seed: its kind, claim, certified bounds, verdict counts and seconds."""

    name: str
    kind: str
    pairs: int
    claimed_epsilon: float | None
    delta: float
    bounds: list[float] = field(default_factory=list)
    caps: list[float] = field(default_factory=list)
    verdicts: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    confidence: float = 0.95

    @property
    def seeds(self) -> int:
        return len(self.bounds)

    @property
    def violated(self) -> int:
        return self.verdicts[VIOLATED]

    @property
    def passes(self) -> bool:
        """correct: at most ``allowed_false_alarms`` "violated"; known-exceeded: "violated" in at least half the
        seeds; vacuous and unjudged rows pass."""
        if self.kind == "correct":
            return self.violated <= allowed_false_alarms(self.seeds, self.confidence)
        if self.kind == "known-exceeded":
            return 2 * self.violated >= self.seeds
        return True

    def line(self) -> str:
        claim = "-" if self.claimed_epsilon is None else f"{self.claimed_epsilon:.3f}"
        counts = " ".join(f"{self.verdicts[v]:>8}" for v in (Verdict.VIOLATED, Verdict.CONSISTENT, Verdict.INCONCLUSIVE))
        counts += f" {self.verdicts[Verdict.VACUOUS] + self.verdicts[Verdict.NO_CLAIM]:>8}"
        return (f"{self.name:<20} {self.kind:<17} {self.pairs:>5} {claim:>9} {self.delta:>7.0e} {min(self.bounds):6.3f} "
                f"{statistics.fmean(self.bounds):6.3f} {max(self.bounds):6.3f} {min(self.caps):6.2f} {counts} "
                f"{self.seconds:6.1f} {'ok' if self.passes else 'FAIL':>4}")


HEADER = (f"{'mechanism':<20} {'kind':<17} {'pairs':>5} {'claim eps':>9} {'delta':>7} {'min':>6} {'mean':>6} "
          f"{'max':>6} {'cap':>6} {'violated':>8} {'consist.':>8} {'inconcl.':>8} {'vacuous':>8} {'s':>6} {'':>4}")


def soundness_sweep(
    *, trials: int, seeds: int, search: bool = True, confidence: float = 0.95,
    names: Sequence[str] | None = None, on_row: Callable[[SoundnessRow], None] | None = None,
) -> list[SoundnessRow]:
    """One ``SoundnessRow`` per mechanism (``names``, default every registered one), each audit at
    ``confidence`` family-wise over its own tests, ``trials`` outputs per pair (module docstring)."""
    kinds = classify()
    rows = []
    for name in names if names is not None else mechanisms.names():
        first = _create(name, 0)
        row = SoundnessRow(name, kinds[name], len(setting_pairs(audit_setting(first))), first.guarantee().epsilon,
                           0.0, confidence=confidence)
        start = time.perf_counter()
        for seed in range(seeds):
            audit = audit_mechanism(_create(name, seed), trials=trials, confidence=confidence, search=search,
                                    seed=seed)
            row.bounds.append(audit.worst.epsilon_lower_bound)
            row.caps.append(audit.worst.max_certifiable)
            row.verdicts[audit.verdict] += 1
            row.delta = audit.worst.delta
        row.seconds = time.perf_counter() - start
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows
