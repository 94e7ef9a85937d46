"""Plugins that fail well (issue 27), run as a user runs them (real subprocesses, real plugin files).

A plugin whose code raises (its claim, encode, decode, a capability) or returns the wrong type, a module that
registers nothing, or a relation word it misspells: every command that loads plugins prints one line naming the
plugin file, the method and the exception, exits 2, and writes nothing (an --out folder is not created, and what
an existing one holds stays as it was). A plugin whose noise is not drawn from its seeds is flagged: a warning, a
key in results.json and a note in the report.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HEAD = '''
import numpy as np
import torch

from auditkit import mechanisms
from auditkit.mechanisms import FloatMessage, Mechanism, PrivacyGuarantee
from auditkit.mechanisms.base import as_update, positive_float
from auditkit.mechanisms.randomness import private_generator


@mechanisms.register
class Mine(Mechanism):
    """Written minimally, as a new user writes one: params_spec, encode, decode, guarantee."""

    name = "{name}"
    summary = "l2 clip + Gaussian noise"
    message_type = FloatMessage
    params_spec = (positive_float("sigma", 2.0, "noise std"), positive_float("clip", 0.5, "l2 clip"))

    def encode(self, x, seed):
        x = as_update(x)
        x = x / max(1.0, x.norm().item() / self.params["clip"])
        y = x + self.params["sigma"] * self.noise(x.numel(), seed)
        return {encoded}

    def noise(self, n, seed):
        return torch.randn(n, generator={generator}, dtype=torch.float64)

    def decode(self, enc, seed):
        return enc.to_tensor()

    def guarantee(self):
        return {claim}
'''
ENCODED = "FloatMessage(y.numpy().astype(np.float32))"
PRIVATE = 'private_generator(self.private_seed, seed, "noise")'
CLAIM = 'PrivacyGuarantee(1.99, 1e-5, "replace-one", sensitivity="l2 clip 0.5")'
TINY_AUDIT = """
seed = 0
plugins = ["{plugin}"]
[data]
dataset = "mnist-5k"
[training]
model = "linear"
clients = 2
rounds = 1
tau = 1
batch_size = 8
checkpoints = [1]
[[mechanisms]]
name = "{name}"
[inversion]
enabled = false
[probe]
targets = 2
sweep = false
[identification]
candidates = [10]
trials = 20
[distinguish]
trials = 2000
"""


def write_plugin(folder: Path, name: str, *, encoded=ENCODED, generator=PRIVATE, claim=CLAIM, register=True) -> Path:
    source = HEAD.format(name=name, encoded=encoded, generator=generator, claim=claim)
    path = folder / f"{name.replace('-', '_')}.py"
    path.write_text(source if register else source.replace("@mechanisms.register\n", ""))
    return path


def auditkit(*args, cwd):
    return subprocess.run([sys.executable, "-m", "auditkit.cli", *map(str, args)], capture_output=True, text=True,
                          check=False, cwd=cwd, timeout=600, env={**os.environ, "COLUMNS": "200"})


def one_line_error(result, expected: str) -> None:
    """Exit 2 and exactly ``expected`` on stderr, one line, no traceback."""
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"error: {expected}"], result.stderr
    assert "Traceback" not in result.stderr


def prior_folder(path: Path) -> dict[str, str]:
    """An --out folder holding an earlier audit's results (of auditkit 0.2: no manifest); returns what it holds, to
    compare after."""
    (path / "stages" / "s00").mkdir(parents=True)
    (path / "results.json").write_text('{"schema": "auditkit/results", "earlier": "results"}\n')
    (path / "stages" / "s00" / "train.json").write_text('{"stage": "train", "key": "k"}\n')
    return contents(path)


def contents(path: Path) -> dict[str, str]:
    return {str(f.relative_to(path)): f.read_text() for f in sorted(path.rglob("*")) if f.is_file()}


def label(command: str, plugin: Path) -> str:
    """How a command names the plugin: as --plugin gave it, or as the config's plugins resolve it (its path)."""
    return repr(str(plugin) if command == "audit" else plugin.name)


def command_line(command: str, tmp_path: Path, plugin: Path, name: str) -> tuple[list[str], Path]:
    """The command line of ``command`` on the plugin's mechanism, and its --out folder."""
    out = tmp_path / "out"
    if command == "audit":
        config = tmp_path / "tiny.toml"
        config.write_text(TINY_AUDIT.format(plugin=plugin.name, name=name))
        return ["audit", config, "--out", out, "--resume"], out  # --resume: the folder holds an earlier audit
    lines = {
        "mechanisms": ["mechanisms", "--plugin", plugin.name],
        "mechanisms NAME": ["mechanisms", name, "--plugin", plugin.name],
        "distinguish": ["distinguish", name, "--plugin", plugin.name, "--trials", "2000", "--out", out],
        "train": ["train", "--mechanism", name, "--plugin", plugin.name, "--rounds", "1", "--clients", "2",
                  "--out", out],
        "account": ["account", name, "--plugin", plugin.name, "--rounds", "3", "--out", out],
        "attack": ["attack", "idlg", "--mechanism", name, "--plugin", plugin.name, "--images", "1", "--out", out],
    }
    return lines[command], out


@pytest.mark.parametrize("command", ["mechanisms", "mechanisms NAME", "distinguish", "audit", "train", "account",
                                     "attack"])
def test_a_guarantee_that_raises_is_one_line_in_every_command_and_nothing_is_written(tmp_path, command):
    plugin = write_plugin(tmp_path, "claim-raises", claim='PrivacyGuarantee(self.params["epsilon"], 1e-5, '
                                                          '"replace-one")')
    args, out = command_line(command, tmp_path, plugin, "claim-raises")
    before = prior_folder(out) if command == "audit" else None
    one_line_error(auditkit(*args, cwd=tmp_path),
                   f"plugin {label(command, plugin)}: claim-raises.guarantee() raised KeyError: 'epsilon'")
    if before is None:
        assert not out.exists()
    else:
        assert contents(out) == before  # earlier results untouched


@pytest.mark.parametrize("command", ["mechanisms", "distinguish", "audit"])
def test_encode_returning_a_tensor_stops_every_command_before_it_writes(tmp_path, command):
    """``distinguish`` used to run on it, give a verdict and write results."""
    plugin = write_plugin(tmp_path, "sends-tensor", encoded="y.float()")
    args, out = command_line(command, tmp_path, plugin, "sends-tensor")
    before = prior_folder(out) if command == "audit" else None
    one_line_error(auditkit(*args, cwd=tmp_path), f"plugin {label(command, plugin)}: sends-tensor.encode() returned "
                                                  "torch.Tensor, not its message_type FloatMessage")
    assert (not out.exists()) if before is None else contents(out) == before


@pytest.mark.parametrize("command", ["mechanisms", "distinguish"])
def test_a_module_that_registers_nothing_says_so(tmp_path, command):
    plugin = write_plugin(tmp_path, "forgotten", register=False)
    args, out = command_line(command, tmp_path, plugin, "forgotten")
    one_line_error(auditkit(*args, cwd=tmp_path), "plugin 'forgotten.py' registered no mechanism (decorate its "
                                                  "class with @mechanisms.register)")
    assert not out.exists()


def test_a_relation_word_is_accepted_and_a_misspelt_one_refused_in_one_line(tmp_path):
    write_plugin(tmp_path, "word-relation")  # CLAIM names its relation "replace-one"
    listed = auditkit("mechanisms", "word-relation", "--plugin", "word_relation.py", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "(eps=1.99, delta=1e-05)-DP for one round, REPLACE_ONE" in listed.stdout
    write_plugin(tmp_path, "bogus-relation", claim='PrivacyGuarantee(1.99, 1e-5, "bogus")')
    one_line_error(auditkit("mechanisms", "--plugin", "bogus_relation.py", cwd=tmp_path),
                   "plugin 'bogus_relation.py': bogus-relation.guarantee() raised ValueError: relation must be a "
                   "dp_accounting.NeighboringRelation or one of 'replace-one', 'add-or-remove-one', 'add-remove', "
                   "'replace-special' (any case), got 'bogus'")


def test_noise_from_torchs_global_generator_is_flagged_not_reproducible(tmp_path):
    write_plugin(tmp_path, "global-rng", generator="None")
    out = tmp_path / "out"
    result = auditkit("distinguish", "global-rng", "--plugin", "global_rng.py", "--trials", "2000", "--out", out,
                      cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "warning: the output of mechanism 'global-rng' is not determined by its seeds (two encodes with the same seeds "
        "differed): results will not reproduce; draw its noise from "
        "auditkit.mechanisms.randomness.private_generator(self.private_seed, seed, purpose)"]
    setting = json.loads((out / "results.json").read_text())["settings"][0]
    assert setting["mechanism"]["reproducible"] is False
    report = " ".join((out / "report.md").read_text().split())
    assert ("global-rng: the mechanism's output is not determined by its seeds (two encodes under the same seeds "
            "differed): these results will not reproduce") in report


def test_noise_from_the_private_generator_is_reproducible_and_not_flagged(tmp_path):
    write_plugin(tmp_path, "seeded")
    out = tmp_path / "out"
    result = auditkit("distinguish", "seeded", "--plugin", "seeded.py", "--trials", "2000", "--out", out, cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    setting = json.loads((out / "results.json").read_text())["settings"][0]
    assert "reproducible" not in setting["mechanism"]
    assert "not determined by its seeds" not in (out / "report.md").read_text()


def test_the_python_api_raises_the_plugins_error_and_flags_an_unseeded_mechanism(tmp_path):
    from auditkit import mechanisms
    from auditkit import run_audit
    from auditkit.audit import Audit
    from auditkit.config import load_config
    from auditkit.mechanisms import registry

    raising = write_plugin(tmp_path, "api-raises", claim="1 / 0")
    unseeded = write_plugin(tmp_path, "api-unseeded", generator="None")
    try:
        for plugin in (raising, unseeded):
            (tmp_path / f"{plugin.stem}.toml").write_text(textwrap.dedent(TINY_AUDIT).format(
                plugin=plugin.name, name=plugin.stem.replace("_", "-")))
        out = tmp_path / "raises-out"
        with pytest.raises(mechanisms.PluginCodeError, match=r"^plugin '.*api_raises\.py': api-raises\.guarantee\(\) "
                                                             r"raised ZeroDivisionError: division by zero$"):
            run_audit(load_config(tmp_path / "api_raises.toml"), out=out)
        assert not out.exists()
        audit = Audit(load_config(tmp_path / "api_unseeded.toml"), out=tmp_path / "unseeded-out")
        assert [plan.setting.name for plan in audit.unreproducible] == ["api-unseeded"]
        document = audit.run()
        assert document["settings"][0]["mechanism"]["reproducible"] is False
        assert "not determined by its seeds" in (tmp_path / "unseeded-out" / "report.md").read_text()
    finally:  # the rest of this worker's tests read every registered mechanism
        for name in ("api-raises", "api-unseeded"):
            registry._REGISTRY.pop(name, None)
            registry._ORIGIN.pop(name, None)
        for module in ("api_raises", "api_unseeded"):
            sys.modules.pop(module, None)
