"""The report's membership section (issue 42): its tables, figure, Findings line and glossary, from a results document
built through the builders (no audit run)."""
from pathlib import Path

import numpy as np
import pytest

from auditkit import mechanisms, results
from auditkit.attacks.membership import auc, tpr_at_fpr
from auditkit.attacks.one_run import one_run_bound
from auditkit.mechanisms.tradeoff import GaussianTradeOff
from auditkit.reports import figures, render_report
from auditkit.reports.membership_figure import CLAIM_LABEL, membership_roc
from auditkit.reports.sections.findings import findings
from auditkit.reports.sections.glossary import GLOSSARY
from auditkit.reports.sections.membership import MEMBERSHIP_HEADING, membership_blocks
from auditkit.results import as_model, validate_results

LABEL = "dp <b>x</b> | $\\mu$"  # HTML, a table pipe and "$" (mathtext, were it parsed)
CANDIDATES, RUNS = 400, 5
SHIFTS = {"loss": 0.0, "lira-offline": 0.5, "lira-online": 1.0, "rmia": 3.0}  # rmia: far stronger than the claim


MEMBERS = np.random.default_rng(0).random(CANDIDATES * RUNS) < 0.5  # every attack scores the same candidates


def _attack(name: str, curve, claimed: float | None, seed: int) -> dict:
    members = MEMBERS
    scores = np.random.default_rng(seed).standard_normal(members.size) + SHIFTS[name] * members
    bound = one_run_bound(scores[:CANDIDATES], members[:CANDIDATES], curve=curve, claimed_epsilon=claimed,
                          bound="fdp", guesses="grid", confidence=0.9875, delta=1e-5)
    at = [tpr_at_fpr(scores, members, fpr) for fpr in (0.001, 0.01)]
    return results.membership_attack(name, bound, scores, members, at, curve, auc=auc(scores, members))


def _membership(curve, claim: dict) -> dict:
    attacks = [_attack(name, curve, claim["epsilon"], i) for i, name in enumerate(SHIFTS)]
    return results.membership_entry(level="record", view="public", references=RUNS - 1, tested=CANDIDATES, population=300,
                                    confidence=0.95, claim=claim, attacks=attacks, seconds=1.0,
                                    details={"test_accuracy": [0.9] * RUNS, "training_seconds": 1.0,
                                             "trials": CANDIDATES * RUNS})


def build(with_membership: bool = True) -> dict:
    curve = GaussianTradeOff(0.5)
    claimed = {"epsilon": curve.epsilon(1e-5), "delta": 1e-5, "curve": curve.label, "rounds": 5,
               "note": "the whole run's claim <i>as judged</i>"}
    none = {"epsilon": None, "delta": 1e-5, "curve": None, "rounds": 5, "note": "the mechanism claims no privacy"}
    settings = [
        results.setting("s00", "none", mechanisms.create("none"),
                        membership=_membership(None, none) if with_membership else None),
        results.setting("s01", LABEL, mechanisms.create("dp-fedavg", noise_multiplier=1.0, clip=1.0),
                        membership=_membership(curve, claimed) if with_membership else None),
    ]
    return results.document("audit", "membership", {}, results.provenance(seed=0, device="cpu", settings=settings),
                            settings)


@pytest.fixture(scope="module")
def document() -> dict:
    doc = build()
    validate_results(doc)
    return doc


@pytest.fixture(scope="module")
def rendered(document, tmp_path_factory) -> tuple[Path, str, str]:
    out = tmp_path_factory.mktemp("membership-report")
    render_report(document, out)
    return out, (out / "report.html").read_text(), (out / "report.md").read_text()


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.2f} %"


def test_each_attack_is_a_row_with_its_numbers_and_verdict(document):
    none, judged = membership_blocks(as_model(document).settings)
    assert (none.label, judged.label) == ("none", LABEL)
    assert judged.game == ("record-level game: a training record in some client's data, or not, read from the final "
                           "global model; 400 records tested per run, each a member by a fair coin; a target run and 4 reference runs; 300 population "
                           "records for RMIA; 2,000 trials pooled over the 5 runs.")
    assert judged.claim == "ε = 1.993 at δ = 1e-05, GDP μ = 0.5, 5 rounds" and none.claim == "no claim"
    assert judged.note == "the whole run's claim <i>as judged</i>"
    section = document["settings"][1]["membership"]
    for (cells, css), attack in zip(judged.rows, section["attacks"], strict=True):
        low, one = attack["tpr_at"]
        r = attack["result"]
        assert cells[1] == f"{attack['auc']:.3f}"
        assert cells[2].startswith(f"{_percent(low['tpr'])} [{100 * low['tpr_low']:.2f}, "
                                   f"{100 * low['tpr_high']:.2f}]; {low['true_positives']:,} of {low['members']:,} "
                                   f"members at FPR {low['false_positives']:,} of {low['non_members']:,}")
        assert cells[3].startswith(f"{_percent(one['tpr'])} [{100 * one['tpr_low']:.2f}, {100 * one['tpr_high']:.2f}]")
        assert cells[4].startswith(f"{r['epsilon_lower_bound']:.4g} (fdp, 400 tested; cap "
                                   f"{r['max_certifiable']:.4g})")
        assert cells[5] == f"{r['claimed_epsilon']:.4g}" and cells[6] == r["verdict"] and css == r["verdict"]
    assert [cells[0] for cells, _ in judged.rows] == ["loss attack", "LiRA offline", "LiRA online", "RMIA"]
    assert judged.rows[-1][0][-1] == "violated" and judged.rows[0][0][-1] == "consistent"
    assert [(cells[5], cells[6], css) for cells, css in none.rows] == [("no claim", "no claim", "none")] * 4


def test_the_findings_line_reads_the_strongest_attack_as_a_measurement(document):
    found = findings(as_model(document).settings)
    none, judged = found.membership
    rmia = document["settings"][1]["membership"]["attacks"][-1]
    one = rmia["tpr_at"][1]
    assert judged.startswith(f"{LABEL} (record level): RMIA identified {_percent(one['tpr'])} of members at 1 % FPR "
                             f"(95 % interval {100 * one['tpr_low']:.2f} to {100 * one['tpr_high']:.2f} %")
    assert (f"certifies ε ≥ {rmia['result']['epsilon_lower_bound']:.4g} against the whole run's claim "
            "(ε = 1.993 at δ = 1e-05, GDP μ = 0.5, 5 rounds): violated") in judged
    assert judged.endswith("This measures these attacks on this run; it is not a bound on what other attacks could "
                           "do.")
    assert "no claim judged (the mechanism claims no privacy)" in none
    assert ("membership inference against the final model", "other", found.membership) in found.sections()
    refuted, = found.refuted  # the headline names the membership test that decided it, with its evidence
    assert "membership inference (RMIA, record level)" in refuted and "against the whole run's claim" in refuted


def test_the_reports_render_the_section_escaped_with_verdict_badges(rendered):
    _, html, md = rendered
    assert f">{MEMBERSHIP_HEADING}</h2>" in html and f"## {MEMBERSHIP_HEADING}" in md
    assert "<h3>dp &lt;b&gt;x&lt;/b&gt; | $\\mu$</h3>" in html and "<b>x</b>" not in html
    assert "### dp &lt;b&gt;x&lt;/b&gt; \\| $\\\\mu$" in md
    assert "the whole run&#39;s claim &lt;i&gt;as judged&lt;/i&gt;" in html
    section = html[html.index(f">{MEMBERSHIP_HEADING}</h2>"):html.index("<h2>Figures</h2>")]
    assert section.count('<span class="badge v-violated">violated</span>') == 1
    assert section.count('<span class="badge v-consistent">consistent</span>') >= 1
    assert section.count('<span class="badge v-none">no claim</span>') == 4
    assert "<td>RMIA</td>" in section and "TPR at 1 % FPR [95 % CP interval]" in section


def test_the_roc_figure_is_written_and_referenced(rendered):
    out, html, md = rendered
    assert (out / "figures" / "membership_roc.png").is_file()
    assert "](figures/membership_roc.png)" in md
    assert "<figcaption>Membership inference against the final model: each attack&#39;s ROC" in html
    assert "the claim allows at most" not in md  # the label is drawn in the figure, not written


def test_the_figure_draws_a_line_per_attack_on_log_axes_with_the_claim(document, monkeypatch):
    kept = []
    monkeypatch.setattr(figures, "_save", lambda figure, path: kept.append(figure) or Path(path))
    membership_roc(as_model(document), "unused.png")
    none, judged = kept[0].axes[:2]
    labels = [line.get_label() for line in judged.lines]
    assert labels[:4] == [f"{name} (AUC {a['auc']:.3f})" for name, a in
                          zip(("loss attack", "LiRA offline", "LiRA online", "RMIA"),
                              document["settings"][1]["membership"]["attacks"])]
    assert labels[4:] == [CLAIM_LABEL, "chance, TPR = FPR"] and CLAIM_LABEL not in [l.get_label() for l in none.lines]
    assert judged.get_xscale() == judged.get_yscale() == "log"
    rmia = document["settings"][1]["membership"]["attacks"][-1]
    assert judged.get_xlim()[0] == pytest.approx(rmia["roc"]["fpr"][0]) == pytest.approx(
        1 / rmia["tpr_at"][0]["non_members"])
    assert list(judged.lines[4].get_ydata()) == pytest.approx(rmia["claim_tpr"])
    assert len({str(line.get_color()) for line in judged.lines[:4]}) == 4  # attacks told apart
    assert "$" not in judged.get_title().replace("\\$", "")  # drawn as given
    import matplotlib.pyplot as plt
    plt.close(kept[0])


def test_the_roc_figure_draws_no_verdicts_colour_and_its_chance_line_straight(document, monkeypatch, verdict_hues):
    kept = []
    monkeypatch.setattr(figures, "_save", lambda figure, path: kept.append(figure) or Path(path))
    membership_roc(as_model(document), "unused.png")
    assert verdict_hues(kept[0]) == {}  # attacks in a neutral palette: green and red are verdicts
    for axis in kept[0].axes[:2]:
        chance = [line for line in axis.lines if line.get_label() == "chance, TPR = FPR"][0]
        assert list(chance.get_xdata()) == list(chance.get_ydata()) and axis.get_xscale() == axis.get_yscale()
    import matplotlib.pyplot as plt
    plt.close(kept[0])


def test_without_membership_nothing_is_rendered(tmp_path):
    doc = build(with_membership=False)
    assert not figures.has_data("membership_roc", as_model(doc))
    assert not findings(as_model(doc).settings).membership
    render_report(doc, tmp_path)
    html, md = (tmp_path / "report.html").read_text(), (tmp_path / "report.md").read_text()
    assert MEMBERSHIP_HEADING not in html and MEMBERSHIP_HEADING not in md
    assert not (tmp_path / "figures" / "membership_roc.png").exists()


@pytest.mark.parametrize("term", ["membership inference", "LiRA", "RMIA", "TPR at low FPR", "reference runs"])
def test_the_glossary_explains_the_section(term):
    assert term in dict(GLOSSARY)
