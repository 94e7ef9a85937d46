"""Gradient inversion against the server's view, clean beside defended (auditkit.stages.inversion)."""
import dataclasses
import json
import re

import numpy as np
import pytest
import torch

from auditkit import attacks
from auditkit.attacks.gradient_inversion import iteration_settings

from auditkit.stages import inversion as inversion_stage
from auditkit.config import ConfigError, from_dict
from auditkit.models import create_model
from auditkit.strict_json import dumps_strict
from auditkit.stages.train import Experiment
from auditkit.figure_files import write_grid

FAST = {"iterations": 3}


def test_targets_are_deterministic_and_named():
    a, b = inversion_stage.load_targets("patches", 4, seed=1), inversion_stage.load_targets("patches", 4, seed=1)
    assert torch.equal(a.images, b.images) and a.names == b.names and a.labels.tolist() == [0, 1, 2, 3]
    digits = inversion_stage.load_targets("digits", 3)
    assert digits.input_shape == (1, 28, 28) and all(n.startswith("digits-test[") for n in digits.names)
    with pytest.raises(ValueError, match="source must be one of patches, digits"):
        inversion_stage.load_targets("faces", 2)
    with pytest.raises(ValueError, match="images must be an integer >= 1"):
        inversion_stage.load_targets("patches", 0)


def test_server_view_is_the_mechanism_decode_with_keyed_seeds():
    from auditkit import mechanisms

    gradients = torch.randn(3, 50)
    sdq = mechanisms.create("sdq", bits=4, support=4.0)
    view, bits = inversion_stage.server_view(sdq, gradients, seed=5)
    again, _ = inversion_stage.server_view(sdq, gradients, seed=5)
    assert torch.equal(view, again) and len(bits) == 3 and all(b > 0 for b in bits)
    step = 2 * 4.0 / 16
    assert (view - gradients).abs().max() <= step / 2 + 1e-5  # subtractive dither: error within half a step
    assert not torch.equal(view, inversion_stage.server_view(sdq, gradients, seed=6)[0])
    clean, _ = inversion_stage.server_view(mechanisms.create("none"), gradients, seed=5)
    assert torch.equal(clean, gradients)


def test_run_inversion_reports_clean_and_defended_with_every_setting(tmp_path):
    doc = inversion_stage.run_inversion("idlg", mechanism="gaussian", params={"sigma": 0.1, "clip": 1e6},
                                        images=2, settings=FAST)
    assert doc["view"] == "server" and doc["settings"]["iterations"] == 3 and doc["settings"]["seed"] == 0
    assert doc["clean"]["scores"]["label_accuracy"] == 1.0  # iDLG's analytic labels, before any optimisation
    assert doc["distortion"]["error_std"] == pytest.approx(0.1, rel=0.05)  # the noise the server view carries
    assert doc["bits_per_coordinate"] == pytest.approx(32, abs=0.1)
    figure = write_grid(inversion_stage.inversion_figure(doc), tmp_path)
    assert figure.relative_to(tmp_path).as_posix() == "figures/inversion.png"
    document = inversion_stage.attack_document(doc, config={"seed": 0}, title="t")
    body = json.loads(dumps_strict(document))
    assert body == document and body["command"] == "attack"
    (setting,) = body["settings"]
    assert setting["mechanism"]["name"] == "gaussian" and setting["mechanism"]["params"]["sigma"] == 0.1
    inversion = setting["inversion"]
    assert inversion["round"] is None and inversion["targets"] is None and inversion["images"] == 2
    assert inversion["clean"]["label_accuracy"] == 1.0 and inversion["error_std"] == doc["distortion"]["error_std"]
    assert (tmp_path / inversion["figure"]).read_bytes()[:4] == b"\x89PNG"


def test_same_seed_same_reconstructions():
    a = inversion_stage.run_inversion("idlg", images=1, settings=FAST)
    b = inversion_stage.run_inversion("idlg", images=1, settings=FAST)
    assert torch.equal(a["tensors"]["clean"], b["tensors"]["clean"])
    assert a["clean"]["scores"] == b["clean"]["scores"]


def test_bad_input_is_refused_before_any_attack():
    with pytest.raises(ValueError, match="attack must be one of"):
        inversion_stage.run_inversion("gan")
    with pytest.raises(ValueError, match="unknown mechanism"):
        inversion_stage.run_inversion("idlg", mechanism="bogus")
    with pytest.raises(ValueError, match=r"^model must be a seed model \(linear, .*, got 'resnet'$"):
        inversion_stage.run_inversion("idlg", model="resnet")
    with pytest.raises(ValueError, match="unknown mechanism"):
        inversion_stage.defence_curve(curve={"bogus": [{}]})


def test_defence_curve_measures_each_point_against_one_clean_reference(tmp_path):
    curve = {"gaussian": [{"sigma": 1e-3, "clip": 1e6}, {"sigma": 1e-1, "clip": 1e6}]}
    seen = []
    doc = inversion_stage.defence_curve(curve=curve, images=1, settings=FAST,
                                        on_point=lambda name, params, run: seen.append(name))
    points = doc["points"]
    assert seen == ["gaussian", "gaussian"] and len(points) == 2
    assert points[0]["distortion"]["error_std"] < points[1]["distortion"]["error_std"]
    assert points[1]["distortion"]["error_std"] == pytest.approx(0.1, rel=0.1)
    document = inversion_stage.curve_document(doc, config={"seed": 0}, title="curve")
    settings = document["settings"]
    assert [s["label"] for s in settings] == ["gaussian sigma=0.001, clip=1e+06", "gaussian sigma=0.1, clip=1e+06"]
    clean = doc["clean"]["defended"]["scores"]["ssim_mean"]  # one clean reference for every point
    assert all(s["inversion"]["clean"]["ssim_mean"] == clean and s["inversion"]["figure"] is None for s in settings)


def test_attack_on_a_real_fl_checkpoint_scores_against_the_clients_own_images():
    config = from_dict({"training": {"clients": 3, "rounds": 1, "tau": 2, "batch_size": 1, "checkpoints": [1]}})
    experiment = Experiment(config)
    run = experiment.train()
    observation = run.result.observations[0]
    train_images = experiment.simulation.data.train.x.cpu()
    view = inversion_stage.RecordedView.from_observation(observation, train_images, 2)
    assert view.clients == observation.clients[:2] and view.images_used.shape == (2, 2, 1, 28, 28)
    assert torch.equal(view.server, view.truth)  # mechanism "none": the server sees the true update
    again = inversion_stage.RecordedView.from_tensors(view.to_tensors())
    assert torch.equal(again.images_used, view.images_used) and again.lr == view.lr

    model = create_model(config.training.model)
    result = inversion_stage.attack_recorded_view(view, model, attack="inverting_gradients",
                                                  settings={"iterations": 3})
    assert result["view"] == "server" and result["round"] == 1 and result["tau"] == 2
    assert result["observation"] == "-update / (lr tau) as one gradient"
    for run_ in ("clean", "defended"):
        scores = result[run_]["scores"]
        assert len(scores["ssim"]) == 2 and all(-1 <= v <= 1 for v in scores["ssim"])
        # each reconstruction is scored against one of the images its own client trained on
        for truth, candidates in zip(result[run_]["truth"], view.images_used):
            assert any(torch.equal(truth, c) for c in candidates)
    assert result["clean"]["scores"] == result["defended"]["scores"]  # same update, same attack, same start
    analytic = inversion_stage.attack_recorded_view(view, model, attack="analytic",
                                                    settings=iteration_settings("analytic", 3))
    assert analytic["clean"]["scores"] == analytic["defended"]["scores"]
    assert len(analytic["clean"]["scores"]["ssim"]) == 2 and all(-1 <= v <= 1 for v in analytic["clean"]["scores"]["ssim"])

    # the config's [inversion] restarts: unset, the attack's preset; set, that many starts
    assert config.inversion.restarts is None
    for restarts, expected in ((None, attacks.preset_settings("inverting_gradients")["restarts"]), (3, 3)):
        inversion = dataclasses.replace(config.inversion, iterations=2, restarts=restarts)
        recorded = inversion_stage.invert_recorded_view(view, config.training, inversion, seed=0)
        assert recorded["settings"]["restarts"] == expected


def test_the_clean_attack_can_be_skipped_and_equals_the_none_mechanism():
    both = inversion_stage.run_inversion("idlg", images=1, settings=FAST)
    only = inversion_stage.run_inversion("idlg", images=1, settings=FAST, clean=False)
    assert only["clean"] is None and only["tensors"]["clean"] is None
    assert only["defended"]["scores"] == both["clean"]["scores"]  # "none" is the clean gradient, same attack


def test_a_defended_reconstruction_is_scored_against_the_clean_runs_images_so_noise_scores_near_zero():
    """Pure noise in the server's view: its reconstructions are noise, and scored against the images the clean
    attack matched (one assignment for both runs) they score SSIM <= 0.05, where matching each noise image to
    whichever of the client's images it resembles most would credit it with that image's background."""
    import dataclasses

    from auditkit.attacks import metrics

    config = from_dict({"data": {"dataset": "mnist-5k"},
                        "training": {"model": "mlp", "clients": 8, "rounds": 1, "tau": 6, "batch_size": 1,
                                     "checkpoints": [1]}})
    experiment = Experiment(config)
    observation = experiment.train().result.observations[0]
    view = inversion_stage.RecordedView.from_observation(observation, experiment.simulation.data.train.x.cpu(), 8)
    noise = torch.randn(view.server.shape, generator=torch.Generator().manual_seed(3)) * view.truth.std()
    noisy = dataclasses.replace(view, server=noise)
    model = create_model("mlp")
    result = inversion_stage.attack_recorded_view(noisy, model, attack="analytic",
                                                  settings=iteration_settings("analytic", 3))
    assert torch.equal(result["defended"]["truth"], result["clean"]["truth"])  # one assignment
    assert result["clean"]["scores"]["ssim_mean"] > 0.2  # the clean attack recovers a blend of the client's images
    assert result["defended"]["scores"]["ssim_mean"] <= 0.05
    # the same noise matched to the best of each client's own images scores higher: that is what this prevents
    rematched = inversion_stage._best_matches(result["defended"]["reconstructions"], view.images_used)
    assert metrics.score(result["defended"]["reconstructions"], rematched)["ssim_mean"] > \
        result["defended"]["scores"]["ssim_mean"]


def test_an_attack_needing_a_layer_the_model_lacks_says_so_in_one_line():
    """squeezenet's classifier is a convolution: no output nn.Linear for iDLG's labels, no FC layer for analytic."""
    model = create_model("torchvision:squeezenet1_1", input_shape=(3, 32, 32), num_classes=10)
    with pytest.raises(ConfigError) as err:
        inversion_stage.check_attack_layers("idlg", model, 10, where="inversion.attack",
                                            model_name="torchvision:squeezenet1_1")
    assert str(err.value) == ("inversion.attack 'idlg' needs an output nn.Linear layer (a 10 x features weight, last of "
                              "the model's), whose gradient gives each image's label (iDLG), and "
                              "'torchvision:squeezenet1_1' has none; choose inversion.attack = 'dlg' (labels optimised)")
    with pytest.raises(ConfigError, match=r"^probe.attack 'analytic' needs a fully-connected layer with a bias "):
        inversion_stage.check_attack_layers("analytic", model, 10, where="probe.attack", model_name="squeeze")
    inversion_stage.check_attack_layers("dlg", model, 10, where="inversion.attack", model_name="squeeze")  # optimised
    inversion_stage.check_attack_layers("idlg", model, 10, where="attack", model_name="squeeze", labels_given=True)
    inversion_stage.check_attack_layers("analytic", create_model("lenet"), 10, where="probe.attack", model_name="lenet")


def test_a_clean_reference_is_named_by_its_images_and_title():
    rng = np.random.default_rng(0)
    truth, clean = rng.random((2, 1, 4, 4)), rng.random((2, 1, 4, 4))
    title = "probe: analytic, round 1"
    grid = inversion_stage.clean_reference("probe", truth, clean, [0.5, 0.25], title)
    again = inversion_stage.clean_reference("probe", truth.copy(), clean.copy(), [0.5, 0.25], title)
    assert grid.path == again.path and re.fullmatch(r"figures/probe-clean-[0-9a-f]{12}\.png", grid.path)
    assert list(grid.rows) == ["truth", "clean"] and grid.captions == {"clean": ["SSIM 0.50", "SSIM 0.25"]}
    moved = clean.copy()
    moved[0, 0, 0, 0] += 1e-3
    others = [inversion_stage.clean_reference("probe", truth, moved, [0.5, 0.25], title),
              inversion_stage.clean_reference("probe", truth, clean, [0.5, 0.25], "probe: analytic, round 3"),
              inversion_stage.clean_reference("reconstruction", truth, clean, [0.5, 0.25], title)]
    assert len({grid.path, *(other.path for other in others)}) == 4


def test_a_clean_reference_another_setting_drew_is_not_drawn_again(tmp_path):
    """The clean reference's path is the digest of its images and title: the second setting with the same clean
    attack finds the file there and leaves it as it is; different images get a file of their own."""
    truth, clean = np.zeros((2, 1, 8, 8), np.float32), np.full((2, 1, 8, 8), 0.5, np.float32)
    first = inversion_stage.clean_reference("probe", truth, clean, [0.9, 0.8], "probe: clean reference")
    path = write_grid(first, tmp_path)
    drawn = path.read_bytes()
    path.write_bytes(drawn + b"kept")  # a marker: a redraw would replace the file
    again = inversion_stage.clean_reference("probe", truth, clean, [0.9, 0.8], "probe: clean reference")
    assert again.path == first.path and again.content_addressed
    assert write_grid(again, tmp_path).read_bytes() == drawn + b"kept"
    other = inversion_stage.clean_reference("probe", truth, clean + 0.1, [0.9, 0.8], "probe: clean reference")
    assert other.path != first.path and write_grid(other, tmp_path).read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("small_stem, mode, expected", [
    (True, "train", "batch statistics"),          # 4x4 at the last BatchNorm: one image has batch statistics
    (False, "train", "running statistics (one image has a single value per channel at a 1x1 BatchNorm)"),
    (False, "eval", "running statistics"),
])
def test_the_attacked_resnet_normalises_as_the_clients_did_where_one_image_can(small_stem, mode, expected):
    """ResNet-18's usual stem leaves 32x32 images 1x1 at layer 4, where train-mode BatchNorm of one image is
    undefined (torch raises): the attack then normalises by the running statistics and says so; with the small
    stem, or a model without BatchNorm, nothing is substituted. The pass that checks it moves no statistic."""
    from auditkit.models import create_model
    from auditkit.stages.inversion import as_the_clients_ran

    model = create_model("torchvision:resnet18", input_shape=(3, 32, 32), small_stem=small_stem)
    buffers = {k: v.clone() for k, v in model.named_buffers()}
    found = as_the_clients_ran(model, buffers, mode, (3, 32, 32))
    assert found == expected
    assert model.training == (found == "batch statistics")
    if found != "batch statistics":
        assert all(torch.equal(v, buffers[k]) for k, v in model.named_buffers())
    model(torch.rand(1, 3, 32, 32))  # one image goes through the attacked model in the mode chosen
    assert as_the_clients_ran(create_model("cnn"), {}, "train", (1, 28, 28)) is None


def test_the_default_budget_fits_the_cpu_time_of_its_model_and_a_configured_one_is_kept():
    """The lenet's 200 iterations x 4 restarts x 4 targets fit 600 s: kept. ResNet-18's (0.4 s an iteration of one
    image: 16 x 200 x 0.4 s is over 20 min) drops to one restart, whose 200 iterations fit; at 16 targets under 120 s
    it is down to one restart and the least, 20. What is configured runs as configured; the estimate is the same each call."""
    from auditkit.models import create_model
    from auditkit.stages.inversion import FEATURE_STEP_COST, MIN_ITERATIONS, attack_budget, iteration_seconds

    small = create_model("lenet", input_shape=(3, 32, 32))
    kept = attack_budget("inverting_gradients", None, None, cpu_default=200, model=small, input_shape=(3, 32, 32),
                         targets=4, seconds=600)
    assert (kept.iterations, kept.restarts) == (200, 4) and kept.estimated_seconds < 600
    resnet = create_model("torchvision:resnet18", input_shape=(3, 32, 32))
    assert 0.3 < iteration_seconds(resnet, (3, 32, 32)) == iteration_seconds(resnet, (3, 32, 32)) < 0.6
    one = attack_budget("inverting_gradients", None, None, cpu_default=200, model=resnet, input_shape=(3, 32, 32),
                        targets=4, seconds=600)
    assert (one.iterations, one.restarts) == (200, 1) and one.estimated_seconds <= 600
    least = attack_budget("analytic", None, None, cpu_default=300, model=resnet, input_shape=(3, 32, 32), targets=16,
                          seconds=120)
    assert (least.iterations, least.restarts) == (MIN_ITERATIONS, 1)
    # the analytic attack's iteration is a feature-inversion and a refinement step of each restart of each target
    analytic = attack_budget("analytic", 50, 2, cpu_default=300, model=resnet, input_shape=(3, 32, 32), targets=16,
                             seconds=120)
    one_step = iteration_seconds(resnet, (3, 32, 32))
    assert analytic.estimated_seconds == pytest.approx(50 * 2 * 16 * (1 + FEATURE_STEP_COST) * one_step)
    asked = attack_budget("inverting_gradients", 1000, 3, cpu_default=200, model=resnet, input_shape=(3, 32, 32),
                          targets=4, seconds=600)
    assert (asked.iterations, asked.restarts) == (1000, 3)
