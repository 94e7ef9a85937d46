"""The membership inference section (issue 42): per setting, the game, the claim judged and a row per attack (its
pooled ROC at low FPR and its one-run bound on the target run); its Findings line."""
from __future__ import annotations

from dataclasses import dataclass

from auditkit.reports.sections.text import VERDICT_CLASSES, number, percent
from auditkit.results.model import CanaryClaim, Membership, MembershipAttackResult, OneRunResult, Setting, TprAtFpr

MEMBERSHIP_HEADING = "Membership inference against the final model"
MEMBERSHIP_EXPLANATION = (
    "Each attack scores every record or client tested from the model attacked (the final global model, or each "
    "client's last update as the server decodes it) in the target run and in reference runs of the same config, "
    "trained on re-drawn memberships. The TPR columns read the ROC pooled over every run taken as the target in "
    "turn (95 % Clopper-Pearson intervals): they describe these attacks on these runs, and their trials share "
    "runs, so they certify nothing. The certified ε is the one-run bound on the target run alone "
    "(each a member by a fair coin), judged against the whole run's claim for this game; a bound above "
    "the claim refutes it, one below it shows nothing about attacks not run here.")
MEMBERSHIP_COLUMNS = ("attack", "AUC", "TPR at 0.1 % FPR [95 % CP interval]", "TPR at 1 % FPR [95 % CP interval]",
                      "certified ε ≥ (target run, one-run bound)", "claim ε", "verdict")
# each attack's name in words (``auditkit.attacks.membership_game.MembershipAttack``)
ATTACK_NAMES = {"loss": "loss attack", "lira-offline": "LiRA offline", "lira-online": "LiRA online", "rmia": "RMIA"}
LEVELS = {"record": ("records", "a training record in some client's data, or not"),
          "client": ("clients", "a client in the federation, or not")}
VIEWS = {"public": "the final global model", "server": "each client's last update as the server decodes it"}
FINDING_FPR = 0.01  # the Findings line reads each attack's TPR at this FPR


@dataclass(frozen=True)
class MembershipBlock:
    """One setting's membership section: its label, the game and the claim in words, a row per attack (cells,
    verdict class)."""

    label: str
    game: str
    claim: str
    note: str
    rows: list[tuple[tuple[str, ...], str]]


def attack_name(attack: str) -> str:
    return ATTACK_NAMES.get(attack, attack)


def membership_settings(settings: list[Setting], *, with_roc: bool = False) -> list[Setting]:
    """The settings whose membership stage scored at least one attack (``with_roc``: with a ROC to draw)."""
    return [s for s in settings if s.membership and s.membership.attacks
            and (not with_roc or any(a.roc.fpr for a in s.membership.attacks))]


def membership_claim(claim: CanaryClaim) -> str:
    """The whole run's claim the game judged: "ε = 24.38 at δ = 1e-05, GDP μ = 4, 4 rounds", or "no claim"
    (the note says why, and how the accountant's ε became this one)."""
    if claim.epsilon is None:
        return "no claim"
    curve = f", {claim.curve}" if claim.curve else ", its (ε, δ) curve"
    rounds = "" if claim.rounds == 1 else f", {claim.rounds} rounds"
    return f"ε = {number(claim.epsilon)} at δ = {number(claim.delta)}{curve}{rounds}"


def _game(membership: Membership) -> str:
    trials = membership.details.get("trials")
    runs = membership.references + 1
    pooled = f"; {trials:,} trials pooled over the {runs} runs" if isinstance(trials, int) else ""
    unit, what = LEVELS[membership.level]
    seen = VIEWS[membership.view]
    return (f"{membership.level}-level game: {what}, read from {seen}; "
            f"{membership.tested:,} {unit} tested per run, each a member by a fair coin; a target run and "
            f"{membership.references} reference runs; {membership.population:,} population records for RMIA"
            f"{pooled}.")


def tpr_cell(point: TprAtFpr | None) -> str:
    """"5.90 % [3.12, 9.95]; 31 of 525 members at FPR 5 of 525" (the interval in %; the empirical FPR as counts);
    "-" when not measured."""
    if point is None:
        return "-"
    return (f"{percent(point.tpr)} [{number(100 * point.tpr_low, '.2f')}, {number(100 * point.tpr_high, '.2f')}]; "
            f"{point.true_positives:,} of {point.members:,} members at FPR {point.false_positives:,} of "
            f"{point.non_members:,}")


def tpr_at(attack: MembershipAttackResult, target_fpr: float) -> TprAtFpr | None:
    return next((p for p in attack.tpr_at if abs(p.target_fpr - target_fpr) <= 1e-9 * target_fpr), None)


def certified_cell(result: OneRunResult) -> str:
    """"0.42 (fdp, 500 tested; cap 3.38)", with the refuted curve where the f-DP test refuted one."""
    text = (f"{number(result.epsilon_lower_bound)} ({result.bound}, {result.canaries:,} tested; cap "
            f"{number(result.max_certifiable)})")
    if result.refuted_curve and result.curve_epsilon is not None:
        text += f"; refutes {result.refuted_curve} (its ε {number(result.curve_epsilon)})"
    return text


def _row(attack: MembershipAttackResult) -> tuple[tuple[str, ...], str]:
    r = attack.result
    claimed = "no claim" if r.claimed_epsilon is None else number(r.claimed_epsilon)
    cells = (attack_name(attack.attack), number(attack.auc, ".3f"), tpr_cell(tpr_at(attack, 0.001)),
             tpr_cell(tpr_at(attack, 0.01)), certified_cell(r), claimed, r.verdict)
    return cells, VERDICT_CLASSES.get(r.verdict, "other")


def membership_blocks(settings: list[Setting]) -> list[MembershipBlock]:
    """One block per setting with membership results, in setting order."""
    return [MembershipBlock(label=s.label, game=_game(s.membership), claim=membership_claim(s.membership.claim),
                            note=s.membership.claim.note, rows=[_row(a) for a in s.membership.attacks])
            for s in membership_settings(settings)]


def strongest(membership: Membership) -> MembershipAttackResult:
    """The attack with the largest TPR at ``FINDING_FPR`` (ties: the larger AUC; then the first)."""
    def key(attack: MembershipAttackResult) -> tuple[float, float]:
        point = tpr_at(attack, FINDING_FPR)
        return (-1.0 if point is None else point.tpr), attack.auc
    return max(membership.attacks, key=key)


def membership_finding(setting: Setting) -> str:
    """The Findings line of a setting's membership results: the strongest attack's TPR at 1 % FPR and its
    certified bound against the whole run's claim, worded as a measurement of these attacks, not a guarantee."""
    membership = setting.membership
    best = strongest(membership)
    point = tpr_at(best, FINDING_FPR)
    name = attack_name(best.attack)
    name = f"the {name}" if best.attack == "loss" else name
    chance = ("" if point is None or point.tpr_low > point.fpr else
              f"; no more than chance: the interval reaches the FPR, {percent(point.fpr)}")
    measured = ("" if point is None else
                f"{name} identified {percent(point.tpr)} of members at {number(100 * FINDING_FPR, 'g')} % FPR "
                f"(95 % interval {number(100 * point.tpr_low, '.2f')} to {number(100 * point.tpr_high, '.2f')} %; "
                f"measured FPR {percent(point.fpr)}; AUC {number(best.auc, '.3f')}), the strongest of the "
                f"{len(membership.attacks)} attacks there{chance}")
    claim = membership.claim
    r = best.result
    if claim.epsilon is None:
        judged = f"no claim judged ({claim.note})"
    else:
        judged = (f"its one-run bound on the target run certifies ε ≥ {number(r.epsilon_lower_bound)} against the "
                  f"whole run's claim ({membership_claim(claim)}): {r.verdict}")
    worst = max(membership.attacks, key=lambda a: a.result.epsilon_lower_bound)
    also = ""
    if claim.epsilon is not None and worst is not best and worst.result.epsilon_lower_bound > r.epsilon_lower_bound:
        also = (f"; the largest certified bound is {attack_name(worst.attack)}'s, ε ≥ "
                f"{number(worst.result.epsilon_lower_bound)}: {worst.result.verdict}")
    lead = f"{setting.label} ({membership.level} level): " + (f"{measured}; " if measured else "")
    return (f"{lead}{judged}{also}. This measures these attacks on this run; it is not a bound on what other "
            "attacks could do.")
