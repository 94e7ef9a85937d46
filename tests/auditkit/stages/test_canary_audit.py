"""The audit's canary stage: canary clients in a run of their own, each judged view's one-run bound against the
whole run's composed claim. Soundness (20 seeds of correct mechanisms: no false "violated") and power (composed
claims that ignore the run's sampling or its rounds are flagged) at fixed seeds."""
from pathlib import Path

import pytest

from auditkit import mechanisms
from auditkit.audit import Audit, run_audit
from auditkit.config import ConfigError, from_dict, merge, preset_dict
from auditkit.results import validate_results
from auditkit.stages.canary import canary_stage, composed_claim_curve, judged_views
from auditkit.stages.distinguish import distinguish_family
from auditkit.stages.setting import build_mechanism

PLUGIN = str(Path(__file__).resolve().parents[3] / "examples" / "buggy_dp_plugin" / "buggy_dp.py")
DP_FEDAVG = {"name": "dp-fedavg", "noise_multiplier": 2.0, "clip": 1.0}
POISSON = {"participation": "poisson", "sample_rate": 0.5}
GAUSSIAN = {"name": "gaussian", "sigma": 0.4, "clip": 0.1}
SEEDS = range(20)


def config(mechanism: dict, training: dict | None = None, canaries: int = 200, seed: int = 0, **canary):
    """The quickstart's data, a linear model trained 5 rounds of 5 local steps, canary clients on."""
    return from_dict(merge(preset_dict("quickstart", mechanisms=False), {
        "seed": seed, "device": "cpu", "mechanism": mechanism,
        "training": {"model": "linear", "rounds": 5, "tau": 5, "checkpoints": [1], **(training or {})},
        "canary": {"enabled": True, "canaries": canaries, **canary}}))


def verdicts(cfg) -> dict[str, str]:
    entry = canary_stage(cfg, per_test_confidence=0.975)
    return {view["view"]: view["result"]["verdict"] for view in entry["views"]}


def test_judged_views_follow_the_claim():
    assert judged_views(build_mechanism(config(DP_FEDAVG, POISSON)), config(DP_FEDAVG, POISSON)) == (
        "aggregate", "public")
    assert judged_views(build_mechanism(config(GAUSSIAN)), config(GAUSSIAN)) == ("server", "public")
    assert judged_views(build_mechanism(config(GAUSSIAN)), config(GAUSSIAN, view="public")) == ("public",)
    with pytest.raises(ConfigError, match="canary.view = 'server' is not covered by dp-fedavg's claim"):
        judged_views(build_mechanism(config(DP_FEDAVG)), config(DP_FEDAVG, view="server"))


def test_the_composed_claim_is_the_accountants_as_a_curve():
    curve, claim = composed_claim_curve(build_mechanism(config(DP_FEDAVG, POISSON)), config(DP_FEDAVG, POISSON))
    # the account stage's number for the same run (opacus-prv) and the curve's own (PLD) agree to 1 %
    assert claim["rounds"] == 5 and claim["curve"] == curve.label and "Poisson q = 0.5" in claim["curve"]
    assert claim["epsilon"] == pytest.approx(2.818, rel=0.01) and "amplified by sampling" in claim["note"]
    curve, claim = composed_claim_curve(build_mechanism(config(GAUSSIAN)), config(GAUSSIAN))
    assert claim["curve"] == "GDP μ = 1.118"  # 5 rounds of mu = 2 clip / sigma = 0.5: mu sqrt 5
    none = composed_claim_curve(build_mechanism(config({"name": "none"})), config({"name": "none"}))
    assert none[0] is None and none[1]["epsilon"] is None


@pytest.mark.parametrize("mechanism, training", [(DP_FEDAVG, POISSON), (GAUSSIAN, None)], ids=["dp-fedavg", "gaussian"])
def test_correct_mechanisms_are_never_called_violated(mechanism, training):
    # 20 seeds x 2 views at 97.5 % each: a sound test refutes a true claim in at most 5 % of audits; 0 of 40 seen
    found = [verdicts(config(mechanism, training, seed=seed)) for seed in SEEDS]
    assert not [(seed, v) for seed, v in zip(SEEDS, found) if "violated" in v.values()]
    assert all(set(v.values()) <= {"consistent", "inconclusive"} for v in found)


def test_an_accountant_that_ignores_the_runs_sampling_is_flagged():
    mechanisms.load_plugins([PLUGIN])
    bug = {"name": "dp-fedavg-ignores-sampling", "noise_multiplier": 1.0, "clip": 1.0}
    for seed in range(3):  # composed claim eps 0.0073 where the run's is 6.5: refuted from 200 canaries
        assert verdicts(config(bug, POISSON, seed=seed))["aggregate"] == "violated"


def test_an_accountant_that_ignores_the_rounds_is_flagged():
    # 10 rounds claimed at the price of one (GDP mu 1, eps 4.38) where they cost mu sqrt 10: 500 canaries refute it
    mechanisms.load_plugins([PLUGIN])
    bug = {"name": "dp-fedavg-ignores-rounds", "noise_multiplier": 1.0, "clip": 1.0, "run_rounds": 10}
    found = [verdicts(config(bug, {"rounds": 10}, canaries=500, seed=seed)) for seed in range(3)]
    assert all(v["aggregate"] == "violated" for v in found)
    # the same noise with its honest accountant (eps 13.8 over the 10 rounds) is not
    honest = {"name": "dp-fedavg", "noise_multiplier": 1.0, "clip": 1.0}
    assert verdicts(config(honest, {"rounds": 10}, canaries=500))["aggregate"] != "violated"


def test_an_audit_with_canary_clients_reports_the_whole_run(tmp_path):
    quiet = {"enabled": False}
    cfg = from_dict(merge(preset_dict("quickstart", mechanisms=False), {
        "seed": 0, "device": "cpu",
        "training": {"model": "linear", "rounds": 3, "tau": 2, "checkpoints": [1], **POISSON},
        "mechanisms": [DP_FEDAVG],
        "inversion": quiet, "probe": quiet, "identification": quiet, "distinguish": {"trials": 2000},
        "canary": {"enabled": True, "canaries": 100}}))
    audit = Audit(cfg, out=tmp_path)
    tests = distinguish_family(build_mechanism(cfg), True, True) + 2  # + the two judged views
    assert audit.family == tests and audit.stage_count == 5 + 1
    document = audit.run()
    validate_results(document)
    canary = document["settings"][0]["canary"]
    assert canary["kind"] == "fl" and [v["view"] for v in canary["views"]] == ["aggregate", "public"]
    assert all(v["result"]["confidence"] == pytest.approx(1 - 0.05 / tests) for v in canary["views"])  # its share
    assert document["settings"][0]["verdict"]["family"] == tests
    html = (tmp_path / "report.html").read_text()
    assert "Whole run: canary clients against the composed claim" in html
    assert (tmp_path / "figures" / "tradeoff_vs_claim.png").is_file()
    again = run_audit(cfg, out=tmp_path, resume=True)  # the canary stage resumes from its stored result
    assert again["settings"][0]["canary"] == canary


@pytest.mark.parametrize("raw, message", [
    ({"canary": {"enabled": True, "canaries": 1}}, "canary.canaries must be an integer in 2..100000, got 1"),
    ({"canary": {"bound": "clt"}}, "canary.bound must be one of fdp, steinke"),
    ({"canary": {"view": "peer"}}, "canary.view must be one of server, aggregate, public"),
    ({"canary": {"guesses": "best"}}, "canary.guesses must be one of claim, grid"),
])
def test_bad_canary_tables(raw, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(merge(preset_dict("quickstart"), raw))
