import pytest
from PIL import Image


def _check(seen, rendered, min_height):
    """What every report must give a reader in a browser: the summary, every image decoded, nothing fetched or run."""
    assert seen["summary_visible"]
    document = rendered.document
    assert seen["summary_rows"] == len(document["tables"] if document["command"] == "reproduce"
                                       else document["settings"])
    assert seen["overflowing"] == []  # every summary table fits a 1400-pixel window: no sideways scrolling
    figures = [p for p in rendered.paths if p.suffix == ".png"]
    grids = sum((s["inversion"] is not None and s["inversion"]["figure"] is not None) + (s["probe"] is not None)
                for s in document.get("settings", []))
    assert len(seen["images"]) == len(figures) + grids
    assert all(image["complete"] and image["naturalWidth"] > 0 for image in seen["images"])
    assert all(image["src"].startswith("data:image/png") for image in seen["images"])
    assert seen["failed_requests"] == [] and seen["external_requests"] == []
    assert seen["dialogs"] == []  # no <script> label ran
    assert seen["page_errors"] == []
    with Image.open(seen["screenshot"]) as screenshot:
        assert screenshot.format == "PNG" and screenshot.width >= 1000 and screenshot.height > min_height
        assert len(screenshot.getcolors(maxcolors=1 << 20) or range(1 << 20)) > 50  # not a blank page


def test_the_report_reads_in_a_headless_browser(rendered, report_browser, tmp_path):
    seen = report_browser(rendered.folder / "report.html", tmp_path / "report.png")
    _check(seen, rendered, 2000)
    assert len(seen["images"]) == 8 + 3  # eight summary figures, two inversion grids and one probe grid


@pytest.mark.parametrize("name, images", [("distinguish", 1), ("attack", 2)])
def test_a_report_of_another_command_reads_in_a_headless_browser(rendered_commands, report_browser, tmp_path,
                                                                 name, images):
    rendered = rendered_commands[name]
    seen = report_browser(rendered.folder / "report.html", tmp_path / f"{name}.png")
    _check(seen, rendered, 1000)
    assert len(seen["images"]) == images  # distinguish: the lower-bound figure; attack: a figure and the grid


@pytest.mark.parametrize("paper", ["jopeq", "msp"])
def test_a_reproduction_reads_in_a_headless_browser(rendered_reproductions, report_browser, tmp_path, paper):
    rendered = rendered_reproductions[paper]
    seen = report_browser(rendered.folder / "report.html", tmp_path / f"{paper}.png", "#reproduction-summary")
    _check(seen, rendered, 1500)
    assert len(seen["images"]) == len(rendered.document["tables"])  # one figure per table of the paper
