"""``auditkit canary``: the idealized one-run canary audit from the command line (in-process through
``auditkit.cli.app.main``, as the console script runs it), at 10^4 canaries and fixed seeds.

gaussian --clip 0.5 --sigma 1 is 1-GDP (eps 4.377 at delta 1e-5). At m = 10^4 the claim rule fixes k = 288
(f-DP) or 170 (Steinke); seed 0 gives the f-DP bound 2.849 (268 of 288 right) and Steinke 2.257 (161 of 170).
Over seeds 0-19 the f-DP bound ranged 2.62-3.45 and Steinke 1.90-2.80, below f-DP on every seed; the f-DP verdict
was "consistent" on all 20 (288 right guesses would refute 1-GDP); Steinke's is "inconclusive" (its cap at k = 170,
3.74, is below the claim). The independent-calls bound (two-sample test) ranged 3.68-4.25 (3.93 on seed 0).
A mechanism claiming sigma while it adds sigma / 2 (really 2-GDP) is refuted; ``none`` has no claim.
"""
import json
import re
import textwrap

import pytest

from auditkit.cli import app, terminal
from auditkit.reports.sections.text import roc_text
from auditkit.results import as_model, load_results, validate_results

GAUSSIAN = ["gaussian", "--clip", "0.5", "--sigma", "1", "--canaries", "10000"]
UNDERCLAIMED = '''
from auditkit import mechanisms
from auditkit.mechanisms.additive import Gaussian


@mechanisms.register
class Underclaimed(Gaussian):
    """Claims the Gaussian mechanism's curve for sigma, adds sigma / 2 (the bug)."""

    name = "test-underclaimed-gaussian"
    summary = "test plugin: Gaussian noise of half the std its claim states"

    def _noise(self, n, gen):
        return super()._noise(n, gen) / 2

    tiling = Gaussian.tiling
    audit_setting = Gaussian.audit_setting
    tradeoff = Gaussian.tradeoff
    output_log_density = Gaussian.output_log_density
'''


@pytest.fixture
def run(capsys, monkeypatch):
    """``run(*args)``: (exit status, stdout, stderr) of ``auditkit canary ARGS``, 200 columns wide."""
    monkeypatch.setattr(terminal.console, "width", 200)

    def invoke(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exit_:
            app.main(["canary", *args])
        captured = capsys.readouterr()
        return exit_.value.code, captured.out, captured.err

    return invoke


def row(stdout: str) -> dict[str, str]:
    """The canary table's one row, by column."""
    lines = [line for line in stdout.splitlines() if line.startswith(("┃", "│"))]
    header, values = (re.split(r"\s*[┃│]\s*", line.strip("┃│ ")) for line in lines)
    return dict(zip(header, values, strict=True))


def test_gaussian_fdp_bound_below_the_claim_and_consistent(run):
    code, out, err = run(*GAUSSIAN)
    assert code == 0, err
    table = row(out)
    assert (table["guess rule"], table["k"], table["v"]) == ("claim", "288", "268")
    # the (eps, delta) bound any mechanism obeys sits below the eps of the refuted GDP curve (the paper's number)
    assert 1.9 <= float(table["fdp bound"]) < float(table["curve's eps"]) <= 3.3 and float(table["cap"].split()[0]) > 4.377
    assert (table["claim eps"], table["claim curve"], table["verdict"]) == ("4.377", "GDP μ = 1", "consistent")
    assert "refutes GDP μ = 0.9" in out and "eps 3.926 if the mechanism's curve is in that family" in out
    assert "meaning: at 95% confidence, 268 right of 288 guesses on 10,000 canaries refute GDP μ = 0.6871" in out
    assert out.rstrip().endswith("verdict: consistent")


def test_steinke_is_below_the_refuted_gdp_curve_on_the_same_draw(run):
    fdp = float(row(run(*GAUSSIAN)[1])["curve's eps"])
    code, out, err = run(*GAUSSIAN, "--bound", "steinke")
    assert code == 0, err
    table = row(out)
    assert (table["k"], table["v"], table["verdict"]) == ("170", "161", "inconclusive")  # cap 3.74 < 4.377
    assert 1.9 <= float(table["steinke bound"]) < fdp
    assert "no (2.257, 1e-05)-DP mechanism gives 161 right of 170 guesses" in out


def test_laplace_ties_of_the_saturated_likelihood_ratio_stay_consistent(run):
    """Laplace's LLR is +-eps beyond the pair (69 % of the canaries tie at seed 1): ties are broken by index;
    seed 1 gives 0.984 against the claim's eps 1."""
    code, out, err = run("laplace", "--clip", "0.5", "--scale", "1", "--canaries", "10000", "--seed", "1")
    assert code == 0, err
    table = row(out)
    assert table["claim curve"] == "Laplace ε = 1" and table["verdict"] == "consistent"
    assert 0.5 <= float(table["fdp bound"]) <= 1.0


def test_a_mechanism_adding_half_the_noise_it_claims_is_violated(run, tmp_path):
    plugin = tmp_path / "underclaimed.py"
    plugin.write_text(textwrap.dedent(UNDERCLAIMED))
    code, out, err = run("test-underclaimed-gaussian", "--clip", "0.5", "--sigma", "1", "--canaries", "10000",
                         "--plugin", str(plugin))
    assert code == 0, err
    table = row(out)
    assert table["claim curve"] == "GDP μ = 1" and table["verdict"] == "violated"
    assert float(table["fdp bound"]) > 4.377
    assert "refutes GDP μ = 1.8" in out or "refutes GDP μ = 1.9" in out  # the two-sample test near the true 2-GDP


def test_none_has_no_claim(run):
    code, out, err = run("none", "--canaries", "1000")
    assert code == 0, err
    table = row(out)
    assert (table["guess rule"], table["claim eps"], table["claim curve"], table["verdict"]) == (
        "grid", "-", "-", "no claim")
    assert table["k"] == table["v"]  # the identity: every guess right


@pytest.mark.parametrize(("args", "message"), [
    (["--bound", "both"], "--bound must be one of fdp, steinke, got 'both'"),
    (["--guesses", "best"], "--guesses must be claim, grid or an integer in 1..10000 (--canaries), got 'best'"),
    (["--guesses", "20000"], "--guesses must be claim, grid or an integer in 1..10000 (--canaries), got '20000'"),
    (["--canaries", "1"], "--canaries must be an integer >= 2, got 1"),
    (["--confidence", "1"], "--confidence must be a number in (0, 1), got 1.0"),
    (["--bound-delta", "1.5"], "--bound-delta must be a number in [0, 1), got 1.5"),
    (["--bound-delta", "0"], "--bound-delta: the claim's curve GDP μ = 1 gives no finite epsilon at delta 0"),
    (["--pair", "diagonal"], "--pair must be one of axis, spread, random-1, random-2, zero-vs-axis, beyond-clip"),
    (["--bits", "3"], "--bits is not a parameter of mechanism 'gaussian'"),
])
def test_bad_options_are_one_line_exit_2_and_write_nothing(run, tmp_path, args, message):
    code, out, err = run(*GAUSSIAN, *args, "--out", str(tmp_path / "never"))
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {message}"), err
    assert "canary audit of" not in out and not (tmp_path / "never").exists()


def test_out_writes_valid_results_and_reports(run, tmp_path):
    code, out, err = run(*GAUSSIAN, "--out", str(tmp_path))
    assert code == 0, err
    document = load_results(tmp_path / "results.json")
    validate_results(document)
    assert document["command"] == "canary"
    assert document["config"]["canaries"] == 10000 and document["config"]["guesses"] == "claim"
    (setting,) = document["settings"]
    canary = setting["canary"]
    assert (canary["kind"], canary["bound"], canary["canaries"]) == ("idealized", "fdp", 10000)
    assert canary["claim"]["curve"] == "GDP μ = 1" and canary["claim"]["epsilon"] == pytest.approx(4.377, abs=1e-3)
    (view,) = canary["views"]
    assert view["statistic"].startswith("log-likelihood ratio") and view["result"]["verdict"] == setting["verdict"]["verdict"] == "consistent"
    assert len(view["roc"]["fpr"]) == len(view["claim_tpr"]) > 10
    details = canary["details"]
    assert details["pair"] == "axis" and details["independent"]["label"] == "independent calls (two-sample test)"
    assert details["independent"]["claim_refuted"] is False and details["refuted_curve"] == "GDP μ = 0.6871"
    assert f"{view['result']['epsilon_lower_bound']:.3f}" == row(out)["fdp bound"]
    # the ROC line: what results.json records, as the report shows it; 1-GDP: AUROC Phi(1 / sqrt 2) = 0.7602
    summary = view["roc_summary"]
    assert (summary["positives"] + summary["negatives"], summary["confidence"]) == (10_000, 0.95)
    assert summary["auc_low"] <= 0.7602 <= summary["auc_high"]
    printed = next(line for line in out.splitlines() if line.startswith("ROC of the canary scores"))
    assert printed == (f"ROC of the canary scores (included canaries the positives): "
                       f"{roc_text(as_model(document).settings[0].canary.views[0].roc_summary)} "
                       "(95 % intervals: DeLong, Clopper-Pearson)")
    assert f"AUROC {summary['auc']:.3f} [{summary['auc_low']:.3f}, {summary['auc_high']:.3f}]; TPR at 1 %" in printed
    for name in ("report.html", "report.md"):
        assert (tmp_path / name).is_file()
    json.loads((tmp_path / "results.json").read_text())  # strict JSON


def test_same_seed_same_numbers_other_seed_other_draw(run):
    first, again = row(run(*GAUSSIAN)[1]), row(run(*GAUSSIAN)[1])
    other = row(run(*GAUSSIAN, "--seed", "1")[1])
    del first["seconds"], again["seconds"], other["seconds"]
    assert first == again
    assert (other["v"], other["fdp bound"]) != (first["v"], first["fdp bound"])
