"""The privacy-utility figure (reports/utility_figure.py): which points it places on the epsilon axes, that it is
drawn into a report as a PNG, and that a document without a finite claim gets no figure."""
import copy

from auditkit.reports import figures, render_report
from auditkit.reports.render import FIGURES
from auditkit.reports.utility_figure import placed_points, privacy_utility, unplaced
from auditkit.results import as_model

PNG = b"\x89PNG\r\n\x1a\n"


def test_only_settings_with_a_finite_claim_are_placed_in_order_of_claim(document):
    doc = copy.deepcopy(document)
    second = copy.deepcopy(doc["settings"][2])
    second["id"], second["label"] = "s03", "gaussian eps 1"
    second["mechanism"]["guarantee"]["epsilon"] = 1.0
    second["training"]["final"]["test_accuracy"] = 0.4
    doc["settings"].append(second)
    results = as_model(doc)
    placed = placed_points(results)
    assert list(placed) == ["jopeq-laplace", "gaussian"]  # "none" has no claim: left out
    assert [(p.setting_id, p.claimed, p.accuracy) for p in placed["gaussian"]] == [("s03", 1.0, 0.4),
                                                                                  ("s02", 2.5, 0.7)]
    assert unplaced(results) == []  # the ceiling is drawn as a line, not listed as left out


def test_a_quantizer_without_a_claim_is_named_as_left_out(document):
    doc = copy.deepcopy(document)
    quantizer = copy.deepcopy(doc["settings"][0])
    quantizer["id"], quantizer["label"], quantizer["mechanism"]["name"] = "s09", "sdq", "sdq"
    doc["settings"].append(quantizer)
    assert unplaced(as_model(doc)) == ["sdq"]


def test_the_figure_is_a_png_drawn_into_the_report(results_folder, tmp_path):
    folder, document = results_folder
    path = privacy_utility(as_model(document), tmp_path / "alone.png")
    assert path.read_bytes()[:8] == PNG
    assert FIGURES["privacy_utility"] is privacy_utility
    written = render_report(document, folder, formats=("md",))
    assert folder / "figures" / "privacy_utility.png" in written
    assert (folder / "figures" / "privacy_utility.png").read_bytes()[:8] == PNG
    assert "figures/privacy_utility.png" in (folder / "report.md").read_text(encoding="utf-8")


def test_no_figure_without_a_trained_setting_with_a_finite_claim(document):
    doc = copy.deepcopy(document)
    doc["settings"] = [doc["settings"][0]]  # the run without a mechanism alone
    assert not figures.has_data("privacy_utility", as_model(doc))
    assert figures.has_data("privacy_utility", as_model(document))
