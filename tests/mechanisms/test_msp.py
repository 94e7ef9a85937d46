"""Model splitting (paper 004): the split, the consensus, its invariant and limit, messages, bits and claims.

Tolerances: the sum invariant is exact algebra, checked to 1e-12 relative (float64 rounding over <= 1000 steps).
With m_i = 1 the mean over clients of alpha[K] - w obeys mean(alpha[K]) - v = prod_{k<K} (1 - 2 gamma/(k+1))
(mean(alpha[0]) - v) exactly; the aggregate is the mean of the float32 uploads, so the identity holds to 1e-6
relative. Statistical checks use n = 200_000 draws and 5 standard errors (or KS p > 0.01) with fixed seeds.
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from auditkit import mechanisms
from auditkit.mechanisms.guarantee import REPLACE_ONE
import auditkit.mechanisms.msp  # noqa: F401  (registers msp, msp-laplace, mspdq)
from auditkit.mechanisms.additive import clip_l1
from auditkit.mechanisms.msp import (
    TRANSCRIPT_FLAG,
    MSPDQMessage,
    consensus_limit,
    consensus_step,
    dequantize,
    stochastic_round,
    weight_bound,
)
from auditkit.mechanisms.randomness import generator

N = 200_000
NAMES = ["msp", "msp-laplace", "mspdq"]


def _models(clients=8, size=400, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 0.1 * torch.randn(clients, size, generator=g, dtype=torch.float64)


def test_gamma_defaults_to_a_stable_weight_and_is_validated():
    assert weight_bound(0.5) == pytest.approx(1 / 3)
    assert mechanisms.create("msp").gamma == pytest.approx(0.3)
    assert mechanisms.create("msp", m_max=2).gamma == pytest.approx(0.15)
    with pytest.raises(ValueError) as err:
        mechanisms.create("msp", gamma=0.4)
    assert str(err.value).startswith("gamma must satisfy m_max * gamma < (1 - eps_c)/(2 - eps_c) = 0.333333")
    assert "got gamma=0.4 with m_max=1" in str(err.value)
    with pytest.raises(ValueError, match="m_max=2"):
        mechanisms.create("mspdq", gamma=0.3, m_max=2)  # sum_n a_n = 0.6 > 1/3
    with pytest.raises(ValueError, match="eps_c must be a number in \\(0, 1\\)"):
        mechanisms.create("msp", eps_c=1.0)
    with pytest.raises(ValueError, match="compat must be one of none, paper004"):
        mechanisms.create("msp", compat="biased")
    with pytest.raises(ValueError, match="parameter 'split' of mechanism 'msp' was renamed to 'compat'"):
        mechanisms.create("msp", split="paper004")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("m", [1, 3])
def test_split_parts_sum_to_one_plus_m_times_the_model(name, m):
    w = _models(1, 1000)[0]
    alpha0, betas = mechanisms.create(name, private_seed=1).split(w, m, generator(3, "split"))
    assert betas.shape == (m, 1000) and alpha0.dtype == torch.float64
    assert torch.allclose(alpha0 + betas.sum(0), (1 + m) * w, rtol=0, atol=1e-15)


@pytest.mark.parametrize(("compat", "m", "mean_ratio"), [("none", 1, 1.0), ("none", 3, 1.0),
                                                          ("paper004", 1, 1.0), ("paper004", 3, 2.0)])
def test_visible_part_is_uniform_on_the_split_interval(compat, m, mean_ratio):
    eps_s = 0.3
    w = torch.linspace(-1, 1, N, dtype=torch.float64)
    w = w[w != 0]
    alpha0, _ = mechanisms.create("msp", eps_s=eps_s, compat=compat).split(w, m, generator(5, "split"))
    ratio = (alpha0 / w).numpy()  # u ~ U[eps_s, high] with high = 2 - eps_s or 1 + m - eps_s
    high = 2 - eps_s if compat == "none" else 1 + m - eps_s
    assert abs(ratio.mean() - mean_ratio) < 5 * (high - eps_s) / math.sqrt(12 * ratio.size)
    assert stats.kstest(ratio, "uniform", args=(eps_s, high - eps_s)).pvalue > 0.01


def test_consensus_step_keeps_the_sum_invariant_whatever_is_sent():
    models, m = _models(), torch.tensor([1, 2, 3, 1, 2, 3, 1, 4])
    g = torch.Generator().manual_seed(1)
    alpha = models * (0.5 + torch.rand(models.shape, generator=g, dtype=torch.float64))
    invisible = (1 + m[:, None]) * models - alpha
    total = (alpha + invisible).sum(0)
    assert torch.allclose(total, ((1 + m[:, None]) * models).sum(0), rtol=1e-14, atol=0)
    for k in range(200):
        # Any decoded value q_i (here a noisy one) keeps sum_i (w[k] - q_i) = 0, hence eq. (5).
        sent = alpha + 0.01 * torch.randn(alpha.shape, generator=g, dtype=torch.float64)
        alpha, invisible = consensus_step(alpha, invisible, sent, m, sent.mean(0), 0.07 / (k + 1), 0.5)
        err = ((alpha + invisible).sum(0) - total).abs().max() / total.abs().max()
        assert err < 1e-12


def test_with_m_one_the_aggregate_tends_to_the_fedavg_mean_at_the_predicted_rate():
    models = 1.0 + _models()  # model-sized values, not update-sized
    fedavg = models.mean(0)
    assert torch.allclose(consensus_limit(models, torch.ones(8, dtype=torch.long)), fedavg, rtol=1e-15)
    gaps = []
    for rounds in (1, 4, 16, 64, 256):
        transcript = mechanisms.create("msp", private_seed=2, consensus_rounds=rounds).run_consensus(models, 7)
        first = transcript.alpha[0].mean(0)
        decay = math.prod(1 - 2 * 0.3 / (k + 1) for k in range(rounds))
        expected = fedavg + decay * (first - fedavg)  # the split is the same for every K (same keys)
        assert torch.allclose(transcript.aggregate, expected, rtol=1e-6, atol=0)
        gaps.append(((transcript.aggregate - fedavg).norm() / (first - fedavg).norm()).item())
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 0.05  # ~ K^-0.6: slow, but it gets there


def test_heterogeneous_m_converge_to_the_weighted_mean_not_fedavg():
    g = torch.Generator().manual_seed(3)
    models = torch.arange(1.0, 7.0, dtype=torch.float64)[:, None] + 0.05 * torch.randn(6, 50, generator=g,
                                                                                         dtype=torch.float64)
    m = torch.tensor([1, 2, 1, 2, 1, 2])
    limit, fedavg = consensus_limit(models, m), models.mean(0)
    assert torch.allclose(limit, (2 * models[::2].sum(0) + 3 * models[1::2].sum(0)) / 15, rtol=1e-14)
    bias = (limit - fedavg).norm().item()
    assert bias > 0.025 * fedavg.norm().item()  # the (1 + m_i)-weighting: 3.6 instead of 3.5 per coordinate
    gaps = []
    for rounds in (10, 100, 1000):
        mechanism = mechanisms.create("msp", private_seed=4, m_max=2, consensus_rounds=rounds, start="split")
        gaps.append((mechanism.run_consensus(models, 1, m=m).aggregate - limit).norm().item())
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < bias / 3


def test_the_common_start_is_the_first_clients_uploaded_split_and_keeps_the_invariant():
    """004 footnote 5: the server broadcasts one uploaded alpha[0] and every client takes it as its own; the
    invisible parts absorb the difference, so eq. (5) and the consensus limit are unchanged. From one client's
    model the visible parts have further to travel when the clients' models differ: the gap closes more slowly."""
    g = torch.Generator().manual_seed(3)
    models = torch.arange(1.0, 7.0, dtype=torch.float64)[:, None] + 0.05 * torch.randn(6, 50, generator=g,
                                                                                         dtype=torch.float64)
    m = torch.tensor([1, 2, 1, 2, 1, 2])
    common = mechanisms.create("msp", private_seed=4, m_max=2, consensus_rounds=1000)  # the default start
    own = mechanisms.create("msp", private_seed=4, m_max=2, consensus_rounds=1000, start="split")
    transcript, reference = common.run_consensus(models, 1, m=m), own.run_consensus(models, 1, m=m)
    assert torch.equal(transcript.splits, reference.alpha[0])  # every client uploaded its own split...
    assert torch.equal(transcript.alpha[0], reference.alpha[0][0].expand(6, -1))  # ...and started from client 0's
    hidden = transcript.hidden
    assert torch.allclose(transcript.alpha[0] + hidden.S0, (1.0 + m.double())[:, None] * models, rtol=1e-14)
    limit = consensus_limit(models, m)
    gap, reference_gap = ((t.aggregate - limit).norm().item() for t in (transcript, reference))
    assert reference_gap < gap < (transcript.alpha[0].mean(0) - limit).norm().item()  # converging, more slowly
    assert reference.splits is None


def test_run_consensus_records_the_public_transcript_and_the_hidden_part():
    models = _models()
    mechanism = mechanisms.create("msp", private_seed=5, m_max=3, gamma=0.1, consensus_rounds=6)
    transcript = mechanism.run_consensus(models, 11, clients=[3, 1, 4, 5, 9, 2, 6, 8])
    assert transcript.alpha.shape == (7, 8, 400) and transcript.broadcast.shape == (6, 400)
    assert transcript.uploads == 7 and transcript.rounds == 6 and transcript.eps_c == 0.5
    assert transcript.clients == [3, 1, 4, 5, 9, 2, 6, 8]
    assert transcript.bits == [7 * 8 * (5 + 4 * 400)] * 8  # K + 1 float32 messages per client
    assert torch.equal(transcript.broadcast, transcript.alpha[:-1].mean(1))
    assert torch.equal(transcript.aggregate, transcript.alpha[-1].mean(0))
    assert torch.equal(transcript.alpha, transcript.alpha.float().double())  # the decoded float32 payloads
    hidden = transcript.hidden
    assert hidden.gamma == 0.1 and set(hidden.m.tolist()) <= {1, 2, 3} and len(set(hidden.m.tolist())) > 1
    assert torch.allclose(transcript.alpha[0] + hidden.S0, (1 + hidden.m[:, None]) * models, atol=1e-7)
    assert transcript.public().hidden is None and transcript.public().alpha is transcript.alpha
    again = mechanism.run_consensus(models, 11)
    assert torch.equal(again.alpha, transcript.alpha) and torch.equal(again.hidden.m, hidden.m)
    other = mechanisms.create("msp", private_seed=6, m_max=3, gamma=0.1, consensus_rounds=6).run_consensus(models, 11)
    assert not torch.equal(other.alpha[0], transcript.alpha[0])  # the split is client-private


@pytest.mark.parametrize("name", NAMES)
def test_encode_is_the_first_upload_of_the_protocol(name):
    mechanism = mechanisms.create(name, private_seed=7, consensus_rounds=2)
    x = _models(1, 3000)[0].float().double()  # float32 values, so x.float() below is the same input
    message = mechanism.encode(x, 99)
    first = mechanism.run_consensus(x[None], [99]).alpha[0, 0]
    if name == "msp-laplace":  # the protocol splits the clipped update: local_models clips, run_consensus does not
        first = mechanism.run_consensus(clip_l1(x, 1.0)[None], [99]).alpha[0, 0]
    decoded = mechanism.decode(type(message).from_bytes(message.to_bytes()), 99)
    assert decoded.dtype == torch.float32 and torch.equal(decoded, first.float())
    assert torch.equal(mechanism(x.float(), 99), decoded)  # float32 input accepted too


def test_message_sizes_are_the_real_bits():
    x = mechanisms.reference_update()
    assert mechanisms.create("msp", private_seed=0).encode(x, 1).num_bits == 8 * (5 + 4 * 10_000)
    for bits in (1, 4, 7, 12, 32):
        message = mechanisms.create("mspdq", bits=bits, private_seed=0).encode(x, 1)
        assert message.num_bits == 8 * (10 + math.ceil(10_000 * bits / 8))
    info = {name: mechanisms.describe(name) for name in NAMES}
    assert info["mspdq"].bits_per_coordinate == pytest.approx(8.008)
    assert info["msp"].bits_per_coordinate == info["msp-laplace"].bits_per_coordinate == pytest.approx(32.004)


def test_mspdq_message_round_trip_and_validation():
    indices = np.array([0, 5, 7, 3, 0, 1, 6], dtype=np.int64)
    message = MSPDQMessage(indices, 3, 2)
    data = message.to_bytes()
    assert len(data) == 10 + 3 and MSPDQMessage.from_bytes(data) == message
    assert np.array_equal(MSPDQMessage.from_bytes(data).indices, indices)
    assert MSPDQMessage.from_bytes(data).overloads == 2
    with pytest.raises(ValueError, match="expected 3 bytes"):
        MSPDQMessage.from_bytes(data[:-1])
    with pytest.raises(ValueError, match="wrong message tag"):
        MSPDQMessage.from_bytes(bytes([1]) + data[1:])
    with pytest.raises(ValueError, match="indices must lie in"):
        MSPDQMessage(np.array([8]), 3, 0)
    with pytest.raises(TypeError, match="mspdq decodes MSPDQMessage"):
        mechanisms.create("mspdq").decode(mechanisms.create("msp").encode(torch.zeros(3), 0), 0)


def test_stochastic_rounding_is_unbiased_and_counts_overloads():
    values = torch.full((N,), 0.3137, dtype=torch.float64)
    uniform = torch.rand(N, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    indices, overloads = stochastic_round(values, -1.0, 2 / 15, 16, uniform)
    knots = dequantize(indices, -1.0, 2 / 15)
    assert overloads == 0 and set(indices.unique().tolist()) == {9, 10}  # the two neighbouring knots
    assert abs(knots.mean().item() - 0.3137) < 5 * (1 / 15) / math.sqrt(N)
    _, clamped = stochastic_round(torch.tensor([-2.0, 0.0, 1.5]), -1.0, 2 / 15, 16, torch.zeros(3))
    assert clamped == 2


def test_mspdq_intervals_shrink_and_the_knot_start_is_the_public_knot():
    mechanism = mechanisms.create("mspdq", private_seed=8, bits=6, consensus_rounds=5, start="knot")
    assert mechanism.pi == 16.0 and mechanism.common_knot == pytest.approx(-1 / 63)
    transcript = mechanism.run_consensus(_models(), 3)
    expected = torch.tensor([2.0] + [16.0 * 0.3 / (k + 1) for k in range(5)], dtype=torch.float64)
    assert torch.allclose(transcript.widths, expected) and transcript.quantizer_bits == 6
    assert torch.all(transcript.alpha[0] == mechanism.common_knot)  # Algorithm 1: every client, the same knot
    steps = transcript.alpha.diff(dim=0).abs().amax(dim=(1, 2))
    assert torch.all(steps <= transcript.widths[1:] / 2 + 1e-12) and transcript.overloads == 0
    assert transcript.bits == [6 * 8 * (10 + 400 * 6 // 8)] * 8
    split = mechanisms.create("mspdq", private_seed=8, start="split").run_consensus(_models(), 3)
    # alpha[0] ~ U[0.5 w, 1.5 w], then rounded to a knot of [-1, 1] (spacing 2/255)
    assert torch.all((split.alpha[0] - _models()).abs() <= 0.5 * _models().abs() + 2 / 255)
    # the default (footnote 5): every client starts from the first client's quantized split, a knot vector
    common = mechanisms.create("mspdq", private_seed=8).run_consensus(_models(), 3)
    assert torch.equal(common.splits, split.alpha[0]) and torch.equal(common.alpha[0], split.alpha[0][0].expand(8, -1))


def test_mspdq_aggregate_converges_to_the_exact_limit():
    """The client keeps its exact alpha and uses its sent knot q in eps_c (w - q) (21a): eq. (5) still holds, so the
    consensus limit is the exact weighted mean although every upload is quantized."""
    models, m = _models(), torch.tensor([1, 1, 2, 2, 1, 1, 2, 2])
    mechanism = mechanisms.create("mspdq", private_seed=9, m_max=2, bits=4, consensus_rounds=1000)
    transcript = mechanism.run_consensus(models, 5, m=m)
    limit = consensus_limit(models, m)
    # Quantized uploads only add noise that shrinks with the interval: the aggregate still converges.
    assert (transcript.aggregate - limit).norm() < 0.1 * (transcript.alpha[1].mean(0) - limit).norm()


def test_msp_laplace_first_upload_is_clipped_update_plus_laplace_noise():
    g = torch.Generator().manual_seed(10)
    x = 3.0 * torch.randn(N, generator=g, dtype=torch.float64)  # l1 norm >> clip: clipped first
    mechanism = mechanisms.create("msp-laplace", eps=4.0, clip=0.5, private_seed=1)
    assert mechanism.scale == 0.25
    noise = (mechanism.first_upload(x, 3) - clip_l1(x, 0.5)).numpy()
    assert abs(noise.mean()) < 5 * math.sqrt(2) * 0.25 / math.sqrt(N)
    assert noise.var() == pytest.approx(2 * 0.25**2, rel=0.02)  # kurtosis 6: sd of the variance ~0.5%
    assert stats.kstest(noise, "laplace", args=(0, 0.25)).pvalue > 0.01


def test_guarantees():
    plain = mechanisms.create("msp").guarantee()
    assert plain.epsilon is None and plain.flags == {"no-privacy", TRANSCRIPT_FLAG}
    assert any("Theorem 1" in c and "guaranteed accuracy" in c for c in plain.caveats)
    lap = mechanisms.create("msp-laplace", eps=2.0, clip=0.5).guarantee()
    assert lap.epsilon == 2.0 and lap.delta == 0.0 and lap.relation is REPLACE_ONE
    assert lap.scope == "the first upload alpha_0 only" and lap.flags == {TRANSCRIPT_FLAG}
    assert lap.summary().startswith("(eps=2, delta=0)-DP for the first upload alpha_0 only")
    dq = mechanisms.create("mspdq", bits=8, consensus_rounds=10)
    claim = dq.guarantee()
    assert claim.epsilon is None and TRANSCRIPT_FLAG in claim.flags
    assert any("Proposition 4" in c and "reported, not claimed" in c for c in claim.caveats)
    spacing = dq.pi * dq.gamma / 255  # knot spacing at k = 0
    assert dq.proposition4_delta(spacing / 2, 0) == pytest.approx(0.5)
    assert dq.proposition4_delta(spacing / 2, 9) == 1.0  # the interval shrank 10x: capped at 1
    for name in NAMES:
        assert mechanisms.create(name).protocol == "consensus"


@pytest.mark.parametrize("name, params", [
    ("msp", {"compat": "paper004", "m_max": 4}),
    ("mspdq", {"compat": "paper004", "m_max": 4, "start": "split", "bits": 4}),
    ("mspdq", {}),
])
def test_the_batch_sampler_is_the_first_upload_code_on_a_batch(name, params):
    """count = 1 reproduces one call exactly; a batch draws one hidden m per row, shared by its coordinates: the
    ratios r_j = alpha_0j / w_j of one row are correlated through m. With eps_s = 1/2, r | m ~ U[1/2, m + 1/2], so
    Cov(r_1, r_2) = Var((1 + m)/2) = 1.25/4 and Var r = 1.25/4 + E[m^2]/12 = 0.9375: correlation 1/3."""
    m = mechanisms.create(name, private_seed=9, **params)
    x = torch.tensor([0.4, -0.3, 0.1, 0.2], dtype=torch.float64)
    for seed in range(6):
        assert torch.equal(m.batch_sampling().sample(x, 1, seed)[0], m(x, seed).to(torch.float64))
    if name == "msp":
        ratios = (m.first_uploads(x, 20_000, 0) / x).numpy()
        assert ratios.min() >= 0.5 - 1e-6 and ratios.max() <= 4.5 + 1e-6
        assert np.corrcoef(ratios[:, 0], ratios[:, 1])[0, 1] == pytest.approx(1 / 3, abs=0.03)  # SE ~ 0.006
