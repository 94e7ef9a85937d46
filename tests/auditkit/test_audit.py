"""The audit pipeline (auditkit.audit / `auditkit audit`): stages, determinism, kill and resume, early refusal.

One tiny config (3 clients, 3 rounds, 2 local steps, 3 mechanism settings with a sweep, 5 inversion iterations,
2,000 trials per test) keeps every run to seconds; the real quickstart is run by tests/auditkit/cli/test_commands.py.
"""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time

import pytest

from auditkit.accounting.dp_sgd import example_level_claim
from auditkit.audit import STAGES, Audit, plan_audit, run_audit
from auditkit.config import ConfigError, from_dict
from auditkit.output_folder import OutputFolderError
from auditkit.results import load_results, validate_results

TINY = {
    "title": "tiny <script>alert('t')</script>",
    "seed": 3,
    "device": "cpu",
    "training": {"model": "cnn", "clients": 3, "rounds": 3, "tau": 2, "checkpoints": [1, 3]},
    "mechanisms": [
        {"name": "none"},
        {"name": "jopeq-laplace", "label": "JoPEQ <script>alert('x')</script>", "bits": 2,
         "sweep": {"eps": [1.0, 4.0]}},
    ],
    "inversion": {"targets": 2, "iterations": 5},
    "probe": {"targets": 2, "iterations": 5},
    "identification": {"candidates": [2, 10], "trials": 40},
    "distinguish": {"trials": 2000},
}
TINY_TOML = """
title = "tiny <script>alert('t')</script>"
seed = 3
device = "cpu"
[training]
model = "cnn"
clients = 3
rounds = 3
tau = 2
checkpoints = [1, 3]
[[mechanisms]]
name = "none"
[[mechanisms]]
name = "jopeq-laplace"
label = "JoPEQ <script>alert('x')</script>"
bits = 2
sweep = { eps = [1.0, 4.0] }
[inversion]
targets = 2
iterations = 5
[probe]
targets = 2
iterations = 5
[identification]
candidates = [2, 10]
trials = 40
[distinguish]
trials = 2000
"""


def _refuse_non_strict(constant):
    raise ValueError(f"not strict JSON (RFC 8259): {constant}")


def _cli(*args, **kwargs):
    # Ctrl-C as in a terminal: SIGINT at its default in the child, whatever this worker inherited or a library
    # (Ray, under Flower's tests) set; a child started with SIGINT ignored keeps ignoring it and runs to the end
    return subprocess.Popen([sys.executable, "-m", "auditkit.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kwargs)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted audit of TINY: (folder, document)."""
    out = tmp_path_factory.mktemp("reference")
    return out, run_audit(from_dict(TINY), out=out)


def test_every_setting_is_trained_accounted_attacked_and_tested(reference):
    out, document = reference
    validate_results(document)
    assert load_results(out / "results.json") == document
    written = [p for p in out.rglob("*") if p.is_file()]
    mask = os.umask(0)
    os.umask(mask)
    for path in written:  # every file strict JSON where it is JSON, and made with the umask's mode
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path
        if path.suffix == ".json":
            json.loads(path.read_text(), parse_constant=_refuse_non_strict)
    assert {p.name for p in written} >= {"results.json", "train.json", "train.pt", "report.html"}
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    settings = document["settings"]
    assert [s["label"] for s in settings] == [
        "none", "JoPEQ <script>alert('x')</script> eps=1", "JoPEQ <script>alert('x')</script> eps=4"]
    assert [s["sweep"] for s in settings] == [{}, {"eps": 1.0}, {"eps": 4.0}]
    for s in settings:
        assert [r["round"] for r in s["training"]["rounds"]] == [1, 2, 3]
        assert s["inversion"]["view"] == "server" and s["inversion"]["round"] == 1
        assert len(s["inversion"]["clean"]["ssim"]) == 2 and (out / s["inversion"]["figure"]).is_file()
        # one Bonferroni family over the whole audit: every setting's bound is at the same per-test level
        assert s["distinguish"]["tests"] == settings[0]["distinguish"]["tests"] > 6
    # round 1's model, the same targets and seed in every setting, no clip to rescale the probe's updates to: the
    # clean attacks are the same, one grid each (named by their images), drawn once in the report
    cleans = {(s["inversion"]["clean_figure"], s["probe"]["clean_figure"]) for s in settings}
    assert len(cleans) == 1 and all((out / path).is_file() for path in cleans.pop())
    assert len({s["inversion"]["clean"]["ssim_mean"] for s in settings}) == 1
    none, jopeq = settings[0], settings[1]
    assert none["inversion"]["clean"] == none["inversion"]["defended"]  # no mechanism: the server sees it all
    assert none["distinguish"]["verdict"] == none["verdict"]["verdict"] == "no claim"
    assert none["probe"] is not None and "sweep" not in none["probe"]  # no claim: nothing to recalibrate
    # the headline's bound is the strongest any test certified: JoPEQ's side channel beats the black-box pair
    bound = jopeq["verdict"]["bound"]
    strongest = max([jopeq["distinguish"]["epsilon_lower_bound"],
                     *(a["epsilon_lower_bound"] for a in jopeq["distinguish"]["adaptive"])])
    assert bound["epsilon_lower_bound"] == strongest and bound["test"]["name"].startswith("adaptive test jopeq-")
    # one reconstruction sweep shared by the two JoPEQ settings; 5 iterations on the CNN reconstruct nothing
    # recognisable without the mechanism, so no point is run (tests/auditkit/stages/test_probe.py runs points)
    sweeps = [s["probe"]["sweep"] for s in settings[1:]]
    assert sweeps[0] == sweeps[1] and sweeps[0]["clean_ssim"] == jopeq["probe"]["clean"]["ssim_mean"] < 0.5
    assert sweeps[0]["points"] == [] and sweeps[0]["stopped"].startswith("not run: the clean attack's mean SSIM")
    assert jopeq["mechanism"]["guarantee"]["epsilon"] == 1.0
    composed = jopeq["accounting"]["composed"]  # 3 pure-eps rounds as randomized response, at delta 1e-5:
    assert 2.9999 < composed["epsilon"] <= 3.0 and composed["accountant"] == "dp_accounting-pld"  # just below 3 eps
    assert jopeq["mechanism"]["capabilities"]["dp_event"] == "generic default"
    assert jopeq["training"]["final"]["bits_per_coordinate"] < 4
    assert {a["test"] for a in jopeq["distinguish"]["adaptive"]} == {"jopeq-scale-side-channel", "jopeq-overload"}
    html = (out / "report.html").read_text()
    assert "<script>alert" not in html and "&lt;script&gt;alert(&#39;x&#39;)" in html


def test_same_config_and_seed_give_identical_results(reference, tmp_path):
    out, _ = reference
    run_audit(from_dict(TINY), out=tmp_path)
    assert (tmp_path / "results.json").read_bytes() == (out / "results.json").read_bytes()
    assert (tmp_path / "report.md").read_text() == (out / "report.md").read_text()


@pytest.mark.parametrize("kill", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_killed_audit_resumes_without_recomputing_and_equals_an_uninterrupted_run(reference, tmp_path, kill):
    config = tmp_path / "tiny.toml"
    config.write_text(TINY_TOML)
    out = tmp_path / "out"
    process = _cli("audit", str(config), "--out", str(out))
    marker = out / "stages" / "s01" / "train.json"
    deadline = time.monotonic() + 300
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, "the audit finished before it could be interrupted"
    process.send_signal(kill)
    _, stderr = process.communicate(timeout=60)
    if kill == signal.SIGINT:  # Ctrl-C: a one-line note on how to finish, exit status 130
        assert process.returncode == 130 and "--resume" in stderr and "Traceback" not in stderr
    assert not (out / "results.json").exists() and not (out / "report.html").exists()
    finished = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in (out / "stages").rglob("*.json")}
    assert (out / "stages" / "s00" / "distinguish.json") in finished and marker in finished

    resumed = _cli("audit", str(config), "--out", str(out), "--resume")
    stdout, stderr = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, stderr
    for path, (mtime, content) in finished.items():  # finished stages were loaded, not recomputed
        assert path.stat().st_mtime_ns == mtime and path.read_bytes() == content, path
    assert len(list((out / "stages").rglob("*.json"))) == 3 * len(STAGES)
    assert not list(out.rglob(".*.tmp*"))  # a temporary file the kill left behind is cleared on resume
    assert (out / "results.json").read_bytes() == (reference[0] / "results.json").read_bytes()
    assert (out / "report.html").is_file() and (out / "report.md").is_file()


def test_resume_recomputes_a_stage_whose_inputs_changed(reference, tmp_path):
    import shutil

    shutil.copytree(reference[0], tmp_path, dirs_exist_ok=True)
    changed = {**TINY, "distinguish": {"trials": 3000}}
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "stages").rglob("*.json")}
    seen = []
    run_audit(from_dict(changed), out=tmp_path, resume=True,
              on_event=lambda kind, **info: seen.append((info["stage"], info["status"])) if kind == "stage" else None)
    assert {status for stage, status in seen if stage != "distinguish"} == {"resumed"}
    assert {status for stage, status in seen if stage == "distinguish"} == {"start", "done"}
    for path, stamp in stamps.items():
        assert (path.stat().st_mtime_ns == stamp) == (path.stem != "distinguish"), path


def test_resume_never_reuses_stages_computed_by_other_code(reference, tmp_path, monkeypatch):
    import shutil

    from auditkit import results

    shutil.copytree(reference[0], tmp_path, dirs_exist_ok=True)
    monkeypatch.setattr(results, "code_fingerprint", lambda plugins=(): "sha256:other-code")
    seen = []
    run_audit(from_dict(TINY), out=tmp_path, resume=True,
              on_event=lambda kind, **info: seen.append(info["status"]) if kind == "stage" else None)
    assert "resumed" not in seen and seen.count("done") == 3 * len(STAGES)


def test_the_code_fingerprint_follows_the_sources_and_the_plugins(tmp_path):
    from auditkit import results

    plugin = tmp_path / "fingerprinted.py"
    plugin.write_text("x = 1\n")
    import importlib.util
    import sys as system

    spec = importlib.util.spec_from_file_location("fingerprinted", plugin)
    module = importlib.util.module_from_spec(spec)
    system.modules["fingerprinted"] = module
    try:
        spec.loader.exec_module(module)
        with_plugin = results.code_fingerprint(["fingerprinted"])
        plugin.write_text("x = 2\n")  # the plugin's source changed: so does the fingerprint
        assert results.code_fingerprint(["fingerprinted"]) != with_plugin
    finally:
        del system.modules["fingerprinted"]
    assert results.code_fingerprint() == results.code_fingerprint() != with_plugin
    assert re.fullmatch(r"sha256:[0-9a-f]{16}", results.code_fingerprint())


@pytest.mark.parametrize(("toml", "message"), [
    ('[[mechanisms]]\nname = "none"\n[[mechanisms]]\nname = "bogus"\n', "mechanisms[1]: unknown mechanism 'bogus'"),
    ('[[mechanisms]]\nname = "gaussian"\nsweep = { rate = [0.1, 1.0] }\n',
     "mechanisms[0]: unknown parameter 'rate' for mechanism 'gaussian'"),
    ('[[mechanisms]]\nname = "gaussian"\nsweep = { sigma = [0.1, -1.0] }\n', "mechanisms[0]: sigma"),
    ('[inversion]\nattack = "gan"\n', "inversion.attack must be one of"),
])
def test_bad_configs_fail_before_any_training(tmp_path, toml, message):
    config = tmp_path / "bad.toml"
    config.write_text(toml)
    result = subprocess.run([sys.executable, "-m", "auditkit.cli", "audit", str(config), "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ") and message in result.stderr
    assert not (tmp_path / "out").exists()  # nothing written: no training started


def test_an_output_path_that_is_a_file_is_refused_before_training(tmp_path):
    target = tmp_path / "file"
    target.write_text("kept")
    with pytest.raises(OutputFolderError, match="is a file, not a folder"):
        Audit(from_dict(TINY), out=target)
    assert target.read_text() == "kept"


def test_an_audit_with_dp_sgd_states_each_settings_example_level_claim(tmp_path):
    """[dp_sgd] under two uplink mechanisms (attack stages off): each setting's accounting holds the example-level
    claim of its 2 rounds x tau 2 steps at the smallest client's q, beside its own client-level claim."""
    quiet = {"enabled": False}
    config = from_dict({
        "seed": 3, "device": "cpu",
        "training": {"model": "linear", "clients": 3, "rounds": 2, "tau": 2, "batch_size": 4, "checkpoints": [1]},
        "mechanisms": [{"name": "none"}, {"name": "gaussian", "sigma": 1.0, "clip": 0.5}],
        "dp_sgd": {"noise_multiplier": 1.1, "max_grad_norm": 0.5},
        "inversion": quiet, "probe": quiet, "identification": quiet, "distinguish": quiet})
    document = run_audit(config, out=tmp_path)
    sizes = document["provenance"]["data"]["client_sizes"]
    expected = example_level_claim(1.1, 0.5, batch_size=4, client_sizes=sizes, rounds=2, tau=2, delta=1e-5)
    assert [s["accounting"].get("example_level") for s in document["settings"]] == [expected.to_dict()] * 2
    assert document["settings"][0]["accounting"]["composed"] is None  # none: no client-level claim
    assert document["settings"][1]["accounting"]["composed"]["rounds"] == 2


def test_plan_ids_labels_and_the_test_family():
    plans = plan_audit(from_dict(TINY))
    assert [p.id for p in plans] == ["s00", "s01", "s02"]
    assert [p.sweep for p in plans] == [{}, {"eps": 1.0}, {"eps": 4.0}]
    assert all(p.config.mechanism == p.setting for p in plans)


def test_report_rerenders_from_results_json_alone(reference, tmp_path):
    out, _ = reference
    target = tmp_path / "again"
    result = subprocess.run([sys.executable, "-m", "auditkit.cli", "report", str(out / "results.json"),
                             "--format", "md", "--out", str(target)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    again, original = (target / "report.md").read_text(), (out / "report.md").read_text()
    assert again.split("## Figures")[0] == original.split("## Figures")[0]  # the same tables, recomputed nothing
    links = re.findall(r"\]\(([^)]+\.png)\)", again)
    # 8 figures, the clean references of the inversion and the probe (shared by the 3 settings), then per setting
    # an inversion grid and a probe grid: every one copied into the report's folder
    assert len(links) == 8 + 2 + 3 + 3 and all((target / link).is_file() for link in links)
    assert not [link for link in links if link.startswith("..")]
    assert not (target / "report.html").exists() and not (target / "stages").exists()
    bad = subprocess.run([sys.executable, "-m", "auditkit.cli", "report", str(out / "results.json"), "--format", "pdf"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --format must be one of")
    missing = subprocess.run([sys.executable, "-m", "auditkit.cli", "report", str(tmp_path / "nope.json")],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and missing.stderr.startswith("error: ")


SEED_MECHANISMS_II = {
    "seed": 1,
    "device": "cpu",
    "training": {"model": "cnn", "clients": 6, "rounds": 2, "tau": 2, "checkpoints": [1],
                 "participation": "uniform", "clients_per_round": 4},
    "groups": {"sizes": [3, 3], "bits": [2, 4], "link_sigma": [0.0, 1e-3], "clients_per_round": 4, "bandwidth": 12},
    "mechanisms": [
        {"name": "dpsq", "eps": 1.0, "fusion": "central-cell", "clusters": "optimal"},
        {"name": "msp-laplace", "eps": 1.0, "consensus_rounds": 4},
    ],
    "inversion": {"targets": 2, "iterations": 5},
    "probe": {"targets": 2, "iterations": 5},
    "identification": {"candidates": [2, 10], "trials": 40},
    "distinguish": {"trials": 2000},
}


def test_dpsq_groups_and_msp_transcript_run_through_the_whole_pipeline(tmp_path):
    document = run_audit(from_dict(SEED_MECHANISMS_II), out=tmp_path)
    validate_results(document)
    dpsq, msp = document["settings"]
    assert dpsq["distinguish"]["adaptive"][0]["verdict"] == "claim holds only cell-locally"
    assert "cell-local" in dpsq["mechanism"]["guarantee"]["flags"]
    assert msp["training"]["final"]["uploads_per_round"] == 5  # K_t + 1
    assert msp["distinguish"]["verdict"] == "consistent"  # alpha_0 alone: Proposition 1 holds
    assert msp["distinguish"]["adaptive"][0]["verdict"] == "violated"  # the transcript does not
    views = [v["name"] for v in msp["inversion"]["views"]]
    assert views == ["first-residual", "alpha0"]  # "defended" is the least-squares reconstruction
    # the reconstruction hands the attacker the true update: the same attack scores alike on both
    assert abs(msp["inversion"]["defended"]["ssim_mean"] - msp["inversion"]["clean"]["ssim_mean"]) < 0.02
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "5 uploads/round" in report and "inversion of alpha0" in report


def test_an_attack_needing_a_layer_the_model_lacks_is_refused_before_training(tmp_path):
    """squeezenet's classifier is a convolution: the inversion's label extraction has no output nn.Linear to read."""
    raw = {**TINY, "data": {"dataset": "digits"},
           "training": {**TINY["training"], "model": "torchvision:squeezenet1_1"}}
    with pytest.raises(ConfigError, match=r"^inversion.attack 'inverting_gradients' needs an output nn.Linear layer "
                                          r".* and 'torchvision:squeezenet1_1' has none; choose inversion.attack = "
                                          r"'dlg' \(labels optimised\)$"):
        Audit(from_dict(raw), out=tmp_path / "out")
    assert not (tmp_path / "out" / "results.json").exists()
