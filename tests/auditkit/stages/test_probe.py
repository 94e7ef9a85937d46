"""The probe: probe clients' updates, the server's view of them, reconstruction matching, the headline verdict."""
import os
import tempfile

import numpy as np
import pytest
import torch

from auditkit import mechanisms
from auditkit.config import ConfigError, from_dict, load_preset
from auditkit.models import create_model
from auditkit.stages.setting import prepare_data
from auditkit.stages.probe import (
    check_probe_inputs,
    defended_updates,
    matched_identification,
    probe_clients,
    probe_updates,
    reconstruction_sweep,
    scaled_to_clip,
)
from auditkit.stages import probe as probe_module
from auditkit.results.model import ReconstructionSweep
from auditkit.attacks.headline import TestKind as Kind, decided_by, overall_verdict


@pytest.fixture(scope="module")
def data():
    return prepare_data(load_preset("quickstart"))[0]


def test_probe_clients_hold_distinct_examples_of_their_fl_client(data):
    clients = probe_clients(data, 12, 3, seed=0)
    assert clients.images.shape == (12, 3, 1, 28, 28) and clients.labels.shape == (12, 3)
    for i, rows in enumerate(clients.indices):
        own = set(data.client_indices[i % len(data.client_indices)].tolist())
        assert set(rows.tolist()) <= own and len(set(rows.tolist())) == 3
    assert torch.equal(probe_clients(data, 12, 3, seed=0).indices, clients.indices)
    assert not torch.equal(probe_clients(data, 12, 3, seed=1).indices, clients.indices)


def test_probe_updates_are_the_clients_sgd_steps(data):
    """Two full-batch momentum-SGD steps with torch.optim.SGD give the same update."""
    torch.manual_seed(0)
    model = create_model("mlp")
    weights = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    clients = probe_clients(data, 3, 2, seed=0)
    updates = probe_updates(model, weights, clients.images, clients.labels, local_steps=2, lr=0.05, momentum=0.9)
    for k in range(3):
        torch.nn.utils.vector_to_parameters(weights.clone(), model.parameters())
        sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for _ in range(2):
            sgd.zero_grad()
            torch.nn.functional.cross_entropy(model(clients.images[k]), clients.labels[k]).backward()
            sgd.step()
        after = torch.nn.utils.parameters_to_vector(model.parameters()).detach()
        torch.testing.assert_close(updates[k], after - weights, atol=1e-6, rtol=1e-5)


def test_scaled_to_clip_uses_the_mechanisms_norm():
    x = torch.randn(4, 50, generator=torch.Generator().manual_seed(0))
    l2 = scaled_to_clip(mechanisms.create("gaussian", clip=0.5), x)
    l1 = scaled_to_clip(mechanisms.create("laplace", clip=2.0), x)
    torch.testing.assert_close(l2.norm(dim=1), torch.full((4,), 0.5))
    torch.testing.assert_close(l1.abs().sum(dim=1), torch.full((4,), 2.0))
    assert torch.equal(scaled_to_clip(mechanisms.create("sdq"), x), x)  # no clip: unchanged


def test_the_server_view_is_the_real_message_decoded():
    m = mechanisms.create("jopeq-laplace", eps=3.0, private_seed=4)
    x = torch.randn(3, 40, generator=torch.Generator().manual_seed(0)) * 0.1
    view, bits = defended_updates(m, x, seed=9)
    again, _ = defended_updates(m, x, seed=9)
    assert torch.equal(view, again) and view.shape == x.shape
    assert all(b == m.encode(x[0], 1).num_bits for b in bits)
    assert not torch.allclose(view, x)


def test_perfect_reconstructions_always_match_their_own_example():
    truth = torch.rand(8, 1, 6, 6, generator=torch.Generator().manual_seed(0))
    others = torch.rand(50, 1, 6, 6, generator=torch.Generator().manual_seed(1))
    assert matched_identification(truth, truth, others, [10, 40], seed=0) == {10: 8, 40: 8}
    # a reconstruction that is pure noise matches about 1 in M
    noise = torch.rand(400, 1, 6, 6, generator=torch.Generator().manual_seed(2))
    wins = matched_identification(noise, torch.rand(400, 1, 6, 6), others, [2], seed=0)[2]
    assert 0.4 < wins / 400 < 0.6


def test_probe_inputs_are_checked_against_the_data(data):
    base = {"training": {"clients": 10}}
    check_probe_inputs(from_dict(base), data)
    with pytest.raises(ValueError, match=r"^probe.batch_size must be at most the 350 examples of the smallest "
                                         r"client, got 351$"):
        check_probe_inputs(from_dict({**base, "probe": {"batch_size": 351}}), data)
    with pytest.raises(ValueError, match=r"^identification.candidates must be at most the 3500 training examples "
                                         r"available, got 3501$"):
        check_probe_inputs(from_dict({**base, "identification": {"candidates": [10, 3501]}}), data)


@pytest.mark.parametrize("table, message", [
    ({"identification": {"candidates": [1, 10]}},
     r"identification.candidates must be a list of integers in 2\.\.10000, got \[1, 10\]"),
    ({"identification": {"candidates": []}},
     r"identification.candidates must be a non-empty list of integers in 2\.\.10000, got \[\]"),
    ({"identification": {"candidates": [10, 10]}}, "identification.candidates must not repeat a value"),
    ({"identification": {"trials": 0}}, "identification.trials must be"),
    ({"probe": {"attack": "magic"}}, "probe.attack must be one of dlg, idlg, inverting_gradients, analytic"),
    ({"probe": {"scale": "huge"}}, "probe.scale must be one of clip, none"),
    ({"probe": {"targets": 0}}, "probe.targets must be"),
    ({"probe": {"round": 7}}, r"probe.round must be one of the checkpoints \[1\]"),
    ({"mechanisms": [{"name": "gaussian", "target_eps": 0}]}, "target_eps must be a finite number > 0"),
    ({"mechanisms": [{"name": "gaussian", "target_eps": 2, "sigma": 1}]},
     "give either target_eps or sigma for 'gaussian', not both"),
    ({"mechanisms": [{"name": "sdq", "target_eps": 2}]}, "declares no noise parameter to calibrate"),
])
def test_bad_probe_identification_and_target_config_is_one_line(table, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(table)


def test_the_sweep_runs_from_the_smallest_claim_up_until_the_defended_attack_matches_the_clean_one(data):
    """The analytic attack reads an MLP's pixels off its first layer (clean mean SSIM 1): Gaussian noise recalibrated
    along the grid from eps 1 hides them at small eps, the SSIM rises with eps through the level 0.5 (the crossing
    lies between the points either side of it) and the grid stops where it is within 0.02 of the clean one."""
    torch.manual_seed(0)
    model = create_model("mlp")
    weights = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    clients = probe_clients(data, 6, 1, seed=0)
    mechanism = mechanisms.create("gaussian", clip=1.0, sigma=1.0)
    updates = scaled_to_clip(mechanism, probe_updates(model, weights, clients.images, clients.labels, local_steps=1,
                                                      lr=0.1, momentum=0.0))
    sweep = reconstruction_sweep(mechanism, model, weights, clients.images[:, 0], updates, 0.99, attack="analytic",
                                 settings={}, seed=0, lr=0.1, local_steps=1, start=1.0, candidates=[10])
    points = sweep["points"]
    eps, ssim = [p["eps"] for p in points], [p["ssim"] for p in points]
    assert eps[0] == 1.0 and eps == sorted(eps) and len(points) >= probe_module.SWEEP_MIN_POINTS
    assert max(ssim[:3]) < 0.1 and ssim[-1] >= 0.99 - probe_module.SWEEP_CLEAN_GAP > max(ssim[:-1])
    assert sweep["reaches_clean_eps"] == eps[-1] and sweep["stopped"] is None
    above = next(i for i, s in enumerate(ssim) if s >= 0.5)
    assert eps[above - 1] < sweep["crossing_eps"] < eps[above]
    assert all(p["ssim_interval"][0] <= p["ssim"] <= p["ssim_interval"][1] for p in points)
    ReconstructionSweep.model_validate(sweep)


def test_no_sweep_point_is_run_where_the_clean_attack_reconstructs_nothing_recognisable(monkeypatch):
    """Below the sweep's level (mean SSIM 0.5) without the mechanism, no epsilon can reach it: no attack is run, the
    sweep has no point, says why, and is a valid results section."""
    def invert(*args, **kwargs):
        raise AssertionError("a sweep point was attacked")

    monkeypatch.setattr(probe_module.attacks, "invert", invert)
    model = create_model("mlp")
    weights = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    truth, updates = torch.rand(4, 1, 28, 28), torch.randn(4, len(weights))
    sweep = reconstruction_sweep(mechanisms.create("gaussian", clip=0.5, sigma=1.0), model, weights, truth, updates,
                                 0.49, attack="analytic", settings={}, seed=0, lr=0.1, local_steps=1, start=1.0,
                                 candidates=[10])
    assert sweep["points"] == [] and sweep["crossing_eps"] is None and sweep["reaches_clean_eps"] is None
    assert sweep["stopped"].startswith("not run: the clean attack's mean SSIM (0.49) is below 0.5")
    ReconstructionSweep.model_validate(sweep)


def test_a_target_eps_sweep_calibrates_the_noise():
    config = from_dict({"mechanisms": [{"name": "gaussian", "clip": 0.5, "sweep": {"target_eps": [1, 4]}}]})
    settings = config.settings()
    assert [s.target_eps for s in settings] == [1.0, 4.0]
    for s, target in zip(settings, (1.0, 4.0)):
        assert "target_eps" not in s.params
        assert mechanisms.create("gaussian", **s.params).guarantee().epsilon == pytest.approx(target, rel=1e-8)
        assert s.display.startswith(f"gaussian target_eps={target:g}")


def test_the_headline_is_the_worst_verdict_and_names_its_test():
    distinguish = {"worst_pair": "axis", "verdict": "consistent", "p_value": 0.4, "tests": 14,
                   "adaptive": [{"test": "side channel", "verdict": "violated"}]}
    identification = {"tests": [{"candidates": 10, "verdict": "violated", "p_value": 1e-12},
                                {"candidates": 100, "verdict": "consistent", "p_value": 0.3}]}
    headline = overall_verdict(distinguish, identification)
    assert headline == {"verdict": "violated",
                        "decided_by": decided_by(Kind.IDENTIFICATION, "identification among 10 candidates",
                                                 candidates=10),
                        "p_value": 1e-12, "tests": 4, "family": 14, "adjusted_p_value": pytest.approx(1.4e-11),
                        "evidence": "decisive"}
    # a refutation just past the family-wise 5% is marginal: 14 x 0.002 = 0.028
    marginal = overall_verdict({**distinguish, "adaptive": []},
                               {"tests": [{"candidates": 10, "verdict": "violated", "p_value": 0.002}]})
    assert (marginal["evidence"], marginal["adjusted_p_value"]) == ("marginal", pytest.approx(0.028))
    # an adaptive test's p-value decides among equally bad verdicts when it is the smallest
    adaptive = overall_verdict({**distinguish, "adaptive": [{"test": "side channel", "verdict": "violated",
                                                            "p_value": 1e-20}]}, identification)
    assert (adaptive["decided_by"]["test"], adaptive["evidence"]) == ("side channel", "decisive")
    consistent = overall_verdict({**distinguish, "adaptive": []}, None)
    assert (consistent["verdict"], consistent["evidence"]) == ("consistent", None)
    vacuous = {"worst_pair": "axis", "verdict": "vacuous claim", "p_value": None, "tests": 1, "adaptive": []}
    assert overall_verdict(vacuous, {"tests": [{"candidates": 10, "verdict": "inconclusive", "p_value": 1.0}]})[
        "verdict"] == "inconclusive"
    assert overall_verdict(None, None) is None


def test_a_probe_beyond_the_free_memory_is_refused_before_any_stage(tmp_path):
    """ResNet-18's 16 probe clients and a pool block need about 4.5 GiB (the 200 pool updates themselves are never
    needed at once): with a 4 GiB limit the audit stops in one line before training, naming what is needed, what is
    free and the setting to lower."""
    import auditkit as toolkit
    from auditkit.config import ConfigError, from_dict

    raw = {"training": {"model": "torchvision:resnet18", "small_stem": True, "clients": 2, "rounds": 1,
                        "checkpoints": [1]},
           "data": {"dataset": "digits"}, "limits": {"max_memory_gib": 4}, "inversion": {"enabled": False}}
    with pytest.raises(ConfigError) as err:
        toolkit.run_audit(from_dict(raw), out=tmp_path / "out")
    message = str(err.value)
    assert message.startswith("the probe and identification need at least ")
    assert "(16 probe clients' and a pool block of " in message and "x 11,17" in message
    assert "is free ([limits] max_memory_gib less what is held); lower probe.targets" in message
    assert "\n" not in message
    assert not (tmp_path / "out" / "results.json").exists()
    with pytest.raises(ConfigError, match=r"^identification\.pool \(at least the largest identification\.candidates\) "
                                          r"must be an integer in 100\.\.100000, got 50$"):
        from_dict({**raw, "identification": {"pool": 50}})


def test_the_probe_memory_counts_its_attack_a_chunk_at_a_time():
    """What the probe clients hold once the identification is done: their updates (12 bytes a parameter each) and the
    analytic attack on 16 x 2 problems of ResNet-50, 5 at a time (``default_chunk``), beside its fixed copies."""
    from auditkit.attacks.gradient_matching import ATTACK_BYTES_PER_PARAMETER, PROBLEM_BYTES_PER_PARAMETER
    from auditkit.config import from_dict
    from auditkit.stages.probe import PROBE_BYTES_PER_PARAMETER, targets_memory

    model = create_model("torchvision:resnet50", input_shape=(3, 32, 32))
    p = sum(q.numel() for q in model.parameters() if q.requires_grad)
    config = from_dict({"training": {"model": "torchvision:resnet50"}, "data": {"dataset": "cifar10"}})
    expected = 16 * PROBE_BYTES_PER_PARAMETER * p + (5 * PROBLEM_BYTES_PER_PARAMETER + ATTACK_BYTES_PER_PARAMETER) * p
    assert targets_memory(config, model) == expected  # 6.9 GB: all 32 problems at once would add 10.5 GB more


@pytest.mark.parametrize("name, params", [("dp-fedavg", {"noise_multiplier": 0.6, "clip": 0.5}),
                                          ("jopeq-laplace", {"eps": 4.0, "bits": 2})])
def test_a_pool_recomputed_block_by_block_gives_the_held_pools_verdicts(data, name, params, tmp_path):
    """The pool of a small model trained 3 rows at a time: held (trained once), written to a file and read back
    (``SpilledUpdates``), and recomputed for every group of 9 trials give the same bits for every row, in the same
    blocks, and the same identification record and verdicts, and the adversary's picks are the same."""
    from auditkit.attacks.identification import SpilledUpdates, identify
    from auditkit.stages.identification import identification_tests
    from auditkit.stages.probe import TrainedPool, _adversary_picks

    torch.manual_seed(0)
    model = create_model("cnn")
    weights = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    mechanism = mechanisms.create(name, private_seed=1, **params)
    images = data.train.x[:40, None].cpu()
    pool = TrainedPool(model, weights, images, data.train.y[:40, None].cpu(), mechanism, local_steps=1, lr=0.1,
                       momentum=0.0, scale="clip", block=3)
    held = pool.held()
    assert torch.equal(pool.rows(np.array([5, 39, 5, 0])), held.updates[[5, 39, 5, 0]])
    group = 9 * 12 * pool.dimension
    kwargs = dict(candidates=(2, 10, 30), trials=120, seed=2)
    spilled = SpilledUpdates(pool, str(tmp_path))
    assert len(spilled) == 40 and spilled.dimension == pool.dimension
    for (start, rows), (again, read) in zip(pool.blocks(), spilled.blocks(), strict=True):
        assert start == again and torch.equal(rows, read)
    assert torch.equal(spilled.rows(np.array([5, 39, 5, 0])), held.updates[[5, 39, 5, 0]])
    record = identify(mechanism, held, **kwargs)
    assert record == identify(mechanism, pool, memory_bytes=group, **kwargs)
    assert record == identify(mechanism, spilled, memory_bytes=group, **kwargs)
    tests = lambda source: identification_tests(mechanism, source, candidates=(2, 10), trials=120,  # noqa: E731
                                                per_test_confidence=0.99, confidence=0.95, seed=2,
                                                memory_bytes=group)["tests"]
    assert tests(held) == tests(pool) == tests(spilled)
    own = held.updates[:4] * 0.5
    defended, _ = defended_updates(mechanism, own, seed=0)
    picked = _adversary_picks(mechanism, defended, own, images[:4, 0], held, images[:, 0], 10, seed=0)
    again = _adversary_picks(mechanism, defended, own, images[:4, 0], pool, images[:, 0], 10, seed=0)
    assert torch.equal(picked[0], again[0]) and picked[1] == again[1]


def test_the_pool_is_held_when_it_leaves_room_for_a_group_of_trials_else_spilled_to_disk_else_recomputed(
        data, tmp_path, monkeypatch):
    """cnn's 6,422 parameters x 30 pool rows in bfloat16 (385 KB) and beside them the larger of 8 trials' outputs
    (617 KB) and the 16 probe clients' updates (1.3 MB): held (trained once) under a memory of 10 MiB, what is left
    handed to the trials; under 900 KB written to a file in the temporary folder when it is on a disk, recomputed
    block by block when the temporary folder is in memory (tmpfs), the rows the same bits each way."""
    from auditkit.attacks.identification import HeldUpdates, SpilledUpdates
    from auditkit.fl.memory import disk_room
    from auditkit.stages.probe import TrainedPool, candidate_pool

    config = from_dict({"training": {"model": "cnn"}})
    torch.manual_seed(0)
    model = create_model("cnn")
    weights = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    mechanism = mechanisms.create("dp-fedavg", noise_multiplier=1.0, clip=1.0)
    rows, companions = torch.arange(30), torch.zeros(0, dtype=torch.long)
    held, left = candidate_pool(config, mechanism, model, weights, data, rows, companions, lr=0.1, memory=10 * 2**20)
    assert isinstance(held, HeldUpdates)
    assert held.updates.dtype == torch.bfloat16 and left == 10 * 2**20 - 30 * 2 * 6422
    if disk_room(str(tmp_path)) == 0:
        pytest.skip("the test's folder is in memory: nothing to spill to")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spilled, all_of_it = candidate_pool(config, mechanism, model, weights, data, rows, companions, lr=0.1,
                                        memory=900_000)
    assert isinstance(spilled, SpilledUpdates) and all_of_it == 900_000
    assert torch.equal(spilled.rows(np.arange(30)), held.updates)
    shared = "/dev/shm"
    if not os.path.isdir(shared) or disk_room(shared) != 0:
        pytest.skip("no tmpfs folder to point TMPDIR at")
    monkeypatch.setattr(tempfile, "tempdir", shared)
    streamed, all_of_it = candidate_pool(config, mechanism, model, weights, data, rows, companions, lr=0.1,
                                         memory=900_000)
    assert isinstance(streamed, TrainedPool) and all_of_it == 900_000
    assert torch.equal(streamed.rows(np.arange(30)), held.updates)


@pytest.mark.parametrize("name, params", [("dp-fedavg", {"noise_multiplier": 0.6, "clip": 0.5}),
                                          ("gaussian", {"sigma": 0.12, "clip": 0.5}),
                                          ("jopeq-laplace", {"eps": 0.5, "bits": 2})])
def test_a_pool_kept_in_bfloat16_gives_the_float32_pools_verdicts(data, name, params):
    """The pool of a small model (40 real examples, one SGD step each, clip-scaled) kept in bfloat16 and in
    float32: every row within 2^-8 of its float32 value relative to the row's largest entry; the identification
    test's successes within 8 of 400 trials (2 %: the trials whose nearly tied picks the rounding may flip) for
    every M and its verdicts equal, under noise that hides most candidates (dp-fedavg: 0.66 at M = 2) and where
    the candidates are told apart in most trials (sigma 0.12: 0.8 at M = 2, 0.2 at M = 30)."""
    from auditkit.stages.identification import identification_tests
    from auditkit.stages.probe import TrainedPool

    torch.manual_seed(0)
    model = create_model("cnn")
    weights = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    mechanism = mechanisms.create(name, private_seed=1, **params)
    images, labels = data.train.x[:40, None].cpu(), data.train.y[:40, None].cpu()
    pools = {dtype: TrainedPool(model, weights, images, labels, mechanism, local_steps=1, lr=0.1, momentum=0.0,
                                scale="clip", block=8, dtype=dtype).held() for dtype in (torch.bfloat16, torch.float32)}
    exact, rounded = pools[torch.float32].updates, pools[torch.bfloat16].updates.float()
    scale = exact.abs().amax(dim=1, keepdim=True)
    assert ((rounded - exact).abs() <= scale * 2**-8).all()
    assert not torch.equal(rounded, exact)
    tests = {dtype: identification_tests(mechanism, pool, candidates=(2, 10, 30), trials=400,
                                         per_test_confidence=0.99, confidence=0.95, seed=3)["tests"]
             for dtype, pool in pools.items()}
    for kept, full in zip(tests[torch.bfloat16], tests[torch.float32], strict=True):
        assert abs(kept["successes"] - full["successes"]) <= 8, (kept, full)
        assert kept["verdict"] == full["verdict"]
    if name == "gaussian":
        assert tests[torch.float32][0]["rate"] > 0.75 and tests[torch.float32][-1]["rate"] > 0.15
