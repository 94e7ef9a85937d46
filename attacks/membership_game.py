"""The membership game's vocabulary: what a candidate is (``MembershipLevel``) and the attacks that score it
(``MembershipAttack``; their scores: ``auditkit.attacks.membership``)."""
from __future__ import annotations

import enum

__all__ = ["MEMBERSHIP_ATTACKS", "MEMBERSHIP_LEVELS", "MembershipAttack", "MembershipLevel"]


class MembershipLevel(enum.StrEnum):
    RECORD = "record"  # a training record in some client's data, or not
    CLIENT = "client"  # a client in the federation (all its records), or not


class MembershipAttack(enum.StrEnum):
    LOSS = "loss"  # Yeom et al. 2018: the negative loss, no reference runs
    LIRA_OFFLINE = "lira-offline"  # Carlini et al. 2022: Gaussian fit to the runs without the candidate
    LIRA_ONLINE = "lira-online"  # Carlini et al. 2022: Gaussian fits with and without it
    RMIA = "rmia"  # Zarifzadeh et al. 2024: likelihood ratio against population records


MEMBERSHIP_LEVELS = tuple(MembershipLevel)
MEMBERSHIP_ATTACKS = tuple(MembershipAttack)
