"""The bounds on a config's sizes and noise (``auditkit.config_bounds``, issue 39): every bound refuses one past it
in one line naming the key and the range, accepts its ends, and the command line's flags take the same ranges."""
from __future__ import annotations

import pytest

from auditkit import mechanisms
from auditkit.config import ConfigError, from_dict, load_preset
from auditkit.config_bounds import NOISE_RANGE, RANGES, SIZES


def _raw(key: str, value: int) -> dict:
    """The smallest config that sets size ``key`` to ``value`` (and what that key needs beside it)."""
    if key == "seed":
        return {"seed": value}
    section, name = key.split(".")
    if key == "training.clients_per_round":  # above K only with replacement
        return {"training": {"participation": "replacement", name: value}}
    if key == "identification.candidates":
        return {section: {name: [value]}}
    if key == "identification.pool":  # at least the largest candidate count
        return {section: {name: value, "candidates": [2]}}
    if key == "training.rounds":
        return {section: {name: value, "checkpoints": [1]}}
    return {section: {name: value}}


@pytest.mark.parametrize("key", sorted(SIZES))
def test_every_size_accepts_its_range_and_refuses_one_past_it_in_one_line(key):
    low, high = SIZES[key].low, SIZES[key].high
    for value in (low, high):
        from_dict(_raw(key, value))
    listed = key == "identification.candidates"
    for value in (low - 1, high + 1):
        with pytest.raises(ConfigError) as err:
            from_dict(_raw(key, value))
        shown = [value] if listed else value
        kind = "a list of integers" if listed else "an integer"
        assert str(err.value) == f"{key} must be {kind} in {low}..{high}, got {shown}"


def test_the_absurd_sizes_of_issue_39_are_refused_naming_the_key_and_range():
    cases = {"training.rounds": 10**9, "training.batch_size": 10**9, "distinguish.trials": 10**12, "seed": 2**64,
             "training.clients": 10**9, "identification.trials": 10**12, "canary.canaries": 10**12}
    for key, value in cases.items():
        with pytest.raises(ConfigError, match=rf"^{key} must be an integer in \d+\.\.\d+, got {value}$"):
            from_dict(_raw(key, value))


def test_every_preset_is_within_the_bounds():
    """The bounds are generous: the papers' settings are far inside them."""
    from auditkit.config import PRESETS

    for name in PRESETS:
        load_preset(name)


def test_the_flags_take_their_ranges_from_the_bounds():
    """One definition: each size flag of ``train`` and ``audit`` is checked by its config key's constraint."""
    from auditkit.cli.app import build_cli
    from auditkit.cli.options import CONFIG_KEYS

    for command in ("train", "audit"):
        params = {p.name: p for p in build_cli().commands[command].params}
        sized = {name: key for name, key in CONFIG_KEYS.items() if key in SIZES}
        assert set(sized) == {"seed", "clients", "rounds", "tau", "batch_size", "local_epochs", "client_chunk"}
        for name, key in sized.items():
            assert params[name].type.constraint is SIZES[key], name
        assert params["max_memory"].type.constraint is RANGES["limits.max_memory_gib"]
        assert params["threads"].type.constraint is RANGES["limits.threads"]


@pytest.mark.parametrize(("table", "key"), [
    ({"mechanism": {"name": "gaussian", "sigma": 1e-300}}, "mechanism.sigma"),
    ({"mechanism": {"name": "gaussian", "sigma": 5e-324}}, "mechanism.sigma"),
    ({"mechanism": {"name": "laplace", "scale": 5e-324}}, "mechanism.scale"),
    ({"mechanism": {"name": "dp-fedavg", "noise_multiplier": 1e-300}}, "mechanism.noise_multiplier"),
    ({"mechanism": {"name": "jopeq-laplace", "eps": 5e-324}}, "mechanism.eps"),
    ({"mechanism": {"name": "dpsq", "eps": 1e12}}, "mechanism.eps"),
    ({"mechanisms": [{"name": "none"}, {"name": "gaussian", "sweep": {"sigma": [1.0, 1e-300]}}]},
     r"mechanisms\[1\].sweep.sigma"),
    ({"dp_sgd": {"noise_multiplier": 1e-300}}, "dp_sgd.noise_multiplier"),
])
def test_a_vanishing_noise_or_epsilon_is_refused_with_the_range(table, key):
    """Before: sigma 1e-300 ended in the epsilon solver's "function value at x=inf is NaN", Laplace scale 5e-324 in
    an infinite epsilon, JoPEQ eps 5e-324 in "support must be a finite number > 0, got inf"."""
    with pytest.raises(ConfigError, match=rf"^{key} must be a number in \[1e-09, 1e\+09\], got "):
        from_dict(table)


def test_the_noise_range_is_where_calibration_reaches_and_its_ends_are_accepted():
    low, high = NOISE_RANGE
    for sigma in (low, high):
        from_dict({"mechanism": {"name": "gaussian", "sigma": sigma}})
    # a target epsilon calibrated next to the small end of the noise (Laplace: eps = 2 clip / scale) passes
    config = from_dict({"mechanism": {"name": "laplace", "target_eps": 1.9e9}})
    assert low <= config.mechanism.params["scale"] <= 1.1e-9
    with pytest.raises(ConfigError, match=r"target_eps 2\.1e\+09 is out of reach of 'laplace' with scale in \[1e-9, "):
        from_dict({"mechanism": {"name": "laplace", "target_eps": 2.1e9}})
    assert mechanisms.calibrate("laplace", 1.0)["scale"] == pytest.approx(2.0)


def test_a_noise_that_is_not_a_positive_number_keeps_the_parameters_own_message():
    with pytest.raises(ConfigError, match=r"^mechanism: sigma must be a finite number > 0, got -1.0$"):
        from_dict({"mechanism": {"name": "gaussian", "sigma": -1.0}})


@pytest.mark.parametrize("value", [0, -1.0, 2.0**21])
def test_the_memory_limit_is_a_positive_number_of_gib(value):
    with pytest.raises(ConfigError, match=r"^limits.max_memory_gib must be a number in \(0, 1048576\], got "):
        from_dict({"limits": {"max_memory_gib": value}})


@pytest.mark.parametrize("value", [0, -1, 1.5, 4097])
def test_the_thread_pool_size_is_a_whole_number_of_threads(value):
    with pytest.raises(ConfigError, match=r"^limits.threads must be "):
        from_dict({"limits": {"threads": value}})
    assert from_dict({"limits": {"threads": 3}}).limits.threads == 3
    assert "limits" not in from_dict({"limits": {"threads": 3}}).to_dict()  # the machine's: no stage key changes


def test_the_memory_limit_is_the_machines_not_the_experiments():
    """Left out of to_dict: raising it changes no stage key and no results."""
    config = from_dict({"limits": {"max_memory_gib": 64}})
    assert config.limits.max_memory_gib == 64.0
    assert "limits" not in config.to_dict()
    assert from_dict(config.to_dict()).to_dict() == config.to_dict()


def test_the_configs_page_lists_every_bound():
    """docs/guide/configs.md's table of bounds is SIZES, row for row."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "configs.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w.]+)` \| (?:an integer|a list of integers) in ([\d,]+)\.\.([\d,]+) \|$", page, re.M)
    assert {key: (int(low.replace(",", "")), int(high.replace(",", ""))) for key, low, high in rows} == {
        key: (size.low, size.high) for key, size in SIZES.items()}


@pytest.mark.parametrize(("raw", "line"), [
    ({"title": "t" * 1001}, "title must be at most 1,000 characters, got 1,001"),
    ({"mechanism": {"name": "gaussian", "sigma": 1.0, "label": "x" * 1001}},
     "mechanism.label (with its sweep's values) must be at most 1,000 characters, got 1,001"),
    ({"mechanisms": [{"name": "gaussian", "label": "x" * 995, "sweep": {"sigma": [1.0, 2.0]}}]},
     "mechanisms[0].label (with its sweep's values) must be at most 1,000 characters, got 1,003"),
])
def test_titles_and_labels_longer_than_results_files_hold_are_refused_when_the_config_loads(raw, line):
    # the same limit results.json is read with: an audit that runs to the end can always write its results
    with pytest.raises(ConfigError) as refused:
        from_dict(raw)
    assert str(refused.value) == line
    from_dict({"title": "t" * 1000})
