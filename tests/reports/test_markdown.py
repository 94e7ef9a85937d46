import re

import pytest

from reports.content import FIGURE_CAPTIONS
from reports.markdown import escape, render_markdown

FIGURES = {name: f"figures/{name}.png" for name in FIGURE_CAPTIONS}


@pytest.fixture
def text(document):
    return render_markdown(document, FIGURES)


def _outside_code(text):
    return re.sub(r"```json\n.*?\n```", "", text, flags=re.S)


def test_summary_rows_carry_the_numbers_with_units(text):
    assert (
        "| float32 (none) | none (no parameters) | 91.23 % | 32 bits/coord | 1.0x | no claim (flags: no-privacy) "
        "| - | not run | not run | 0.97 → 0.97 | 0 → 0 | inf dB → inf dB |") in text
    assert (
        "| JoPEQ \\| eps=1 | jopeq-laplace (eps=1.0, n=2) | 81.23 % | 2.75 bits/coord | 11.6x "
        "| ε = 1, δ = 0 (flags: claim-exceeded) "
        "| ε = 3, δ = 0 over 3 rounds (basic composition); realised noise: ε = 9.5, δ = 0 "
        "| ≥ 1.83 (95 % conf.), cap 4.61, p = 0.00012 | violated | 0.412 → 0.0213 | 0.0123 → 0.0456 "
        "| 19.1 dB → 13.4 dB |"
    ) in text
    assert (
        "| &lt;script&gt;alert(\"x\")&lt;/script&gt; $\\\\notacommand$ gaussian "
        "| gaussian (sigma=0.8, clip=1.0 (l2), note=&lt;script&gt;alert(1)&lt;/script&gt;) | 70.00 % "
        "| 32 bits/coord | - | ε = 2.5, δ = 1e-05 | refused: the accountant needs the sampling rate "
        "| ≥ 0.4 (95 % conf.), cap 4.61, p = 0.91 | consistent | not run | not run | not run |") in text


def test_every_table_row_has_as_many_cells_as_its_header(text):
    rows = [line for line in text.splitlines() if line.startswith("|")]
    cells = [len(re.split(r"(?<!\\)\|", row)) for row in rows]
    assert cells[:5] == [14] * 5  # the summary: header, rule, 3 settings
    assert len(rows) > 5


def test_adaptive_tests_are_listed_and_omitted_when_there_are_none(document, text):
    assert ("| JoPEQ \\| eps=1 | moment-matching excess | per round (ε = 1) | ≥ 2.2, cap 4.61 | violated "
            "| noise scale set from a moment match |") in text
    document["settings"][1]["distinguish"]["adaptive"] = []
    assert "## Adaptive tests" not in render_markdown(document, FIGURES)


def test_figures_then_reconstruction_grids_are_linked_in_order(text):
    links = re.findall(r"!\[[^\n]*?\]\(([^)]*)\)", text)
    assert links == [*FIGURES.values(), "figures/reconstruction-s00.png", "figures/reconstruction-s01.png"]
    assert "![JoPEQ \\| eps=1: inverting\\_gradients on the server's view at round 3" in text


def test_only_the_figures_given_are_linked_and_paths_are_url_quoted(document):
    document["settings"][1]["inversion"]["figure"] = "figures/grid (s01).png"
    text = render_markdown(document, {"bits_vs_accuracy": "figures/bits_vs_accuracy.png"})
    assert re.findall(r"\]\(([^)]*)\)", text) == [
        "figures/bits_vs_accuracy.png", "figures/reconstruction-s00.png", "figures/grid%20%28s01%29.png"]


def test_grids_are_linked_through_the_results_folder(document):
    links = re.findall(r"\]\(([^)]*)\)", render_markdown(document, {}, results_dir="../run"))
    assert links == ["../run/figures/reconstruction-s00.png", "../run/figures/reconstruction-s01.png"]


def test_user_strings_cannot_inject_markup(text):
    assert "<script" not in _outside_code(text)
    assert "# auditkit report: quickstart &lt;b&gt;" in text
    assert "### &lt;script&gt;alert(\"x\")&lt;/script&gt;" in text


def test_claim_details_and_provenance(text):
    assert ("- **accounting**: backend asked for: opacus-prv, 3 rounds at δ = 1e-05; "
            "refused: the accountant needs the sampling rate") in text
    assert "- **inversion**: not run" in text
    assert "- **training**: protocol uplink, 3 rounds, checkpoints at 1, 3" in text
    assert "- **neighbouring relations**: REPLACE\\_ONE" in text
    assert "- **code**: sha256:0123abcd4567ef89" in text and "- **plugins**: none" in text
    assert "| eavesdropper | the bitstreams |" in text
    assert '"label": "<script>alert(\\"x\\")</script> $\\\\notacommand$ gaussian"' in text  # inside ```json


def test_a_distinguishing_test_shows_where_and_how_it_sampled_its_p_value_and_every_pair(text):
    assert "- **distinguishing setting**: one scaled block at zeta = 1" in text
    assert "- **sampling**: tiled: blocks of n = 2 are independent" in text
    assert ('- **p-value**: 0.00012, of "the mechanism is (1, 0)-DP as claimed" on the worst pair (0 vs clip)'
            in text)
    assert ("| pair | statistic | certified ε lower bound | cap | p-value | sampling |\n|---|---|---|---|---|---|\n"
            "| 0 vs clip | likelihood ratio | ≥ 1.83 | 4.61 | 0.00012 | tiled: blocks of n = 2 |\n"
            "| 0 vs -clip | threshold | ≥ 0.91 | 4.61 | 0.41 | tiled: blocks of n = 2 |") in text
    assert text.count("Every pair's estimate:") == 1  # only the setting that recorded them


def test_a_pair_sampled_as_the_whole_test_says_so_once(document):
    test = document["settings"][1]["distinguish"]
    test["estimates"][0]["sampling"] = test["sampling"]
    text = render_markdown(document, FIGURES)
    assert "| 0 vs clip | likelihood ratio | ≥ 1.83 | 4.61 | 0.00012 | as above |" in text
    assert "| 0 vs -clip | threshold | ≥ 0.91 | 4.61 | 0.41 | tiled: blocks of n = 2 |" in text


def test_a_generic_default_under_a_distinguishing_test_gets_a_note_under_the_summary(document):
    assert "### Notes" not in render_markdown(document, FIGURES)
    document["settings"][2]["mechanism"]["capabilities"]["tiling"] = "generic default"
    document["settings"][0]["mechanism"]["capabilities"]["audit_setting"] = "generic default"  # no test: no note
    text = render_markdown(document, FIGURES)
    assert text[text.index("### Notes"):text.index("## Adaptive tests")] == (
        "### Notes\n\n- &lt;script&gt;alert(\"x\")&lt;/script&gt; $\\\\notacommand$ gaussian: the distinguishing test "
        "ran on generic defaults for the sampling (outputs drawn one call at a time: the mechanism declares no "
        "tiling). This weakens the verdict \"consistent\".\n\n")


def test_capabilities_and_the_clip_norm_are_in_the_details(text):
    assert ("- **capabilities**: declared by the mechanism: tiling, audit setting, output density, dp\\_event; "
            "generic defaults used: true epsilon (the realised noise's epsilon not computed)") in text
    assert "- **mechanism**: gaussian (sigma=0.8, clip=1.0 (l2), note=&lt;script&gt;" in text
    assert "- **origin**: built-in" in text


def test_the_config_fence_outgrows_backticks_in_the_config(document):
    document["config"]["note"] = "```"
    text = render_markdown(document, FIGURES)
    assert "\n````json\n" in text and text.rstrip().endswith("````")


@pytest.mark.parametrize("raw, escaped", [
    ("a|b", "a\\|b"),
    ("a\\|b", "a\\\\\\|b"),
    ("two\nlines", "two lines"),
    ("[x](javascript:alert(1))", "\\[x\\](javascript:alert(1))"),
    ("<img src=x onerror=alert(1)> & `code` *em* _u_",
     "&lt;img src=x onerror=alert(1)&gt; &amp; \\`code\\` \\*em\\* \\_u\\_"),
])
def test_escape(raw, escaped):
    assert escape(raw) == escaped
