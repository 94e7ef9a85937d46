"""Every call into a plugin's mechanism code is bounded in time (issue 39): a plugin stuck in a loop ends with one
``PluginCodeError`` line naming the plugin and the method, and the bound leaves the program's own alarm, other
threads and the built-in mechanisms alone.

A "stuck" method here spins until a deadline far past the bound and then returns: should the bound fail, the call
returns and the test fails instead of hanging."""
import signal
import sys
import threading
import time

import pytest
import torch

from auditkit import mechanisms
from auditkit.mechanisms import PluginCodeError, registry

PLUGIN = '''
import time

import numpy as np
from auditkit import mechanisms
from auditkit.mechanisms import FloatMessage, Mechanism, PrivacyGuarantee
from auditkit.mechanisms.base import as_update

SPIN = {{"encode": 0.0, "guarantee": 0.0}}  # seconds each method spins; set by the tests


def spin(seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            pass
        except Exception:  # a plugin that swallows every exception does not swallow the bound
            pass


@mechanisms.register
class Slow(Mechanism):
    name = "{name}"
    summary = "spins as told"
    message_type = FloatMessage
    params_spec = ()

    def encode(self, x, seed):
        spin(SPIN["encode"])
        if SPIN.get("nested"):
            self.guarantee()
        return FloatMessage(as_update(x).numpy().astype(np.float32))

    def decode(self, enc, seed):
        return enc.to_tensor()

    def guarantee(self):
        spin(SPIN["guarantee"])
        return PrivacyGuarantee(1.0, 1e-5, "replace-one")
'''
FAR = 30.0  # seconds a stuck method spins: far past any bound below


@pytest.fixture
def slow(tmp_path):
    """(mechanism, its SPIN dict) of a plugin loaded from a file; unregistered after, and the bound restored."""
    path = tmp_path / "slow_plugin.py"
    path.write_text(PLUGIN.format(name="slow-plugin"))
    before = registry.plugin_timeout()
    mechanisms.load_plugins([str(path)])
    yield mechanisms.create("slow-plugin"), sys.modules["slow_plugin"].SPIN
    registry.set_plugin_timeout(before)
    registry._REGISTRY.pop("slow-plugin", None)
    registry._ORIGIN.pop("slow-plugin", None)
    sys.modules.pop("slow_plugin", None)


def test_a_stuck_encode_ends_with_one_line_naming_plugin_and_method(slow, tmp_path):
    mechanism, spin = slow
    spin["encode"] = FAR
    registry.set_plugin_timeout(0.5)
    started = time.monotonic()
    with pytest.raises(PluginCodeError) as err:
        mechanisms.preflight(mechanism)
    assert str(err.value) == (f"plugin {str(tmp_path / 'slow_plugin.py')!r}: slow-plugin.encode() did not return "
                              "within 0.5 s (raise --plugin-timeout; 0 lifts the bound)")
    assert time.monotonic() - started < FAR / 2  # stopped by the bound, not by the spin's own deadline
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # no alarm left behind


def test_a_stuck_call_inside_another_is_reported_as_the_outer_call(slow):
    """The outer call's alarm covers the calls it makes (they are not bounded again, each with its own bound)."""
    mechanism, spin = slow
    spin.update(guarantee=FAR, nested=True)
    registry.set_plugin_timeout(0.5)
    with pytest.raises(PluginCodeError, match=r"slow-plugin\.encode\(\) did not return within 0\.5 s"):
        mechanism.encode(torch.ones(4), 0)


def test_a_call_within_the_bound_returns_and_the_bound_can_be_lifted(slow):
    mechanism, spin = slow
    spin["guarantee"] = 0.8
    registry.set_plugin_timeout(5)
    assert mechanism.guarantee().epsilon == 1.0
    registry.set_plugin_timeout(0)  # no bound: the same spin past 0.5 s returns
    assert registry.plugin_timeout() is None
    assert mechanism.guarantee().epsilon == 1.0


def test_the_programs_own_alarm_and_handler_are_left_alone(slow):
    mechanism, spin = slow
    fired = []

    def own(signum, frame):
        fired.append(signum)

    previous = signal.signal(signal.SIGALRM, own)
    try:
        registry.set_plugin_timeout(0.2)
        assert mechanism.guarantee().epsilon == 1.0
        assert signal.getsignal(signal.SIGALRM) is own  # put back after a call
        spin["guarantee"] = 0.8
        with pytest.raises(PluginCodeError, match="did not return within 0.2 s"):
            mechanism.guarantee()
        assert signal.getsignal(signal.SIGALRM) is own and fired == []  # and after a call it stopped
        signal.setitimer(signal.ITIMER_REAL, 100)  # the program's alarm is armed: the bound is left out
        assert mechanism.guarantee().epsilon == 1.0
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 90 and fired == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_call_outside_the_main_thread_is_not_bounded(slow):
    mechanism, spin = slow
    spin["guarantee"] = 0.8
    registry.set_plugin_timeout(0.2)
    results = []
    thread = threading.Thread(target=lambda: results.append(mechanism.guarantee().epsilon))
    thread.start()
    thread.join(timeout=FAR)
    assert results == [1.0]


def test_built_in_mechanisms_are_not_wrapped():
    assert not getattr(type(mechanisms.create("gaussian")).encode, "_guarded", False)


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf"), True, "5"])
def test_a_bound_that_is_not_a_finite_number_of_seconds_is_refused(seconds):
    before = registry.plugin_timeout()
    with pytest.raises(ValueError, match=r"^the plugin timeout must be a finite number of seconds >= 0 \(0: no "
                                         r"bound\)"):
        registry.set_plugin_timeout(seconds)
    assert registry.plugin_timeout() == before
