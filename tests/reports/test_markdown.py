import re

import pytest

from auditkit.attacks.headline import TestKind as Kind, decided_by
from auditkit.results import as_model, validate_results
from auditkit.reports.sections.figure_captions import FIGURE_CAPTIONS
from auditkit.reports.markdown import escape, render_markdown

FIGURES = {name: f"figures/{name}.png" for name in FIGURE_CAPTIONS}


@pytest.fixture
def text(document):
    return render_markdown(as_model(document), FIGURES)


def _outside_code(text):
    return re.sub(r"```json\n.*?\n```", "", text, flags=re.S)


def _table_rows(text, heading):
    section = text[text.index(heading):]
    return section.split("\n\n")[1].splitlines()[2:]


def test_the_privacy_table_carries_claims_verdicts_and_each_settings_strongest_bound(text):
    none, jopeq, gaussian = _table_rows(text, "### Privacy: claims and verdicts")
    # no test ran on the no-mechanism run, and it states no claim over the run
    assert none == "| float32 (none) | no claim (flags: no-privacy) | not run | - | - | - | not run |"
    assert jopeq.split(" | ") == [
        "| JoPEQ \\| eps=1", "ε = 1, δ = 0 (flags: claim-exceeded)",
        "violated, decisive (decided by: identification among 10 candidates, p = 1e-09, 4e-09 adjusted over the "
        "audit's 4 tests; 4 tests)",
        "ε = 3, δ = 0 over 3 rounds; realised noise: ε = 9.5, δ = 0",
        # the accountant asked for composes neither: each says which did and why, from the recorded fallbacks
        "basic composition (asked for opacus-prv: Opacus composes Gaussian rounds only; at δ = 0, T pure-ε rounds "
        "compose to exactly T ε); realised noise: basic composition (asked for dp\\_accounting-pld: at δ = 0, T "
        "pure-ε rounds compose to exactly T ε)",
        # a whole-run claim no test judged (identification judges the one-round claim)
        "not tested (enable \\[canary\\] to test it)",
        "≥ 2.2 (moment-matching excess; 95 % family-wise; cap 4.61) |"]
    assert gaussian == (
        "| &lt;script&gt;alert(\"x\")&lt;/script&gt; $\\\\notacommand$ gaussian | ε = 2.5, δ = 1e-05 "
        "| consistent (decided by: identification among 10 candidates, p = 0.6; 3 tests) "
        "| refused: the accountant needs the sampling rate | - | - "
        "| ≥ 0.4 (black-box test (worst pair: 0 vs clip); 95 % family-wise; cap 4.61) |")


def test_the_attack_and_utility_tables_carry_the_numbers_with_units(text):
    none, jopeq, gaussian = _table_rows(text, "### Attacks: what the adversary recovered")
    assert none == "| float32 (none) | not run | not run | 0.97 → 0.97 | 0 → 0 | inf dB → inf dB |"
    cells = jopeq.split(" | ")
    # identification: M=10 exceeds the bound (violated); M=100's point estimate is above its bound, not significantly
    assert cells[1] == "M=10: 0.42 \\[0.38, 0.46\\] &gt; 0.27; M=100: 0.06 \\[0.02, 0.10\\] &gt; 0.03"
    assert cells[2:] == ["0.998 → 0.05", "0.412 → 0.0213", "0.0123 → 0.0456", "19.1 dB → 13.4 dB |"]
    assert gaussian.endswith("| M=10: 0.12 \\[0.08, 0.16\\] ≤ 0.35; M=100: 0.02 \\[-0.02, 0.06\\] ≤ 0.06 "
                             "| not run | not run | not run | not run |")
    none, jopeq, gaussian = _table_rows(text, "### Utility and cost")
    assert none == "| float32 (none) | none (no parameters) | 91.23 % | - | 32 bits/coord | 1x | ∞ (lossless) |"
    assert jopeq == ("| JoPEQ \\| eps=1 | jopeq-laplace (eps=1, n=2) | 81.23 % | -10.00 points | 2.75 bits/coord "
                     "| 11.64x | -3.456 dB |")
    assert gaussian == (
        "| &lt;script&gt;alert(\"x\")&lt;/script&gt; $\\\\notacommand$ gaussian "
        "| gaussian (sigma=0.8, clip=1 (l2), note=&lt;script&gt;alert(1)&lt;/script&gt;) | 70.00 % | -21.23 points "
        "| 32 bits/coord | - | - |")


def test_every_table_row_has_as_many_cells_as_its_header(text):
    rows = [line for line in text.splitlines() if line.startswith("|")]
    cells = [len(re.split(r"(?<!\\)\|", row)) for row in rows]
    assert cells[:5] == [9] * 5  # privacy: header, rule, 3 settings (7 columns, 8 pipes)
    assert cells[5:10] == [8] * 5  # attacks (6 columns)
    assert cells[10:15] == [9] * 5  # utility and cost (7 columns)
    assert cells[15:20] == [9] * 5  # privacy against utility (7 columns)
    assert cells[20:23] == [8] * 3  # adaptive tests: header, rule, 1 test (6 columns)
    assert cells[23:31] == [9] * 8  # identification: header, rule, 4 tests and 2 probe matches (7 columns)


def test_the_findings_open_the_report_with_the_refuted_claim_and_its_evidence(text):
    headings = re.findall(r"^## (.*)$", _outside_code(text), flags=re.M)
    assert headings[:6] == ["Findings", "How to read this report", "Summary", "Adaptive tests",
                            "Reconstruction against the claim", "Figures"]
    assert text[text.index("## Findings"):text.index("## How to read this report")] == (
        "## Findings\n\n"
        "### Claims refuted\n\n"
        "- JoPEQ \\| eps=1: violated (decisive refutation): the one-round claim ε = 1, δ = 0; the informed adversary identified the "
        "target among 10 candidates in 210 of 500 trials (0.42, lower limit 0.37) while the claim allows at most "
        "0.27 (gaussian M-point (Hayes et al. 2023)) (p = 1e-09, 4e-09 adjusted over the audit's 4 tests). Also by "
        "computation: the noise it really adds is ε = 1.65 per round, not 1 (computed from the noise's law; flag "
        "claim-exceeded): the mechanism adds less noise than its claim assumes; the whole run's claim ε = 3, δ = 0 "
        "over 3 rounds: not tested.\n\n"
        "### Claims consistent with every test\n\n"
        "- &lt;script&gt;alert(\"x\")&lt;/script&gt; $\\\\notacommand$ gaussian: the one-round claim ε = 2.5, "
        "δ = 1e-05: 3 tests, none refuted it; strongest certified ε ≥ 0.4.\n\n"
        "### Utility: accuracy against the run without a mechanism\n\n"
        "- float32 (none) (no mechanism): 91.23 %; chance is 10.00 %\n"
        "- JoPEQ \\| eps=1: 81.23 % (-10.00 points)\n"
        "- &lt;script&gt;alert(\"x\")&lt;/script&gt; $\\\\notacommand$ gaussian: 70.00 % (-21.23 points)\n\n"
        "### What one reconstruction attack achieved (not a guarantee)\n\n"
        "- jopeq-laplace (bits=2), the analytic attack on the mlp at round 1: 16 targets, each a client's update of 1 "
        "step on 1 example: this attack's mean SSIM reaches 0.5 near ε ≈ 20, above the audited claims (ε 1); below it "
        "the updates still leak: identification succeeded 0.42 among 10 at ε 1, against guessing 0.10; where this "
        "attack failed is not where privacy begins: another attack, model, batch size or round can reconstruct at a "
        "smaller ε; only the claim's bound on identification (Reconstruction against the claim) holds for every "
        "attack.\n\n")


def test_a_refutation_by_the_distinguishing_test_is_told_with_its_certified_bound(document):
    decisive = decided_by(Kind.DISTINGUISHING, "distinguishing test (worst pair: 0 vs clip)", pair="0 vs clip")
    document["settings"][1]["verdict"] = {"verdict": "violated", "decided_by": decisive, "p_value": 0.00012,
                                          "tests": 4}
    text = render_markdown(as_model(document), FIGURES)
    assert ("- JoPEQ \\| eps=1: violated: the one-round claim ε = 1, δ = 0; certified ε ≥ 1.83 against the claimed 1 (0 vs clip) "
            "(p = 0.00012).") in text


def test_the_findings_are_left_out_when_no_setting_has_a_headline_verdict(document):
    for setting in document["settings"]:
        setting["verdict"] = None
    text = render_markdown(as_model(document), FIGURES)
    assert "### Claims refuted" not in text and "### Claims consistent" not in text
    assert text.index("## Summary") > text.index("# auditkit report")


def test_the_identification_table_has_a_row_per_test_and_per_probe_match(document, text):
    section = text[text.index("## Reconstruction against the claim"):text.index("## Figures")]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert rows[0] == "| setting | attack | M | success (95 % interval) | the claim's bound | p-value | verdict |"
    tests = [t for s in document["settings"] if s["identification"] is not None for t in s["identification"]["tests"]]
    matched = [m for s in document["settings"] if s["probe"] is not None for m in s["probe"]["matched"]["defended"]]
    assert len(rows[2:]) == len(tests) + len(matched) == 4 + 2
    assert rows[2:] == [
        "| JoPEQ \\| eps=1 | informed adversary (likelihood), 500 trials | 10 | 0.420 \\[0.38, 0.46\\] "
        "| 0.27 (gaussian M-point (Hayes et al. 2023)) | 1e-09 | violated |",
        "| JoPEQ \\| eps=1 | informed adversary (likelihood), 500 trials | 100 | 0.060 \\[0.02, 0.10\\] "
        "| 0.03 (gaussian M-point (Hayes et al. 2023)) | 0.6 | consistent |",
        "| JoPEQ \\| eps=1 | inversion probe (analytic): nearest of M to the reconstruction, 16 clients | 10 "
        "| 0.188 \\[0.00, 0.39\\] | 0.27 ((eps, delta)-DP) | - | reported, not judged |",
        "| JoPEQ \\| eps=1 | inversion probe (analytic): nearest of M to the reconstruction, 16 clients | 100 "
        "| 0.062 \\[0.00, 0.26\\] | 0.27 ((eps, delta)-DP) | - | reported, not judged |",
        "| &lt;script&gt;alert(\"x\")&lt;/script&gt; $\\\\notacommand$ gaussian | informed adversary (likelihood), "
        "500 trials | 10 | 0.120 \\[0.08, 0.16\\] | 0.35 (gaussian M-point (Hayes et al. 2023)) | 0.6 | consistent |",
        "| &lt;script&gt;alert(\"x\")&lt;/script&gt; $\\\\notacommand$ gaussian | informed adversary (likelihood), "
        "500 trials | 100 | 0.016 \\[-0.02, 0.06\\] | 0.06 (gaussian M-point (Hayes et al. 2023)) | 0.6 "
        "| consistent |",
    ]
    # a probe match above the claim's bound says so, and is still not judged
    document["settings"][1]["probe"]["matched"]["defended"][0]["exceeds_bound"] = True
    assert ("| 0.27 ((eps, delta)-DP) | - | above the bound (reported, not judged) |"
            in render_markdown(as_model(document), FIGURES))


def test_the_identification_table_is_left_out_without_identification_tests_or_a_probe(document):
    document["settings"][1]["identification"] = document["settings"][2]["identification"] = None
    text = render_markdown(as_model(document), FIGURES)  # the probe alone: its two matched rows
    section = text[text.index("## Reconstruction against the claim"):text.index("## Figures")]
    assert [line.split(" | ")[-1] for line in section.splitlines() if line.startswith("| JoPEQ")] == [
        "reported, not judged |"] * 2
    document["settings"][1]["probe"] = None
    assert "## Reconstruction against the claim" not in render_markdown(as_model(document), FIGURES)


def test_adaptive_tests_are_listed_and_omitted_when_there_are_none(document, text):
    assert ("| JoPEQ \\| eps=1 | moment-matching excess | per round (ε = 1) | ≥ 2.2, cap 4.61 | violated "
            "| noise scale set from a moment match |") in text
    document["settings"][1]["distinguish"]["adaptive"] = []
    assert "## Adaptive tests" not in render_markdown(as_model(document), FIGURES)


def test_figures_then_reconstruction_grids_are_linked_in_order(text):
    links = re.findall(r"!\[[^\n]*?\]\(([^)]*)\)", text)
    assert links == [*FIGURES.values(), "figures/reconstruction-s00.png", "figures/reconstruction-s01.png",
                     "figures/probe-s01.png"]  # the probe's grid after the inversions'
    assert "![JoPEQ \\| eps=1: inverting\\_gradients on the server's view at round 3" in text
    assert "![JoPEQ \\| eps=1: inversion probe (analytic, 16 clients with 1 example each, 1 step, round 1; rows:" in text


def test_only_the_figures_given_are_linked_and_paths_are_url_quoted(document):
    document["settings"][1]["inversion"]["figure"] = "figures/grid (s01).png"
    text = render_markdown(as_model(document), {"bits_vs_accuracy": "figures/bits_vs_accuracy.png"})
    assert re.findall(r"\]\(([^)]*)\)", text) == [
        "figures/bits_vs_accuracy.png", "figures/reconstruction-s00.png", "figures/grid%20%28s01%29.png",
        "figures/probe-s01.png"]


def test_a_shared_clean_reference_is_linked_once_before_each_settings_grids(referenced):
    text = render_markdown(as_model(referenced), {})
    assert re.findall(r"\]\(([^)]*)\)", text) == [
        "figures/reconstruction-clean-0123456789ab.png", "figures/reconstruction-s00.png",
        "figures/reconstruction-s01.png", "figures/probe-clean-ba9876543210.png",
        "figures/probe-s01.png"]  # the probe's clean reference is its setting's alone: among its grids
    section = text[text.index("## Reconstructions"):text.index("## Claim details")]
    assert ("![Clean reference for every setting: inverting\\_gradients on the clients' true updates at round 3"
            in section)
    assert "![Clean reference of the probe for this setting: analytic, 16 clients with 1 example each" in section
    assert "(rows: ground truth, defended; the clean reconstruction is in the clean reference)" in section
    headings = re.findall(r"^### (.*)$", section, flags=re.M)
    assert len(headings) == 2 and headings[1] == "JoPEQ \\| eps=1"
    assert "\n\ninversion SSIM 0.41 clean → 0.02 defended; probe SSIM 1.00 clean → 0.05 defended\n\n" in section


def test_user_strings_cannot_inject_markup(text):
    assert "<script" not in _outside_code(text)
    assert "# auditkit report: quickstart &lt;b&gt;" in text
    assert "### &lt;script&gt;alert(\"x\")&lt;/script&gt;" in text


def test_claim_details_and_provenance(text):
    assert ("- **accounting**: accountant asked for: opacus-prv, 3 rounds at δ = 1e-05; "
            "refused: the accountant needs the sampling rate") in text
    assert "- **inversion**: not run" in text
    assert "- **training**: protocol uplink, 3 rounds, checkpoints at 1, 3" in text
    assert "- **neighbouring relations**: REPLACE\\_ONE" in text
    assert "- **code**: sha256:0123abcd4567ef89" in text and "- **plugins**: none" in text
    assert "| eavesdropper | the bitstreams |" in text
    assert '"label": "<script>alert(\\"x\\")</script> $\\\\notacommand$ gaussian"' in text  # inside ```json


def test_a_distinguishing_test_shows_where_and_how_it_sampled_its_p_value_and_every_pair(text):
    assert "- **audit setting**: one scaled block at zeta = 1" in text
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
    text = render_markdown(as_model(document), FIGURES)
    assert "| 0 vs clip | likelihood ratio | ≥ 1.83 | 4.61 | 0.00012 | as above |" in text
    assert "| 0 vs -clip | threshold | ≥ 0.91 | 4.61 | 0.41 | tiled: blocks of n = 2 |" in text


def test_a_generic_default_under_a_distinguishing_test_gets_a_note_under_the_summary(document):
    assert "### Notes" not in render_markdown(as_model(document), FIGURES)
    document["settings"][2]["mechanism"]["capabilities"]["tiling"] = "generic default"  # tiled nonetheless: no note
    document["settings"][0]["mechanism"]["capabilities"]["audit_setting"] = "generic default"  # no test: no note
    assert "### Notes" not in render_markdown(as_model(document), FIGURES)
    document["settings"][2]["distinguish"]["sampling"] = "per call: gaussian: one call of the real mechanism per output"
    text = render_markdown(as_model(document), FIGURES)
    assert text[text.index("### Notes"):text.index("## Adaptive tests")] == (
        "### Notes\n\n- &lt;script&gt;alert(\"x\")&lt;/script&gt; $\\\\notacommand$ gaussian: the distinguishing test "
        "drew its outputs per call, gaussian: one call of the real mechanism per output: exact, only slower than a "
        "declared tiling or batch sampler, so this weakens no verdict.\n\n")


def test_capabilities_and_the_clip_norm_are_in_the_details(text):
    assert ("- **capabilities**: declared by the mechanism: tiling, audit setting, output density, dp\\_event; "
            "generic defaults used: true epsilon (the realised noise's epsilon not computed)") in text
    assert "- **mechanism**: gaussian (sigma=0.8, clip=1 (l2), note=&lt;script&gt;" in text
    assert "- **origin**: built-in" in text


def test_the_config_fence_outgrows_backticks_in_the_config(document):
    document["config"]["note"] = "```"
    text = render_markdown(as_model(document), FIGURES)
    config = text[text.index("### Config"):text.index("\n---\n")]  # the footer follows the config
    assert "\n````json\n" in config and config.rstrip().endswith("\n````")


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


# ---------------------------------------------------------------- a reproduction (command "reproduce")

@pytest.mark.parametrize("paper", ["dpsq", "jopeq", "msp"])
def test_every_reproduction_table_row_has_as_many_cells_as_its_header(rendered_reproductions, paper):
    text = rendered_reproductions[paper].md
    tables = [block.splitlines() for block in _outside_code(text).split("\n\n") if block.startswith("| ")]
    assert len(tables) >= 4  # the summary, a table per paper table, the orderings, the settings' and versions'
    for rows in tables:
        cells = [len(re.split(r"(?<!\\)\|", row)) for row in rows]
        assert cells == [cells[0]] * len(rows) and rows[1].startswith("|---|")


def test_a_reproduction_in_markdown_counts_its_verdicts_and_explains_its_terms(reproduction):
    from auditkit.reports.sections.reproduction import REPRODUCTION_GLOSSARY

    rows = [r["verdict"] for t in reproduction["tables"] for r in t["rows"]]
    text = render_markdown(as_model(reproduction), {f"reproduction-{i}": f"figures/reproduction-{i}.png" for i in range(3)})
    assert text.startswith("# auditkit reproduction: dpsq (quick budget)\n\n- "
                           f"{len(rows)} rows of the paper's tables: {rows.count('not comparable')} not comparable; ")
    glossary = text[text.index("## How to read this report"):text.index("## Summary")]
    assert re.findall(r"^- \*\*(.*?)\*\*:", glossary, flags=re.M) == [escape(t) for t, _ in REPRODUCTION_GLOSSARY]
    assert "| method | column | paper (line) | ours \\[95 % interval\\] | ours − paper | verdict | why |" in text
    assert "this run's reasons, for every training row (under the intro)" in text  # why a training row is not


EXAMPLE_LEVEL = {"epsilon": 4.443, "delta": 1e-5, "noise_multiplier": 1.1, "max_grad_norm": 0.5, "batch_size": 32,
                 "sample_rate": 0.05, "client": 3, "client_examples": 640, "steps": 200, "accountant": "opacus-rdp",
                 "event": "PoissonSampledDpEvent(sampling_probability=0.05, event=GaussianDpEvent(noise_multiplier=1.1)) "
                          "under ADD_OR_REMOVE_ONE x 200",
                 "note": "one training example, over 20 rounds x tau = 10 local steps"}


def test_dp_sgds_example_level_claim_is_shown_beside_the_client_level_one_and_labelled(document):
    document["settings"][0]["accounting"]["example_level"] = EXAMPLE_LEVEL
    validate_results(document)
    text = render_markdown(as_model(document), FIGURES)
    none = _table_rows(text, "### Privacy: claims and verdicts")[0]
    assert none == ("| float32 (none) | no claim (flags: no-privacy) | not run | example-level (DP-SGD): ε = 4.443, "
                    "δ = 1e-05 over 200 steps at q = 0.05 (opacus-rdp) | - | - | not run |")
    assert ("**example-level (DP-SGD)**: z = 1.1, C = 0.5, expected batch 32; opacus-rdp: PoissonSampledDpEvent("
            "sampling\\_probability=0.05") in text
    assert "worst client 3 (640 examples)" in text
    del document["settings"][0]["accounting"]["example_level"]["steps"]
    with pytest.raises(ValueError, match=r"^results.settings\[0\].accounting.example_level.steps is missing$"):
        validate_results(document)
