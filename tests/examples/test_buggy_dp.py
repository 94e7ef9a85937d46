"""The example plugin ``examples/buggy_dp_plugin/buggy_dp.py``: DP-FedAvg with three deployed bugs, each stating
``dp-fedavg``'s claim (z = 1, C = 1: eps = 4.377 for one round at delta 1e-5, add/remove one client). Each is
flagged "violated" by auditkit's own audit path -- the noise bugs by the distinguishing audit (and identification),
the accountant's by the accounting check -- and the correct ``dp-fedavg`` at the same budget is "consistent".

Every test runs at fixed seeds. A correct claim is called "violated" by one audit with probability at most 5 %
(family-wise confidence 0.95); the buggy mechanisms are far beyond their claims (true eps 91.8 for the mean noise
at m = 10; unbounded for the clip after the noise), and at 20,000 outputs per pair the worst-pair search certified
6.8 to 9.7 for them over seeds 0-7, against 2.3 to 2.9 for dp-fedavg (the claim is 4.38).
"""
import json
import os
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import dp_accounting
import numpy as np
import pytest
import torch
from scipy import stats

import auditkit as toolkit
from auditkit import mechanisms, results
from auditkit.accounting import compose
from auditkit.attacks.bulk_sampling import BulkSampler
from auditkit.config import AccountingConfig, TrainingConfig, load_config
from auditkit.mechanisms.additive import analytic_gaussian_epsilon
from auditkit.stages.account import account_rounds
from auditkit.stages.distinguish import distinguish_family, run_distinguish
from auditkit.stages.identification import identification_tests

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "buggy_dp_plugin"
PLUGIN = str(EXAMPLE / "buggy_dp.py")
CLAIM = analytic_gaussian_epsilon(1.0, 1.0, 1e-5)  # 4.377: dp-fedavg's one round at z = 1, C = 1
TRIALS = 20_000
ADD_OR_REMOVE = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE


@pytest.fixture
def plugin() -> None:
    """The plugin loaded in this process (``tests/conftest.py`` removes its mechanisms and protocol afterwards)."""
    mechanisms.load_plugins([PLUGIN])


def _create(name: str, **params) -> mechanisms.Mechanism:
    return mechanisms.create(name, private_seed=mechanisms.derive_seed("buggy-dp", name), **params)


def test_each_variant_states_dp_fedavgs_claim_and_accounting_event(plugin):
    honest = _create("dp-fedavg").guarantee()
    assert honest.epsilon == pytest.approx(CLAIM, rel=1e-12) and CLAIM == pytest.approx(4.377, abs=1e-3)
    for name in ("dp-fedavg-mean-noise", "dp-fedavg-clip-after-noise", "dp-fedavg-ignores-sampling",
                 "dp-fedavg-ignores-rounds"):
        claim = _create(name).guarantee()
        assert (claim.epsilon, claim.delta, claim.relation, claim.scope) == (
            honest.epsilon, honest.delta, honest.relation, honest.scope)
    for name in ("dp-fedavg-mean-noise", "dp-fedavg-clip-after-noise"):
        assert mechanisms.capability(_create(name), "dp_event") == dp_accounting.GaussianDpEvent(1.0)
    assert _create("dp-fedavg-mean-noise").true_epsilon() == pytest.approx(
        analytic_gaussian_epsilon(1.0, 0.1, 1e-5))  # 91.8: the noise really added, std z C / m


@pytest.mark.parametrize(("name", "expected"), [
    ("dp-fedavg", "consistent"),
    ("dp-fedavg-ignores-sampling", "consistent"),  # its noise is right: only the accounting is wrong
    ("dp-fedavg-mean-noise", "violated"),
    ("dp-fedavg-clip-after-noise", "violated"),
])
def test_the_distinguishing_audit_of_auditkit_audit_flags_the_noise_bugs_and_not_dp_fedavg(plugin, name, expected):
    """The distinguish stage as ``auditkit audit`` runs it (worst-pair search, adaptive tests, one family), at
    20,000 outputs per pair, on three seeds."""
    mechanism = _create(name)
    family = distinguish_family(mechanism, adaptive=True)
    for seed in range(3):
        audit, _ = run_distinguish(mechanism, trials=TRIALS, confidence=0.95, family=family, adaptive=True,
                                   seed=seed)
        assert audit.claimed_epsilon == pytest.approx(CLAIM) and audit.verdict == expected, (seed, audit.worst)
        if expected == "violated":
            assert audit.worst.p_value < 1e-6
        else:
            assert audit.worst.epsilon_lower_bound < CLAIM
    if name == "dp-fedavg-clip-after-noise":
        assert audit.worst.pair.label == "beyond-clip"  # an update far beyond C keeps its direction


def test_identification_flags_the_mean_calibrated_noise_and_not_dp_fedavg(plugin):
    """The informed adversary picks the target among M orthogonal updates at the clip (the worst-case prior):
    with std C / 10 on the sum it nearly always succeeds, far above what the claim allows."""
    q, _ = torch.linalg.qr(torch.randn(400, 200, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    pool = q.T.float()  # 200 orthonormal updates of 400 coordinates, norm C = 1
    verdicts = {}
    for name in ("dp-fedavg", "dp-fedavg-mean-noise"):
        section = identification_tests(_create(name), pool, candidates=(10, 100), trials=400,
                                       per_test_confidence=0.9975, confidence=0.95, seed=0)
        verdicts[name] = [t["verdict"] for t in section["tests"]]
        if name == "dp-fedavg-mean-noise":
            assert all(t["p_value"] < 1e-6 and t["rate"] > 0.8 for t in section["tests"])
    assert verdicts == {"dp-fedavg": ["consistent", "consistent"],
                        "dp-fedavg-mean-noise": ["violated", "violated"]}


def test_the_mean_noise_bug_adds_std_z_c_over_m_to_the_sum_as_mechanism_and_as_an_fl_round(plugin):
    """Residual std within 2 % of z C / m = 0.1 (the standard error of a std over n = 50,000 normal values is
    0.32 %) and a KS test against N(0, 0.1^2) at p > 1e-3, in the mechanism's encode and in the round protocol
    it runs (dp-fedavg's "central-noise"); dp-fedavg's own round adds std z C = 1."""
    n = 50_000
    buggy = _create("dp-fedavg-mean-noise")  # clients_per_round m = 10
    residual = buggy.decode(buggy.encode(torch.zeros(n), seed=3), seed=3).double().numpy()
    updates = 3 * torch.nn.functional.normalize(torch.randn(3, n, generator=torch.Generator().manual_seed(0)), dim=1)
    context = mechanisms.ProtocolContext(seed=0, clients=10, participation="poisson", sample_rate=0.5)
    clipped = torch.nn.functional.normalize(updates.double(), dim=1).sum(0)  # each clipped to C = 1
    for mechanism, std in ((buggy, 0.1), (_create("dp-fedavg"), 1.0)):
        protocol = mechanisms.protocol_class(mechanism.protocol).build(mechanism, context)
        outcome = protocol.communicate(updates, [0, 1, 2], torch.ones(3), 1)
        noise = (outcome.views["aggregate"].double() - clipped).numpy()
        assert protocol.name == "central-noise" and outcome.stats["noise_std_aggregate"] == pytest.approx(std / 5)
        assert noise.std() == pytest.approx(std, rel=0.02)
        assert stats.kstest(noise / std, "norm").pvalue > 1e-3
    assert residual.std() == pytest.approx(0.1, rel=0.02) and stats.kstest(residual / 0.1, "norm").pvalue > 1e-3


def test_clip_after_noise_samples_like_its_encode_and_its_round_lets_a_large_update_through(plugin):
    """Its batch sampler (it cannot be tiled) gives one encode's output for count = 1 and the law of independent
    encodes (two-sample KS on the first coordinate and the norm, 4,000 outputs each, p > 1e-3). In its round, one
    client's update of norm 1000 C comes out as C times its direction, to within 0.05 C: the clip shrank the noise
    (norm about z C sqrt(100) = 10 C in dp-fedavg's round) to about 0.01 C."""
    buggy = _create("dp-fedavg-clip-after-noise")
    x = torch.tensor([3.0, -1.0], dtype=torch.float64)
    batch = mechanisms.capability(buggy, "batch_sampling")
    assert torch.equal(batch.sample(x, 1, 11)[0], buggy.decode(buggy.encode(x, 11), 11).double())
    fast = BulkSampler(buggy, seed=0)(x, 4000, stream=0).numpy()
    per_call = BulkSampler(buggy, seed=1, per_call=True)(x, 4000, stream=0).numpy()
    assert np.linalg.norm(fast, axis=1).max() <= 1.0 + 1e-6
    for statistic in (lambda rows: rows[:, 0], lambda rows: np.linalg.norm(rows, axis=1)):
        assert stats.ks_2samp(statistic(fast), statistic(per_call)).pvalue > 1e-3
    direction = torch.nn.functional.normalize(torch.randn(1, 100, generator=torch.Generator().manual_seed(2)), dim=1)
    context = mechanisms.ProtocolContext(seed=0, clients=10)
    released = {}
    for mechanism in (buggy, _create("dp-fedavg", clipping="server")):
        protocol = mechanisms.protocol_class(mechanism.protocol).build(mechanism, context)
        released[protocol.name] = protocol.communicate(1000 * direction, [0], torch.ones(1), 1).views["aggregate"]
    assert float((released["central-noise-clip-after-noise"] - direction[0]).norm()) < 0.05
    assert float((released["central-noise"] - direction[0]).norm()) > 5


def test_the_accountant_that_ignores_the_runs_sampling_is_refuted_by_the_accounting_check(plugin):
    """The account stage of a run with Poisson participation q = 0.1 over 100 rounds: the plugin's event, already
    sampled at q' = 1e-3, composes (with the run's q on top) to the eps of q q' = 1e-4; the recomputation from the
    run is dp-fedavg's own composition, 7.06, and the setting's headline is "violated" (analytic) although every
    distinguishing test is consistent."""
    training = TrainingConfig(participation="poisson", sample_rate=0.1)
    buggy = _create("dp-fedavg-ignores-sampling")
    entry = account_rounds(buggy, 100, AccountingConfig(), training)
    honest = account_rounds(_create("dp-fedavg"), 100, AccountingConfig(), training)
    gaussian = dp_accounting.GaussianDpEvent(1.0)
    understated = compose(dp_accounting.PoissonSampledDpEvent(1e-4, gaussian), 100, delta=1e-5, relation=ADD_OR_REMOVE)
    assert entry["composed"]["epsilon"] == pytest.approx(understated.epsilon, rel=1e-12)
    assert entry["check"]["verdict"] == "violated"
    assert entry["check"]["independent_epsilon"] == honest["composed"]["epsilon"] == pytest.approx(7.057, abs=1e-3)
    assert honest["check"]["verdict"] == "consistent"
    audit, _ = run_distinguish(buggy, trials=TRIALS, confidence=0.95, family=1, adaptive=False, seed=0)
    distinguish = results.distinguish_entry(audit, [], trials=TRIALS, confidence=0.95, tests=1)
    setting = results.setting("s00", buggy.name, buggy, accounting=entry, distinguish=distinguish)
    assert distinguish["verdict"] == "consistent"
    assert (setting["verdict"]["verdict"], setting["verdict"]["evidence"]) == ("violated", "analytic")


def test_the_example_config_audits_each_bug_as_violated_and_dp_fedavg_as_consistent(tmp_path):
    """``auditkit audit examples/buggy_dp_plugin/audit.toml`` through the Python API, at a reduced budget (one
    round of 4 clients, 20,000 outputs per pair, no inversion, probe or identification)."""
    config = load_config(EXAMPLE / "audit.toml")
    assert config.plugins == (PLUGIN,) and config.training.participation == "poisson"
    small = replace(config, training=replace(config.training, rounds=1, clients=4),
                    inversion=replace(config.inversion, enabled=False), probe=replace(config.probe, enabled=False),
                    identification=replace(config.identification, enabled=False),
                    distinguish=replace(config.distinguish, trials=TRIALS))
    document = toolkit.run_audit(small, out=tmp_path / "audit")
    headlines = {s["mechanism"]["name"]: (s["verdict"]["verdict"], s["verdict"]["evidence"])
                 for s in document["settings"]}
    assert headlines == {"dp-fedavg": ("consistent", None),
                         "dp-fedavg-mean-noise": ("violated", "decisive"),
                         "dp-fedavg-clip-after-noise": ("violated", "decisive"),
                         "dp-fedavg-ignores-sampling": ("violated", "analytic")}
    checks = {s["mechanism"]["name"]: s["accounting"]["check"]["verdict"] for s in document["settings"]}
    assert checks == {**dict.fromkeys(headlines, "consistent"), "dp-fedavg-ignores-sampling": "violated"}
    written = json.loads((tmp_path / "audit" / "results.json").read_text())
    assert written["settings"][3]["accounting"]["check"] == document["settings"][3]["accounting"]["check"]
    assert "check violated: recomputed from the run" in (tmp_path / "audit" / "report.md").read_text()


def _auditkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditkit.cli", *args, "--plugin", PLUGIN], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "COLUMNS": "300"})


def test_the_accountant_that_ignores_the_rounds_states_one_rounds_claim_for_the_run_and_no_check_sees_it(plugin):
    """Its 5 rounds compose to what one round of dp-fedavg costs (4.38), where they cost 9.7; the accounting check
    has no sampling of its own to recompute, so only the whole-run canary audit can flag it
    (``tests/auditkit/stages/test_canary_audit.py``)."""
    rounds = TrainingConfig(rounds=5)
    buggy = account_rounds(_create("dp-fedavg-ignores-rounds", run_rounds=5), 5, AccountingConfig(), rounds)
    honest = account_rounds(_create("dp-fedavg"), 5, AccountingConfig(), rounds)
    assert buggy["composed"]["epsilon"] == pytest.approx(CLAIM, rel=0.01)
    assert honest["composed"]["epsilon"] > 2 * CLAIM
    assert buggy["check"]["verdict"] == "consistent"


def test_auditkit_account_prints_the_accounting_checks_verdict(tmp_path):
    account = _auditkit("account", "dp-fedavg-ignores-sampling", "--rounds", "100", "--out", str(tmp_path))
    assert account.returncode == 0, account.stderr
    assert ("check: violated: the accountant ignores the run's client sampling: its one-round event is "
            "Poisson-sampled at q' = 0.001 of its own") in " ".join(account.stdout.split())
    check = json.loads((tmp_path / "results.json").read_text())["settings"][0]["accounting"]["check"]
    assert check["verdict"] == "violated" and check["independent_epsilon"] == pytest.approx(91.83, abs=0.01)


def test_auditkit_distinguish_calls_the_clip_after_the_noise_violated(tmp_path):
    distinguish = _auditkit("distinguish", "dp-fedavg-clip-after-noise", "--trials", str(TRIALS), "--out",
                            str(tmp_path))
    assert distinguish.returncode == 0, distinguish.stderr
    assert "black-box verdict: violated (worst pair beyond-clip" in distinguish.stdout
    test = json.loads((tmp_path / "results.json").read_text())["settings"][0]["distinguish"]
    assert test["verdict"] == "violated" and test["epsilon_lower_bound"] > CLAIM


def test_the_package_registers_the_module_under_the_entry_point_group():
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["auditkit.mechanisms"] == {"buggy_dp": "buggy_dp"}
    assert project["tool"]["setuptools"]["py-modules"] == ["buggy_dp"]
    assert (EXAMPLE / "buggy_dp.py").is_file()
