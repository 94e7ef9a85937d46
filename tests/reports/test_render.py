import re
from pathlib import Path
from urllib.parse import unquote

import pytest

import reports.render as render_module
from reports import render_report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FIGURE_FILES = ["accuracy_vs_round.png", "ssim_vs_epsilon.png", "lower_bound_vs_epsilon.png", "bits_vs_accuracy.png"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_render_report_writes_the_figures_and_both_reports(rendered):
    folder = rendered.folder
    assert rendered.paths == [*(folder / "figures" / name for name in FIGURE_FILES),
                              folder / "report.md", folder / "report.html"]
    for path in rendered.paths[:4]:
        assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert sorted(p.name for p in folder.rglob("*") if p.name.startswith(".")) == []  # no temporary left


def test_the_markdown_links_files_that_exist(rendered):
    text = (rendered.folder / "report.md").read_text()
    links = re.findall(r"!\[[^\n]*?\]\(([^)]*)\)", text)
    assert len(links) == 6
    assert all((rendered.folder / unquote(link)).read_bytes().startswith(PNG_SIGNATURE) for link in links)
    assert "| 81.23 % | 2.75 bits/coord | 11.6x |" in text


def test_the_html_report_is_self_contained_and_inert(rendered):
    page = (rendered.folder / "report.html").read_text()
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*https?:""", page, flags=re.I)
    sources = re.findall(r"<img src=\"([^\"]*)\"", page)
    assert len(sources) == 6 and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page


def test_rendering_again_gives_the_same_reports(rendered):
    before = _snapshot(rendered.folder)
    render_report(rendered.document, rendered.folder)
    assert _snapshot(rendered.folder) == before


def _break_a_figure(monkeypatch):
    def half_written(results, path):
        Path(path).write_bytes(PNG_SIGNATURE)
        raise RuntimeError("interrupted")

    monkeypatch.setitem(render_module.FIGURES, "bits_vs_accuracy", half_written)


def _break_the_html(monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(render_module, "render_html", interrupted)


@pytest.mark.parametrize("breaks, error", [(_break_a_figure, RuntimeError), (_break_the_html, KeyboardInterrupt)])
def test_an_interrupted_render_leaves_the_previous_report_untouched(results_folder, monkeypatch, breaks, error):
    folder, document = results_folder
    render_report(document, folder)
    before = _snapshot(folder)
    breaks(monkeypatch)
    with pytest.raises(error):
        render_report(document, folder)
    assert _snapshot(folder) == before  # same files, same bytes, no temporary left


def test_only_the_formats_asked_for_are_written(results_folder):
    folder, document = results_folder
    written = render_report(document, folder, formats=["md"])
    assert [p.name for p in written] == [*FIGURE_FILES, "report.md"]
    assert not (folder / "report.html").exists()


@pytest.mark.parametrize("change, message", [
    (lambda doc: doc.update(schema_version=1), "schema_version must be 2, got 1"),
    (lambda doc: doc["settings"][1]["inversion"].update(figure="figures/gone.png"),
     "results.settings[1].inversion.figure: figures/gone.png is not a file in "),
])
def test_a_bad_document_writes_nothing(results_folder, change, message):
    folder, document = results_folder
    before = _snapshot(folder)
    change(document)
    with pytest.raises(ValueError, match=re.escape(message)):
        render_report(document, folder)
    assert _snapshot(folder) == before


def test_an_unknown_format_is_refused(results_folder):
    folder, document = results_folder
    with pytest.raises(ValueError, match="unknown report format 'pdf'; choose from html, md"):
        render_report(document, folder, formats=("html", "pdf"))


def test_a_report_elsewhere_reads_and_links_the_grids_of_the_results_folder(results_folder, tmp_path_factory):
    folder, document = results_folder
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "report"
    written = render_report(document, elsewhere, results_dir=folder)
    assert written[-2:] == [elsewhere / "report.md", elsewhere / "report.html"]
    links = re.findall(r"!\[[^\n]*?\]\(([^)]*)\)", (elsewhere / "report.md").read_text())
    assert links[4].startswith("../") and links[4].endswith("/figures/reconstruction-s00.png")
    assert all((elsewhere / unquote(link)).read_bytes().startswith(PNG_SIGNATURE) for link in links)
    assert (elsewhere / "report.html").read_text().count("<img src=\"data:image/png;base64,") == 6
