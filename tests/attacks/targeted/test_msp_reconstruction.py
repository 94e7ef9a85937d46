"""The adaptive server attack on model splitting: exact recovery of w_i, m_i and gamma from the transcript.

Tolerances: the uploads are float32 payloads, so the least squares is exact up to their rounding; the recovered
models are checked to 1e-6 relative (observed ~1e-8 .. 1e-7) and m_i exactly. The K_t = 1 split-support bound is
within O(1/P) of the true scale (P = 20_000: observed ~5e-5 relative error, checked to 1e-3).
"""

import pytest
import torch

from auditkit import mechanisms
import auditkit.mechanisms.msp  # noqa: F401  (registers msp, msp-laplace, mspdq)
from auditkit.attacks import first_residual_direction, reconstruct_from_split_support, reconstruct_msp
from auditkit.attacks.targeted.msp_reconstruction import pull_residuals
from auditkit.mechanisms.additive import clip_l1


def _models(clients=8, size=2000, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 0.05 * torch.randn(clients, size, generator=g, dtype=torch.float64)


def _relative_errors(estimate, truth):
    return (estimate - truth).norm(dim=1) / truth.norm(dim=1)


@pytest.mark.parametrize("start", ["split", "common"])
@pytest.mark.parametrize("compat", ["none", "paper004"])
@pytest.mark.parametrize("m_max", [1, 2, 4])
@pytest.mark.parametrize("rounds", [2, 3, 7])
def test_exact_reconstruction_once_there_are_two_consensus_rounds(start, compat, m_max, rounds):
    models = _models()
    mechanism = mechanisms.create("msp", private_seed=m_max + rounds, m_max=m_max, consensus_rounds=rounds,
                                  compat=compat, start=start)
    transcript = mechanism.run_consensus(models, 17)
    result = reconstruct_msp(transcript.public())  # the attack sees the server's view only
    assert _relative_errors(result.w_hat, models).max() < 1e-6
    if start == "common" and rounds == 2:
        # from a common start w[0] = alpha_i[0], so r[1] is parallel to r[0] and only gamma (1 + m) is
        # identified: w comes out exactly, m and gamma do not (a third round separates them)
        return
    assert torch.equal(result.m_hat, transcript.hidden.m.double()) and result.rounded.all()
    assert torch.allclose(result.gamma_hat, torch.full((8,), mechanism.gamma, dtype=torch.float64), rtol=1e-5)
    assert torch.allclose(result.S0_hat, transcript.hidden.S0, rtol=0, atol=1e-6)
    if m_max > 1:
        assert len(set(transcript.hidden.m.tolist())) > 1  # heterogeneous m_i, all recovered


def test_msp_laplace_noise_is_cancelled_by_the_later_uploads():
    g = torch.Generator().manual_seed(1)
    updates = 0.01 * torch.randn(6, 2000, generator=g, dtype=torch.float64)
    mechanism = mechanisms.create("msp-laplace", eps=1.0, clip=1.0, private_seed=2, consensus_rounds=3)
    models = mechanism.local_models(updates, torch.zeros(2000, dtype=torch.float64))
    assert torch.allclose(models, torch.stack([clip_l1(u, 1.0) for u in updates]))
    transcript = mechanism.run_consensus(models, 5)
    noise_to_signal = _relative_errors(transcript.alpha[0], models)
    assert noise_to_signal.min() > 1000  # alpha[0] alone: Laplace(2) noise on coordinates ~5e-4
    # Exact but for the float32 rounding of the noisy uploads (unit roundoff 6e-8 of |alpha| ~ 2): observed ~1e-8
    # of the noise-to-signal ratio, i.e. ~3e-5 relative error on w.
    assert (_relative_errors(reconstruct_msp(transcript).w_hat, models) < 1e-7 * noise_to_signal).all()


def test_mspdq_reconstruction_is_a_noisy_least_squares_improving_with_the_bits():
    models = _models(size=4000)
    errors = []
    for bits in (6, 10, 14, 18):
        mechanism = mechanisms.create("mspdq", private_seed=3, bits=bits, support=0.5, consensus_rounds=6)
        transcript = mechanism.run_consensus(models, 9)
        assert transcript.overloads == 0
        result = reconstruct_msp(transcript)
        assert torch.isfinite(result.w_hat).all()
        errors.append(_relative_errors(result.w_hat, models).median().item())
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-3 and errors[0] > 10 * errors[-1]


@pytest.mark.parametrize("start", ["split", "common"])
def test_one_consensus_round_reveals_the_direction_and_the_split_law_the_scale(start):
    """From a common start (004 footnote 5) the scale comes from each client's own recorded split: bounded on both
    sides; from the client's own split, bounded above only, where the true scale attains the cap."""
    models = _models(size=20_000)
    for m_max in (1, 3):
        mechanism = mechanisms.create("msp", private_seed=4, m_max=m_max, consensus_rounds=1, start=start)
        transcript = mechanism.run_consensus(models, 6)
        with pytest.raises(ValueError, match="needs K_t >= 2 consensus rounds, got 1"):
            reconstruct_msp(transcript)
        direction = first_residual_direction(transcript)
        truth = models - transcript.alpha[0]
        cosine = (direction * truth).sum(1) / truth.norm(dim=1)
        assert cosine.min() > 1 - 1e-6  # r[0] = gamma (1 + m) (w - alpha[0]), whatever m
        w_hat = reconstruct_from_split_support(transcript, 0.5, 1.5)  # U[eps_s w, (2 - eps_s) w], eps_s = 0.5
        assert _relative_errors(w_hat, models).max() < 1e-3
    with pytest.raises(ValueError, match="0 < low < 1 < high"):
        reconstruct_from_split_support(transcript, 0.5, 1.0)


def test_pull_residuals_are_the_private_pull():
    models = _models(clients=4, size=300)
    transcript = mechanisms.create("msp", private_seed=5, m_max=2, consensus_rounds=2).run_consensus(models, 1)
    r0 = pull_residuals(transcript)[0]
    hidden = transcript.hidden
    expected = hidden.gamma * (hidden.S0 - hidden.m[:, None] * transcript.alpha[0])
    assert torch.allclose(r0, expected, rtol=0, atol=1e-7)
