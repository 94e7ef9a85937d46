"""The notes under the summary: results that will not reproduce, distinguishing tests run on generic defaults."""
from __future__ import annotations

from auditkit.reports.sections.details import GENERIC
from auditkit.results.model import Setting

# How the generic audit setting's note (``auditkit.attacks.audit_settings``) says where its norm came from: from the claim's
# sensitivity or the mechanism's clip norm (its pairs are neighbours the claim covers), or assumed.
_GENERIC_SETTING = "generic default: the mechanism declares no audit setting: "
_NORM_ASSUMED = "names no norm: l2 assumed"
_CLAIMS_NEIGHBOURS = ("the norm of the claim's sensitivity", "the claim's l-infinity sensitivity",
                      "the mechanism's clip norm")
_REFUTING = ("violated", "claim holds only cell-locally")


def notes(settings: list[Setting]) -> list[str]:
    """The notes under the summary, per setting: a mechanism not determined by its seeds
    (``mechanism.reproducible`` false), and what a generic default does to a distinguishing test's verdict
    (docs/methodology/distinguishing.md, "Generic defaults")."""
    found = []
    for setting in settings:
        label = setting.label
        if setting.mechanism.reproducible is False:
            found.append(f"{label}: the mechanism's output is not determined by its seeds (two encodes under the same "
                         "seeds differed): these results will not reproduce, and a rerun may reach another verdict. "
                         "Its noise should be drawn from auditkit.mechanisms.randomness.private_generator(private_seed, seed, "
                         "purpose).")
        test = setting.distinguish
        if test is None:  # tiling and the audit setting matter to that test alone
            continue
        verdict, claim_ = test.verdict, setting.mechanism.guarantee
        parts = []
        where = test.audit_setting or ""
        if setting.mechanism.capabilities.audit_setting == GENERIC and verdict in (*_REFUTING,
                                                                                                  "consistent"):
            pairs = where.removeprefix(_GENERIC_SETTING) if where.startswith(_GENERIC_SETTING) else (
                "the generic 2-D pairs")
            said = f"the generic neighbouring pairs ({pairs}), as the mechanism declares no audit setting"
            if verdict == "consistent":
                parts.append(f"ran on {said}. This weakens the verdict \"consistent\": these pairs may miss the "
                             "mechanism's worst case (a worse pair may exist)")
            elif any(marker in where for marker in _CLAIMS_NEIGHBOURS):
                parts.append(f"ran on {said}. The verdict \"{verdict}\" stands: these pairs are neighbours within "
                             "the claim's sensitivity, and one pair the claim covers on which it fails refutes it")
            else:
                sensitivity = claim_.sensitivity or "not stated"
                why = (f"its sensitivity ({sensitivity}) names no norm, so the l2 ball was assumed"
                       if _NORM_ASSUMED in where else f"the claim's sensitivity reads \"{sensitivity}\"")
                parts.append(f"ran on {said}. The verdict \"{verdict}\" holds only if the claim's neighbours "
                             f"include these pairs: {why}")
        sampling = test.sampling or ""
        if sampling.startswith("per call"):
            parts.append(f"drew its outputs per call, {sampling.removeprefix('per call: ')}: exact, only slower "
                         "than a declared tiling or batch sampler, so this weakens no verdict")
        if parts:
            found.append(f"{label}: the distinguishing test " + "; it ".join(parts) + ".")
    return found
