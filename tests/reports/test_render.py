import math
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest

import auditkit.reports.render as render_module
from auditkit.output_folder import MANIFEST
from auditkit.reports import render_report
from auditkit.results import load_results

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FIGURE_FILES = ["accuracy_vs_round.png", "privacy_utility.png", "ssim_vs_epsilon.png", "lower_bound_vs_epsilon.png",
                "bits_vs_accuracy.png", "identification_vs_epsilon.png", "probe_ssim_vs_epsilon.png",
                "reconstruction_vs_epsilon.png"]
GRIDS = ["figures/reconstruction-s00.png", "figures/reconstruction-s01.png", "figures/probe-s01.png"]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_render_report_writes_the_figures_and_both_reports(rendered):
    folder = rendered.folder
    assert rendered.paths == [*(folder / "figures" / name for name in FIGURE_FILES),
                              folder / "report.md", folder / "report.html"]
    for path in rendered.paths[:7]:
        assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert sorted(p.name for p in folder.rglob("*") if p.name.startswith(".")) == [MANIFEST]  # no temporary left


def test_the_markdown_links_files_that_exist(rendered):
    text = (rendered.folder / "report.md").read_text()
    links = re.findall(r"!\[[^\n]*?\]\(([^)]*)\)", text)
    assert links == [*(f"figures/{name}" for name in FIGURE_FILES), *GRIDS]  # 8 figures, 2 inversion grids, 1 probe
    assert all((rendered.folder / unquote(link)).read_bytes().startswith(PNG_SIGNATURE) for link in links)
    assert "| 81.23 % | -10.00 points | 2.75 bits/coord | 11.64x |" in text


def test_the_html_report_is_self_contained_and_inert(rendered):
    page = (rendered.folder / "report.html").read_text()
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*https?:""", page, flags=re.I)
    sources = re.findall(r"<img src=\"([^\"]*)\"", page)
    assert len(sources) == 8 + 3 and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page


def test_rendering_again_gives_the_same_reports(rendered):
    before = _snapshot(rendered.folder)
    render_report(rendered.document, rendered.folder)
    assert _snapshot(rendered.folder) == before


def _break_a_figure(monkeypatch):
    def half_written(results, file):
        file.write(PNG_SIGNATURE)
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


def test_a_null_grid_is_not_looked_for(results_folder):
    folder, document = results_folder
    document["settings"][1]["inversion"]["figure"] = None
    (folder / "figures" / "reconstruction-s01.png").unlink()
    render_report(document, folder)
    assert (folder / "report.html").read_text().count("<img src=\"data:image/png;base64,") == 8 + 2  # s00, probe


def test_a_probe_grid_must_be_a_file_in_the_results_folder(results_folder):
    folder, document = results_folder
    (folder / "figures" / "probe-s01.png").unlink()
    before = _snapshot(folder)
    with pytest.raises(ValueError, match=re.escape("results.settings[1].probe.figure: figures/probe-s01.png is not a "
                                                   "file in ")):
        render_report(document, folder)
    assert _snapshot(folder) == before


@pytest.mark.parametrize("change, message", [
    (lambda doc: doc.update(schema_version=2), "schema_version must be 6, got 2"),
    (lambda doc: doc.update(schema_version=3), "schema_version must be 6, got 3"),
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


def _image_links(folder: Path) -> list[str]:
    return re.findall(r"!\[[^\n]*?\]\(([^)]*)\)", (folder / "report.md").read_text())


def test_a_report_elsewhere_copies_the_grids_and_stands_alone(results_folder, tmp_path_factory):
    folder, document = results_folder
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "report"
    written = render_report(document, elsewhere, results_dir=folder)
    assert written[:3] == [elsewhere / grid for grid in GRIDS]  # copied with the reports, in one batch
    assert written[-2:] == [elsewhere / "report.md", elsewhere / "report.html"]
    shutil.rmtree(folder)  # the results folder gone: the report still shows every image
    links = _image_links(elsewhere)
    assert links == [*(f"figures/{name}" for name in FIGURE_FILES), *GRIDS]
    assert all((elsewhere / unquote(link)).resolve().is_relative_to(elsewhere.resolve()) for link in links)
    assert all((elsewhere / unquote(link)).read_bytes().startswith(PNG_SIGNATURE) for link in links)
    assert (elsewhere / "report.html").read_text().count("<img src=\"data:image/png;base64,") == 11


def test_a_moved_report_folder_renders_again_from_its_results(results_folder, tmp_path_factory):
    folder, document = results_folder
    render_report(document, folder, with_results=True)
    moved = tmp_path_factory.mktemp("moved") / "other"
    shutil.move(folder, moved)
    render_report(load_results(moved / "results.json"), moved, results_dir=moved)
    links = _image_links(moved)
    assert len(links) == 11 and all((moved / unquote(link)).read_bytes().startswith(PNG_SIGNATURE) for link in links)
    again = tmp_path_factory.mktemp("again")
    render_report(load_results(moved / "results.json"), again, results_dir=moved)
    assert _image_links(again) == links and all((again / unquote(link)).is_file() for link in links)


# ---------------------------------------------------------------- every command's document

# the figures drawn for each command's sample document, and the files written after them
DRAWN = {
    "train": ["accuracy_vs_round", "privacy_utility", "bits_vs_accuracy"],
    "audit": ["accuracy_vs_round", "privacy_utility", "ssim_vs_epsilon", "lower_bound_vs_epsilon", "bits_vs_accuracy",
              "identification_vs_epsilon", "probe_ssim_vs_epsilon", "reconstruction_vs_epsilon"],
    "attack": ["ssim_vs_epsilon"],
    "attack-curve": ["ssim_vs_epsilon", "ssim_vs_error_std"],
    "distinguish": ["lower_bound_vs_epsilon"],
    "account": [],
}
ERROR_STD_CAPTION = ("Inversion SSIM against the standard deviation of the error in the server's view, one line per "
                     "mechanism; dashed: the clean attack.")


def _rows(markdown: str, heading: str) -> list[str]:
    """The rows of the summary table under ``heading`` ([] when the report leaves that table out)."""
    if f"### {heading}" not in markdown:
        return []
    section = markdown[markdown.index(f"### {heading}"):]
    return [line for line in section.split("\n\n")[1].splitlines()[2:]]


PRIVACY, ATTACKS, UTILITY = ("Privacy: claims and verdicts", "Attacks: what the adversary recovered",
                             "Utility and cost")


@pytest.mark.parametrize("name", list(DRAWN))
def test_every_commands_document_renders_its_figures_and_both_reports(rendered_commands, name):
    r = rendered_commands[name]
    assert r.paths == [*(r.folder / "figures" / f"{f}.png" for f in DRAWN[name]),
                       r.folder / "report.md", r.folder / "report.html"]
    assert all(path.read_bytes().startswith(PNG_SIGNATURE) for path in r.paths[:-2])
    links = re.findall(r"!\[[^\n]*?\]\(([^)]*)\)", r.md)
    grids = [*(s["inversion"]["figure"] for s in r.document["settings"]
               if s["inversion"] is not None and s["inversion"]["figure"] is not None),
             *(s["probe"]["figure"] for s in r.document["settings"] if s["probe"] is not None)]
    assert links == [*(f"figures/{f}.png" for f in DRAWN[name]), *grids]
    assert all((r.folder / unquote(link)).read_bytes().startswith(PNG_SIGNATURE) for link in links)
    assert len(re.findall(r"<img src=\"data:image/png;base64,", r.html)) == len(links)
    assert "<script" not in r.html.lower()
    assert len(_rows(r.md, PRIVACY)) == len(r.document["settings"])  # every document makes (or lacks) a claim
    assert ("## Figures" in r.md) == bool(DRAWN[name]) and ("<h2>Figures</h2>" in r.html) == bool(DRAWN[name])
    assert ("## Reconstructions" in r.md) == bool(grids)
    headline = any(s["verdict"] is not None for s in r.document["settings"])
    assert ("## Findings" in r.md) == headline and ("<h2>Findings</h2>" in r.html) == headline
    tested = any(s["identification"] is not None or s["probe"] is not None for s in r.document["settings"])
    assert ("## Reconstruction against the claim" in r.md) == tested and ('id="identification"' in r.html) == tested
    assert r.html.count("<details open>") == (len(r.document["settings"]) == 1)  # one setting: details shown


def test_the_train_report(rendered_commands):
    r = rendered_commands["train"]
    assert r.md.split("\n")[2].startswith(
        "1 mechanism setting trained and accounted with auditkit 0.2.0 (command: train) on the mnist-5k dataset (iid "
        "split over 10 clients; 1,200 training, 200 validation and 397 test examples), model cnn (6,422 parameters), "
        "3 FedAvg rounds of τ = 15 local steps")
    assert _rows(r.md, PRIVACY) == [
        "| dpsq | ε = 0.5, δ = 1e-05 | not run | ε = 1.2, δ = 1e-05 over 3 rounds | dp\\_accounting-pld | not run | "
        "not run |"]
    assert _rows(r.md, UTILITY) == ["| dpsq | dpsq (bits=4, clip=1 (l1), rho=0.5) | 80.10 % | - | 4 bits/coord | 8x | - |"]
    assert _rows(r.md, ATTACKS) == [] and 'id="summary-attacks"' not in r.html  # nothing attacked: no table
    assert "- **training**: protocol device-groups, 3 rounds, checkpoints at 1, 3" in r.md
    assert ("- **capabilities**: declared by the mechanism: audit setting, dp\\_event, true epsilon; generic defaults "
            "used: tiling (no one call on tiled copies), output density (no likelihood-ratio statistic)") in r.md
    assert "### Notes" not in r.md and 'id="notes"' not in r.html  # no distinguishing test that they weaken


def test_the_audit_report_has_no_defence_curve_and_no_notes(rendered_commands):
    r = rendered_commands["audit"]
    assert "ssim_vs_error_std" not in r.md and ERROR_STD_CAPTION not in r.md
    assert "### Notes" not in r.md
    assert r.html.count("<details>") == 3


def test_the_attack_report(rendered_commands):
    r = rendered_commands["attack"]
    assert r.md.split("\n")[2] == (
        "1 mechanism setting attacked with auditkit 0.2.0 (command: attack): idlg inverts the gradients of 8 patches "
        "images, each held by a single-image client (one local step), through model lenet (13,648 parameters), once "
        "on the clean gradients and once on the server's view after the mechanism, the labels inferred by the "
        "attack; seed 4, device cpu.")
    assert _rows(r.md, PRIVACY) == ["| laplace scale=0.01 | ε = 200, δ = 0 | not run | not run | not run | - | not run |"]
    assert _rows(r.md, ATTACKS) == [
        "| laplace scale=0.01 | not run | not run | 0.934 → 0.183 | 0.0021 → 0.0612 | 26.8 dB → 12.1 dB |"]
    assert _rows(r.md, UTILITY) == []  # nothing trained
    assert ("![laplace scale=0.01: idlg on the server's view of single-image gradients (rows: ground truth, clean, "
            "defended).](inversion.png)") in r.md
    assert ("- **inversion**: idlg on the server's view of single-image gradients, 8 patches images, labels inferred "
            "by the attack, model lenet; observation: one image's gradient") in r.md
    assert "- **label accuracy**: clean 100.00 % → defended 62.50 %" in r.md
    assert "- **server's view**: 32 bits/coord" in r.md
    assert "- **training**: not run" in r.md and "- **accounting**: not run" in r.md
    assert "client sizes" not in r.md and "FedAvg" not in r.md  # no data or training in the provenance


def test_the_defence_curve_report_draws_ssim_against_the_error(rendered_commands):
    r = rendered_commands["attack-curve"]
    assert f"![{ERROR_STD_CAPTION}](figures/ssim_vs_error_std.png)" in r.md
    assert "<figcaption>" + ERROR_STD_CAPTION.replace("'", "&#39;") + "</figcaption>" in r.html
    assert "a defence curve: each setting is one mechanism at one parameter value" in r.md
    assert [row.split(" | ")[3] for row in _rows(r.md, ATTACKS)] == [
        "0.934 → 0.91", "0.934 → 0.62", "0.934 → 0.11", "0.934 → 0.85", "0.934 → 0.2"]
    assert "- **server's view**: error std 0.0009, 32 bits/coord" in r.md
    assert "## Reconstructions" not in r.md  # no grid drawn for a curve point


def test_the_distinguish_report(rendered_commands):
    r = rendered_commands["distinguish"]
    assert r.md.split("\n")[2] == (
        "1 mechanism setting tested with auditkit 0.2.0 (command: distinguish) by black-box distinguishing tests on "
        "outputs sampled from the real implementation (200,000 outputs per neighbouring pair, 2 tests, 95 % "
        "family-wise confidence, Bonferroni): each certified lower bound on epsilon is set against the claim; seed 4, "
        "device cpu.")
    assert _rows(r.md, PRIVACY) == [
        "| half (plugin: entry point half = my\\_pkg.half) | ε = 1, δ = 0 | violated, decisive (decided by: "
        "distinguishing test (worst pair: 0 vs clip), p = 3.2e-07, 6.4e-07 adjusted over the audit's 2 tests; 1 test) "
        "| not run | not run | - | ≥ 1.41 (black-box test (worst pair: 0 vs "
        "clip); 95 % family-wise; cap 9.2) |"]
    assert _rows(r.md, ATTACKS) == _rows(r.md, UTILITY) == []
    assert r.md[r.md.index("## Findings"):r.md.index("## How to read this report")] == (
        "## Findings\n\n### Claims refuted\n\n- half: violated (decisive refutation): the one-round claim ε = 1, δ = 0; "
        "certified ε ≥ 1.41 against the claimed 1 (0 vs clip) (p = 3.2e-07, 6.4e-07 adjusted over the audit's 2 tests).\n\n")
    notes = r.md[r.md.index("### Notes"):r.md.index("## Figures")]
    # a file whose generic setting does not say where its norm came from: the violation holds only if the claim's
    # neighbours include the pairs, and the claim's own sensitivity is named beside them
    assert notes.strip().splitlines()[2:] == [
        "- half: the distinguishing test ran on the generic neighbouring pairs (d = 2, the l2 ball of radius 1, "
        "pairs 2 radius apart), as the mechanism declares no audit setting. The verdict \"violated\" holds only if "
        "the claim's neighbours include these pairs: the claim's sensitivity reads \"l1 clip 1\"; it drew its "
        "outputs per call, one call per output (generic default: the mechanism declares no tiling): exact, only "
        "slower than a declared tiling or batch sampler, so this weakens no verdict."]
    html_notes = r.html[r.html.index('<ul class="notes" id="notes">'):]
    assert html_notes.index("half: the distinguishing test ran on the generic neighbouring pairs") < html_notes.index(
        "</ul>")
    assert r.html.index('id="notes"') < r.html.index("<h2>Figures</h2>")  # right under the summary
    assert '<span class="badge plugin">plugin: entry point half = my_pkg.half</span>' in r.html
    assert "- **origin**: plugin: entry point half = my\\_pkg.half" in r.md
    assert ("- **capabilities**: generic defaults used: tiling (no one call on tiled copies), audit setting (the "
            "generic 2-D pairs), output density (no likelihood-ratio statistic), dp\\_event (the claim composed as a "
            "generic event), true epsilon (the realised noise's epsilon not computed)") in r.md
    assert ("- **audit setting**: generic default: the mechanism declares no audit setting: d = 2, the l2 "
            "ball of radius 1, pairs 2 radius apart") in r.md
    assert "- **sampling**: per call: one call per output (generic default: the mechanism declares no tiling)" in r.md
    assert "| beyond clip | threshold | ≥ 0.2 | 9.2 | - | per call |" in r.md
    assert "- **plugins**: my\\_pkg.half" in r.md
    assert "- **accountants**: none" in r.md


def test_the_account_report(rendered_commands):
    r = rendered_commands["account"]
    assert r.md.split("\n")[2] == (
        "1 mechanism setting accounted with auditkit 0.2.0 (command: account): analytic accounting, each one-round "
        "claim composed over 100 rounds at δ = 1e-05 (accountant asked for: dp\\_accounting-pld); nothing was trained, "
        "attacked or tested; seed 4, device cpu.")
    assert _rows(r.md, PRIVACY) == [
        "| cepam-gaussian | ε = 0.9, δ = 1e-05 | not run | ε = 7.3, δ = 1e-05 over 100 rounds; paper's FL claim: "
        "ε = 2.1, δ = 1e-05 | dp\\_accounting-pld | not run | not run |"]
    assert _rows(r.md, ATTACKS) == _rows(r.md, UTILITY) == []
    assert ("- **paper's claim**: (eps=2.1, delta=1e-05)-DP for the whole run (003 Theorem 12) (unit: one record; "
            "scope: the whole run; threat model: server sees each update); assumes: Poisson subsampling of records"
            ) in r.md
    assert ("- **accounting**: accountant asked for: dp\\_accounting-pld, 100 rounds at δ = 1e-05; dp\\_accounting-pld: "
            "100 x GaussianDpEvent(1.2)") in r.md
    assert re.findall(r"<h2>(.*?)</h2>", r.html) == ["Summary", "Claim details", "Provenance"]


def test_plugin_names_and_origins_are_escaped(documents, tmp_path):
    document = documents["distinguish"]
    document["settings"][0]["mechanism"]["origin"] = "<script>alert(3)</script>"
    document["provenance"]["plugins"] = ["<img src=x onerror=alert(1)>", "pkg|[x](y)"]
    render_report(document, tmp_path)
    page, text = (tmp_path / "report.html").read_text(), (tmp_path / "report.md").read_text()
    assert "<script" not in page.lower() and "<img src=x" not in page
    assert "plugin: &lt;script&gt;alert(3)&lt;/script&gt;" in page
    assert "<dd>&lt;img src=x onerror=alert(1)&gt;, pkg|[x](y)</dd>" in page
    assert "- **plugins**: &lt;img src=x onerror=alert(1)&gt;, pkg\\|\\[x\\](y)" in text
    assert "(plugin: &lt;script&gt;alert(3)&lt;/script&gt;)" in text


def test_rendering_a_version_2_document_in_memory_asks_for_version_6(v2_document, tmp_path):
    with pytest.raises(ValueError, match=r"^schema_version must be 6, got 2$"):
        render_report(v2_document, tmp_path)
    assert not any(tmp_path.iterdir())


# ---------------------------------------------------------------- a reproduction (command "reproduce")

def _numbers(value, key=""):
    """Every number of a JSON document with the key it sits under (lists under their key), bools left out."""
    if isinstance(value, dict):
        return [found for k, item in value.items() for found in _numbers(item, k)]
    if isinstance(value, list):
        return [found for item in value for found in _numbers(item, key)]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [(key, value)]
    return []


@pytest.fixture(params=["dpsq", "jopeq", "msp"])
def reproduced(request, rendered_reproductions):
    return rendered_reproductions[request.param]


def test_a_reproduction_renders_a_figure_per_table_and_both_reports(reproduced):
    folder, tables = reproduced.folder, reproduced.document["tables"]
    assert reproduced.paths == [*(folder / "figures" / f"reproduction-{i}.png" for i in range(len(tables))),
                                folder / "report.md", folder / "report.html"]
    assert all(path.read_bytes().startswith(PNG_SIGNATURE) for path in reproduced.paths[:-2])
    assert sorted(p.name for p in folder.rglob("*") if p.name.startswith(".")) == [MANIFEST]  # no temporary left
    links = re.findall(r"!\[[^\n]*?\]\(([^)]*)\)", reproduced.md)
    assert links == [f"figures/reproduction-{i}.png" for i in range(len(tables))]


def test_both_kinds_of_report_come_from_the_templates_one_layout(reproduced, rendered):
    """The reproduction's page and a results page share the base template: the same style, header and footer."""
    results_page = (rendered.folder / "report.html").read_text()
    for page, heading, command in ((reproduced.html, "auditkit reproduction", "reproduce"),
                                   (results_page, "auditkit report", "audit")):
        assert f'<header id="report-header">\n<h1>{heading}: ' in page
        assert re.search(rf'<footer id="report-footer">written by auditkit [^<]+ as auditkit/results version 6 '
                         rf'\(command: {command}\)</footer>\n</body>\n</html>', page)
        assert '<details id="how-to-read">' in page and '<dl class="glossary">' in page
    style = re.compile(r"<style>.*?</style>", re.S)
    assert style.search(reproduced.html).group() == style.search(results_page).group()
    assert reproduced.md.rstrip().endswith("(command: reproduce)")


def test_every_number_of_a_reproduction_is_in_its_html(reproduced):
    """Each number as the report writes it (4 significant digits) or as JSON (the configs); per-round curves are
    drawn in the figures, not tabulated."""
    from auditkit.reports.sections.reproduction import CURVES
    from auditkit.reports.sections.text import number

    page = reproduced.html
    numbers = [(key, value) for key, value in _numbers(reproduced.document) if key not in CURVES]
    assert len(numbers) > 100
    missing = [(key, value) for key, value in numbers
               if number(value) not in page and str(value) not in page]
    assert missing == []


def test_each_reproduction_row_is_a_table_row_with_its_verdict_badge(reproduced):
    document, page = reproduced.document, reproduced.html
    classes = {"reproduced": "consistent", "not reproduced": "violated", "not comparable": "inconclusive",
               "holds": "consistent", "reversed": "violated", "unresolved": "inconclusive"}
    verdicts = [r["verdict"] for t in document["tables"] for r in t["rows"]]
    pairs = [p["verdict"] for o in document["orderings"] for p in o["pairs"]]
    badges = re.findall(r'<td><span class="badge v-(\w+)">([a-z ]+)</span></td>', page)
    assert badges == [(classes[v], v) for v in verdicts + pairs]
    assert page.count('<table class="rows">') == len(document["tables"])
    assert page.count("<img src=\"data:image/png;base64,") == len(document["tables"])


def test_the_html_report_of_a_reproduction_is_self_contained_and_inert(reproduced):
    page = reproduced.html
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*https?:""", page, flags=re.I)
    sources = re.findall(r"<img src=\"([^\"]*)\"", page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)


def test_rendering_a_reproduction_again_gives_the_same_reports(rendered_reproductions):
    rendered = rendered_reproductions["msp"]
    before = _snapshot(rendered.folder)
    render_report(rendered.document, rendered.folder)
    assert _snapshot(rendered.folder) == before


@pytest.mark.parametrize("change, message", [
    (lambda doc: doc["tables"][0]["rows"][0].pop("verdict"), "reproduction.tables[0].rows[0].verdict is missing"),
    (lambda doc: doc.update(confidence=math.nan), "reproduction.confidence must be a finite number, got nan"),
])
def test_a_bad_reproduction_writes_nothing(reproduction, tmp_path, change, message):
    change(reproduction)
    with pytest.raises(ValueError, match=re.escape(message)):
        render_report(reproduction, tmp_path / "out")
    assert not (tmp_path / "out").exists()
