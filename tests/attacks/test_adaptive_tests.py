"""The adaptive-test registry (``auditkit.attacks.adaptive_tests``): built-in tests registered by ``auditkit.attacks.targeted`` for the
mechanisms they target, a test registered the way a plugin registers one, and the shared argument checks.
The tests themselves are tested in ``tests/attacks/targeted``.
"""

import pytest
import torch

from auditkit import mechanisms
from auditkit.attacks.adaptive_tests import (
    adaptive_test,
    adaptive_tests_for,
    message_side_channel,
    registered_adaptive_tests,
    run_views,
)
from auditkit.attacks.targeted.cepam import cepam_normalisation
from auditkit.attacks.targeted.jopeq import jopeq_overload, jopeq_scale_side_channel
from auditkit.attacks.verdicts import VIOLATED


def test_registry_lists_tests_per_mechanism_and_refuses_bad_input():
    assert adaptive_tests_for("jopeq-t") == [jopeq_scale_side_channel, jopeq_overload]
    assert adaptive_tests_for("cepam-laplace") == [cepam_normalisation]
    assert adaptive_tests_for("gaussian") == []
    assert set(registered_adaptive_tests()) <= set(mechanisms.names())
    with pytest.raises(ValueError, match="mechanism_name must be a registered mechanism"):
        adaptive_tests_for("jopeq")
    with pytest.raises(ValueError, match="mechanism must be one of jopeq-laplace, jopeq-t for jopeq_overload"):
        jopeq_overload("jopeq-exact", trials=100)
    with pytest.raises(ValueError, match="trials must be an integer >= 20"):
        cepam_normalisation("cepam-gaussian", trials=10)
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\)"):
        jopeq_scale_side_channel("jopeq-laplace", trials=100, confidence=1.0)


def test_a_test_registered_like_a_plugin_runs_through_the_shared_runner():
    @adaptive_test("laplace")
    def leak(m, *, trials, confidence, seed):
        """A view that sees the update in clear (say, a debug log): a perfect test, so the claim is violated."""
        x0, x1 = torch.tensor([-0.5, 0.0]), torch.tensor([0.5, 0.0])
        in_clear = lambda x, seed: x.clone()  # noqa: E731
        return run_views("leak", m, "two inputs of the clip ball", [("output", m, x0, x1, True),
                                                                  ("in clear", in_clear, x0, x1, True)],
                         trials=trials, confidence=confidence, seed=seed, findings={}, note="")

    try:
        assert adaptive_tests_for("laplace") == [leak] and "laplace" in registered_adaptive_tests()
        result = leak(mechanisms.create("laplace", scale=1.0, clip=0.5, private_seed=0), trials=2000,
                      confidence=0.95, seed=0)
        output, clear = result.estimates
        assert result.claimed_epsilon == 1.0 and output.epsilon_lower_bound < 1.0  # the mechanism keeps its claim
        assert clear.epsilon_lower_bound == clear.max_certifiable > 1.0 and result.verdict == VIOLATED
        assert result.per_test_confidence == pytest.approx(0.975)
        with pytest.raises(ValueError, match="mechanism must be one of laplace for leak, got 'gaussian'"):
            leak("gaussian")
        with pytest.raises(ValueError, match="trials must be an integer >= 20"):
            leak("laplace", trials=5)
    finally:
        from auditkit.attacks import adaptive_tests

        adaptive_tests._REGISTRY.pop("laplace")
    assert adaptive_tests_for("laplace") == []


def test_message_side_channel_needs_a_side_value():
    with pytest.raises(ValueError, match="carries no side value"):
        message_side_channel(mechanisms.create("gaussian"))(torch.zeros(1, 3, dtype=torch.float64), 0)


@pytest.mark.parametrize("name", ["jopeq-laplace", "jopeq-t", "jopeq-exact"])
def test_declared_side_values_are_the_ones_parsed_from_each_encoded_message(name):
    """The message view reads a mechanism's declared side values in one call; they must equal, bit for bit, the
    side value parsed from the bytes of one encode per row (zero, tiny and huge norms included)."""
    m = mechanisms.create(name, private_seed=3)
    assert mechanisms.declared(m, "side_values")
    x = torch.randn(200, 18, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x[0], x[1], x[2] = 0.0, x[1] * 1e-30, x[2] * 1e30
    fast = message_side_channel(m)(x, 4).view(-1)
    parsed = []
    for i, row in enumerate(x):
        message = m.encode(row, mechanisms.derive_seed(4, i))
        parsed.append(type(message).from_bytes(message.to_bytes()).side_value)
    assert torch.equal(fast, torch.tensor(parsed, dtype=torch.float64))
