from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
from PIL import Image

from auditkit.reports import figure_style, figures
from auditkit.reports.figure_style import VERDICT_COLOURS
from auditkit.reports.sections.figure_captions import FIGURE_CAPTIONS
from auditkit.reports.render import FIGURES
from auditkit.results import as_model
from auditkit.results.model import MechanismEntry, Setting


@pytest.fixture
def drawn(monkeypatch):
    """The figures the report figure functions would save (not written), for their axes to be inspected."""
    kept = []
    monkeypatch.setattr(figures, "_save", lambda figure, path: kept.append(figure) or Path(path))
    yield kept
    for figure in kept:
        plt.close(figure)


SCRIPT_LABEL_DRAWN = '<script>alert("x")</script> \\$\\notacommand\\$ gaussian'  # "$" escaped for matplotlib


def _points(collections):
    return [tuple(np.round(point, 4)) for collection in collections for point in collection.get_offsets()]


def test_every_summary_figure_has_a_caption_in_report_order():
    assert list(FIGURES) == list(FIGURE_CAPTIONS)


@pytest.mark.parametrize("name", list(FIGURES))
def test_each_figure_is_a_png_even_with_dollar_signs_in_labels(tmp_path, document, name):
    assert "$\\notacommand$" in document["settings"][2]["label"]  # broken mathtext, were it parsed
    path = FIGURES[name](as_model(document), tmp_path / f"{name}.png")
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width > 300 and image.height > 200


def test_accuracy_vs_round_draws_one_line_per_setting_in_percent(document, drawn):
    figures.accuracy_vs_round(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    assert [list(line.get_ydata()) for line in axis.lines] == [
        pytest.approx([50, 80, 91.23]), pytest.approx([40, 70, 81.23]), pytest.approx([30, 60, 70])]
    assert [text.get_text() for text in axis.get_legend().get_texts()] == [
        "float32 (none)", "JoPEQ | eps=1", '<script>alert("x")</script> \\$\\notacommand\\$ gaussian']


def test_ssim_vs_epsilon_keeps_settings_with_a_finite_claim_and_an_inversion(document, drawn):
    figures.ssim_vs_epsilon(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    assert [(list(line.get_xdata()), list(line.get_ydata()), line.get_linestyle()) for line in axis.lines] == [
        ([1.0], [0.0213], "-"), ([1.0], [0.412], "--")]
    assert axis.get_xscale() == "log"
    assert [text.get_text() for text in axis.get_legend().get_texts()] == [
        "jopeq-laplace (defended)", "jopeq-laplace (clean attack)"]


def test_ssim_vs_epsilon_without_anything_to_plot_draws_a_note(document, drawn):
    document["settings"] = document["settings"][:1]  # no claim
    figures.ssim_vs_epsilon(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    assert not axis.lines
    assert [text.get_text() for text in axis.texts] == [
        "no setting has both a finite claimed epsilon and an inversion result"]


def test_lower_bound_vs_epsilon_plots_each_settings_strongest_bound_coloured_by_its_headline(document, drawn):
    figures.lower_bound_vs_epsilon(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    # JoPEQ's strongest bound is its adaptive test's 2.2, not the black-box 1.83; x is the mechanism's claim
    assert _points(axis.collections) == [(1.0, 2.2), (2.5, 0.4)]
    assert [c.get_facecolor()[0][:3].round(3).tolist() for c in axis.collections] == [
        np.round(plt.matplotlib.colors.to_rgb(VERDICT_COLOURS[v]), 3).tolist() for v in ("violated", "consistent")]
    cap, claim_line = axis.lines
    assert (list(cap.get_ydata()), cap.get_linestyle()) == ([4.61, 4.61], ":")
    assert list(claim_line.get_xdata()) == list(claim_line.get_ydata()) == pytest.approx([0, 4.61 * 1.05])
    # claims 1 and 2.5, less than a decade apart: both axes linear, y = x their diagonal
    assert axis.get_xscale() == axis.get_yscale() == "linear" and axis.get_ylim() == pytest.approx((0, 1.15 * 4.61))
    assert not axis.texts  # the legend names verdicts and mechanisms; labels beside points overlapped
    legend = axis.get_legend()
    assert [text.get_text() for text in legend.get_texts()] == [
        "violated (decisive)", "consistent", "jopeq-laplace", "gaussian", "y = x (the claim)", "cap (a perfect test)"]
    assert legend.get_bbox_to_anchor().x0 > axis.get_window_extent().x1 - 1  # outside the data, to the right


def _one_round_verdict(setting, verdict, evidence=None):
    """The setting's headline and its one-round claim's verdict set to ``verdict``."""
    setting["verdict"] = {**setting["verdict"], "verdict": verdict, "evidence": evidence}
    one_round = setting["verdict"]["claims"][0]
    assert one_round["scope"] == "one round"
    one_round.update(verdict=verdict, evidence=evidence)


def test_the_bound_figure_colours_a_claim_that_a_test_did_not_decide_by_its_verdict(document, drawn):
    """A setting whose black-box test says consistent but whose one-round claim is refuted by computation is red,
    not green."""
    _one_round_verdict(document["settings"][2], "violated", "analytic")
    figures.lower_bound_vs_epsilon(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    red = np.round(plt.matplotlib.colors.to_rgb(VERDICT_COLOURS["violated"]), 3).tolist()
    jopeq, gaussian = axis.collections
    assert jopeq.get_facecolor()[0][:3].round(3).tolist() == red
    # refuted by computation: hollow, its edge red (no test reached it)
    assert gaussian.get_facecolor()[0][:3].round(3).tolist() == [1.0, 1.0, 1.0]
    assert gaussian.get_edgecolor()[0][:3].round(3).tolist() == red
    assert [t.get_text() for t in axis.get_legend().get_texts()][:2] == ["violated (decisive)", "violated (analytic)"]


def test_lower_bound_vs_epsilon_goes_log_log_when_claims_span_decades(document, drawn):
    document["settings"][2]["mechanism"]["guarantee"]["epsilon"] = 2.0e4  # a vague claim beside a tight one
    figures.lower_bound_vs_epsilon(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    assert axis.get_xscale() == axis.get_yscale() == "log"  # y = x a straight line, not a curve
    assert axis.get_xlim() == pytest.approx((0.2 / 1.5, 4.0e4))  # the floor: half the smallest value, 0.4
    assert axis.get_ylim() == pytest.approx((0.2 / 1.5, 1.15 * 4.61))  # the y axis stops above the cap, not at 2e4
    claim_line = [line for line in axis.lines if line.get_linestyle() == "-"][0]
    assert list(claim_line.get_xdata()) == list(claim_line.get_ydata())
    assert figures.FLOOR_LABEL not in [t.get_text() for t in axis.get_legend().get_texts()]  # no bound of 0


def test_a_bound_of_zero_on_log_axes_sits_at_the_floor_and_the_legend_says_so(document, drawn):
    document["settings"][2]["mechanism"]["guarantee"]["epsilon"] = 2.0e4
    document["settings"][2]["verdict"]["bound"]["epsilon_lower_bound"] = 0.0  # a test that certified nothing
    figures.lower_bound_vs_epsilon(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    floor = 1.0 / 2  # half the smallest positive value drawn: the claim 1
    assert _points(axis.collections) == [(1.0, 2.2), (2.0e4, floor)]
    assert axis.get_ylim()[0] < floor and axis.get_yscale() == "log"
    floor_line = [line for line in axis.lines if line.get_linestyle() == "-."][0]
    assert list(floor_line.get_ydata()) == [floor, floor]
    assert [t.get_text() for t in axis.get_legend().get_texts()][-1] == figures.FLOOR_LABEL


@pytest.mark.parametrize("verdict", ["consistent", "violated", "vacuous claim", "inconclusive", "no claim"])
def test_the_bound_figure_colours_each_point_by_its_verdicts_badge_colour(document, drawn, verdict):
    _one_round_verdict(document["settings"][2], verdict)
    figures.lower_bound_vs_epsilon(as_model(document), "unused.png")
    jopeq, gaussian = drawn[0].axes[0].collections
    assert plt.matplotlib.colors.to_hex(gaussian.get_facecolor()[0]) == VERDICT_COLOURS[verdict]
    assert plt.matplotlib.colors.to_hex(jopeq.get_facecolor()[0]) == VERDICT_COLOURS["violated"]


def test_the_bound_figure_colours_the_one_round_claims_verdict_not_the_whole_runs(document, drawn):
    """The figure plots one-round claims: a whole-run refutation (here by canary clients) leaves its point the
    colour of the one-round verdict, consistent."""
    gaussian = document["settings"][2]
    _one_round_verdict(gaussian, "consistent")
    gaussian["verdict"]["verdict"] = "violated"  # the headline: the worst over both claims
    figures.lower_bound_vs_epsilon(as_model(document), "unused.png")
    assert plt.matplotlib.colors.to_hex(drawn[0].axes[0].collections[1].get_facecolor()[0]) == (
        VERDICT_COLOURS["consistent"])


# every figure but the bound figure: mechanisms, settings, views and attacks, never a verdict
_NOT_VERDICTS = [name for name in FIGURES if name != "lower_bound_vs_epsilon"]


@pytest.mark.parametrize("name", _NOT_VERDICTS)
def test_no_figure_but_the_bound_figure_draws_a_verdicts_colour(document, documents, drawn, verdict_hues, name):
    source = documents["attack-curve"] if name == "ssim_vs_error_std" else document
    FIGURES[name](as_model(source), "unused.png")
    assert verdict_hues(drawn[0]) == {}


def test_the_verdict_colour_check_finds_matplotlibs_red_green_and_orange(drawn, verdict_hues):
    figure, axis = plt.subplots()
    drawn.append(figure)
    for colour in ("tab:red", "tab:green", "tab:orange"):
        axis.plot([0, 1], [0, 1], color=colour)
    assert sorted(verdict_hues(figure).values()) == ["consistent", "vacuous claim", "violated"]


@pytest.mark.parametrize("name", FIGURES)
def test_every_figure_that_draws_y_equals_x_has_equal_scales(document, drawn, name):
    """A line y = x (a claim, or guessing) is straight only when both axes share a scale."""
    document["settings"][2]["mechanism"]["guarantee"]["epsilon"] = 2.0e4  # the bound figure's claims span decades
    FIGURES[name](as_model(document), "unused.png")
    for axis in drawn[0].axes:
        diagonal = [line for line in axis.lines if len(line.get_xdata()) > 1
                    and list(line.get_xdata()) == list(line.get_ydata())]
        if diagonal:
            assert axis.get_xscale() == axis.get_yscale()


def test_lower_bound_vs_epsilon_without_distinguishing_draws_a_note(document, drawn):
    for setting in document["settings"]:
        setting["distinguish"], setting["verdict"] = None, None
    figures.lower_bound_vs_epsilon(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    assert not axis.collections and not axis.lines
    assert [text.get_text() for text in axis.texts] == [
        "no setting has both a finite claimed epsilon and a distinguishing result"]


def test_bits_vs_accuracy_puts_a_point_per_setting_named_in_a_legend_outside(document, drawn):
    figures.bits_vs_accuracy(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    assert _points(axis.collections) == [(32.0, 91.23), (2.75, 81.23), (32.0, 70.0)]
    assert not axis.texts
    assert [text.get_text() for text in axis.get_legend().get_texts()] == [
        "float32 (none)", "JoPEQ | eps=1", '<script>alert("x")</script> \\$\\notacommand\\$ gaussian']
    assert axis.get_xscale() == "log"  # 2.75 to 32 bits: more than a decade


def test_every_setting_gets_its_own_colour_and_a_mechanisms_settings_share_a_marker():
    settings = [Setting.model_construct(id=f"s{i:02d}", mechanism=MechanismEntry.model_construct(name=name))
                for i, name in enumerate(["none", "sdq", *["gaussian"] * 3, *["cepam-gaussian"] * 3,
                                          *["jopeq-laplace"] * 3])]
    styles = figure_style.setting_styles(settings)
    colours = [styles[s.id]["color"] for s in settings]
    assert len(set(colours)) == 11  # eleven settings, eleven colours (the default cycle repeats after ten)
    assert {styles[f"s0{i}"]["marker"] for i in (2, 3, 4)} == {styles["s02"]["marker"]}
    assert styles["s00"]["marker"] != styles["s02"]["marker"] != styles["s05"]["marker"]


def test_the_reconstruction_sweep_figure_draws_one_panel_per_sweep_with_its_band_and_the_claims_bound(
        document, drawn):
    figures.reconstruction_vs_epsilon(as_model(document), "unused.png")
    axis, legend_cell = drawn[0].axes  # one sweep, and the cell beside it for the legend
    assert not legend_cell.axison and legend_cell.get_legend() is not None
    defended = [line for line in axis.lines if line.get_label().startswith("defended")][0]
    assert list(defended.get_xdata()) == [1.0, 10.0, 100.0] and list(defended.get_ydata()) == [0.05, 0.3, 0.8]
    bound = [line for line in axis.lines if line.get_label() == "identification the claim allows, M = 10 (ReRo bound)"][0]
    assert list(bound.get_ydata()) == [0.27, 0.9, 1.0]
    assert axis.get_xscale() == "log" and len(axis.collections) == 1  # the interval band
    crossing = [line for line in axis.lines if line.get_label().startswith("mean SSIM reaches")][0]
    assert list(crossing.get_xdata()) == [pytest.approx(20.0)]
    assert axis.get_title() == "jopeq-laplace (bits=2)"


# which report figures each command's sample document has data for (the report draws only those)
PLOTTED = {
    "train": ["accuracy_vs_round", "privacy_utility", "bits_vs_accuracy"],
    "audit": ["accuracy_vs_round", "privacy_utility", "ssim_vs_epsilon", "lower_bound_vs_epsilon", "bits_vs_accuracy",
              "identification_vs_epsilon", "probe_ssim_vs_epsilon", "reconstruction_vs_epsilon"],
    "attack": ["ssim_vs_epsilon"],
    "attack-curve": ["ssim_vs_epsilon", "ssim_vs_error_std"],
    "distinguish": ["lower_bound_vs_epsilon"],
    "account": [],
}


def test_each_document_has_data_for_the_figures_it_can_fill(documents):
    assert {name: [f for f in FIGURES if figures.has_data(f, as_model(doc))] for name, doc in documents.items()} == PLOTTED


def test_ssim_vs_error_std_draws_a_line_per_mechanism_and_the_shared_clean_attack(documents, drawn):
    figures.ssim_vs_error_std(as_model(documents["attack-curve"]), "unused.png")
    axis = drawn[0].axes[0]
    gaussian, sdq, clean = axis.lines
    assert (list(gaussian.get_xdata()), list(gaussian.get_ydata())) == ([0.0009, 0.009, 0.09], [0.91, 0.62, 0.11])
    assert (list(sdq.get_xdata()), list(sdq.get_ydata())) == ([0.004, 0.07], [0.85, 0.2])  # sorted by error
    assert (list(clean.get_ydata()), clean.get_linestyle()) == ([0.934, 0.934], "--")
    assert axis.get_xscale() == "log" and axis.get_ylim()[1] > 0.934 + 0.05  # the clean line clear of the frame
    assert [text.get_text() for text in axis.get_legend().get_texts()] == ["gaussian", "sdq", "clean attack"]
    assert axis.get_xlabel() == "standard deviation of the error in the server's view"


def test_ssim_vs_error_std_dashes_each_mechanisms_own_clean_attack_when_they_differ(documents, drawn):
    document = documents["attack-curve"]
    document["settings"][3]["inversion"]["clean"]["ssim_mean"] = 0.5  # sdq's clean attack scored apart
    document["settings"][4]["inversion"]["clean"] = None  # and one point without a clean run
    figures.ssim_vs_error_std(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    assert [(list(line.get_ydata()), line.get_linestyle()) for line in axis.lines] == [
        ([0.91, 0.62, 0.11], "-"), ([0.934, 0.934, 0.934], "--"), ([0.85, 0.2], "-"), ([0.5], "--")]
    assert [text.get_text() for text in axis.get_legend().get_texts()] == [
        "gaussian", "gaussian (clean attack)", "sdq", "sdq (clean attack)"]


def test_ssim_vs_error_std_without_errors_draws_a_note(document, drawn):
    figures.ssim_vs_error_std(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    assert not axis.lines
    assert [text.get_text() for text in axis.texts] == ["no setting recorded the error of the server's view"]


def test_ssim_vs_epsilon_leaves_out_the_clean_line_without_a_clean_run(documents, drawn):
    document = documents["attack"]
    document["settings"][0]["inversion"]["clean"] = None
    figures.ssim_vs_epsilon(as_model(document), "unused.png")
    axis = drawn[0].axes[0]
    assert [(list(line.get_xdata()), list(line.get_ydata())) for line in axis.lines] == [([200.0], [0.183])]


def test_training_figures_leave_out_settings_that_did_not_train(document, drawn):
    document["settings"][1]["training"] = None
    figures.accuracy_vs_round(as_model(document), "unused.png")
    figures.bits_vs_accuracy(as_model(document), "unused.png")
    lines, points = drawn[0].axes[0], drawn[1].axes[0]
    assert [line.get_label() for line in lines.lines] == ["float32 (none)", SCRIPT_LABEL_DRAWN]
    assert _points(points.collections) == [(32.0, 91.23), (32.0, 70.0)]


def test_a_figure_of_a_document_without_training_is_a_note_not_a_crash(documents, drawn):
    figures.accuracy_vs_round(as_model(documents["distinguish"]), "unused.png")
    figures.bits_vs_accuracy(as_model(documents["distinguish"]), "unused.png")
    assert [[t.get_text() for t in figure.axes[0].texts] for figure in drawn] == [
        ["no setting trained"], ["no setting has a finite rate and accuracy"]]


# ---------------------------------------------------------------- a reproduction's figures (one per table)

def _stars(axis):
    return [(list(line.get_xdata()), list(line.get_ydata())) for line in axis.lines if line.get_marker() == "*"]


def test_a_reproduction_table_against_x_draws_a_panel_per_column_with_bands(reproduction, drawn):
    table = reproduction["tables"][1]  # 001 Fig. 2a: distortion against eps1, one column per b, plot only
    figures.reproduction_table(as_model(reproduction), 1, "unused.png")
    axes = drawn[0].axes
    assert [axis.get_title() for axis in axes] == ["001 Fig. 2a: b = 4", "001 Fig. 2a: b = 5", "001 Fig. 2a: b = 6"]
    first = [r for r in table["rows"] if r["column"] == "b = 4"]
    for axis in axes:
        assert [line.get_label() for line in axis.lines] == ["Q_b,eps1 (proposed)", "LaplaceSQ"]
        assert len(axis.collections) == 2 and _stars(axis) == []  # a band per method; the paper prints no number
    proposed = axes[0].lines[0]
    rows = sorted((r for r in first if r["method"] == "Q_b,eps1 (proposed)"), key=lambda r: r["x"])
    assert list(proposed.get_xdata()) == [r["x"] for r in rows]
    assert list(proposed.get_ydata()) == pytest.approx([r["mean"] for r in rows])
    assert axes[0].get_xlabel() == "eps1"
    legend = axes[-1].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["Q_b,eps1 (proposed)", "LaplaceSQ", "the paper's number"]


def test_a_reproduction_training_table_draws_our_mean_curve_and_the_papers_final_number(reproduction, drawn):
    table = reproduction["tables"][0]  # 001 Fig. 4a: final test accuracy, two columns (range readings)
    figures.reproduction_table(as_model(reproduction), 0, "unused.png")
    axis = drawn[0].axes[0]
    rows = [r for r in table["rows"] if r["column"] == "range = literal"]
    seeds = reproduction["runs"][rows[0]["setting"]]["seeds"]
    mean = 100 * np.mean([seeds[str(s)]["curve"] for s in reproduction["budget"]["seeds"]], axis=0)
    assert list(axis.lines[0].get_ydata()) == pytest.approx(list(mean))
    assert list(axis.lines[0].get_xdata()) == [1, 2, 3, 4] and axis.get_xlabel() == "round"
    printed = [(r["paper_value"]) for r in rows if r["paper_value"] is not None]
    assert [y for _, (y,) in _stars(axis)] == pytest.approx(printed) and all(x == [4] for x, _ in _stars(axis))


def test_a_reproduction_table_of_means_draws_each_row_with_its_interval(reproduction, drawn):
    table = reproduction["tables"][2]  # 001 Fig. 2a (text): one mean per row, one column per reading of rho
    figures.reproduction_table(as_model(reproduction), 2, "unused.png")
    axis = drawn[0].axes[0]
    rows = [r for r in table["rows"] if r["column"] == table["rows"][0]["column"]]
    assert [t.get_text() for t in axis.get_xticklabels()] == [r["method"] for r in rows]
    means = [line.get_ydata()[0] for line in axis.lines if line.get_marker() == "o"]
    assert means == pytest.approx([r["mean"] for r in rows])


def test_a_reproduction_figure_draws_labels_as_given(reproduction, tmp_path):
    reproduction["tables"][2]["rows"][0]["method"] = "$\\notacommand$ LaplaceSQ"  # broken mathtext, were it parsed
    path = figures.reproduction_table(as_model(reproduction), 2, tmp_path / "figure.png")
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width > 600
