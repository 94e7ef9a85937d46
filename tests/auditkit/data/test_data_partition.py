"""Client partitions (iid, Dirichlet label skew, McMahan shards) and the train/validation split."""
import numpy as np
import pytest
import torch

from auditkit.data import PARTITION_SCHEMES, partition, train_validation_split

LABELS = np.random.default_rng(7).integers(0, 10, size=1000)


def check_is_partition(parts, n):
    assert all(part.dtype == np.int64 and part.ndim == 1 for part in parts)
    assert all(np.all(np.diff(part) > 0) for part in parts)  # sorted, no repeats
    assert all(len(part) >= 1 for part in parts)
    joined = np.concatenate(parts)
    assert len(joined) == n  # disjoint ...
    assert np.array_equal(np.sort(joined), np.arange(n))  # ... and complete


@pytest.mark.parametrize("scheme", PARTITION_SCHEMES)
@pytest.mark.parametrize("clients", [1, 3, 10, 30, 100])
def test_every_scheme_is_a_deterministic_partition(scheme, clients):
    for seed in (0, 1, 12345):
        parts = partition(LABELS, clients, scheme, seed=seed)
        assert len(parts) == clients
        check_is_partition(parts, len(LABELS))
        again = partition(torch.from_numpy(LABELS), clients, scheme, seed=seed)  # tensors work the same
        assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    if clients > 1:
        other = partition(LABELS, clients, scheme, seed=1)
        assert any(not np.array_equal(a, b) for a, b in zip(partition(LABELS, clients, scheme, seed=0), other))


@pytest.mark.parametrize("n, clients", [(1000, 30), (1001, 10), (7, 7), (50, 3)])
def test_iid_shares_are_equal(n, clients):
    parts = partition(np.zeros(n, dtype=np.int64), clients, "iid", seed=3)
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == n


def test_shards_give_each_client_two_labels_when_shards_align_with_classes():
    labels = np.repeat(np.arange(10), 20)  # 200 samples, 20 shards of 10: every shard holds one label
    for seed in range(5):
        parts = partition(labels, 10, "shards", seed=seed)
        check_is_partition(parts, 200)
        assert all(len(part) == 20 for part in parts)
        assert all(len(np.unique(labels[part])) <= 2 for part in parts)
        assert any(len(np.unique(labels[part])) == 2 for part in parts)


def test_shards_on_unbalanced_labels_stay_label_skewed():
    for seed in range(3):
        parts = partition(LABELS, 50, "shards", seed=seed, shards_per_client=2)  # shards of 10, classes ~100
        distinct = np.array([len(np.unique(LABELS[part])) for part in parts])
        assert distinct.max() <= 4  # a shard smaller than every class straddles at most 2 labels
        assert np.mean(distinct <= 2) > 0.75
        sizes = [len(part) for part in parts]
        assert max(sizes) - min(sizes) <= 2


def test_shards_per_client_sets_the_number_of_shards():
    labels = np.repeat(np.arange(10), 30)
    parts = partition(labels, 10, "shards", seed=0, shards_per_client=3)
    assert all(len(part) == 30 for part in parts)
    assert all(len(np.unique(labels[part])) <= 3 for part in parts)


def mean_label_entropy(parts, labels):
    entropies = []
    for part in parts:
        p = np.bincount(labels[part], minlength=10) / len(part)
        p = p[p > 0]
        entropies.append(-(p * np.log(p)).sum())
    return float(np.mean(entropies))


def test_dirichlet_alpha_controls_label_skew():
    for seed in range(3):
        skewed = mean_label_entropy(partition(LABELS, 10, "dirichlet", seed=seed, alpha=0.1), LABELS)
        even = mean_label_entropy(partition(LABELS, 10, "dirichlet", seed=seed, alpha=100.0), LABELS)
        assert skewed < 1.2 < 2.0 < even <= np.log(10)


def test_dirichlet_never_leaves_a_client_empty():
    labels = np.repeat(np.arange(2), 10)  # 20 samples, 20 clients, very small alpha
    for seed in range(5):
        parts = partition(labels, 20, "dirichlet", seed=seed, alpha=0.01)
        check_is_partition(parts, 20)
        assert all(len(part) == 1 for part in parts)


@pytest.mark.parametrize("kwargs, message", [
    ({"clients": 0}, "clients must be an integer between 1 and the number of samples (1000), got 0"),
    ({"clients": 1001}, "clients must be an integer between 1 and the number of samples (1000), got 1001"),
    ({"clients": 2.0}, "clients must be an integer"),
    ({"clients": 2, "scheme": "pathological"}, "scheme must be one of iid, dirichlet, shards, got 'pathological'"),
    ({"clients": 2, "scheme": "dirichlet", "alpha": 0.0}, "alpha must be a finite number > 0, got 0.0"),
    ({"clients": 2, "scheme": "dirichlet", "alpha": float("inf")}, "alpha must be a finite number > 0"),
    ({"clients": 2, "scheme": "dirichlet", "alpha": float("nan")}, "alpha must be a finite number > 0"),
    ({"clients": 2, "scheme": "shards", "shards_per_client": 0}, "shards_per_client must be an integer >= 1"),
    ({"clients": 600, "scheme": "shards", "shards_per_client": 2}, "clients \\* shards_per_client <= the number"),
    ({"clients": 2, "seed": -1}, "seed must be an integer >= 0, got -1"),
])
def test_bad_partition_arguments_name_the_parameter(kwargs, message):
    kwargs = {"seed": 0, **kwargs}
    with pytest.raises(ValueError, match=message.replace("(", "\\(").replace(")", "\\)")):
        partition(LABELS, **kwargs)


def test_labels_must_be_integer_vector():
    with pytest.raises(ValueError, match="labels must be a 1-D array of integer class labels"):
        partition(np.zeros((4, 2), dtype=np.int64), 2, seed=0)
    with pytest.raises(ValueError, match="labels must be a 1-D array of integer class labels"):
        partition(np.zeros(4), 2, seed=0)


def test_train_validation_split():
    train, validation = train_validation_split(60_000, 1 / 6, seed=0)
    assert len(validation) == 10_000 and len(train) == 50_000
    assert train.dtype == np.int64 and validation.dtype == np.int64
    assert np.array_equal(np.sort(np.concatenate([train, validation])), np.arange(60_000))
    again_train, again_validation = train_validation_split(60_000, 1 / 6, seed=0)
    assert np.array_equal(train, again_train) and np.array_equal(validation, again_validation)
    assert not np.array_equal(validation, train_validation_split(60_000, 1 / 6, seed=1)[1])
    train, validation = train_validation_split(10, 0.0, seed=0)
    assert np.array_equal(train, np.arange(10)) and len(validation) == 0


@pytest.mark.parametrize("args, message", [
    ((10, 1.0), "fraction must be a number in \\[0, 1\\), got 1.0"),
    ((10, -0.1), "fraction must be a number in \\[0, 1\\), got -0.1"),
    ((0, 0.5), "n must be an integer >= 1, got 0"),
    ((1, 0.9), "fraction must leave at least one training index"),
])
def test_bad_split_arguments_name_the_parameter(args, message):
    with pytest.raises(ValueError, match=message):
        train_validation_split(*args, seed=0)
