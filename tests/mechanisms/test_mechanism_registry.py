"""Registry, parameter validation and the common Mechanism contract."""

import json
import math

import pytest
import torch

from auditkit import mechanisms
from auditkit.mechanisms.base import Mechanism, positive_float
from auditkit.mechanisms.guarantee import REPLACE_ONE
from auditkit.mechanisms.registry import register

BUILTIN = ["gaussian", "laplace", "none", "sdq"]


def test_names_lists_the_builtin_mechanisms_sorted():
    got = mechanisms.names()
    assert set(BUILTIN) <= set(got)
    assert got == sorted(got)


def test_unknown_mechanism_names_the_valid_ones():
    with pytest.raises(ValueError) as err:
        mechanisms.create("bogus")
    assert str(err.value) == f"unknown mechanism 'bogus'; valid: {', '.join(mechanisms.names())}"


@pytest.mark.parametrize(("name", "old", "value"), [
    (name, old, mechanisms.mechanism_class(name)().params[new])
    for name, renamed in mechanisms.registry.RENAMED_PARAMS.items() for old, new in renamed.items()
])
def test_a_renamed_parameter_is_refused_with_its_new_name(name, old, value):
    new = mechanisms.registry.RENAMED_PARAMS[name][old]
    assert new in {p.name for p in mechanisms.mechanism_class(name).params_spec}
    assert old not in {p.name for p in mechanisms.mechanism_class(name).params_spec}
    with pytest.raises(ValueError) as err:
        mechanisms.create(name, **{old: value})
    assert str(err.value) == f"parameter {old!r} of mechanism {name!r} was renamed to {new!r}"
    assert mechanisms.create(name, **{new: value}).params[new] == value


def test_unknown_parameter_names_the_valid_ones():
    with pytest.raises(ValueError) as err:
        mechanisms.create("gaussian", sigma=0.1, bits=8)
    msg = str(err.value)
    assert "'bits'" in msg and "gaussian" in msg
    assert "valid: clip, delta, private_seed, sigma" in msg


@pytest.mark.parametrize(
    ("name", "param", "value", "allowed"),
    [
        ("gaussian", "sigma", -1.0, "a finite number > 0"),
        ("gaussian", "sigma", 0.0, "a finite number > 0"),
        ("gaussian", "sigma", math.nan, "a finite number > 0"),
        ("gaussian", "sigma", math.inf, "a finite number > 0"),
        ("gaussian", "sigma", "0.1", "a finite number > 0"),
        ("gaussian", "sigma", True, "a finite number > 0"),
        ("gaussian", "clip", -math.inf, "a finite number > 0"),
        ("gaussian", "delta", 0.0, "a number in (0, 1)"),
        ("gaussian", "delta", 1.0, "a number in (0, 1)"),
        ("laplace", "scale", -0.5, "a finite number > 0"),
        ("sdq", "bits", 0, "an integer in 1..16"),
        ("sdq", "bits", 17, "an integer in 1..16"),
        ("sdq", "bits", 2.5, "an integer in 1..16"),
        ("sdq", "bits", 8.0, "an integer in 1..16"),
        ("sdq", "support", math.nan, "a finite number > 0"),
        ("sdq", "compat", "bogus", "one of none, jopeq-code"),
    ],
)
def test_invalid_values_name_the_parameter_and_what_is_allowed(name, param, value, allowed):
    with pytest.raises(ValueError) as err:
        mechanisms.create(name, **{param: value})
    assert str(err.value) == f"{param} must be {allowed}, got {value!r}"


@pytest.mark.parametrize("private_seed", ["7", 1.5, True])
def test_invalid_private_seed(private_seed):
    with pytest.raises(ValueError, match="private_seed must be an integer or None"):
        mechanisms.create("gaussian", private_seed=private_seed)


def test_params_are_resolved_and_converted():
    m = mechanisms.create("gaussian", clip=2)
    assert m.params == {"sigma": 0.1, "clip": 2.0, "delta": 1e-5}
    assert isinstance(m.params["clip"], float)
    assert mechanisms.create("sdq", bits=4).params == {"bits": 4, "support": 1.0, "compat": "none"}
    assert m.name == "gaussian"


def test_describe_lists_params_and_default_guarantee():
    info = mechanisms.describe("sdq")
    assert isinstance(info, mechanisms.MechanismInfo)
    assert info.name == "sdq" and info.summary
    assert [(p.name, p.type, p.default) for p in info.params] == [
        ("bits", int, 8),
        ("support", float, 1.0),
        ("compat", str, "none"),
    ]
    assert info.params[2].choices == ("none", "jopeq-code")
    assert info.guarantee == "no privacy guarantee"
    assert mechanisms.describe("gaussian").guarantee.startswith("(eps=")
    for name in mechanisms.names():
        assert all(p.help and p.allowed for p in mechanisms.describe(name).params)


def test_registering_a_taken_name_fails():
    class Duplicate(Mechanism):
        name = "none"
        summary = "duplicate"

    with pytest.raises(ValueError, match="already registered"):
        register(Duplicate)
    assert mechanisms.create("none").__class__.__name__ == "Identity"


@pytest.mark.parametrize(("params", "message"), [
    ((positive_float("my-param", 1.0, "dashes"),), "parameter name 'my-param' must be a Python identifier"),
    ((positive_float("private_seed", 1.0, "taken"),), "parameter name 'private_seed' must be"),
    ((positive_float("a", 1.0, "one"), positive_float("a", 2.0, "two")), "parameter name 'a' must be"),
    ((positive_float("a", -1.0, "bad default"),), "the default of parameter 'a' fails its own check"),
])
def test_a_badly_declared_mechanism_is_refused_at_registration(params, message):
    class Bad(Mechanism):
        name = "bad-declaration"
        summary = "bad"
        params_spec = params

    with pytest.raises(ValueError, match=message):
        register(Bad)
    assert "bad-declaration" not in mechanisms.names()


def test_plugins_load_from_a_file_or_a_module_record_their_origin_and_roll_back_on_failure(tmp_path, monkeypatch):
    plugin = tmp_path / "two_mechs.py"
    plugin.write_text("from auditkit import mechanisms\nfrom auditkit.mechanisms.identity import Identity\n\n"
                      "@mechanisms.register\nclass A(Identity):\n    name = 'plugin-a'\n\n"
                      "@mechanisms.register\nclass B(Identity):\n    name = 'plugin-b'\n")
    assert mechanisms.load_plugins([str(plugin)]) == ["plugin-a", "plugin-b"]
    assert mechanisms.origin("plugin-a") == str(plugin) and mechanisms.origin("none") == "built-in"
    assert mechanisms.load_plugins([str(plugin)]) == ["plugin-a", "plugin-b"]  # loaded once
    half = tmp_path / "half_broken.py"
    half.write_text("from auditkit import mechanisms\nfrom auditkit.mechanisms.identity import Identity\n\n"
                    "@mechanisms.register\nclass C(Identity):\n    name = 'plugin-c'\n\nraise RuntimeError('late')\n")
    with pytest.raises(mechanisms.PluginError, match=f"plugin '{half}' failed to load: late"):
        mechanisms.load_plugins([str(half)])
    assert "plugin-c" not in mechanisms.names()  # what the failed plugin registered is removed again
    monkeypatch.chdir(tmp_path)  # a dotted module in the current folder imports, as with `python -m`
    (tmp_path / "dotted_plugin.py").write_text("from auditkit import mechanisms\nfrom auditkit.mechanisms.identity import Identity\n\n"
                                               "@mechanisms.register\nclass D(Identity):\n    name = 'plugin-d'\n")
    assert mechanisms.load_plugins(["dotted_plugin"]) == ["plugin-d"] and mechanisms.origin("plugin-d") == "dotted_plugin"
    with pytest.raises(mechanisms.PluginError, match="plugin must be a module name"):
        mechanisms.load_plugins([""])


@pytest.mark.parametrize("name", BUILTIN)
def test_call_is_decode_of_encode(name):
    m = mechanisms.create(name, private_seed=5)
    x = torch.randn(1000, dtype=torch.float64) * 0.05
    out = m(x, 11)
    assert out.dtype == torch.float32 and out.device.type == "cpu" and out.shape == x.shape
    assert torch.equal(out, m.decode(m.encode(x, 11), 11))
    assert m.encode(x.float(), 11).num_bits > 0  # float32 input accepted too


@pytest.mark.parametrize("name", BUILTIN)
def test_guarantee_is_json_friendly(name):
    g = mechanisms.create(name).guarantee()
    d = g.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["summary"] == g.summary()
    if g.epsilon is None:
        assert "no-privacy" in g.flags and g.relation is None
    else:
        assert g.relation is REPLACE_ONE and g.scope == "one round" and g.caveats


@pytest.mark.parametrize(
    ("x", "error"),
    [
        (torch.zeros(3, 3), ValueError),
        (torch.arange(5), ValueError),
        (torch.tensor([0.0, math.nan]), ValueError),
        (torch.tensor([math.inf]), ValueError),
        ([0.0, 1.0], TypeError),
    ],
)
@pytest.mark.parametrize("name", BUILTIN)
def test_bad_updates_are_rejected(name, x, error):
    with pytest.raises(error):
        mechanisms.create(name).encode(x, 0)


def test_describe_quotes_the_measured_rate_of_the_reference_update():
    x = mechanisms.reference_update()
    assert x.numel() == 10_000 and abs(x.double().norm().item() - 1.0) < 1e-6
    assert mechanisms.describe("none").bits_per_coordinate == 8 * (5 + 4 * 10_000) / 10_000
    sdq = mechanisms.describe("sdq")
    expected = mechanisms.create("sdq").encode(x, mechanisms.registry.REFERENCE_SEED).num_bits / 10_000
    assert sdq.bits_per_coordinate == expected and sdq.bits_per_coordinate < 8


@pytest.mark.parametrize("name, target", [("gaussian", 1.0), ("gaussian", 16.0), ("cepam-gaussian", 4.0),
                                          ("laplace", 2.0), ("cepam-laplace", 0.5)])
def test_calibrate_sets_the_noise_so_the_claim_meets_the_target(name, target):
    params = mechanisms.calibrate(name, target, clip=0.5)
    noise = mechanisms.mechanism_class(name).noise_param
    assert set(params) == {"clip", noise}
    assert mechanisms.create(name, **params).guarantee().epsilon == pytest.approx(target, rel=1e-8)
    if name == "laplace":  # eps = 2 clip / scale, written out independently
        assert params["scale"] == pytest.approx(2 * 0.5 / target, rel=1e-8)


def test_calibrate_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="declares no noise parameter"):
        mechanisms.calibrate("sdq", 1.0)
    with pytest.raises(ValueError, match="give either target_eps or sigma"):
        mechanisms.calibrate("gaussian", 1.0, sigma=2.0)
    with pytest.raises(ValueError, match="target_eps must be a finite number > 0"):
        mechanisms.calibrate("gaussian", float("nan"))


# --- plugins whose code fails at run time: one line naming the plugin, the method and the exception -------------

PLUGIN_HEAD = """
import numpy as np
import torch

from auditkit import mechanisms
from auditkit.mechanisms import AuditSetting, FloatMessage, Mechanism, PrivacyGuarantee, Tiling
from auditkit.mechanisms.base import as_update, positive_float
from auditkit.mechanisms.randomness import private_generator


@mechanisms.register
class Mine(Mechanism):
    name = "{name}"
    summary = "l2 clip + Gaussian noise"
    message_type = FloatMessage
    params_spec = (positive_float("sigma", 1.0, "noise std"), positive_float("clip", 0.5, "l2 clip"))

    def encode(self, x, seed):
        x = as_update(x)
        y = x + self.params["sigma"] * torch.randn(x.numel(), generator=private_generator(self.private_seed, seed, "n"),
                                                   dtype=torch.float64)
        return FloatMessage(y.numpy().astype(np.float32))

    def decode(self, enc, seed):
        return enc.to_tensor()

    def guarantee(self):
        return PrivacyGuarantee(1.0, 1e-5, "replace-one", sensitivity="l2 clip 0.5")
"""


@pytest.fixture
def plugin(tmp_path):
    """load(name, methods): a plugin file registering mechanism ``name`` (``PLUGIN_HEAD``), with ``methods``
    (source indented as the class body) appended to its class; what it registered is removed afterwards, so that
    tests reading every registered mechanism never meet it."""
    import sys

    from auditkit.mechanisms import registry

    loaded = []

    def load(name: str, methods: str = "") -> tuple[str, mechanisms.Mechanism]:
        path = tmp_path / f"{name.replace('-', '_')}.py"
        path.write_text(PLUGIN_HEAD.format(name=name) + methods)
        loaded.append((name, path.stem))
        assert mechanisms.load_plugins([str(path)]) == [name]
        return str(path), mechanisms.create(name, private_seed=1)

    yield load
    for name, module in loaded:
        registry._REGISTRY.pop(name, None)
        registry._ORIGIN.pop(name, None)
        sys.modules.pop(module, None)


def _one_line(err: BaseException, expected: str) -> None:
    assert str(err) == expected and "\n" not in str(err)


def test_a_guarantee_that_raises_is_one_line_naming_the_plugin_the_method_and_the_exception(plugin):
    path, m = plugin("g-raises", "    def guarantee(self):\n        return {}['epsilon']\n")
    with pytest.raises(mechanisms.PluginCodeError) as err:
        m.guarantee()
    _one_line(err.value, f"plugin {path!r}: g-raises.guarantee() raised KeyError: 'epsilon'")
    assert isinstance(err.value.__cause__, KeyError)  # the plugin's own exception, for whoever wants it
    assert not isinstance(err.value, ValueError)  # never mistaken for input the toolkit refuses
    with pytest.raises(mechanisms.PluginCodeError, match=r"g-raises\.guarantee\(\) raised KeyError"):
        mechanisms.preflight(m)


def test_encode_must_return_its_message_type(plugin):
    path, m = plugin("enc-tensor", "    def encode(self, x, seed):\n        return as_update(x).float()\n")
    with pytest.raises(mechanisms.PluginCodeError) as err:
        m.encode(torch.zeros(4), 0)
    _one_line(err.value, f"plugin {path!r}: enc-tensor.encode() returned torch.Tensor, not its message_type "
                         "FloatMessage")
    with pytest.raises(mechanisms.PluginCodeError, match="not its message_type FloatMessage"):
        mechanisms.preflight(m)  # a plugin's first sample
    with pytest.raises(mechanisms.PluginCodeError, match="not its message_type"):
        mechanisms.describe("enc-tensor")


@pytest.mark.parametrize(("name", "methods", "expected"), [
    ("pf-decode-raises", "    def decode(self, enc, seed):\n        raise NotImplementedError\n",
     "decode() raised NotImplementedError"),
    ("pf-decode-array", "    def decode(self, enc, seed):\n        return enc.values\n",
     "decode() returned numpy.ndarray, not a torch.Tensor"),
    ("pf-claim-float", "    def guarantee(self):\n        return 1.0\n",
     "guarantee() returned float, not a PrivacyGuarantee"),
    ("pf-setting-raises", "    def audit_setting(self):\n        return AuditSetting.clipped(self.params['clop'], 'l2')\n",
     "audit_setting() raised KeyError: 'clop'"),
    ("pf-true-eps-str", "    def true_epsilon(self):\n        return '2'\n",
     "true_epsilon() returned str, not a number or None"),
    ("pf-density-int", "    def output_log_density(self):\n        return 3\n",
     "output_log_density() returned int, not a function f(y, x), an OutputDensity or None"),
])
def test_preflight_runs_the_claim_every_declared_capability_and_one_encode_decode(plugin, name, methods, expected):
    path, m = plugin(name, methods)
    with pytest.raises(mechanisms.PluginCodeError) as err:
        mechanisms.preflight(m)
    _one_line(err.value, f"plugin {path!r}: {m.name}.{expected}")


def test_the_callables_a_capability_returns_are_guarded_too(plugin):
    path, m = plugin("tiled", "    def tiling(self):\n        return Tiling(block=1, why='iid', "
                              "for_copies=lambda copies: 1 / 0)\n")
    mechanisms.preflight(m)  # the capability itself returns fine
    tiling = mechanisms.capability(m, "tiling")
    with pytest.raises(mechanisms.PluginCodeError) as err:
        tiling.for_copies(4)
    _one_line(err.value, f"plugin {path!r}: tiled.tiling().for_copies raised ZeroDivisionError: division by zero")


def test_a_correct_plugin_passes_and_refusing_its_parameters_stays_a_value_error(plugin):
    _, m = plugin("fine")
    mechanisms.preflight(m)
    assert mechanisms.reproducible(m)
    assert m.guarantee().relation is REPLACE_ONE  # "replace-one", a string, read as the relation it names
    with pytest.raises(ValueError, match="sigma must be a finite number > 0") as err:
        mechanisms.create("fine", sigma=-1.0)
    assert not isinstance(err.value, mechanisms.PluginCodeError)


def test_builtin_mechanisms_are_not_guarded():
    from auditkit.mechanisms.additive import Gaussian

    assert not getattr(Gaussian.encode, "_guarded", False)
    mechanisms.preflight(mechanisms.create("gaussian"))  # nothing to check: a built-in's bugs keep their traceback


def test_a_plugin_module_that_registers_nothing_is_refused(tmp_path):
    path = tmp_path / "forgot.py"
    path.write_text(PLUGIN_HEAD.format(name="forgotten").replace("@mechanisms.register\n", ""))
    for _ in range(2):  # and again: it is not left half-imported
        with pytest.raises(mechanisms.PluginError) as err:
            mechanisms.load_plugins([str(path)])
        _one_line(err.value, f"plugin {str(path)!r} registered no mechanism (decorate its class with "
                             "@mechanisms.register)")
    assert "forgotten" not in mechanisms.names()


@pytest.mark.parametrize(("body", "message"), [
    ("    name = 'no-message-type'\n    summary = 's'\n    def encode(self, x, seed): ...\n"
     "    def decode(self, enc, seed): ...\n    def guarantee(self): ...\n",
     "mechanism 'no-message-type' must set message_type to the mechanisms.Message subclass its encode returns"),
    ("    name = 'no-decode'\n    summary = 's'\n    message_type = mechanisms.FloatMessage\n"
     "    def encode(self, x, seed): ...\n    def guarantee(self): ...\n",
     "mechanism 'no-decode' does not implement decode"),
])
def test_a_class_without_a_message_type_or_a_method_is_refused_at_registration(body, message):
    namespace: dict = {"mechanisms": mechanisms, "Mechanism": Mechanism}
    exec(f"class Bad(Mechanism):\n{body}", namespace)  # noqa: S102 -- a class body written as a plugin would
    with pytest.raises(ValueError, match=message):
        register(namespace["Bad"])
    assert namespace["Bad"].name not in mechanisms.names()
