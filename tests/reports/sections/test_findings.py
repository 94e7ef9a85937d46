"""The findings that open a report; the accounting check beside the composed claim, in the findings and the claim
details."""
from auditkit.attacks.headline import overall_verdict
from auditkit.reports.sections.details import details
from auditkit.reports.sections.findings import findings
from auditkit.reports.sections.summary import privacy_row
from auditkit.results.model import Setting


def _typed(setting):
    return Setting.model_validate(setting)


def test_an_accounting_check_shows_beside_the_composed_claim_and_in_the_findings(document):
    setting = document["settings"][2]  # a Gaussian claim every test found consistent
    reason = ("the accountant ignores the run's client sampling: its one-round event is Poisson-sampled at q' = 0.001 "
              "of its own; recomputed from the run (participation 'full', not amplified) over 100 rounds: eps = 91.83, "
              "not 0.06526")
    setting["accounting"] = {**setting["accounting"], "refusal": None,
                             "composed": {"epsilon": 0.06526, "delta": 1e-5, "rounds": 100, "accountant": "opacus-prv",
                                          "event": "PoissonSampledDpEvent(...) x 100"},
                             "check": {"verdict": "violated", "independent_epsilon": 91.83, "reason": reason}}
    setting["verdict"] = overall_verdict(setting["distinguish"], setting["identification"], setting["mechanism"],
                                         setting["accounting"])
    assert privacy_row(_typed(setting)).composed == ("ε = 0.06526, δ = 1e-05 over 100 rounds; check violated: "
                                             "recomputed from the run, ε = 91.83")
    (refuted,) = findings([_typed(setting)]).refuted
    # the check refutes the whole run's claim; the one-round claim's own tests did not
    assert refuted.startswith(f"{setting['label']}: violated (analytic refutation): the whole run's claim ε = 0.06526, "
                              f"δ = 1e-05 over 100 rounds; accounting check: {reason}; the strongest test certified "
                              "ε ≥ 0.4")
    assert refuted.endswith("; the one-round claim ε = 2.5, δ = 1e-05: consistent.")
    row = privacy_row(_typed(setting))
    assert (row.one_round.text, row.whole_run.text, row.whole_run.evidence) == ("consistent", "violated", "analytic")
    assert ("accounting check", f"violated: {reason}") in details(_typed(setting)).facts
    setting["accounting"]["check"] = {"verdict": "consistent", "independent_epsilon": 0.06526, "reason": "none own"}
    assert privacy_row(_typed(setting)).composed.endswith("; check consistent: recomputed from the run, ε = 0.06526")
