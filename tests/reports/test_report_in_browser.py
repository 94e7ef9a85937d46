from PIL import Image

from reports.render import FIGURES


def test_the_report_reads_in_a_headless_browser(rendered, report_browser, tmp_path):
    seen = report_browser(rendered.folder / "report.html", tmp_path / "report.png")
    assert seen["summary_visible"]
    assert seen["summary_rows"] == len(rendered.document["settings"])
    with_grids = sum(s["inversion"] is not None for s in rendered.document["settings"])
    assert len(seen["images"]) == len(FIGURES) + with_grids
    assert all(image["complete"] and image["naturalWidth"] > 0 for image in seen["images"])
    assert all(image["src"].startswith("data:image/png") for image in seen["images"])
    assert seen["failed_requests"] == [] and seen["external_requests"] == []
    assert seen["dialogs"] == []  # the <script> label did not run
    assert seen["page_errors"] == []
    with Image.open(seen["screenshot"]) as screenshot:
        assert screenshot.format == "PNG" and screenshot.width >= 1000 and screenshot.height > 2000
        assert len(screenshot.getcolors(maxcolors=1 << 20) or range(1 << 20)) > 50  # not a blank page
