"""The console script, run as a user runs it (a real subprocess)."""
import json
import os
import re
import subprocess
import sys

import pytest

from auditkit.results import load_results

SMALL = ["--rounds", "2", "--clients", "3", "--tau", "2"]


def auditkit(*args, cwd=None, timeout=600, columns=None):
    env = None if columns is None else {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-m", "auditkit.cli", *args], check=False, capture_output=True, text=True, cwd=cwd,
        timeout=timeout, env=env,
    )


def test_help_lists_the_commands():
    result = auditkit("--help")
    assert result.returncode == 0
    for command in ("mechanisms", "train", "audit"):
        assert command in result.stdout


def test_mechanisms_table_lists_every_registered_mechanism():
    from auditkit import mechanisms

    result = auditkit("mechanisms", columns=220)
    assert result.returncode == 0
    for name in mechanisms.names():
        assert name in result.stdout
    text = " ".join(result.stdout.split())
    assert "no privacy" in text and "claim-exceeded" in text and "eps as implemented" in text


def test_mechanisms_list_fits_a_narrow_terminal():
    from auditkit import mechanisms

    names = mechanisms.names()
    result = auditkit("mechanisms", columns=80)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[1].split() == ["name", "claimed", "eps", "delta", "eps", "as", "implemented", "bits/coord"]
    starts = [line.split()[0] for line in lines if line and not line.startswith(" ")]
    assert all(name in starts for name in names)  # each mechanism opens its own line
    assert len(lines) <= 3 * len(names) + 10  # title, header, at most 3 lines each, the footnote
    gaussian = lines.index(next(line for line in lines if line.startswith("gaussian ")))
    assert lines[gaussian].split() == ["gaussian", "284.4", "1e-05", "-", "32.00"]
    assert lines[gaussian + 1] == "    l2 clipping + Gaussian noise added by the client (DP baseline)"
    assert "(the full table needs 160+ columns)" in " ".join(result.stdout.split())


@pytest.mark.parametrize(("columns", "wide"), [(159, False), (160, True), (200, True)])
def test_mechanisms_table_is_kept_from_160_columns(columns, wide):
    from auditkit.cli.mechanisms import WIDE_TABLE_MIN_WIDTH

    assert WIDE_TABLE_MIN_WIDTH == 160
    result = auditkit("mechanisms", columns=columns)
    assert result.returncode == 0, result.stderr
    assert ("unit of privacy" in result.stdout and "┃ name" in result.stdout) is wide
    assert result.stdout.splitlines()[1].startswith("name ") is not wide


@pytest.mark.parametrize(("args", "message"), [
    (["--mechanism", "bogus"], "unknown mechanism 'bogus'"),
    (["--preset", "fast"], "--preset must be one of quickstart, "),
    (["--mechanism", "gaussian", "--sigma", "-1"], "sigma"),
    (["--mechanism", "gaussian", "--sigma", "nan"], "sigma"),
    (["--clients", "0"], "--clients must be an integer in 1..100000, got 0"),
    (["--tau", "0"], "--tau must be an integer in 1..10000, got 0"),
    # absurd sizes and a vanishing noise (issue 39): the flags' ranges are the config's bounds
    (["--rounds", "1000000000"], "--rounds must be an integer in 1..100000, got 1000000000"),
    (["--batch-size", "1000000000"],
     "--batch-size must be an integer in 1..10000, got 1000000000"),
    (["--seed", str(2**64)],
     f"--seed must be an integer in 0..{2**63 - 1}, got {2**64}"),
    (["--mechanism", "gaussian", "--sigma", "1e-300"], "mechanism.sigma must be a number in [1e-09, 1e+09]"),
    # a data folder without the preset's preferred dataset is an error, never the embedded fallback
    (["--preset", "jopeq", "--data-dir", "{tmp}"], "data.data_dir: MNIST not found in"),
    (["--dataset", "mnist", "--data-dir", "{tmp}/nowhere", "--mechanism", "none"], "MNIST"),
    (["--dataset", "mnist", "--mechanism", "none"], "MNIST"),
    # audit's own options: train judges nothing
    (["--confidence", "0.99"], "no such option: --confidence"),
    (["--resume"], "no such option: --resume"),
    (["--recorded", "{tmp}/rec"], "no such option: --recorded"),
    # DP-SGD in the clients: a batch larger than a client's data is refused once the data are split
    (["--clients", "70", "--batch-size", "60", "--dp-sgd-noise-multiplier", "1"],
     "dp_sgd needs training.batch_size <= the smallest client's example count (50); got 60"),
    (["--dp-sgd-noise-multiplier", "0"], "dp_sgd.noise_multiplier must be a number in [1e-09, 1e+09], got 0.0"),
    (["--dp-sgd-max-grad-norm", "0.5"],
     "dp_sgd.noise_multiplier must be given to turn DP-SGD on ([dp_sgd] sets max_grad_norm without it)"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "out"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = auditkit("train", *args, "--out", str(out))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    assert not out.exists()


def test_audit_confidence_out_of_range_is_one_line_before_any_training(tmp_path):
    result = auditkit("audit", "--confidence", "1.5", "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --confidence must be a number in (0, 1), got 1.5"
    assert not (tmp_path / "out").exists()


def test_config_with_unknown_key_fails_without_touching_earlier_results(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    earlier = out / "results.json"
    earlier.write_text('{"kept": true}')
    config = tmp_path / "c.toml"
    config.write_text("[training]\nclientz = 3\n")
    result = auditkit("audit", str(config), "--out", str(out))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: config key 'training.clientz' is not allowed; allowed keys in [training]: backend, batch_size, "
        "batched, bn_stats, checkpoints, client_chunk, client_mode, client_weights, clients, clients_per_round, "
        "local_epochs, lr, lr_factor, lr_patience, lr_schedule, model, momentum, norm, optimizer, optimizer_state, "
        "participation, precision, recompute_activations, rounds, sample_rate, server_lr, small_stem, tau, "
        "weight_decay")
    assert earlier.read_text() == '{"kept": true}'
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]


def test_train_runs_one_mechanism_of_a_config_with_several(tmp_path):
    config = tmp_path / "two.toml"
    config.write_text('[[mechanisms]]\nname = "none"\n[[mechanisms]]\nname = "sdq"\n')
    result = auditkit("train", str(config), *SMALL, "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.strip() == ("error: this config holds 2 mechanism settings; `auditkit train` runs one "
                                     "(use `auditkit audit`, or give --mechanism)")
    assert not (tmp_path / "out").exists()


def test_out_path_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    result = auditkit("train", *SMALL, "--out", str(target))
    assert result.returncode == 2 and "is a file" in result.stderr
    assert target.read_text() == "x"


def test_train_writes_results_with_every_round_and_report_renders_them(tmp_path):
    result = auditkit("train", *SMALL, "--mechanism", "sdq", "--bits", "4", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["schema_version"] == 6 and document["command"] == "train"
    (setting,) = document["settings"]
    assert [r["round"] for r in setting["training"]["rounds"]] == [1, 2]
    assert setting["mechanism"]["name"] == "sdq" and setting["mechanism"]["params"]["bits"] == 4
    assert 0 < setting["training"]["final"]["bits_per_coordinate"] < 5  # 4-bit indices, entropy coded
    assert "FedAvg rounds" in result.stdout
    assert (tmp_path / "report.html").is_file() and (tmp_path / "report.md").is_file()
    again = tmp_path / "again"
    rendered = auditkit("report", str(tmp_path / "results.json"), "--out", str(again))
    assert rendered.returncode == 0, rendered.stderr
    assert "sdq" in (again / "report.md").read_text() and (again / "report.html").is_file()


@pytest.mark.slow
def test_audit_with_no_arguments_writes_the_three_files_and_a_report_that_renders(tmp_path, report_browser):
    """The README's main job: the quickstart preset on a fresh install, then its report in headless Chromium.
    The subprocess timeout (10 minutes) is the preset's time limit; its wall time is reported by the run."""
    result = auditkit("audit", cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "auditkit-out"
    document = load_results(out / "results.json")
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    # off a terminal the audit prints a line per stage as it goes, and a compact summary at the end
    assert re.search(r"^\[ *\d+\.\d s\] s00 none: train done \(\d+\.\d s(, peak \d[\d.]* [MG]iB)?\)$", result.stdout, flags=re.M)
    assert ("\njopeq-laplace bits=2, eps=10: violated, analytic (one round); not tested (whole run); claim eps 10 "
            "[claim-exceeded]; ") in result.stdout
    settings = document["settings"]
    assert len(settings) == 11 and all(len(s["training"]["rounds"]) == 20 for s in settings)
    assert settings[0]["training"]["final"]["test_accuracy"] >= 0.7  # the `none` baseline learns
    by_name = {s["label"]: s for s in settings}
    # the clean probe is a working attack, and the claims span eps 1 to 16
    assert all(s["probe"]["clean"]["ssim_mean"] >= 0.9 for s in settings)
    targets = sorted(s["mechanism"]["guarantee"]["epsilon"] for s in settings if s["mechanism"]["name"] == "gaussian")
    assert targets == pytest.approx([1, 4, 16])
    claimed = [s for s in settings if s["mechanism"]["guarantee"]["epsilon"] is not None]
    assert all(len(s["identification"]["tests"]) == 2 for s in claimed)
    # the audit's findings on the quickstart: JoPEQ's scale side channel breaks its claim, and the headline says so
    jopeq = [s for s in settings if s["mechanism"]["name"] == "jopeq-laplace"]
    assert any(a["test"] == "jopeq-scale-side-channel" and a["verdict"] == "violated"
               for s in jopeq for a in s["distinguish"]["adaptive"])
    assert all(s["verdict"]["verdict"] == "violated" for s in jopeq if any(
        a["verdict"] == "violated" for a in s["distinguish"]["adaptive"]))
    # eps 10 is beyond these trials' reach, but the noise JoPEQ really adds is computed: refuted analytically
    assert (by_name["jopeq-laplace bits=2, eps=10"]["verdict"]["evidence"],
            by_name["jopeq-laplace bits=2, eps=10"]["mechanism"]["true_epsilon"] > 10) == ("analytic", True)
    assert [by_name[n]["verdict"]["verdict"] for n in ("none", "sdq bits=4, support=0.25")] == ["no claim"] * 2
    assert by_name["sdq bits=4, support=0.25"]["training"]["final"]["compression_vs_float32"] > 10
    assert all(s["verdict"]["verdict"] != "violated" for s in settings if s["mechanism"]["name"] != "jopeq-laplace")
    # the uplink SNR of the clipped update follows the noise: it rises with the claimed epsilon
    for name in ("gaussian", "cepam-gaussian"):
        snrs = [s["training"]["final"]["snr_db"] for s in settings if s["mechanism"]["name"] == name]
        assert snrs == sorted(snrs), (name, snrs)
    # where reconstruction begins: far above the Gaussian claims, inside JoPEQ's
    sweeps = {s["mechanism"]["name"]: s["probe"]["sweep"] for s in settings if "sweep" in s["probe"]}
    assert set(sweeps) == {"gaussian", "cepam-gaussian", "jopeq-laplace"}
    assert len(sweeps["gaussian"]["points"]) >= 8 and sweeps["gaussian"]["crossing_eps"] > 100
    assert sweeps["jopeq-laplace"]["crossing_eps"] < 10
    report = (out / "report.md").read_text()
    summary = " ".join(report.split())
    assert f"{100 * settings[0]['training']['final']['test_accuracy']:.2f}" in summary
    assert "## Findings" in report and "### What one reconstruction attack achieved (not a guarantee)" in report
    for path in out.rglob("*.json"):  # strict JSON, stages included
        json.loads(path.read_text(), parse_constant=lambda constant: pytest.fail(f"{path}: {constant}"))

    seen = report_browser(out / "report.html", tmp_path / "report.png")
    assert seen["summary_visible"] and seen["summary_rows"] == 11 and seen["overflowing"] == []
    # eight figures, the clean references (the inversion's, the probe's without and with a clip), then an inversion
    # and a probe grid per setting, each setting's in its fold
    assert len(seen["images"]) == 8 + 3 + 2 * 11
    assert all(i["complete"] and i["naturalWidth"] > 0 and i["src"].startswith("data:image/png") for i in seen["images"])
    assert seen["failed_requests"] == [] and seen["external_requests"] == [] and seen["dialogs"] == []
    assert (tmp_path / "report.png").stat().st_size > 50_000


def test_cepam_preset_trains_on_mnist_from_data_dir(tmp_path, make_mnist):
    make_mnist(tmp_path / "data", n_train=120, n_test=30)
    out = tmp_path / "out"
    result = auditkit("train", "--preset", "cepam", "--mechanism", "none", "--data-dir", str(tmp_path / "data"),
                      "--rounds", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    document = json.loads((out / "results.json").read_text())
    data = document["provenance"]["data"]
    assert data["dataset"] == "mnist"
    assert (data["train"], data["validation"], data["test"]) == (100, 20, 30)
    assert len(data["client_sizes"]) == 30 and set(data["client_sizes"]) <= {3, 4}
    assert document["config"]["training"]["checkpoints"] == [1, 2]


def test_account_prints_the_claims_and_the_composition():
    result = auditkit("account", "cepam-gaussian", "--sigma", "0.1", "--eps-tilde", "5.9", "--tau", "15",
                      "--dataset-size", "1666", "--clients", "30", "--rounds", "80")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "(eps=1.45, delta=0.009689)" in text and "flags: vacuous" in text
    assert "80 rounds: (eps=1.771e+04, delta=1e-05) via opacus-rdp" in text  # PRV's grid cannot: RDP, named
    assert "opacus-prv could not evaluate it" in text
    solved = auditkit("account", "cepam-gaussian", "--solve", "sigma", "--target-eps", "1", "--target-delta", "0.01",
                      "--tau", "15", "--dataset-size", "1666", "--clients", "30", "--formula", "paper003")
    assert "sigma = 0.137493" in solved.stdout
    bad = auditkit("account", "laplace", "--scale", "-1")
    assert bad.returncode == 2 and bad.stderr.startswith("error: scale must be a finite number > 0")


@pytest.mark.parametrize(("args", "message"), [
    (["gaussian", "--composition-delta", "1.5"],
     "error: --composition-delta must be a number in [0, 1), got 1.5"),
    (["gaussian", "--delta", "1.5"], "error: delta must be a number in (0, 1), got 1.5"),
    (["gaussian", "--rounds", "0"], "error: --rounds must be an integer >= 1, got 0"),
    (["laplace", "--scale", "0"], "error: scale must be a finite number > 0"),
    (["cepam-gaussian", "--sigma", "1", "--eps-tilde", "1", "--tau", "0", "--dataset-size", "10", "--clients", "3"],
     "error: tau must be an integer >= 1, got 0"),
    (["cepam-gaussian", "--sigma", "1", "--eps-tilde", "1", "--tau", "15", "--dataset-size", "0", "--clients", "3"],
     "error: dataset_size must be an integer >= 1, got 0"),
    (["cepam-gaussian", "--solve", "sigma", "--target-eps", "0", "--target-delta", "1e-5", "--tau", "15",
      "--dataset-size", "1666", "--clients", "30"], "error: --solve sigma needs --target-eps > 0"),
    (["cepam-gaussian", "--solve", "sigma", "--target-eps", "1", "--target-delta", "1e-30", "--tau", "15",
      "--dataset-size", "1666", "--clients", "30", "--formula", "paper003"], "error: no sigma reaches"),
    (["gaussian", "--formula", "paper000"], "error: formula must be one of exact, paper003, got 'paper000'"),
    (["gaussian", "--solve", "rounds", "--target-eps", "1"],
     "error: --solve must be one of eps-tilde, sigma, t-noise, got 'rounds'"),
    (["gaussian", "--solve", "sigma", "--target-eps", "1", "--target-delta", "0.01"],
     "error: --solve sigma applies to cepam-gaussian, not gaussian"),
    (["cepam-gaussian", "--solve", "sigma", "--target-eps", "1", "--target-delta", "0.01", "--tau", "15"],
     "error: --solve sigma needs --dataset-size and --clients"),
])
def test_account_bad_input_is_one_line_and_exit_2(args, message):
    result = auditkit("account", *args)
    assert result.returncode == 2 and result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_account_composes_dp_fedavg_over_poisson_sampled_rounds(tmp_path):
    common = ("account", "dp-fedavg", "--noise-multiplier", "1.0", "--clip", "1", "--participation", "poisson",
              "--sample-rate", "0.1", "--rounds", "100", "--composition-delta", "1e-5")
    rdp = auditkit(*common, "--accountant", "dp_accounting-rdp", "--out", str(tmp_path / "rdp"))
    assert rdp.returncode == 0, rdp.stderr
    text = " ".join(rdp.stdout.split())
    assert "100 rounds: (eps=7.904, delta=1e-05) via dp_accounting-rdp" in text
    assert "PoissonSampledDpEvent(sampling_probability=0.1" in text and "amplified by sampling" in text
    document = json.loads((tmp_path / "rdp" / "results.json").read_text())
    written = document["settings"][0]["accounting"]
    assert document["config"]["accountant"] == written["accountant"] == written["composed"]["accountant"] == (
        "dp_accounting-rdp") and document["provenance"]["accountants"] == ["dp_accounting-rdp"]
    assert written["sampling"] == {"participation": "poisson", "sample_rate": 0.1, "amplified": True,
                                   "note": written["sampling"]["note"]}
    assert abs(written["composed"]["epsilon"] - 7.9039) < 1e-3
    pld = auditkit(*common, "--accountant", "dp_accounting-pld")
    assert "100 rounds: (eps=7.047, delta=1e-05) via dp_accounting-pld" in " ".join(pld.stdout.split())


@pytest.mark.parametrize(("args", "message"), [
    (["--participation", "poisson", "--sample-rate", "0"], "error: sample_rate must be a number in (0, 1], got 0.0"),
    (["--participation", "poisson", "--sample-rate", "1.5"], "error: sample_rate must be a number in (0, 1], got 1.5"),
    (["--noise-multiplier", "0"], "error: noise_multiplier must be a finite number > 0, got 0.0"),
    (["--participation", "uniform"], "error: dp-fedavg's claim covers --participation 'full' or 'poisson'; "
                                     "'uniform' has no sampling claim"),
    (["--participation", "poisson"], "error: --participation 'poisson' needs --sample-rate, a number in (0, 1]"),
])
def test_dp_fedavg_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, args, message):
    out = tmp_path / "out"
    result = auditkit("account", "dp-fedavg", "--rounds", "10", *args, "--out", str(out))
    assert result.returncode == 2 and result.stderr.startswith(message), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_account_solves_eps_tilde_and_the_t_noise_and_shows_the_realised_epsilon():
    tilde = auditkit("account", "cepam-gaussian", "--solve", "eps-tilde", "--target-eps", "1.450187", "--tau", "15",
                     "--dataset-size", "1666")
    assert "eps_tilde = 5.9 " in tilde.stdout
    t_noise = auditkit("account", "jopeq-t", "--solve", "t-noise", "--target-eps", "4")
    assert "nu = 5.35" in t_noise.stdout and "s2 = 0.5724" in t_noise.stdout
    exceeded = " ".join(auditkit("account", "t-dist", "--nu", "5", "--s2", "1e-4", "--rounds", "10").stdout.split())
    assert "[flags: claim-exceeded]" in exceeded and "10 rounds: (eps=40, delta=1e-05)" in exceeded
    assert "10 rounds, as implemented: (eps=314.6, delta=0)" in exceeded


def test_mechanisms_detail_and_unknown_name():
    detail = auditkit("mechanisms", "jopeq-laplace")
    assert detail.returncode == 0 and "support" in detail.stdout and "claim-exceeded" in detail.stdout
    bad = auditkit("mechanisms", "bogus")
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown mechanism 'bogus'")


def test_attack_writes_results_the_grid_and_the_report(tmp_path):
    out = tmp_path / "attack"
    result = auditkit("attack", "idlg", "--mechanism", "jopeq-laplace", "--eps", "3", "--bits", "8", "--images", "1",
                      "--iterations", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    document = json.loads((out / "results.json").read_text())
    (setting,) = document["settings"]
    assert document["command"] == "attack" and document["config"]["settings"]["iterations"] == 2
    assert setting["mechanism"]["params"]["eps"] == 3.0 and setting["inversion"]["images"] == 1
    assert (out / "figures" / "inversion.png").exists() and (out / "report.html").exists()
    assert "clean" in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["gan"], "error: attack must be one of dlg, idlg, inverting_gradients"),
    (["idlg", "--images", "0"], "error: images must be an integer >= 1"),
    (["idlg", "--mechanism", "gaussian", "--sigma", "-1"], "error: sigma"),
    (["idlg", "--source", "faces"], "error: --source must be one of patches, digits"),
])
def test_attack_bad_input_is_one_line_and_writes_nothing(tmp_path, args, message):
    result = auditkit("attack", *args, "--out", str(tmp_path / "never"))
    assert result.returncode == 2 and result.stderr.startswith(message), result.stderr
    assert not (tmp_path / "never").exists()


def test_distinguish_prints_bounds_claim_and_verdict(tmp_path):
    result = auditkit("distinguish", "laplace", "--scale", "1", "--clip", "0.5", "--trials", "20000",
                      "--no-adaptive", "--out", str(tmp_path), columns=200)
    assert result.returncode == 0, result.stderr
    assert "black-box verdict: consistent" in result.stdout and "(eps=1, delta=0)-DP" in result.stdout
    test = json.loads((tmp_path / "results.json").read_text())["settings"][0]["distinguish"]
    assert test["verdict"] == "consistent" and 0 < test["epsilon_lower_bound"] <= 1 and test["p_value"] > 0.05
    # the worst-pair search: 6 candidate pairs, one certified estimate on the chosen one, judged as one test
    assert len(test["search"]["candidates"]) == 6 and len(test["estimates"]) == 1 and test["tests"] == 1
    assert test["estimates"][0]["pair"] == test["search"]["candidates"][test["search"]["chosen"]]["pair"]
    assert "pair search" in result.stdout and "(chosen)" in result.stdout and (tmp_path / "report.md").is_file()
    assert "Worst-pair search: every pair's bound predicted" in (tmp_path / "report.md").read_text()
    roc = test["roc_summary"]  # the chosen pair's held-out ROC, printed as recorded
    assert roc == test["estimates"][0]["roc_summary"] and roc["auc_low"] <= roc["auc"] <= roc["auc_high"]
    assert (f"held-out ROC of the worst pair's test (M(x1)'s outputs the positives): AUROC {roc['auc']:.3f} "
            f"[{roc['auc_low']:.3f}, {roc['auc_high']:.3f}]; TPR at 1 % FPR") in " ".join(result.stdout.split())
    every = auditkit("distinguish", "laplace", "--scale", "1", "--clip", "0.5", "--trials", "20000",
                     "--no-adaptive", "--no-search", "--out", str(tmp_path / "every"), columns=200)
    assert every.returncode == 0, every.stderr
    test = json.loads((tmp_path / "every" / "results.json").read_text())["settings"][0]["distinguish"]
    assert len(test["estimates"]) == 6 and test["tests"] == 6 and test["search"] is None
    adaptive = auditkit("distinguish", "dpsq", "--range", "adaptive", "--trials", "4000", columns=200)
    assert adaptive.returncode == 0 and "dpsq-cross-cell" in adaptive.stdout
    side = auditkit("distinguish", "jopeq-laplace", "--trials", "4000", columns=200)
    assert "jopeq-scale-side-channel: violated" in side.stdout
    bad = auditkit("distinguish", "laplace", "--confidence", "1.5")
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --confidence must be a number in (0, 1), got 1.5"


@pytest.mark.parametrize(("args", "message"), [
    (["nope"], "paper must be one of cepam, dpsq, jopeq, msp, got 'nope'"),
    (["cepam", "--budget", "slow"], "--budget must be one of quick, paper, got 'slow'"),
    (["cepam", "--data-dir", "{tmp}"], "does not hold mnist in torchvision's layout"),
    (["cepam", "--seeds", "0"], "--seeds must be an integer >= 1, got 0"),
    (["cepam", "--confidence", "1.5"], "--confidence must be in (0, 1), got 1.5"),
    (["jopeq", "--data-dir", "{tmp}"], "does not hold mnist in torchvision's layout"),
    ([], "PAPER is required: one of cepam, dpsq, jopeq, msp"),
])
def test_reproduce_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "out"
    result = auditkit("reproduce", *[a.replace("{tmp}", str(tmp_path)) for a in args], "--out", str(out))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not out.exists()


def test_reproduce_list_shows_each_table():
    result = auditkit("reproduce", "--list", columns=200)
    assert result.returncode == 0, result.stderr
    tables = ("003 Table I", "000 Table I", "000 Table II", "003 Fig. 2", "002 Table I", "002 Fig. 2", "002 Fig. 4",
              "001 Fig. 2a", "001 Fig. 4a", "004 Fig. 2")
    assert all(table in result.stdout for table in tables)


def test_train_with_dp_sgd_flags_reports_the_example_level_claim(tmp_path):
    result = auditkit("train", *SMALL, "--batch-size", "4", "--dp-sgd-noise-multiplier", "1.1",
                      "--dp-sgd-max-grad-norm", "0.5", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "results.json").read_text())
    assert document["config"]["dp_sgd"] == {"noise_multiplier": 1.1, "max_grad_norm": 0.5}
    example = document["settings"][0]["accounting"]["example_level"]
    assert (example["noise_multiplier"], example["max_grad_norm"], example["steps"]) == (1.1, 0.5, 4)
    assert example["sample_rate"] == 4 / min(document["provenance"]["data"]["client_sizes"])
    text = " ".join(result.stdout.split())
    assert f"example-level claim (DP-SGD): (eps={example['epsilon']:.4g}, delta=1e-05) over 4 steps" in text
    assert "example-level (DP-SGD): ε = " in (tmp_path / "report.md").read_text()
    assert result.stderr == ""  # the accountants' log lines stay quiet

