"""Mechanisms of one's own (plugins), from the command line, a config, the Python API and an installed package.

The example plugin (``examples/half_noise_plugin/half_noise.py``) adds half the noise its claims assume:
``half-noise-laplace`` claims eps = 1 and is really 2-DP; ``half-noise-gaussian`` claims 1.99 and is really
4.38-DP. A plugin must be audited exactly like a built-in: its flags, its config keys, every stage, the report.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "half_noise_plugin"
PLUGIN = str(EXAMPLE / "half_noise.py")


def auditkit(*args, cwd=None, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "auditkit.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, "COLUMNS": "200", **(env or {})})


def one_line_error(result, starts: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), result.stderr
    assert "Traceback" not in result.stderr


def test_a_plugin_is_listed_with_its_origin_and_its_parameters():
    listed = " ".join(auditkit("mechanisms", "--plugin", PLUGIN).stdout.split())
    assert "half-noise-laplace" in listed and "half-noise-gaussian" in listed and f"plugin {PLUGIN}" in listed
    detail = auditkit("mechanisms", "half-noise-gaussian", "--plugin", PLUGIN)
    assert detail.returncode == 0 and f"registered by plugin {PLUGIN}" in detail.stdout
    assert "audit capabilities declared: tiling, audit_setting, output_log_density, dp_event" in " ".join(
        detail.stdout.split())


def test_the_buggy_plugin_is_violated_from_the_command_line_with_a_bound_well_above_its_claim(tmp_path):
    out = tmp_path / "out"
    result = auditkit("distinguish", "half-noise-laplace", "--plugin", PLUGIN, "--trials", "100000", "--out", str(out))
    assert result.returncode == 0, result.stderr
    setting = json.loads((out / "results.json").read_text())["settings"][0]
    test = setting["distinguish"]
    assert test["claimed_epsilon"] == 1.0 and test["verdict"] == "violated"
    assert 1.5 <= test["epsilon_lower_bound"] <= 2.0  # the true epsilon is 2
    assert test["p_value"] < 1e-6 and test["sampling"].startswith("tiled")
    assert setting["mechanism"]["origin"] == PLUGIN
    assert set(setting["mechanism"]["capabilities"].values()) == {"declared", "generic default"}
    assert PLUGIN in (out / "report.html").read_text() and (out / "report.md").is_file()


@pytest.mark.parametrize(("command", "source", "message"), [
    (["train", "--rounds", "1"], "import no_such_package_anywhere\n",
     "failed to load: No module named 'no_such_package_anywhere'"),
    (["distinguish", "gaussian"], "from auditkit import mechanisms\nfrom auditkit.mechanisms.additive import Gaussian\n\n"
     "@mechanisms.register\nclass Mine(Gaussian):\n    name = 'gaussian'\n",
     "failed to load: mechanism 'gaussian' is already registered by auditkit.mechanisms.additive.Gaussian"),
    (["attack", "idlg"], "from auditkit import mechanisms\nfrom auditkit.mechanisms.additive import Gaussian\n"
     "from auditkit.mechanisms.base import positive_float\n\n"
     "@mechanisms.register\nclass Mine(Gaussian):\n    name = 'mine'\n"
     "    params_spec = (positive_float('sigma', -1.0, 'std'),)\n",
     "failed to load: mechanism 'mine': the default of parameter 'sigma' fails its own check"),
])
def test_a_broken_plugin_is_one_line_naming_it_and_writes_nothing(tmp_path, command, source, message):
    plugin = tmp_path / "broken.py"
    plugin.write_text(source)
    out = tmp_path / "out"
    one_line_error(auditkit(*command, "--plugin", str(plugin), "--out", str(out)),
                   f"error: plugin {str(plugin)!r} {message}")
    assert not out.exists()


def test_a_plugin_parameter_that_takes_a_commands_option_name_is_refused(tmp_path):
    plugin = tmp_path / "clash.py"
    plugin.write_text("from auditkit import mechanisms\nfrom auditkit.mechanisms.additive import Gaussian\nfrom auditkit.mechanisms.base import "
                      "int_range\n\n@mechanisms.register\nclass Clash(Gaussian):\n    name = 'clash'\n"
                      "    params_spec = (*Gaussian.params_spec, int_range('rounds', 1, 9, 1, 'a bad name'))\n")
    one_line_error(auditkit("mechanisms", "--plugin", str(plugin)),
                   f"error: mechanism parameter 'rounds' of clash ({plugin}) is also an option of `auditkit train` "
                   "(--rounds); rename the parameter")


@pytest.mark.parametrize("command, name", [("audit", "backend"), ("audit", "recorded"),
                                           ("distinguish", "no_search")])
def test_every_option_a_command_has_is_reserved_from_plugin_parameters(tmp_path, command, name):
    # read from the command itself, so that an option added later is covered (backend and recorded once were not)
    plugin = tmp_path / "clash.py"
    plugin.write_text("from auditkit import mechanisms\nfrom auditkit.mechanisms.additive import Gaussian\n"
                      "from auditkit.mechanisms.base import int_range\n\n@mechanisms.register\nclass Clash(Gaussian):\n"
                      f"    name = 'clash'\n    params_spec = (*Gaussian.params_spec, int_range({name!r}, 1, 9, 1, 'x'))\n")
    result = auditkit(command, "--plugin", str(plugin), "--help")
    one_line_error(result, f"error: mechanism parameter {name!r} of clash ({plugin}) is also an option of `auditkit ")
    # the first command that has the flag is named (train has --backend too)
    assert result.stderr.strip().endswith(f"({'--' + name.replace('_', '-')}); rename the parameter")


def test_a_plugin_written_for_the_former_top_level_packages_is_told_the_namespace(tmp_path):
    plugin = tmp_path / "old_style.py"
    plugin.write_text("import mechanisms\n")
    # outside this checkout (whose folders would import as top-level packages) and without a PYTHONPATH leading
    # back to it (Flower's Ray backend extends this process's PYTHONPATH by sys.path)
    one_line_error(auditkit("mechanisms", "--plugin", str(plugin), cwd=tmp_path, env={"PYTHONPATH": ""}),
                   f"error: plugin {str(plugin)!r} failed to load: No module named 'mechanisms' (it is "
                   "auditkit.mechanisms now: write `from auditkit import mechanisms`)")


def test_a_missing_plugin_file_and_a_bad_plugins_key_in_a_config(tmp_path):
    one_line_error(auditkit("mechanisms", "--plugin", str(tmp_path / "nowhere.py")),
                   f"error: plugin {str(tmp_path / 'nowhere.py')!r} failed to load: no such file")
    config = tmp_path / "c.toml"
    config.write_text("plugins = 'half_noise.py'\n")
    one_line_error(auditkit("train", str(config), "--out", str(tmp_path / "out")),
                   "error: plugins must be a list of module names")


def test_a_config_names_its_plugin_beside_it_and_the_python_api_audits_it(tmp_path):
    import auditkit as toolkit
    from auditkit.config import load_config

    config = load_config(EXAMPLE / "audit.toml")
    assert config.plugins == (str(EXAMPLE / "half_noise.py"),)
    small = config.with_setting(config.mechanisms[0])
    from dataclasses import replace

    small = replace(small, training=replace(small.training, rounds=1, clients=3),
                    inversion=replace(small.inversion, enabled=False),
                    probe=replace(small.probe, targets=2), identification=replace(small.identification, trials=50),
                    distinguish=replace(small.distinguish, trials=20_000))
    document = toolkit.run_audit(small, out=tmp_path / "api")
    setting = document["settings"][0]
    assert setting["mechanism"]["name"] == "half-noise-laplace" and setting["mechanism"]["origin"] == PLUGIN
    assert setting["distinguish"]["verdict"] == "violated" and setting["accounting"]["composed"] is not None
    assert document["provenance"]["plugins"] == [PLUGIN]


@pytest.mark.slow
def test_the_example_audit_flags_the_plugin_and_passes_the_correct_mechanisms(tmp_path):
    out = tmp_path / "audit"
    result = auditkit("audit", str(EXAMPLE / "audit.toml"), "--out", str(out), "--confidence", "0.99")
    assert result.returncode == 0, result.stderr
    document = json.loads((out / "results.json").read_text())
    settings = {s["mechanism"]["name"]: s for s in document["settings"]}
    assert document["config"]["distinguish"]["confidence"] == 0.99  # --confidence reaches every verdict
    assert all(s["distinguish"]["confidence"] == 0.99 for s in settings.values())
    laplace, gaussian = settings["half-noise-laplace"]["distinguish"], settings["half-noise-gaussian"]["distinguish"]
    assert laplace["verdict"] == "violated" and laplace["epsilon_lower_bound"] >= 1.5 * laplace["claimed_epsilon"]
    assert gaussian["verdict"] == "violated" and gaussian["epsilon_lower_bound"] > gaussian["claimed_epsilon"]
    assert settings["laplace"]["distinguish"]["verdict"] == "consistent"
    assert settings["gaussian"]["distinguish"]["verdict"] == "consistent"
    assert all(s["training"]["final"]["test_accuracy"] > 0 for s in settings.values())
    assert (out / "report.html").is_file()


def test_an_installed_package_registers_its_mechanisms_through_the_entry_point(tmp_path):
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "--target", str(site), str(EXAMPLE)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert install.returncode == 0, install.stderr
    entry_points = next(site.glob("*.dist-info")) / "entry_points.txt"
    assert "[auditkit.mechanisms]" in entry_points.read_text()
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    listed = " ".join(auditkit("mechanisms", env=env, cwd=tmp_path).stdout.split())
    assert "half-noise-laplace" in listed and "plugin entry point half_noise = half_noise" in listed
    out = tmp_path / "out"
    result = auditkit("distinguish", "half-noise-laplace", "--scale", "0.5", "--trials", "40000", "--out", str(out),
                      env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    setting = json.loads((out / "results.json").read_text())["settings"][0]
    assert setting["mechanism"]["params"]["scale"] == 0.5 and setting["distinguish"]["claimed_epsilon"] == 2.0
    assert setting["distinguish"]["verdict"] == "violated"
    assert setting["mechanism"]["origin"] == "entry point half_noise = half_noise"
