"""DP-SGD's example-level claim (auditkit.accounting.dp_sgd) against Opacus's accountants called directly."""
import pytest
from opacus.accountants import PRVAccountant, RDPAccountant

from auditkit.accounting.dp_sgd import dp_sgd_epsilon, example_level_claim


def _opacus(accountant, z: float, q: float, steps: int, delta: float) -> float:
    accountant.history = [(z, q, steps)]
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize(("accountant", "expected"), [
    ("opacus-rdp", 4.4430), ("opacus-prv", 3.9719), ("dp_accounting-rdp", 4.4436), ("dp_accounting-pld", 3.9617),
])
def test_the_reference_point(accountant, expected):
    """z = 1.1, q = 0.05, 200 steps, delta = 1e-5 (the field's reference: RDP 4.44, PRV 3.97), to 1e-3."""
    composed = dp_sgd_epsilon(1.1, 0.05, 200, delta=1e-5, accountant=accountant)
    print(f"DP-SGD z 1.1, q 0.05, 200 steps, delta 1e-5: {accountant} eps = {composed.epsilon:.4f}")
    assert composed.epsilon == pytest.approx(expected, abs=1e-3)
    assert composed.accountant == accountant and "PoissonSampledDpEvent(sampling_probability=0.05" in composed.event


@pytest.mark.parametrize(("z", "q", "steps"), [(1.1, 0.05, 200), (1.0, 0.02, 750), (1.1, 32 / 500, 200)])
def test_equals_opacus_accountants_with_the_same_history(z, q, steps):
    assert dp_sgd_epsilon(z, q, steps, delta=1e-5, accountant="opacus-rdp").epsilon == _opacus(
        RDPAccountant(), z, q, steps, 1e-5)
    assert dp_sgd_epsilon(z, q, steps, delta=1e-5, accountant="opacus-prv").epsilon == _opacus(
        PRVAccountant(), z, q, steps, 1e-5)


def test_the_claim_is_at_the_smallest_client_over_rounds_times_tau():
    """Clients of 800, 500 and 640 examples, B = 32: the worst q is 32 / 500 (client 1); 20 rounds of tau = 10 are
    200 steps, so the claim is Opacus's at (1.1, 0.064, 200): 5.7522 (RDP)."""
    claim = example_level_claim(1.1, 0.5, batch_size=32, client_sizes=[800, 500, 640], rounds=20, tau=10,
                                delta=1e-5, accountant="opacus-rdp")
    assert (claim.client, claim.client_examples, claim.steps) == (1, 500, 200)
    assert claim.sample_rate == 32 / 500
    assert claim.epsilon == _opacus(RDPAccountant(), 1.1, 32 / 500, 200, 1e-5) == pytest.approx(5.7522, abs=1e-3)
    entry = claim.to_dict()
    assert entry["max_grad_norm"] == 0.5 and entry["accountant"] == "opacus-rdp" and "client-level" in entry["note"]
    larger = example_level_claim(1.1, 0.5, batch_size=32, client_sizes=[800, 640], rounds=20, tau=10, delta=1e-5,
                                 accountant="opacus-rdp")
    assert larger.epsilon < claim.epsilon  # a smaller rate, a smaller epsilon: the worst client decides


def test_a_batch_larger_than_a_client_is_refused():
    with pytest.raises(ValueError, match="batch_size must be at most every client's example count; got 60 with "
                                         "client sizes down to 50"):
        example_level_claim(1.0, 1.0, batch_size=60, client_sizes=[80, 50], rounds=1, tau=1, delta=1e-5)
