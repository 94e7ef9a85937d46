"""Round protocols as registered extensions (auditkit.mechanisms.protocol): a plugin adds one in its own file --
a mechanism naming it, its config table and option -- and the FL core runs it without a line changed."""
import textwrap

import pytest

from auditkit import mechanisms
from auditkit.config import ConfigError, from_dict
from auditkit.fl.aggregation import UplinkProtocol
from auditkit.stages.setting import build_protocol
from auditkit.stages.train import Experiment

# A plugin's whole story: the mechanism (plain Gaussian) runs the "median-relay" protocol, whose server takes the
# coordinate-wise median of the decoded updates instead of their mean. Its table [relay] sets how many of the
# round's clients the relay drops (the largest-norm ones); its option `keep_views` on the mechanism setting says
# whether the server view is recorded.
PLUGIN = textwrap.dedent('''
    import torch
    from dataclasses import dataclass
    from auditkit import mechanisms
    from auditkit.mechanisms.additive import Gaussian
    from auditkit.mechanisms.base import choice
    from auditkit.mechanisms.randomness import shared_seed


    @dataclass(frozen=True)
    class RelayTable:
        drop: int = 0


    @mechanisms.register_protocol
    class MedianRelay:
        name = "median-relay"
        table = "relay"
        table_type = RelayTable
        options = (choice("keep_views", ("yes", "no"), "yes", "record the server view"),)

        @staticmethod
        def check_table(table, clients):
            if not 0 <= table.drop < clients:
                raise ValueError(f"relay.drop must be an integer in [0, {clients - 1}], got {table.drop}")

        @classmethod
        def build(cls, mechanism, context):
            table = context.table or RelayTable()
            return cls(mechanism, context.seed, table.drop, context.options.get("keep_views", "yes"))

        def __init__(self, mechanism, seed, drop, keep_views):
            self.mechanism, self.seed, self.drop, self.keep_views = mechanism, seed, drop, keep_views

        def communicate(self, updates, clients, weights, round_, *, global_params):
            decoded = []
            for update, client in zip(updates, clients):
                seed = shared_seed(self.seed, client, round_)
                message = self.mechanism.encode(update.detach().cpu(), seed)
                decoded.append(self.mechanism.decode(message, seed))
            stacked = torch.stack(decoded)
            kept = stacked[stacked.norm(dim=1).argsort()[: len(clients) - self.drop]]
            views = {"server": stacked} if self.keep_views == "yes" else {}
            return mechanisms.RoundOutcome(aggregate=kept.median(dim=0).values.to(updates.dtype), bits=[32] * len(clients),
                                           views=views, stats={"dropped": float(self.drop)})


    @mechanisms.register
    class RelayedGaussian(Gaussian):
        name = "relayed-gaussian-test"
        protocol = "median-relay"
''')


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    path = tmp_path_factory.mktemp("plugin") / "median_relay.py"
    path.write_text(PLUGIN)
    if "relayed-gaussian-test" not in mechanisms.names():
        mechanisms.load_plugins([str(path)])
    return str(path)


def _config(plugin, **extra):
    raw = {"plugins": [plugin], "training": {"clients": 4, "rounds": 1, "tau": 1, "checkpoints": [1]},
           "mechanism": {"name": "relayed-gaussian-test", "sigma": 0.01, "clip": 10.0}}
    for key, value in extra.items():
        raw[key] = {**raw.get(key, {}), **value}
    return from_dict(raw)


def test_a_plugin_protocol_with_its_own_table_and_option_runs_in_the_fl_core(plugin):
    config = _config(plugin, relay={"drop": 1}, mechanism={"keep_views": "no"})
    assert config.tables["relay"].drop == 1 and config.mechanism.protocol_options == {"keep_views": "no"}
    assert from_dict(config.to_dict()) == config  # the table and the option round-trip through the config
    run = Experiment(config).train()
    assert run.protocol == "median-relay"
    assert all(r.stats["dropped"] == 1.0 for r in run.result.rounds)


def test_without_its_table_the_protocol_uses_its_defaults_and_a_bad_table_names_the_key(plugin):
    config = _config(plugin)
    protocol = build_protocol(mechanisms.create("relayed-gaussian-test"), config)
    assert protocol.name == "median-relay" and protocol.drop == 0 and protocol.keep_views == "yes"
    with pytest.raises(ConfigError, match=r"^relay.drop must be an integer in \[0, 3\], got 4$"):
        _config(plugin, relay={"drop": 4})
    with pytest.raises(ConfigError, match=r"^mechanism.keep_views must be one of yes, no, got 'maybe'$"):
        _config(plugin, mechanism={"keep_views": "maybe"})
    with pytest.raises(ConfigError, match="relay.hops"):
        _config(plugin, relay={"hops": 2})


def test_a_mechanism_without_a_protocol_sends_one_upload_per_client():
    config = from_dict({"mechanism": {"name": "gaussian"}})
    assert mechanisms.create("gaussian").protocol is None
    assert isinstance(build_protocol(mechanisms.create("gaussian"), config), UplinkProtocol)


def test_the_papers_protocols_are_registered_beside_their_mechanisms():
    assert {"consensus", "device-groups"} <= set(mechanisms.protocol_names())
    assert mechanisms.protocol_class("consensus").__module__ == "auditkit.mechanisms.msp_consensus"
    assert mechanisms.protocol_class("device-groups").__module__ == "auditkit.mechanisms.dpsq_groups"
    assert {n for n in mechanisms.names() if mechanisms.mechanism_class(n).protocol == "consensus"} >= {
        "msp", "msp-laplace", "mspdq"}
    with pytest.raises(ValueError, match="unknown round protocol 'nope'"):
        mechanisms.protocol_class("nope")


def test_registration_refuses_an_incomplete_protocol():
    class NoBuild:
        name = "no-build-test"

    with pytest.raises(ValueError, match="must define build"):
        mechanisms.register_protocol(NoBuild)

    class TableWithoutType:
        name = "no-type-test"
        table = "x"

        @classmethod
        def build(cls, mechanism, context):
            return None

    with pytest.raises(ValueError, match="no table_type dataclass"):
        mechanisms.register_protocol(TableWithoutType)


def test_the_fl_core_imports_no_mechanism_module_and_names_no_mechanism():
    """The FL core (auditkit.fl, the train stage, the config) knows the protocol interface only: it imports no
    mechanism's module and no string in it is a registered mechanism's name (but the default, "none")."""
    import ast
    from pathlib import Path

    import auditkit

    root = Path(auditkit.__file__).parent
    core = [*sorted((root / "fl").glob("*.py")), root / "stages" / "train.py", root / "config.py"]
    named = set(mechanisms.names()) - {"none"}
    for path in core:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("auditkit.mechanisms."):
                assert node.module.split(".")[2] in ("protocol", "randomness", "message", "base"), (path, node.module)
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in named, (path.name, node.value)
