"""The notes under the summary: by verdict, sampling path and reproducibility."""
from auditkit.attacks.verdicts import Verdict
from auditkit.reports.sections.notes import notes
from auditkit.results.model import Capabilities, Distinguish, Guarantee, MechanismEntry, Setting


GENERIC_L1 = ("generic default: the mechanism declares no audit setting: d = 2, the l1 ball of radius 0.5, pairs up to 1 "
              "apart (its diameter); l1: the norm of the claim's sensitivity 'l1 clip 0.5'")
GENERIC_ASSUMED = ("generic default: the mechanism declares no audit setting: d = 2, the l2 ball of radius 1, pairs up to 2 "
                   "apart (its diameter); l2: the claim's sensitivity 'clip 1' names no norm: l2 assumed")
PER_CALL = "per call: mine: one call of the real mechanism per output (generic default: the mechanism declares no tiling)"


def _setting(verdict, where=GENERIC_L1, sampling="tiled: blocks of n = 1", sensitivity="l1 clip 0.5",
             audit_setting="generic default", **mechanism):
    return _partial("mine", Distinguish.model_construct(verdict=Verdict(verdict), audit_setting=where, sampling=sampling),
                    guarantee=Guarantee.model_construct(sensitivity=sensitivity),
                    capabilities=Capabilities.model_construct(audit_setting=audit_setting), **mechanism)


def _partial(label, distinguish, **mechanism):
    """A setting holding only the fields the notes read (``model_construct``: the rest left unset)."""
    mechanism.setdefault("capabilities", Capabilities.model_construct())
    return Setting.model_construct(label=label, distinguish=distinguish, mechanism=MechanismEntry.model_construct(
        **mechanism))


def test_generic_pairs_weaken_a_consistent_verdict():
    assert notes([_setting("consistent")]) == [
        "mine: the distinguishing test ran on the generic neighbouring pairs (d = 2, the l1 ball of radius 0.5, pairs "
        "up to 1 apart (its diameter); l1: the norm of the claim's sensitivity 'l1 clip 0.5'), as the mechanism declares no audit "
        "setting. This weakens the verdict \"consistent\": these pairs may miss the mechanism's worst case (a worse "
        "pair may exist)."]


def test_a_violation_on_neighbours_within_the_claims_sensitivity_stands():
    (note,) = notes([_setting("violated", sampling=PER_CALL)])
    assert "weaken the verdict \"violated\"" not in note and "weakens the verdict" not in note
    assert note == (
        "mine: the distinguishing test ran on the generic neighbouring pairs (d = 2, the l1 ball of radius 0.5, pairs "
        "up to 1 apart (its diameter); l1: the norm of the claim's sensitivity 'l1 clip 0.5'), as the mechanism declares no audit "
        "setting. The verdict \"violated\" stands: these pairs are neighbours within the claim's sensitivity, and one "
        "pair the claim covers on which it fails refutes it; it drew its outputs per call, mine: one call of the real "
        "mechanism per output (generic default: the mechanism declares no tiling): exact, only slower than a "
        "declared tiling or batch sampler, so this weakens no verdict.")


def test_a_violation_on_pairs_of_an_assumed_norm_holds_only_if_the_claim_covers_them():
    (note,) = notes([_setting("violated", where=GENERIC_ASSUMED, sensitivity="clip 1")])
    assert note.endswith("The verdict \"violated\" holds only if the claim's neighbours include these pairs: its "
                         "sensitivity (clip 1) names no norm, so the l2 ball was assumed.")
    # a file written before the generic setting said where its norm came from: the claim's sensitivity is named
    old = "generic default: the mechanism declares no audit setting: d = 2, the l2 ball of radius 1, pairs 2 radius apart"
    (note,) = notes([_setting("violated", where=old)])
    assert note.endswith("holds only if the claim's neighbours include these pairs: the claim's sensitivity reads "
                         "\"l1 clip 0.5\".")


def test_declared_settings_and_verdicts_without_a_claim_to_weaken_get_no_note():
    assert notes([_setting("consistent", where="replace-one within the l2 ball", audit_setting="declared")]) == []
    assert notes([_setting("no claim"), _setting("inconclusive"), _setting("vacuous claim")]) == []
    assert notes([_partial("x", None)]) == []


def test_a_mechanism_not_determined_by_its_seeds_is_noted_even_without_a_distinguishing_test():
    unseeded = _partial("mine", None, reproducible=False)
    assert notes([unseeded]) == [
        "mine: the mechanism's output is not determined by its seeds (two encodes under the same seeds differed): "
        "these results will not reproduce, and a rerun may reach another verdict. Its noise should be drawn from "
        "auditkit.mechanisms.randomness.private_generator(private_seed, seed, purpose)."]