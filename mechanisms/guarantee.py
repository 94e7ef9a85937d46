"""The analytic privacy claim a mechanism makes about one use of itself.

The neighbouring relation is Google ``dp_accounting``'s ``NeighboringRelation`` (``REPLACE_ONE``: one input
replaced by any other; ``ADD_OR_REMOVE_ONE``; ``REPLACE_SPECIAL``), the same object its accountants take, so a
claim and its composition speak of one relation. ``REPLACE_ONE`` is re-exported here for mechanisms. A claim may
also name its relation by a string, as plugins written before relations were objects did: "replace-one",
"REPLACE_ONE", "add-remove", "add-or-remove-one", "replace-special" (any case, "-" or "_"), read as the
relation it names (``parse_relation``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from dp_accounting import NeighboringRelation

__all__ = ["PrivacyGuarantee", "CLAIM_EXCEEDED", "NeighboringRelation", "REPLACE_ONE", "parse_relation",
           "relation_name", "stated_norm"]

REPLACE_ONE = NeighboringRelation.REPLACE_ONE
CLAIM_EXCEEDED = "claim-exceeded"  # flag: the mechanism as implemented has a larger epsilon than it claims

# The words that name a relation (after upper-casing and "-" -> "_"): dp_accounting's member names, and
# "ADD_REMOVE", the name the DP literature gives ADD_OR_REMOVE_ONE.
_RELATION_WORDS = {"REPLACE_ONE": NeighboringRelation.REPLACE_ONE,
                   "ADD_OR_REMOVE_ONE": NeighboringRelation.ADD_OR_REMOVE_ONE,
                   "ADD_REMOVE": NeighboringRelation.ADD_OR_REMOVE_ONE,
                   **{member.name: member for member in NeighboringRelation}}


@dataclass(frozen=True)
class PrivacyGuarantee:
    """An (epsilon, delta)-DP claim with everything needed to read it correctly.

    epsilon:      the claimed epsilon, or None when the mechanism claims no privacy at all.
    delta:        the claimed delta; 1.0 (the trivial bound) when epsilon is None.
    relation:     the neighbouring relation (``dp_accounting.NeighboringRelation``, or a string naming one:
                  ``parse_relation``), None when there is no claim.
    unit:         what a neighbour changes, e.g. "client update" (one client's whole update).
    scope:        over what the claim holds, e.g. "one round" (no composition over rounds).
    threat_model: the view it protects, e.g. "server" (the aggregator sees the decoded update).
    sensitivity:  the bound the claim rests on, e.g. "l2 clip 1.0"; empty when epsilon is None.
    assumptions:  conditions that must hold for the claim.
    caveats:      known ways the claim can mislead.
    flags:        machine-readable markers for reports: "no-privacy"; ``CLAIM_EXCEEDED`` ("claim-exceeded"):
                  the mechanism as implemented has a larger epsilon than the ``epsilon`` it claims.
    """

    epsilon: float | None
    delta: float
    relation: NeighboringRelation | None
    unit: str = "client update"
    scope: str = "one round"
    threat_model: str = "server"
    sensitivity: str = ""
    assumptions: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()
    flags: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if isinstance(self.relation, str):
            object.__setattr__(self, "relation", parse_relation(self.relation))
        if not (self.relation is None or isinstance(self.relation, NeighboringRelation)):
            raise ValueError(f"relation must be a dp_accounting.NeighboringRelation, one of its names or None, "
                             f"got {self.relation!r}")
        if (self.relation is None) != (self.epsilon is None):
            raise ValueError("relation must be None exactly when epsilon is None (no claim)")
        if self.epsilon is not None and not (math.isfinite(self.epsilon) and self.epsilon >= 0):
            raise ValueError(f"epsilon must be None or a finite number >= 0, got {self.epsilon!r}")
        if not 0.0 <= self.delta <= 1.0:
            raise ValueError(f"delta must be in [0, 1], got {self.delta!r}")
        # Accept any iterables from callers but store hashable, immutable values.
        object.__setattr__(self, "assumptions", tuple(self.assumptions))
        object.__setattr__(self, "caveats", tuple(self.caveats))
        object.__setattr__(self, "flags", frozenset(self.flags))

    @classmethod
    def no_privacy(cls, *caveats: str) -> PrivacyGuarantee:
        """The claim of a mechanism that offers no differential privacy."""
        return cls(epsilon=None, delta=1.0, relation=None, caveats=caveats, flags={"no-privacy"})

    def summary(self) -> str:
        """One line, numbers to 4 significant digits, e.g. "(eps=4.845, delta=1e-05)-DP for one round, REPLACE_ONE,
        l2 clip 1.0".

        Flags other than "no-privacy" follow in brackets ("[flags: claim-exceeded]"), so a number
        that must not be read at face value never travels without its warning.
        """
        if self.epsilon is None:
            return "no privacy guarantee"
        parts = [f"(eps={self.epsilon:.4g}, delta={self.delta:.4g})-DP for {self.scope}", relation_name(self.relation)]
        if self.sensitivity:
            parts.append(self.sensitivity)
        text = ", ".join(parts)
        return f"{text} [flags: {', '.join(sorted(self.flags))}]" if self.flags else text

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict: tuples become lists, flags a sorted list, the relation its name (None without a
        claim), no epsilon becomes None."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "relation": relation_name(self.relation),
            "unit": self.unit,
            "scope": self.scope,
            "threat_model": self.threat_model,
            "sensitivity": self.sensitivity,
            "assumptions": list(self.assumptions),
            "caveats": list(self.caveats),
            "flags": sorted(self.flags),
            "summary": self.summary(),
        }


def relation_name(relation: NeighboringRelation | None) -> str | None:
    """The relation as dp_accounting names it ("REPLACE_ONE"), or None for no relation."""
    return None if relation is None else relation.name


def parse_relation(word: str) -> NeighboringRelation:
    """The relation a string names: a ``NeighboringRelation`` member's name or "add-remove", in any case, with "-"
    or "_" ("replace-one", "REPLACE_ONE", "add-remove", "ADD_OR_REMOVE_ONE"); ``ValueError`` naming the words
    allowed otherwise."""
    relation = _RELATION_WORDS.get(word.strip().upper().replace("-", "_"))
    if relation is None:
        allowed = ", ".join(repr(w.lower().replace("_", "-")) for w in _RELATION_WORDS)
        raise ValueError(f"relation must be a dp_accounting.NeighboringRelation or one of {allowed} (any case), "
                         f"got {word!r}")
    return relation


# A norm named in a claim's sensitivity text: "l1", "L2", "l-infinity", "linf", "l_inf", "ℓ2", "l∞" (not inside a word).
_NORM = re.compile(r"(?<![0-9A-Za-z_])[lℓ][-_ ]?(1|2|inf(?:inity)?|∞)(?![0-9A-Za-z])", re.IGNORECASE)
_NORM_NAMES = {"1": "l1", "2": "l2"}


def stated_norm(sensitivity: str) -> str | None:
    """The norm a claim's sensitivity text names ("l1 clip 0.5" -> "l1"; "l-infinity clip 1" -> "linf"), or None
    when it names none, or more than one."""
    named = {_NORM_NAMES.get(m.group(1).lower(), "linf") for m in _NORM.finditer(sensitivity or "")}
    return named.pop() if len(named) == 1 else None
