"""The report's canary section: a one-run canary audit's table, its figure and its headline, from the results
document alone (idealized and FL kinds)."""
import math

import numpy as np
import pytest

from auditkit import mechanisms, results
from auditkit.attacks.one_run import one_run_bound
from auditkit.mechanisms.tradeoff import GaussianTradeOff
from auditkit.reports import figures, render_report
from auditkit.results import as_model, validate_results
from auditkit.reports.sections.canary import CANARY_COLUMNS, canary_heading, canary_rows
from auditkit.reports.sections.glossary import GLOSSARY


def document(kind: str, mu_true: float, curve, *, claim_epsilon=None):
    rng = np.random.default_rng(0)
    inserted = rng.random(20_000) < 0.5
    scores = rng.standard_normal(20_000) + mu_true * inserted
    bound = one_run_bound(scores, inserted, curve=curve, delta=1e-5)
    view = results.canary_view("idealized" if kind == "idealized" else "aggregate", "likelihood ratio", bound,
                               scores, inserted, curve)
    claim = {"epsilon": curve.epsilon(1e-5) if claim_epsilon is None else claim_epsilon, "delta": 1e-5,
             "curve": curve.label, "rounds": 1 if kind == "idealized" else 5, "note": "the claim"}
    entry = results.canary_entry(kind=kind, canaries=20_000, bound="fdp", confidence=0.95, claim=claim, views=[view],
                                 seconds=1.0, details={"pair": "axis"})
    setting = results.setting("s00", "gaussian <b>", mechanisms.create("gaussian", clip=0.5, sigma=1.0), canary=entry)
    return results.document("canary" if kind == "idealized" else "audit", "t", {},
                            results.provenance(seed=0, device="cpu", settings=[setting]), [setting])


def test_a_true_claim_is_consistent_and_its_row_says_so():
    doc = document("idealized", 1.0, GaussianTradeOff(1.0))
    validate_results(doc)
    (cells, css), = canary_rows(as_model(doc).settings)
    assert cells[1] == "ε = 4.377 at δ = 1e-05, GDP μ = 1" and cells[2] == "idealized" and cells[-1] == "consistent"
    assert css == "consistent" and cells[6].startswith("≥ ") and "(fdp); refutes GDP μ = " in cells[6]
    assert doc["settings"][0]["verdict"]["decided_by"]["name"] == "one-run canary audit (idealized, fdp)"
    assert doc["settings"][0]["verdict"]["decided_by"]["kind"] == "canary"
    assert doc["settings"][0]["verdict"]["bound"]["test"]["name"] == "one-run canary audit (idealized, fdp)"
    assert canary_heading(as_model(doc).settings)[0] == "One-run canary audit"


def test_a_false_whole_run_claim_is_violated_and_reported_in_its_own_section(tmp_path):
    doc = document("fl", 2.0, GaussianTradeOff(0.5))
    heading = canary_heading(as_model(doc).settings)[0]
    assert heading == "Whole run: canary clients against the composed claim"
    headline = doc["settings"][0]["verdict"]
    assert headline["verdict"] == "violated" and headline["decided_by"]["name"].endswith("against the whole run's claim")
    assert headline["decided_by"]["kind"] == "canary" and headline["decided_by"]["whole_run"]
    assert headline["bound"] is None  # an FL canary audit bounds the composed claim, not the per-round one
    assert figures.has_data("tradeoff_vs_claim", as_model(doc))
    written = {p.name for p in render_report(doc, tmp_path)}
    assert {"report.html", "report.md", "tradeoff_vs_claim.png"} <= written
    html, md = (tmp_path / "report.html").read_text(), (tmp_path / "report.md").read_text()
    assert heading in html and f"## {heading}" in md and "gaussian &lt;b&gt;" in html
    assert '<span class="badge v-violated">violated</span>' in html


def test_the_tradeoff_figure_draws_views_in_neutral_colours_on_log_log_axes(monkeypatch, verdict_hues):
    kept = []
    monkeypatch.setattr(figures, "_save", lambda figure, path: kept.append(figure) or path)
    figures.tradeoff_vs_claim(as_model(document("fl", 2.0, GaussianTradeOff(0.5))), "unused.png")
    axis = kept[0].axes[0]
    assert verdict_hues(kept[0]) == {}  # the view's line is not coloured by its verdict, "violated"
    guessing = [line for line in axis.lines if list(line.get_xdata()) == list(line.get_ydata())]
    assert len(guessing) == 1 and axis.get_xscale() == axis.get_yscale() == "log"
    import matplotlib.pyplot as plt
    plt.close(kept[0])


def test_an_infinite_claim_is_written_as_null():
    doc = document("fl", 1.0, GaussianTradeOff(1.0), claim_epsilon=math.inf)
    assert doc["settings"][0]["canary"]["claim"]["epsilon"] is None
    validate_results(doc)


@pytest.mark.parametrize("term", ["one-run canary audit", "trade-off curve (f-DP)"])
def test_the_glossary_explains_the_section(term):
    assert term in dict(GLOSSARY)


def test_each_view_shows_its_auroc_and_tpr_at_low_fpr_with_intervals(tmp_path):
    doc = document("idealized", 1.0, GaussianTradeOff(1.0))
    summary = doc["settings"][0]["canary"]["views"][0]["roc_summary"]
    at1, at01 = summary["tpr_at"]
    shown = (f"AUROC {summary['auc']:.3f} [{summary['auc_low']:.3f}, {summary['auc_high']:.3f}]; "
             f"TPR at 1 % FPR {100 * at1['tpr']:.2f} % [{100 * at1['tpr_low']:.2f}, {100 * at1['tpr_high']:.2f}]; "
             f"at 0.1 % FPR {100 * at01['tpr']:.2f} % [{100 * at01['tpr_low']:.2f}, {100 * at01['tpr_high']:.2f}]")
    (cells, _), = canary_rows(as_model(doc).settings)
    assert cells[-2] == shown and CANARY_COLUMNS[-2] == "ROC of the scores (95 % intervals)"
    # 1-GDP scores N(0, 1) against N(1, 1): AUROC Phi(1 / sqrt 2) = 0.760 inside the interval
    assert summary["auc_low"] <= 0.7602 <= summary["auc_high"] and summary["auc_high"] - summary["auc_low"] < 0.02
    render_report(doc, tmp_path)
    html, md = (tmp_path / "report.html").read_text(), (tmp_path / "report.md").read_text()
    assert f"<td>{shown}</td>" in html
    assert shown.replace("[", "\\[").replace("]", "\\]") in md
