"""Every command that takes a mechanism accepts every registered mechanism's every parameter, and the value reaches
the mechanism that runs: each (command, mechanism, parameter) is invoked with a valid non-default value, and the
object the command hands on (the config's mechanism, the configured mechanism) is caught where the work would
start and checked -- not a substring of --help. The flags are generated from the ``Param`` specs, so a parameter
added to any mechanism is covered here without an edit.
"""

import math

import pytest
from click.testing import CliRunner

from auditkit import mechanisms
from auditkit.cli import app

APP = app.build_cli()
COMMANDS = ("train", "audit", "account", "attack", "distinguish")


class Reached(Exception):
    """Raised where the command's work would start, carrying the mechanism it was about to run."""

    def __init__(self, mechanism):
        super().__init__(repr(mechanism))
        self.mechanism = mechanism


def _candidates(spec):
    if spec.type is str:
        return [c for c in (spec.choices or ()) if c != spec.default]
    if spec.type is int:
        return [spec.default + 1, spec.default - 1, 2, 3, 1]
    base = spec.default if spec.default else 1.0
    return [base * 2, base / 2, base + 1, 0.5, 1.0, 2.0, 3.0, 0.25, 1e-3]


def _accepted(name, params):
    try:
        mechanisms.create(name, **params)
    except ValueError:
        return False
    return True


def non_default(name, spec):
    """A value of ``spec`` other than its default that mechanism ``name`` accepts, on its own or with one other
    parameter changed too (jopeq-exact's n = 2 needs noise = t): (value, the other parameters)."""
    others = [o for o in mechanisms.mechanism_class(name).params_spec if o.name != spec.name]
    for value in _candidates(spec):
        if value == spec.default or not _accepted(name, {spec.name: value}):
            continue
        return value, {}
    for value in _candidates(spec):
        for other in others:
            for companion in _candidates(other):
                if _accepted(name, {spec.name: value, other.name: companion}):
                    return value, {other.name: companion}
    pytest.fail(f"no valid non-default value found for {name}.{spec.name}")


CASES = [(command, name, spec.name) for command in COMMANDS for name in mechanisms.names()
         for spec in mechanisms.mechanism_class(name).params_spec]


@pytest.fixture
def catch(monkeypatch):
    """Stop each command where its work starts, raising ``Reached`` with the mechanism it would run."""
    import auditkit.results
    import auditkit.stages.inversion
    import auditkit.stages.train
    from auditkit.cli import audit, distinguish, train

    def experiment(config, **kwargs):
        raise Reached(auditkit.stages.train.build_mechanism(config))

    def audit_stopped(config, **kwargs):
        raise Reached(auditkit.stages.train.build_mechanism(config))

    def accounting_entry(mechanism, *args, **kwargs):
        raise Reached(mechanism)

    def run_inversion(attack, *, mechanism, params, **kwargs):
        raise Reached(mechanisms.create(mechanism, **params))

    def run_distinguish(mechanism, **kwargs):
        raise Reached(mechanism)

    monkeypatch.setattr(train, "Experiment", experiment)
    monkeypatch.setattr(audit, "Audit", audit_stopped)
    monkeypatch.setattr(auditkit.results, "accounting_entry", accounting_entry)
    monkeypatch.setattr(auditkit.stages.inversion, "run_inversion", run_inversion)
    monkeypatch.setattr(distinguish, "run_distinguish", run_distinguish)


def invoke(command, name, flag, value, tmp_path, **others):
    args = {"train": ["train", "--mechanism", name], "audit": ["audit", "--mechanism", name],
            "account": ["account", name], "attack": ["attack", "idlg", "--mechanism", name],
            "distinguish": ["distinguish", name]}[command]
    flags = [word for key, v in {flag: value, **others}.items() for word in (f"--{key.replace('_', '-')}", str(v))]
    return CliRunner().invoke(APP, [*args, *flags, "--out", str(tmp_path / "o")])


@pytest.mark.parametrize(("command", "name", "param"), CASES)
def test_every_parameter_of_every_mechanism_reaches_it_from_every_command(catch, tmp_path, command, name, param):
    spec = next(s for s in mechanisms.mechanism_class(name).params_spec if s.name == param)
    value, others = non_default(name, spec)
    result = invoke(command, name, param, value, tmp_path, **others)
    assert isinstance(result.exception, Reached), (result.output, result.exception)
    reached = result.exception.mechanism
    assert reached.name == name and type(reached.params[param]) is spec.type
    if spec.type is float:
        assert math.isclose(reached.params[param], value, rel_tol=1e-12)  # the word "0.1" is the float 0.1
    else:
        assert reached.params[param] == value
    assert all(reached.params[k] == v for k, v in others.items())
    assert not (tmp_path / "o").exists()  # caught before anything is written


def test_a_parameter_the_mechanism_lacks_is_refused_by_name(tmp_path):
    for command in COMMANDS:
        result = invoke(command, "gaussian", "bits", 4, tmp_path)
        assert result.exit_code == 2, (command, result.output)
        assert "--bits is not a parameter of mechanism 'gaussian'; its parameters: --sigma, --clip, --delta" in (
            result.output + result.stderr if hasattr(result, "stderr") else result.output)


def test_a_refused_value_names_the_parameter_and_what_is_allowed(tmp_path):
    result = CliRunner().invoke(APP, ["distinguish", "dpsq", "--range", "sideways"])
    assert result.exit_code == 2 and "range must be one of literal, adaptive, got 'sideways'" in result.output
    result = CliRunner().invoke(APP, ["account", "jopeq-t", "--bits", "2.5"])
    assert result.exit_code == 2 and "bits must be an integer in 1..12, got '2.5'" in result.output


def test_each_flag_names_every_mechanism_with_the_parameter_and_its_constraint():
    from auditkit.cli.mechanism_flags import mechanism_flags

    flags = {f.name: f for f in mechanism_flags()}
    every = {spec.name for n in mechanisms.names() for spec in mechanisms.mechanism_class(n).params_spec}
    assert set(flags) == every
    rounds = flags["consensus_rounds"]
    assert rounds.flag == "--consensus-rounds" and rounds.metavar == "INTEGER"
    assert rounds.help.startswith("msp, msp-laplace, mspdq: K_t: consensus rounds per learning round")
    assert "(an integer in 1..1000; default 10)" in rounds.help
    assert flags["range"].metavar == "[adaptive|literal]"
    help_text = CliRunner().invoke(APP, ["distinguish", "--help"]).output
    assert "--consensus-rounds" in help_text and "Mechanism parameters" in help_text
