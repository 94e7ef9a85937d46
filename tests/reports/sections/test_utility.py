"""The privacy-utility findings and table (reports/sections/utility.py, summary.privacy_utility_row): the poor-utility
rule, and the noise-against-signal explanation recomputed here from the document's own numbers."""
import copy
import math

import pytest

from auditkit.reports.sections.findings import findings
from auditkit.reports.sections.summary import privacy_utility_row, baseline
from auditkit.reports.sections.utility import (POOR_SHARE, lost_share, noise_share, run_scale, utility_findings,
                                               utility_points)
from auditkit.results import as_model

D, N, SIGMA, CLIP = 6422, 10, 0.8, 1.0


def _run(document, accuracy=0.2, snr_db=None, *, participation="full", view=None):
    """The sample audit document as a run of N clients on a D-coordinate model whose gaussian setting (s02) adds
    sigma SIGMA to updates clipped to CLIP and ends at ``accuracy``; by default its updates reach the clip."""
    doc = copy.deepcopy(document)
    doc["provenance"]["model"] = {"name": "cnn", "num_params": D}
    doc["provenance"]["training"]["participation"] = participation
    gaussian = doc["settings"][2]
    gaussian["mechanism"]["noise_std"] = SIGMA
    if view is not None:
        gaussian["mechanism"]["view"] = view
    final = gaussian["training"]["final"]
    final["test_accuracy"] = accuracy
    final["snr_db"] = 20 * math.log10(CLIP / (SIGMA * math.sqrt(D))) if snr_db is None else snr_db
    gaussian["accounting"]["composed"] = {"epsilon": 7.5, "delta": 1e-5, "rounds": 3, "accountant": "opacus-prv",
                                          "event": "3 x gaussian"}
    return as_model(doc)


def _line(results, label_start):
    lines = findings(results.settings, scale=run_scale(results)).utility
    return next(line for line in lines if line.startswith(label_start))


def _levers(results, mechanism):
    """The line of a mechanism's levers, said once for all its poor settings."""
    lines = findings(results.settings, scale=run_scale(results)).utility
    return next(line for line in lines if line.startswith(f"levers for {mechanism} "))


def test_the_run_scale_reads_coordinates_clients_and_classes(document):
    scale = run_scale(_run(document))
    assert (scale.coordinates, scale.clients, scale.classes) == (D, N, 10)
    assert scale.chance == pytest.approx(0.1)


def test_a_setting_far_below_the_ceiling_is_explained_by_its_noise_against_the_clipped_update(document):
    results = _run(document, accuracy=0.2)
    line = _line(results, "<script>")
    norm = SIGMA * math.sqrt(D)  # 64.11: one client's noise
    mean = norm / math.sqrt(N)  # 20.27: the noise left on the mean of N clients
    lost = (0.9123 - 0.2) / (0.9123 - 0.1)  # 88 % of the gain over chance
    assert f"20.00 % (-71.23 points); poor utility: it lost {100 * lost:.0f} % of what training" in line
    assert f"noise of norm ≈ {norm:.4g} (σ 0.8 on each of 6,422 coordinates)" in line
    assert "clipped to l2 norm 1" in line
    assert f"uplink SNR {20 * math.log10(CLIP / norm):.4g} dB" in line
    assert f"averaging 10 clients divides the noise by √10 = {math.sqrt(10):.4g} only" in line
    assert f"the mean's noise ≈ {mean:.4g}, {float(f'{mean / CLIP:.2g}'):g} times the largest mean update" in line
    levers = _levers(results, "gaussian")
    assert "central noise (dp-fedavg" in levers and "d = 6,422" in levers and "central noise" not in line
    assert "fewer rounds than 3 at the same whole-run claim" in levers
    assert "not a larger clip" in levers  # the SNR says the updates reach the clip: sigma grows with C


def test_updates_below_the_clip_name_a_smaller_clip_as_the_lever(document):
    updates = 0.25  # a quarter of the clip: the SNR is 12 dB lower than at the clip
    results = _run(document, snr_db=20 * math.log10(updates / (SIGMA * math.sqrt(D))))
    levers = _levers(results, "gaussian")
    assert f"a clip nearer the updates' norm (≈ {updates:.4g} from the SNR, against the clip 1;" in levers
    assert "not a larger clip" not in levers


def test_central_noise_divides_by_the_clients_and_offers_no_central_lever(document):
    results = _run(document, view="aggregate")
    share = noise_share(results.settings[2], run_scale(results))
    assert share.central and share.mean_norm == pytest.approx(SIGMA * math.sqrt(D) / N)
    line = _line(results, "<script>")
    assert f"the server adds noise of norm ≈ {SIGMA * math.sqrt(D):.4g}" in line
    assert f"the mean's noise ≈ {SIGMA * math.sqrt(D) / N:.4g}" in line
    levers = _levers(results, "gaussian")
    assert "central noise (dp-fedavg" not in levers and "noise on the mean ∝ 1 / n)" in levers


@pytest.mark.parametrize("accuracy, flagged", [(0.51, False), (0.50, True)])
def test_the_rule_flags_a_setting_that_lost_more_than_half_the_gain_over_chance(document, accuracy, flagged):
    # ceiling 91.23 %, chance 10 %: half the gain lost at 50.615 %
    assert (lost_share(accuracy, 0.9123, 0.1) > POOR_SHARE) is flagged
    line = _line(_run(document, accuracy=accuracy), "<script>")
    assert ("poor utility" in line) is flagged
    assert ("Why:" in line) is flagged


def test_a_setting_with_good_utility_gets_no_poor_utility_line(document):
    results = _run(document)
    line = _line(results, "JoPEQ")  # 81.23 % against 91.23 %: 12 % of the gain lost
    assert line == "JoPEQ | eps=1: 81.23 % (-10.00 points)"


def test_a_setting_without_recorded_noise_is_explained_by_its_snr_alone(document):
    doc = copy.deepcopy(document)
    doc["settings"][1]["training"]["final"]["test_accuracy"] = 0.15
    results = as_model(doc)
    line = _line(results, "JoPEQ")
    ratio = 10 ** (3.456 / 20)  # the error's spread against the update's from the SNR of -3.456 dB
    assert f"an error {float(f'{ratio:.2g}'):g} times the update's spread (uplink SNR -3.456 dB)" in line
    assert "σ" not in line and "central noise" not in line  # nothing recorded supports a noise-norm argument


def test_a_mechanism_without_a_claim_gets_no_privacy_noise_explanation(document):
    doc = copy.deepcopy(document)
    doc["settings"][0]["mechanism"]["name"] = "sdq"  # the none setting becomes a quantizer: no baseline left
    doc["settings"][0]["training"]["final"].update(test_accuracy=0.12, bits_per_coordinate=1.5, snr_db=-2.0)
    results = as_model(doc)
    assert baseline(results.settings) is None
    line = _line(results, "float32")
    assert "near chance" in line and "no privacy noise explains it" in line
    assert "σ" not in line
    assert _levers(results, "sdq") == "levers for sdq (its poor settings above): a finer encoding than 1.5 bits per coordinate."


def test_the_privacy_utility_table_row(document):
    results = _run(document, accuracy=0.2)
    reference = baseline(results.settings)
    row = privacy_utility_row(results.settings[2], reference)
    assert (row.claimed, row.composed, row.certified) == ("2.5", "7.5 over 3 rounds", "≥ 0.4")
    assert (row.accuracy, row.versus, row.loss) == ("20.00 %", "-71.23 points", "0.4")
    none = privacy_utility_row(results.settings[0], reference)
    assert (none.claimed, none.composed, none.versus) == ("no claim", "-", "-")


def test_the_points_carry_claim_bound_accuracy_and_loss(document):
    points = utility_points(_run(document, accuracy=0.2).settings)  # s01: its adaptive test certifies most
    assert [(p.setting_id, p.claimed, p.certified, p.accuracy) for p in points] == [
        ("s00", None, None, 0.9123), ("s01", 1.0, 2.2, 0.8123), ("s02", 2.5, 0.4, 0.2)]


def test_a_consistent_claim_beside_an_unusable_model_says_so_in_its_finding(document):
    """The claim holds, but the model it trained is far below the run without a mechanism: the consistent finding
    says so, so the verdict is not read as a usable mechanism; a usable one gets no such note."""
    (poor,) = findings(_run(document, accuracy=0.2).settings, scale=run_scale(_run(document))).consistent
    assert poor.endswith("; but its model trains to 20.00 % against 91.23 % without a mechanism (poor utility, see "
                         "below).")
    (usable,) = findings(_run(document, accuracy=0.9).settings, scale=run_scale(_run(document))).consistent
    assert "poor utility" not in usable and "its model trains" not in usable
