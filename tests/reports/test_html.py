import base64
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from auditkit.reports.figures import image_grid
from auditkit.reports.html import png_data_uri, render_html
from auditkit.reports.render import FIGURES
from auditkit.reports.sections.reconstructions import grid_paths
from auditkit.results import as_model
from auditkit.reports.sections.glossary import GLOSSARY
from auditkit.reports.sections.summary import ATTACK_COLUMNS, PRIVACY_COLUMNS, UTILITY_COLUMNS


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self, page):
        super().__init__()
        self.tags, self.text = [], []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def grids_of(document, folder):
    """The PNG of every reconstruction grid ``document`` names, read from ``folder``."""
    return {grid: (folder / grid).read_bytes() for grid in grid_paths(as_model(document).settings)}


@pytest.fixture
def page(results_folder):
    folder, document = results_folder
    png = (folder / "figures" / "reconstruction-s00.png").read_bytes()  # any real PNG
    return render_html(as_model(document), dict.fromkeys(FIGURES, png), grids_of(document, folder))


def test_nothing_runs_and_nothing_is_fetched(page):
    tags = _Tags(page).tags
    names = {tag for tag, _ in tags}
    assert "script" not in names and not names & {"link", "iframe", "object", "embed", "base", "form"}
    assert "<script" not in page.lower()
    assert not [attrs for _, attrs in tags if any(key.startswith("on") for key in attrs)]
    urls = [value for _, attrs in tags for key, value in attrs.items() if key in ("src", "href", "srcset")]
    assert urls and all(url.startswith("data:image/png;base64,") for url in urls)
    assert not re.search(r"https?://|url\(|@import", page)


def test_every_figure_and_reconstruction_grid_is_embedded(page, grid_png):
    images = [attrs for tag, attrs in _Tags(page).tags if tag == "img"]
    assert len(images) == len(FIGURES) + 3  # two settings ran the inversion, one the probe (after the inversions)
    assert images[-2]["alt"].startswith("JoPEQ | eps=1: inverting_gradients on the server's view at round 3")
    assert images[-1]["alt"].startswith("JoPEQ | eps=1: inversion probe (analytic, 16 clients with 1 example each, "
                                        "1 step, round 1; rows: the client's example")
    assert images[0]["src"] == "data:image/png;base64," + base64.b64encode(grid_png).decode()


def test_each_settings_grids_sit_behind_a_closed_fold(page):
    section = page[page.index("<h2>Reconstructions</h2>"):page.index("<h2>Claim details</h2>")]
    folds = re.findall(r'<details class="grids">\s*<summary><strong>(.*?)</strong>: (.*?)</summary>(.*?)</details>',
                       section, flags=re.S)
    assert [(label, summary, block.count("<img ")) for label, summary, block in folds] == [
        ("float32 (none)", "inversion SSIM 0.97 clean → 0.97 defended", 1),
        ("JoPEQ | eps=1", "inversion SSIM 0.41 clean → 0.02 defended; probe SSIM 1.00 clean → 0.05 defended", 2)]
    assert section.count("<img ") == 3  # a document from before the clean references: its grids as they are


def test_a_shared_clean_reference_is_shown_once_above_the_folds(referenced_folder, tmp_path_factory):
    folder, document = referenced_folder
    clean = image_grid({"truth": np.zeros((2, 1, 8, 8)), "clean": np.ones((2, 1, 8, 8))},
                       folder / "figures" / "reconstruction-clean-0123456789ab.png")
    page = render_html(as_model(document), {}, grids_of(document, folder))
    section = page[page.index("<h2>Reconstructions</h2>"):page.index("<h2>Claim details</h2>")]
    uri = png_data_uri(clean.read_bytes(), "clean")
    assert section.count(uri) == 1
    assert section.index(uri) < section.index('<details class="grids">')
    images = [attrs["alt"] for tag, attrs in _Tags(section).tags if tag == "img"]
    assert images[0].startswith("Clean reference for every setting: inverting_gradients on the clients' true updates")
    assert images[3].startswith("Clean reference of the probe for this setting: analytic")  # in JoPEQ's fold
    assert len(images) == 5 and section.count('<details class="grids">') == 2


def test_one_setting_alone_shows_its_grids_open(referenced_folder):
    folder, document = referenced_folder
    document["settings"] = document["settings"][1:2]
    section = render_html(as_model(document), {}, grids_of(document, folder))
    assert section.count('<details class="grids" open>') == 1 and '<details class="grids">' not in section


def test_user_strings_are_text_only(page):
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; $\\notacommand$ gaussian" in page
    assert "note=&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<title>auditkit report: quickstart &lt;b&gt;</title>" in page
    text = "".join(_Tags(page).text)
    assert '<script>alert("x")</script>' in text  # what a reader sees


def _table(page, table_id):
    table = page[page.index(f'<table id="{table_id}"'):]
    return table[:table.index("</table>")]


def _rows(table):
    return table.split("<tr>")[2:]


def test_the_summary_is_three_tables_of_five_to_seven_columns(page):
    for table_id, columns in (("summary-privacy", PRIVACY_COLUMNS), ("summary-attacks", ATTACK_COLUMNS),
                              ("summary-utility", UTILITY_COLUMNS)):
        table = _table(page, table_id)
        assert re.findall(r"<th>(.*?)</th>", table) == [name.replace("'", "&#39;") for name in columns]
        assert 5 <= len(columns) <= 7 and len(_rows(table)) == 3
        assert all(row.count("<td") == len(columns) for row in _rows(table))


def test_the_privacy_table_carries_claims_verdicts_and_the_strongest_bound(page):
    none, jopeq, gaussian = _rows(_table(page, "summary-privacy"))
    assert 'ε = 1, δ = 0 <span class="badge flag">claim-exceeded</span>' in jopeq
    assert ('<td><span class="badge v-violated">violated</span> <span class="badge e-decisive">decisive</span><br>'
            '<span class="muted">decided by: identification among 10 candidates, p = 1e-09, 4e-09 adjusted over the '
            "audit&#39;s 4 tests; 4 tests</span></td>") in jopeq
    # the strongest certified bound of the setting: its adaptive test (2.2) beats the black-box test (1.83)
    assert ('<td class="bound">≥ 2.2<br><span class="muted">moment-matching excess; 95 % family-wise; cap 4.61</span>'
            '</td>') in jopeq
    assert '<span class="badge v-none">not run</span>' in none and "<td class=\"bound\">not run</td>" in none
    assert ('<span class="badge v-consistent">consistent</span><br><span class="muted">decided by: identification '
            'among 10 candidates, p = 0.6; 3 tests</span>') in gaussian
    assert "≥ 0.4<br><span class=\"muted\">black-box test (worst pair: 0 vs clip); 95 % family-wise" in gaussian
    assert "refused: the accountant needs the sampling rate" in gaussian


def test_the_attack_table_carries_identification_probe_and_inversion(page):
    none, jopeq, gaussian = _rows(_table(page, "summary-attacks"))
    assert "<td>M=10: 0.42 [0.38, 0.46] &gt; 0.27; M=100: 0.06 [0.02, 0.10]" in jopeq
    assert ('<td class="num">0.998 → 0.05</td>\n  <td class="num">0.412 → 0.0213</td>'
            '<td class="num">0.0123 → 0.0456</td><td class="num">19.1 dB → 13.4 dB</td>') in jopeq
    assert "<td>M=10: 0.12 [0.08, 0.16] ≤ 0.35; M=100: 0.02 [-0.02, 0.06] ≤ 0.06</td>" in gaussian
    assert '<td>not run</td><td class="num">not run</td>' in none  # neither identification nor probe
    assert "<td class=\"num\">inf dB → inf dB</td>" in none


def test_the_utility_table_reads_accuracy_against_the_run_without_a_mechanism(page):
    none, jopeq, gaussian = _rows(_table(page, "summary-utility"))
    assert all(f'<td class="num">{value}</td>' in jopeq for value in
               ("81.23 %", "-10.00 points", "2.75 bits/coord", "11.64x", "-3.456 dB"))
    assert "sigma=0.8, clip=1 (l2), note=&lt;script&gt;" in gaussian
    assert '<td class="num">∞ (lossless)</td>' in none and '<td class="num">-</td>' in gaussian  # SNR
    assert '<td class="num">91.23 %</td><td class="num">-</td>' in none  # the reference itself
    assert '<td class="num">-21.23 points</td>' in gaussian


def test_the_report_explains_its_terms(page):
    block = page[page.index('<details id="how-to-read">'):]
    block = block[:block.index("</details>")]
    terms = re.findall(r"<dt>(.*?)</dt>", block)
    assert terms == [term for term, _ in GLOSSARY]
    for word in ("cap", "decided by", "worst pair", "uplink SNR", "PPN", "identification, M, ReRo"):
        assert word in terms


def test_sections_come_in_order(page):
    headings = re.findall(r"<h2>(.*?)</h2>", page)
    assert headings[0] == "Findings"  # the audit document's settings have headline verdicts
    assert headings == ["Findings", "Summary", "Adaptive tests", "Reconstruction against the claim", "Figures",
                        "Reconstructions", "Claim details", "Provenance"]
    assert page.index("<h2>Findings</h2>") > page.index("<h1>") and page.index("<p>") < page.index("<h2>Findings")
    assert page.index('<details id="how-to-read">') < page.index("<h2>Summary</h2>")
    assert page.count("<details>") == 3
    assert "<dt>client sizes</dt><dd>120, 120, 120, 120, 120, 120, 120, 120, 120, 120 examples</dd>" in page
    assert "<td>eavesdropper</td><td>the bitstreams</td>" in page
    assert "&#34;label&#34;: &#34;&lt;script&gt;" in page[page.index("<pre>"):]


def test_the_findings_name_the_refuted_claim_with_its_evidence(page):
    block = page[page.index('<div id="findings">'):page.index('<details id="how-to-read">')]
    assert re.findall(r"<h3>(.*?)</h3>", block) == [
        '<span class="badge v-violated">claims refuted</span>',
        '<span class="badge v-consistent">claims consistent with every test</span>',
        '<span class="badge v-other">utility: accuracy against the run without a mechanism</span>',
        '<span class="badge v-other">what one reconstruction attack achieved (not a guarantee)</span>']
    refuted, consistent, utility, reconstruction = re.findall(r"<ul>(.*?)</ul>", block, flags=re.S)
    assert re.findall(r"<li>(.*?)</li>", refuted) == [
        "JoPEQ | eps=1: violated (decisive refutation): the one-round claim ε = 1, δ = 0; the informed adversary identified the "
        "target among 10 candidates in 210 of 500 trials (0.42, lower limit 0.37) while the claim allows at most "
        "0.27 (gaussian M-point (Hayes et al. 2023)) (p = 1e-09, 4e-09 adjusted over the audit&#39;s 4 tests). Also "
        "by computation: the noise it really adds is ε = 1.65 per round, not 1 (computed from the noise&#39;s law; "
        "flag claim-exceeded): the mechanism adds less noise than its claim assumes; the whole run&#39;s claim ε = 3, "
        "δ = 0 over 3 rounds: not tested."]
    assert re.findall(r"<li>(.*?)</li>", consistent) == [
        "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; $\\notacommand$ gaussian: the one-round claim ε = 2.5, δ = "
        "1e-05: 3 tests, none refuted it; strongest certified ε ≥ 0.4."]
    assert re.findall(r"<li>(.*?)</li>", utility) == [
        "float32 (none) (no mechanism): 91.23 %; chance is 10.00 %", "JoPEQ | eps=1: 81.23 % (-10.00 points)",
        "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; $\\notacommand$ gaussian: 70.00 % (-21.23 points)"]
    assert re.findall(r"<li>(.*?)</li>", reconstruction) == [
        "jopeq-laplace (bits=2), the analytic attack on the mlp at round 1: 16 targets, each a client&#39;s update of "
        "1 step on 1 example: this attack&#39;s mean SSIM reaches 0.5 near ε ≈ 20, above the audited claims (ε 1); "
        "below it the updates still leak: identification succeeded 0.42 among 10 at ε 1, against guessing 0.10; where "
        "this attack failed is not where privacy begins: another attack, model, batch size or round can reconstruct "
        "at a smaller ε; only the claim&#39;s bound on identification (Reconstruction against the claim) holds for "
        "every attack."]
    assert "float32 (none):" not in block  # no test ran: no headline


def test_the_identification_table_has_a_row_per_test_and_per_probe_match(page, document):
    table = page[page.index('<table id="identification">'):]
    table = table[:table.index("</table>")]
    assert re.findall(r"<th>(.*?)</th>", table) == [
        "setting", "attack", "M", "success (95 % interval)", "the claim&#39;s bound", "p-value", "verdict"]
    rows = [re.findall(r"<td>(.*?)</td>", row) for row in table.split("<tbody>")[1].split("<tr>")[1:]]
    tests = sum(len(s["identification"]["tests"]) for s in document["settings"] if s["identification"] is not None)
    matched = sum(len(s["probe"]["matched"]["defended"]) for s in document["settings"] if s["probe"] is not None)
    assert (len(rows), tests, matched) == (6, 4, 2)
    jopeq = "JoPEQ | eps=1"
    gaussian = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; $\\notacommand$ gaussian"
    adversary, probe = "informed adversary (likelihood), 500 trials", ("inversion probe (analytic): nearest of M to "
                                                                       "the reconstruction, 16 clients")
    hayes = "(gaussian M-point (Hayes et al. 2023))"
    assert rows == [
        [jopeq, adversary, "10", "0.420 [0.38, 0.46]", f"0.27 {hayes}", "1e-09",
         '<span class="badge v-violated">violated</span>'],
        [jopeq, adversary, "100", "0.060 [0.02, 0.10]", f"0.03 {hayes}", "0.6",
         '<span class="badge v-consistent">consistent</span>'],
        [jopeq, probe, "10", "0.188 [0.00, 0.39]", "0.27 ((eps, delta)-DP)", "-",
         '<span class="badge v-none">reported, not judged</span>'],
        [jopeq, probe, "100", "0.062 [0.00, 0.26]", "0.27 ((eps, delta)-DP)", "-",
         '<span class="badge v-none">reported, not judged</span>'],
        [gaussian, adversary, "10", "0.120 [0.08, 0.16]", f"0.35 {hayes}", "0.6",
         '<span class="badge v-consistent">consistent</span>'],
        [gaussian, adversary, "100", "0.016 [-0.02, 0.06]", f"0.06 {hayes}", "0.6",
         '<span class="badge v-consistent">consistent</span>'],
    ]


def test_a_setting_with_estimates_lists_them_in_its_details(page):
    details = page[page.index("<h2>Claim details</h2>"):]
    block = details[details.index("<summary><strong>JoPEQ | eps=1</strong>"):]
    block = block[:block.index("</details>")]
    table = block[block.index('<table class="estimates">'):]
    assert re.findall(r"<th>(.*?)</th>", table) == [
        "pair", "statistic", "certified ε lower bound", "cap", "p-value", "sampling"]
    assert ('<tr><td>0 vs clip</td><td>likelihood ratio</td><td class="num">≥ 1.83</td><td class="num">4.61</td>'
            '<td class="num">0.00012</td><td>tiled: blocks of n = 2</td></tr>') in table
    assert "<dt>p-value</dt><dd>0.00012, of &#34;the mechanism is (1, 0)-DP as claimed&#34; on the worst pair" in block
    assert page.count('<table class="estimates">') == 1


def test_png_data_uri_refuses_other_files():
    with pytest.raises(ValueError, match="figures/x.png is not a PNG file"):
        png_data_uri(b"<svg onload=alert(1)>", "figures/x.png")


def test_a_grid_the_results_name_and_nobody_gave_is_one_line(results_folder):
    folder, document = results_folder
    with pytest.raises(ValueError, match="figures/.*png: the results name this reconstruction grid, and no image"):
        render_html(as_model(document), {}, {})


# ---------------------------------------------------------------- a reproduction (command "reproduce")

@pytest.fixture
def reproduction_page(reproduction, tmp_path):
    from auditkit.reports.figures import reproduction_table

    paths = {f"reproduction-{i}": reproduction_table(as_model(reproduction), i, tmp_path / f"{i}.png")
             for i in range(len(reproduction["tables"]))}
    return render_html(as_model(reproduction), {name: path.read_bytes() for name, path in paths.items()})


def test_a_reproduction_explains_its_terms_and_states_its_confidence(reproduction_page):
    from auditkit.reports.sections.reproduction import REPRODUCTION_GLOSSARY

    block = reproduction_page[reproduction_page.index('<details id="how-to-read">'):]
    assert re.findall(r"<dt>(.*?)</dt>", block[:block.index("</details>")]) == [
        term.replace('"', "&#34;") for term, _ in REPRODUCTION_GLOSSARY]
    assert reproduction_page.count("<th>ours [95 % interval]</th>") == 3  # one table of rows per paper table


def test_a_reproduction_row_shows_the_papers_number_ours_and_the_verdict(reproduction_page, reproduction):
    row = reproduction["tables"][0]["rows"][0]  # 001 Fig. 4a, Algorithm 1: "≈70", tolerance 2.5
    low, high = row["interval"]
    per_seed = ", ".join(f"{v:.4g}" for v in row["per_seed"])
    assert (f'<td>Algorithm 1</td><td>range = literal</td>\n'
            f'  <td class="num">≈70 <span class="muted">(l. 431)</span><br><span class="muted">compared as 70 ± 2.5'
            f'</span></td>\n  <td class="num">{row["mean"]:.4g} [{low:.4g}, {high:.4g}]<br><span class="muted">'
            f'per seed: {per_seed}; setting 1</span></td>\n  <td class="num">{row["difference"]:+.4g}</td>\n'
            f'  <td><span class="badge v-inconclusive">not comparable</span></td>') in reproduction_page


def test_a_reproduction_page_is_inert(reproduction_page):
    tags = _Tags(reproduction_page).tags
    assert "script" not in {tag for tag, _ in tags}
    urls = [value for _, attrs in tags for key, value in attrs.items() if key in ("src", "href", "srcset")]
    assert len(urls) == 3 and all(url.startswith("data:image/png;base64,") for url in urls)
