"""The findings that open a report; the accounting check beside the composed claim, in the findings and the claim
details."""
import matplotlib.pyplot as plt

from auditkit.attacks.headline import overall_verdict
from auditkit.reports import figures
from auditkit.reports.sections.details import details
from auditkit.reports.sections.findings import findings
from auditkit.reports.sections.summary import privacy_row
from auditkit.results import as_model
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


def test_a_sweep_that_ran_no_point_says_why_in_the_findings_and_its_panel(document, monkeypatch):
    """A sweep skipped because the clean attack stayed below the level: the finding names the reason, and the panel
    draws the clean attack with the reason noted and no defended line."""
    stopped = ("not run: the clean attack's mean SSIM (0.0059) is below 0.5 at this budget, so no ε can reach it "
               "(a larger [probe] iterations might)")
    sweep = {**document["settings"][1]["probe"]["sweep"], "clean_ssim": 0.0059, "crossing_eps": None,
             "reaches_clean_eps": None, "stopped": stopped, "points": []}
    document["settings"][1]["probe"]["sweep"] = sweep
    (line,) = findings([_typed(document["settings"][1])]).reconstruction
    assert line.startswith("jopeq-laplace (bits=2), ") and f": the sweep was {stopped}; the audited claims are ε 1" in line
    drawn = []
    monkeypatch.setattr(figures, "_save", lambda figure, path: drawn.append(figure) or path)
    figures.reconstruction_vs_epsilon(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    assert not [x for x in axis.lines if x.get_label().startswith("defended")] and not axis.collections
    assert [x.get_ydata()[0] for x in axis.lines if x.get_label() == "clean attack"] == [0.0059]
    assert any("no ε can reach it" in t.get_text().replace("\n", " ") for t in axis.texts)
    plt.close("all")
