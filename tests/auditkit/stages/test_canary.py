"""Canary clients inside FL (``canary_run``) and repeated training, on the embedded quickstart run (mnist-5k) cut
to a linear model, 5 rounds of tau = 5 local steps, 10 clients and m = 200 canaries.

dp-fedavg (z = 1, C = 1, Poisson q = 0.5): an included canary sends c_i in the rounds its coin comes up and an
excluded one sends nothing, so its aggregate score (the noisy sum projected on u_i, summed over all T rounds) is
C x its rounds sent + N(0, T (z C)^2) (the noise of each round projected on nearly orthogonal directions:
nearly independent across canaries); the mean over the n canaries of a kind is within 4 sd, 4 sqrt(T) z C /
sqrt(n) (0.9 for n = 100), of C x their mean rounds sent (in) or 0 (out). The real clients' updates add
|<sum of <= 10 clipped updates, u_i>| ~ 10 C / sqrt(P) (P = 7,850) per round, far below. Gaussian (sigma 0.2,
clip 0.1, full participation): every canary sends +c_i or -c_i in all T rounds; its server score is
+-T clip + N(0, T sigma^2), the mean over n within 4 sqrt(T) sigma / sqrt(n) (0.18 for n = 100) of +-T clip.
Repeated training: with ``none`` the canary client's decoded update separates D from D' perfectly, 40 trials
certify their cap 0.81.
"""

import dataclasses
import functools
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from auditkit.attacks.verdicts import NO_CLAIM, VIOLATED
from auditkit.config import from_dict, merge, preset_dict
from auditkit.mechanisms.dp_fedavg import CentralNoiseProtocol
from auditkit.mechanisms.guarantee import NeighboringRelation
from auditkit.stages.canary import CanaryClients, canary_run, repeated_training_audit

GAUSSIAN = {"name": "gaussian", "sigma": 0.4, "clip": 0.1}  # eps 1.99 per round at delta 1e-5
DP_FEDAVG = {"name": "dp-fedavg", "noise_multiplier": 1.0, "clip": 1.0}
POISSON = {"participation": "poisson", "sample_rate": 0.5}
SMALL = {"model": "linear", "rounds": 5, "tau": 5}  # the quickstart's clients (10), batch 1, lr 0.01
T, M = 5, 200


def quickstart(mechanism=None, seed=0, **training):
    overrides = {"seed": seed, "device": "cpu", "training": {"checkpoints": [1], **training}}
    if mechanism is not None:
        overrides["mechanism"] = mechanism
    return from_dict(merge(preset_dict("quickstart", mechanisms=False), overrides))


@functools.cache
def recorded(mechanism: str, **training):
    """canary_run of dp-fedavg with every call of the inner protocol recorded: (run, calls), each call a dict of
    clients, weights, the canaries' rows, the noisy sum (views["aggregate"]) and the applied aggregate."""
    calls = []
    inner = CentralNoiseProtocol.communicate

    def record(self, updates, clients, weights, round_, *, global_params=None):
        outcome = inner(self, updates, clients, weights, round_, global_params=global_params)
        real = sum(c < training.get("clients", 10) for c in clients)
        calls.append({"round": round_, "clients": list(clients), "real": real, "weights": weights.clone(),
                      "rows": updates[real:].double().clone(), "sum": outcome.views["aggregate"].double().clone(),
                      "applied": outcome.aggregate.clone()})
        return outcome

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CentralNoiseProtocol, "communicate", record)
        run = canary_run(quickstart(DP_FEDAVG if mechanism == "dp-fedavg" else None, **SMALL, **training), M)
    return run, calls


@functools.cache
def gaussian_run(seed=0):
    return canary_run(quickstart({"name": "gaussian", "sigma": 0.2, "clip": 0.1}, seed=seed, **SMALL), M)


def directions(seed=0):
    """The canaries' unit directions u_i (m, P) as the wrapper draws them."""
    wrapper = CanaryClients(SimpleNamespace(name="inner"), first=10, canaries=M, size=7850, norm=1.0, rate=1.0,
                            relation=NeighboringRelation.ADD_OR_REMOVE_ONE, seed=seed)
    return wrapper.directions(torch.arange(M))


def test_dp_fedavg_canaries_score_clip_per_round_sent_when_in_and_zero_when_out():
    run, calls = recorded("dp-fedavg", **POISSON)
    assert run.relation == "ADD_OR_REMOVE_ONE" and run.rate == 0.5 and run.canary_norm == 1.0 and run.rounds == T
    assert len(calls) == T and set(run.scores) == {"aggregate", "public", "server"}
    inside, outside = run.inserted, ~run.inserted
    assert (run.rounds_sent[outside] == 0).all() and 1.5 < run.rounds_sent[inside].mean() < 3.5  # T q = 2.5
    aggregate = run.scores["aggregate"]
    n_in, n_out = int(inside.sum()), int(outside.sum())
    assert abs(aggregate[inside].mean() - run.rounds_sent[inside].mean()) < 4 * np.sqrt(T) / np.sqrt(n_in)
    assert abs(aggregate[outside].mean()) < 4 * np.sqrt(T) / np.sqrt(n_out)
    # the server view holds each clipped message in clear: exactly C per round sent (float32 rounding)
    np.testing.assert_allclose(run.scores["server"], run.rounds_sent, atol=1e-4)
    for call in calls:  # the canaries of a round weigh as one average client (the plain sum ignores weights)
        real, canaries = call["weights"][: call["real"]], call["weights"][call["real"]:]
        if len(real) and len(canaries):
            assert float(canaries.sum()) == pytest.approx(float(real.mean()))


def test_empty_rounds_still_carry_the_canaries_and_nothing_is_nan():
    run, calls = recorded("dp-fedavg", clients=2, participation="poisson", sample_rate=0.2)
    assert [c["round"] for c in calls] == list(range(1, T + 1))  # every round, sampled or not
    empty = [c for c in calls if c["real"] == 0]
    assert empty and any(len(c["clients"]) for c in empty)  # rounds with canaries only
    for call in calls:
        assert torch.isfinite(call["weights"]).all() and torch.isfinite(call["applied"]).all()
        if call["real"] == 0 and len(call["clients"]):
            assert float(call["weights"].sum()) == pytest.approx(1.0)  # the share of an empty round
    assert all(np.isfinite(s).all() for s in run.scores.values()) and np.isfinite(run.test_accuracy)
    assert int(run.rounds_sent.sum()) == sum(len(c["clients"]) - c["real"] for c in calls)


def test_gaussian_server_scores_are_plus_and_minus_t_clip():
    run = gaussian_run()
    assert run.relation == "REPLACE_ONE" and run.rate == 1.0 and run.canary_norm == 0.1
    assert (run.rounds_sent == T).all()  # full participation: every canary in every round, +c_i or -c_i
    server, inside = run.scores["server"], run.inserted
    for mask, expected in ((inside, T * 0.1), (~inside, -T * 0.1)):
        assert abs(server[mask].mean() - expected) < 4 * np.sqrt(T) * 0.2 / np.sqrt(mask.sum())


def test_same_config_and_seed_same_scores_another_seed_other_canaries():
    first, again, other = gaussian_run(), canary_run(
        quickstart({"name": "gaussian", "sigma": 0.2, "clip": 0.1}, **SMALL), M), gaussian_run(seed=1)
    for name in ("inserted", "rounds_sent", "relation", "canary_norm", "rate", "rounds", "test_accuracy"):
        assert np.array_equal(getattr(first, name), getattr(again, name)), name
    assert first.scores.keys() == again.scores.keys()
    assert all(np.array_equal(first.scores[v], again.scores[v]) for v in first.scores)
    assert not np.array_equal(first.inserted, other.inserted)
    assert not any(np.allclose(first.scores[v], other.scores[v]) for v in first.scores)
    with pytest.raises(ValueError, match="read-only"):
        first.scores["server"][0] = 0.0


def test_aggregate_and_public_scores_sum_every_round_whatever_the_schedule():
    run, calls = recorded("dp-fedavg", **POISSON)
    u = directions()
    for call in calls:  # the directions are what the canaries sent: c_i = C u_i
        ids = torch.tensor(call["clients"][call["real"]:], dtype=torch.long) - 10
        torch.testing.assert_close(call["rows"], u[ids], atol=1e-6, rtol=0)
    every_round = sum(u @ call["sum"] for call in calls).numpy()  # recomputed from the recorded noisy sums
    np.testing.assert_allclose(run.scores["aggregate"], every_round, rtol=1e-9, atol=1e-9)
    applied = sum(u @ call["applied"].double() for call in calls).numpy()
    np.testing.assert_allclose(run.scores["public"], applied, atol=1e-4)  # w_T - w_0, accumulated in float32
    # canaries that never sent (excluded) or sent in some rounds only are scored over all T rounds alike
    assert (run.rounds_sent == 0).sum() > 50 and ((run.rounds_sent > 0) & (run.rounds_sent < T)).sum() > 50
    own_rounds = np.zeros(M)
    for call in calls:
        ids = np.array(call["clients"][call["real"]:], dtype=int) - 10
        own_rounds[ids] += (u[ids] @ call["sum"]).numpy()
    assert not np.allclose(run.scores["aggregate"], own_rounds)


def test_no_claim_pairs_replace_one_and_a_transcript_view_gets_no_server_score():
    none = canary_run(quickstart(**SMALL), 20)  # no clip: norm 1, the update sent as it is
    assert none.relation == "REPLACE_ONE" and none.canary_norm == 1.0
    np.testing.assert_allclose(none.scores["server"], np.where(none.inserted, T, -T), atol=1e-4)
    msp = canary_run(quickstart({"name": "msp-laplace", "eps": 1.0, "consensus_rounds": 4}, model="linear",
                                rounds=1, tau=2), 20)
    assert set(msp.scores) == {"aggregate", "public"}  # the server sees MSP's transcript, not one row per message


@pytest.mark.parametrize(
    ("change", "canaries", "match"),
    [
        ({}, 0, "canaries must be an integer >= 1, got 0"),
        ({}, True, "canaries must be an integer >= 1, got True"),
        ({"backend": "flower"}, 10, "training.backend must be 'builtin' for canary clients, got 'flower'"),
        ({"groups": True}, 10, ("mechanism must be one whose round protocol leaves the clients to "
                                "training.participation for canary clients; 'dpsq'")),
    ],
)
def test_what_canary_clients_cannot_join_is_a_one_line_error(change, canaries, match):
    if change.get("groups"):
        config = from_dict(merge(preset_dict("quickstart", mechanisms=False), {
            "device": "cpu", "mechanism": {"name": "dpsq", "eps": 1.0},
            "training": {**SMALL, "clients": 6, "checkpoints": [1], "participation": "uniform",
                         "clients_per_round": 4},
            "groups": {"sizes": [3, 3], "bits": [2, 4], "link_sigma": [0.0, 1e-3], "clients_per_round": 4}}))
    else:
        config = quickstart(**SMALL)
        config = dataclasses.replace(config, training=dataclasses.replace(config.training, **change))
    with pytest.raises(ValueError, match=match) as info:
        canary_run(config, canaries)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="canary_norm must be a finite number > 0 or None"):
        canary_run(quickstart(**SMALL), 10, canary_norm=-1.0)


def test_repeated_training_separates_the_canary_client_for_none_and_not_beyond_a_claim():
    small = {"model": "linear", "rounds": 2, "tau": 5}
    none = repeated_training_audit(quickstart(**small), trials=40, view="server")
    assert none.estimate.fp == none.estimate.fn == 0
    assert none.epsilon_lower_bound == none.estimate.max_certifiable > 0.8 and none.verdict == NO_CLAIM
    dp = repeated_training_audit(quickstart(GAUSSIAN, **small), trials=40, view="public")
    assert dp.verdict != VIOLATED and dp.canary_round == 2 and dp.claimed_epsilon == pytest.approx(1.99, abs=0.01)
    assert json.loads(json.dumps(dp.to_dict()))["view"] == "public"
    with pytest.raises(ValueError, match="view must be one of public, server"):
        repeated_training_audit(quickstart(**small), trials=40, view="peer")
    with pytest.raises(ValueError, match=r"canary_round must be an integer in 1\.\.2, got 3"):
        repeated_training_audit(quickstart(**small), trials=40, canary_round=3)
