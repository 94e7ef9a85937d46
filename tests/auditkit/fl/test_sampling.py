import pytest
import torch

from auditkit.fl.sampling import draw_batches, select_clients


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
