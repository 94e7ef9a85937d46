import pytest
import torch

from auditkit.fl.sampling import draw_batches, draw_poisson_batches, select_clients


def test_full_participation_selects_everyone():
    assert select_clients(7, 3, seed=0) == list(range(7))


def test_uniform_participation_is_without_replacement_and_keyed_by_round():
    picks = [select_clients(30, t, seed=1, participation="uniform", clients_per_round=10) for t in range(1, 201)]
    assert all(len(p) == 10 and len(set(p)) == 10 for p in picks)
    assert picks[0] == select_clients(30, 1, seed=1, participation="uniform", clients_per_round=10)
    assert picks[0] != picks[1]
    # each client is picked with probability 1/3: 200 rounds -> mean 66.7, sd 6.7 per client
    counts = torch.bincount(torch.tensor(sum(picks, [])), minlength=30).float()
    assert counts.min() > 40 and counts.max() < 95


def test_poisson_participation_rate():
    sizes = [len(select_clients(100, t, seed=2, participation="poisson", sample_rate=0.2)) for t in range(1, 301)]
    mean = sum(sizes) / len(sizes)
    assert mean == pytest.approx(20, abs=1.5)  # sd of the mean: 4/sqrt(300) = 0.23
    assert len(set(sizes)) > 5  # the round size varies, as Poisson sampling must


def test_missing_sampling_parameters_are_errors():
    with pytest.raises(ValueError, match="clients_per_round"):
        select_clients(10, 1, seed=0, participation="uniform")
    with pytest.raises(ValueError, match="clients_per_round is required when participation is 'replacement'"):
        select_clients(10, 1, seed=0, participation="replacement")
    with pytest.raises(ValueError, match="participation must be one of full, uniform, replacement, poisson"):
        select_clients(10, 1, seed=0, participation="sometimes")


def test_batches_come_from_each_clients_own_data_and_are_reproducible():
    own = [torch.arange(0, 10), torch.arange(10, 25), torch.arange(25, 27)]
    batches = draw_batches(own, [0, 2], 5, seed=3, tau=15, batch_size=4)
    assert batches.shape == (2, 15, 4)
    assert set(batches[0].flatten().tolist()) <= set(range(0, 10))
    assert set(batches[1].flatten().tolist()) <= {25, 26}
    # client 2's draws do not depend on which other clients were selected
    alone = draw_batches(own, [2], 5, seed=3, tau=15, batch_size=4)
    assert torch.equal(alone[0], batches[1])
    assert not torch.equal(draw_batches(own, [0], 6, seed=3, tau=15, batch_size=4)[0], batches[0])


def test_sampling_with_replacement_draws_duplicates_at_the_expected_rate():
    """M = 20 draws of N = 100 with replacement: E[distinct] = N (1 - (1 - 1/N)^M) = 18.209, so 1.791 duplicate
    draws per round; over 2,000 rounds the mean is within 4 standard errors (per-round sd ~1.2: se ~0.027)."""
    n, m, rounds = 100, 20, 2000
    duplicates = []
    for r in range(1, rounds + 1):
        drawn = select_clients(n, r, seed=0, participation="replacement", clients_per_round=m)
        assert len(drawn) == m and drawn == sorted(drawn) and all(0 <= c < n for c in drawn)
        duplicates.append(m - len(set(drawn)))
    expected = m - n * (1 - (1 - 1 / n) ** m)
    mean = sum(duplicates) / rounds
    sd = (sum((d - mean) ** 2 for d in duplicates) / (rounds - 1)) ** 0.5
    assert abs(mean - expected) < 4 * sd / rounds**0.5, (mean, expected)
    assert select_clients(n, 1, seed=0, participation="replacement", clients_per_round=m) == \
        select_clients(n, 1, seed=0, participation="replacement", clients_per_round=m)


def test_a_client_drawn_twice_trains_twice_in_a_real_run():
    from auditkit.config import from_dict
    from auditkit.stages.train import Experiment

    config = from_dict({"training": {"clients": 3, "rounds": 3, "tau": 2, "participation": "replacement",
                                     "clients_per_round": 6}, "mechanism": {"name": "gaussian", "sigma": 0.01}})
    rounds = Experiment(config).train().result.rounds
    assert all(len(r.clients) == 6 and len(set(r.clients)) < 6 for r in rounds)  # 6 draws of 3: always a repeat
    assert all(len(r.bits) == 6 for r in rounds)


def test_poisson_batches_have_binomial_sizes_and_take_every_example_at_rate_q():
    """DP-SGD's batches: n = 50 examples, B = 5, so q = 0.1 and each step's size is Binomial(50, 0.1): mean 5,
    variance 4.5. Over 10^4 steps the mean is within 3 standard errors (SE 0.021) and the variance within 4 of its
    standard errors (SE ~ 4.5 sqrt(2 / 10^4) = 0.064, the Binomial's excess kurtosis 0.1 being negligible); each
    example is taken in a fraction q of the steps, within 4 SE (0.003)."""
    own = [torch.arange(100, 150)]
    steps = 10_000
    indices, mask = draw_poisson_batches(own, [0], 1, seed=6, tau=steps, batch_size=5)
    sizes = mask[0].sum(1)
    width = int(sizes.max())
    assert indices.shape == mask.shape == (1, steps, width)
    n, q = 50, 0.1
    assert abs(float(sizes.mean()) - n * q) < 3 * (n * q * (1 - q) / steps) ** 0.5
    assert abs(float(sizes.var()) - n * q * (1 - q)) < 4 * n * q * (1 - q) * (2 / (steps - 1)) ** 0.5
    taken = torch.bincount(indices[0][mask[0].bool()] - 100, minlength=n).double() / steps
    assert (taken - q).abs().max() < 4 * (q * (1 - q) / steps) ** 0.5
    # no example twice in a step; padding repeats one of the client's own examples
    assert all(len(set(row[m.bool()].tolist())) == int(m.sum()) for row, m in zip(indices[0][:500], mask[0][:500]))
    assert set(indices.flatten().tolist()) <= set(range(100, 150))


def test_poisson_batches_are_keyed_by_client_and_padded_to_the_rounds_largest():
    own = [torch.arange(0, 20), torch.arange(20, 220), torch.arange(220, 240)]
    indices, mask = draw_poisson_batches(own, [0, 1], 4, seed=2, tau=6, batch_size=8)
    assert indices.shape[2] == int(mask.sum(2).max()) > 8  # the largest realised batch of the round
    alone, alone_mask = draw_poisson_batches(own, [1], 4, seed=2, tau=6, batch_size=8)
    width = alone.shape[2]
    assert torch.equal(mask[1, :, :width], alone_mask[0]) and not mask[1, :, width:].any()
    assert torch.equal((indices[1] * mask[1].long())[:, :width], alone[0] * alone_mask[0].long())
    assert set(indices[0].flatten().tolist()) <= set(range(20))
    # a round whose steps all came out empty still has one (masked) column
    empty = next(r for r in range(1, 50)
                 if not draw_poisson_batches([torch.arange(400)], [0], r, seed=0, tau=1, batch_size=1)[1].any())
    indices, mask = draw_poisson_batches([torch.arange(400)], [0], empty, seed=0, tau=1, batch_size=1)
    assert indices.shape == (1, 1, 1) and not mask.any()
    with pytest.raises(ValueError, match="DP-SGD needs batch_size <= every client's example count; client 2 has 20"):
        draw_poisson_batches(own, [2], 1, seed=0, tau=1, batch_size=21)
