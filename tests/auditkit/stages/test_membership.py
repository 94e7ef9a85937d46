"""The membership stage (``auditkit.stages.membership``, ``membership_runs``) on the embedded mnist-5k data, cut to a
few rounds: the game's memberships and data, the claim it is judged against, the scores, and the section."""
import math

import numpy as np
import pytest
import torch

from auditkit.attacks import membership as scores_of
from auditkit.attacks.membership_game import MembershipAttack
from auditkit.config import ConfigError, from_dict
from auditkit.mechanisms.tradeoff import EpsDeltaTradeOff, GaussianTradeOff
from auditkit.stages import membership_runs as runs_module
from auditkit.stages.membership import attack_scores, membership_claim, membership_stage
from auditkit.stages.membership_runs import MembershipRuns, membership_runs
from auditkit.stages.setting import build_mechanism, prepare_data


def config(mechanism=None, seed=0, training=None, **membership):
    return from_dict({"seed": seed, "data": {"dataset": "mnist-5k"},
                      "training": {"model": "mlp", "clients": 6, "rounds": 2, "local_epochs": 1, "batch_size": 32,
                                   "lr": 0.05, "checkpoints": [1], **(training or {})},
                      "mechanism": mechanism or {"name": "none"},
                      "membership": {"enabled": True, "references": 3, "records": 60, "population": 50,
                                     **membership}})


def test_record_runs_remove_exactly_the_out_candidates_and_keep_the_rest(monkeypatch):
    """Each run's clients hold the partition minus that run's OUT candidates; run 0 is trained with the audit's seed,
    the references with their own; the candidates' labels are the pool's (or moved to another class when
    mislabelled)."""
    built = []
    original = runs_module._simulation

    def spy(cfg, data, members, candidates, level, run, *rest):
        simulation = original(cfg, data, members, candidates, level, run, *rest)
        built.append((members.copy(), candidates.clone(), simulation))
        return simulation

    monkeypatch.setattr(runs_module, "_simulation", spy)
    cfg = config(mislabelled=True)
    runs = membership_runs(cfg)
    partition = torch.cat(prepare_data(cfg)[0].client_indices)
    assert [sim.seed for _, _, sim in built][0] == 0 and len({sim.seed for _, _, sim in built}) == 4
    for members, candidates, sim in built:
        held = torch.cat(sim.data.client_indices)
        assert set(held.tolist()) == set(partition.tolist()) - set(candidates[torch.as_tensor(~members)].tolist())
    pool = prepare_data(cfg)[0].train
    candidates = built[0][1]
    assert np.all(runs.labels != pool.y[candidates].numpy())  # mislabelled: every candidate moved
    assert np.array_equal(built[0][2].data.train.y[candidates].numpy(), runs.labels)


def test_same_seed_same_runs_stacked_equals_one_after_another_other_seed_other_memberships():
    cfg = config()
    a, b = membership_runs(cfg), membership_runs(cfg, stacked=False)
    assert np.array_equal(a.members, b.members)
    np.testing.assert_allclose(a.logits, b.logits, rtol=0, atol=1e-4)
    np.testing.assert_allclose(a.population_logits, b.population_logits, rtol=0, atol=1e-4)
    assert np.array_equal(membership_runs(cfg).logits, a.logits)
    other = membership_runs(config(seed=1))
    assert not np.array_equal(other.members, a.members)


def test_memberships_are_fair_independent_coins():
    """Every run's candidates are in with probability 1/2 independently: over 4 x 2000 draws the IN rate is within
    4 standard errors of 1/2, and the rows do not agree more than chance."""
    cfg = config(references=3, records=2000)
    members = membership_runs(cfg).members
    assert abs(members.mean() - 0.5) < 4 * math.sqrt(0.25 / members.size)
    agree = (members[0] == members[1]).mean()
    assert abs(agree - 0.5) < 4 * math.sqrt(0.25 / members.shape[1])


def test_client_level_runs_leave_out_whole_clients_and_score_a_client_by_its_records_mean():
    cfg = config(level="client", training={"clients": 8})
    runs = membership_runs(cfg)
    held = sum(len(ix) for ix in prepare_data(cfg)[0].client_indices)
    assert runs.members.shape == (4, 8) and len(runs.owner) == len(runs.labels) == held
    scores = attack_scores(runs, 0, MembershipAttack.LOSS)
    records = scores_of.loss_scores(runs.logits[0], runs.labels)
    for client in range(8):
        assert scores[client] == pytest.approx(records[runs.owner == client].mean())


def test_the_claim_follows_the_games_neighbouring_relation():
    """dp-fedavg claims add/remove one client: client level is judged on that curve, record level (one client's data
    replaced) on the group of two, 2 mu for a Gaussian curve; a local mechanism's replace-one claim covers record
    level as is and does not cover a client in or out."""
    fedavg = {"name": "dp-fedavg", "noise_multiplier": 2.0, "clip": 1.0}
    client_cfg = config(fedavg, level="client")
    client_curve, client_claim = membership_claim(build_mechanism(client_cfg), client_cfg)
    record_cfg = config(fedavg)
    record_curve, record_claim = membership_claim(build_mechanism(record_cfg), record_cfg)
    assert isinstance(client_curve, GaussianTradeOff) and client_curve.mu == pytest.approx(math.sqrt(2) / 2)
    assert record_curve.mu == pytest.approx(2 * client_curve.mu)
    assert record_claim["epsilon"] > client_claim["epsilon"] and "group of two" in record_claim["note"]
    gaussian = {"name": "gaussian", "sigma": 1.0, "clip": 0.1}
    local_client = config(gaussian, level="client")
    curve, claim = membership_claim(build_mechanism(local_client), local_client)
    assert curve is None and claim["epsilon"] is None and "not a neighbouring pair" in claim["note"]
    local_record = config(gaussian)
    curve, claim = membership_claim(build_mechanism(local_record), local_record)
    assert curve is not None and "group" not in claim["note"]
    vacuous = config({"name": "gaussian", "sigma": 0.001, "clip": 10.0})  # GDP mu ~ 3e4: no finite eps at 1e-5
    curve, claim = membership_claim(build_mechanism(vacuous), vacuous)
    assert curve is None and claim["epsilon"] is None and "bounds no finite ε" in claim["note"]


def test_group_of_two_for_an_eps_delta_curve_applies_the_claim_twice(monkeypatch):
    import auditkit.stages.membership as stage

    monkeypatch.setattr(stage, "composed_claim_curve", lambda mechanism, config: (
        EpsDeltaTradeOff(1.0, 1e-5), {"epsilon": 1.0, "delta": 1e-5, "curve": "x", "rounds": 2, "note": "n"}))
    cfg = config({"name": "dp-fedavg", "noise_multiplier": 2.0, "clip": 1.0})
    curve, claim = membership_claim(build_mechanism(cfg), cfg)
    assert claim["epsilon"] == pytest.approx(2.0, abs=1e-6)
    assert claim["delta"] == pytest.approx((1 + math.e) * 1e-5)


def test_lira_gives_records_without_references_on_a_side_the_score_of_no_evidence():
    runs = MembershipRuns(members=np.array([[True, False], [True, True], [False, True]]),
                          logits=np.random.default_rng(0).normal(size=(3, 2, 3)), labels=np.array([0, 1]),
                          owner=np.arange(2), population_logits=np.zeros((3, 1, 1, 3)),
                          population_labels=np.zeros(1, int), group=np.zeros(2, int), test_accuracy=np.zeros(3),
                          seconds=0.0)
    # target 2: record 0 is IN in both other runs (no OUT reference), record 1 has one of each
    online = attack_scores(runs, 2, MembershipAttack.LIRA_ONLINE)
    offline = attack_scores(runs, 2, MembershipAttack.LIRA_OFFLINE)
    assert online[0] == 0.0 and offline[0] == pytest.approx(math.log(2))
    assert np.isfinite(online).all() and np.isfinite(offline).all()


def test_the_stage_finds_mislabelled_members_of_a_non_private_run():
    """No mechanism, mislabelled candidates fitted over several local epochs: every attack that uses references
    ranks members above non-members (AUC > 0.6 over the pooled runs), and the section carries the game."""
    cfg = config(training={"rounds": 3, "local_epochs": 3, "clients": 4}, mislabelled=True, records=200,
                 references=4)
    section = membership_stage(cfg, build_mechanism(cfg), per_test_confidence=0.95)
    assert section["level"] == "record" and section["tested"] == 200 and section["details"]["trials"] == 1000
    aucs = {a["attack"]: a["auc"] for a in section["attacks"]}
    assert set(aucs) == {"loss", "lira-offline", "lira-online", "rmia"}
    assert aucs["rmia"] > 0.6 and aucs["lira-offline"] > 0.6, aucs
    assert all(a["result"]["verdict"] == "no claim" for a in section["attacks"])


def test_the_server_view_reads_each_record_in_its_holders_last_update():
    """view = server: a record's logits are those of the model its holder sent in the last round (global before +
    decoded update), the population is read in every client's; the local Gaussian mechanism's claim covers that view,
    dp-fedavg's (noise the server adds) does not."""
    cfg = config({"name": "gaussian", "sigma": 0.01, "clip": 10.0}, view="server")
    runs = membership_runs(cfg)
    public = membership_runs(config({"name": "gaussian", "sigma": 0.01, "clip": 10.0}))
    assert np.array_equal(runs.members, public.members)
    assert runs.population_logits.shape == (4, 6, 50, 10) and public.population_logits.shape == (4, 1, 50, 10)
    assert set(runs.group.tolist()) <= set(range(6)) and len(set(runs.group.tolist())) > 1
    assert not np.allclose(runs.logits, public.logits, atol=1e-3)  # a client's model is not the average
    for view_cfg, judged in ((config({"name": "gaussian", "sigma": 1.0, "clip": 0.1}, view="server"), True),
                             (config({"name": "dp-fedavg", "noise_multiplier": 1.0, "clip": 1.0}, view="server"),
                              False)):
        curve, claim = membership_claim(build_mechanism(view_cfg), view_cfg)
        assert (curve is not None) == judged, claim["note"]
    scores = attack_scores(runs, 0, MembershipAttack.RMIA)
    assert scores.shape == (60,) and np.all((scores >= 0) & (scores <= 1 + 1 / 50))


def test_what_the_game_cannot_run_is_a_one_line_error():
    with pytest.raises(ConfigError, match="membership.records must be at most"):
        membership_runs(config(records=100_000))
    with pytest.raises(ConfigError, match="membership.mislabelled needs membership.level = 'record'"):
        config(level="client", mislabelled=True)
    with pytest.raises(ConfigError, match="membership.references must be an integer in 2..1000"):
        config(references=1)
    with pytest.raises(ConfigError, match="membership.view = 'server' needs membership.level = 'record'"):
        config(view="server", level="client")
    with pytest.raises(ConfigError, match="membership.view must be one of public, server"):
        config(view="aggregate")
