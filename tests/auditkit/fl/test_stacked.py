"""Runs trained together (``run_stacked``) give each run's own numbers: the same final model and round records as
the run trained alone, whatever the others do (other seeds, memberships, step counts, BatchNorm, kept state)."""
import dataclasses

import pytest
import torch

from auditkit import mechanisms
from auditkit.config import TrainingConfig
from auditkit.data import Split
from auditkit.fl.aggregation import UplinkProtocol
from auditkit.fl.simulation import FederatedData, FederatedSimulation
from auditkit.fl.stacked import run_stacked
from auditkit.models import create_model

_G = torch.Generator().manual_seed(0)
_X, _Y = torch.rand(140, 1, 28, 28, generator=_G), torch.randint(0, 10, (140,), generator=_G)
_TRAIN, _HELD = Split(_X[:120], _Y[:120]), Split(_X[120:], _Y[120:])


def _data(run: int, clients: int = 4) -> FederatedData:
    """One shared pool, a different membership per run: run r leaves out records r, r + 7, ... (unequal sizes)."""
    keep = torch.tensor([i for i in range(120) if (i - run) % 7 != 0])
    return FederatedData(_TRAIN, _HELD, _HELD, list(torch.tensor_split(keep, clients)))


def _bn_model() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, bias=False), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(4 * 13 * 13, 10))


def _frozen_model(seed: int = 0) -> torch.nn.Module:
    """The cnn with its first convolution frozen (its values drawn from ``seed``: every run's the same)."""
    torch.manual_seed(seed)
    model = create_model("cnn")
    model[0][0].requires_grad_(False)
    return model


def _simulation(run: int, model, **training) -> FederatedSimulation:
    config = TrainingConfig(**{"model": "cnn", "clients": 4, "rounds": 3, "tau": 3, "batch_size": 4, "lr": 0.05,
                               "checkpoints": (2,), **training})
    mechanism = mechanisms.create("gaussian", sigma=0.01, clip=1.0, private_seed=11 + run)
    return FederatedSimulation(model(), _data(run), UplinkProtocol(mechanism, run), config, seed=run)


def _records(result):
    return [dataclasses.asdict(r) for r in result.rounds]


@pytest.mark.parametrize("training", [
    dict(model=lambda: create_model("cnn"), participation="uniform", clients_per_round=2),
    dict(model=_bn_model, local_epochs=1, optimizer="adam", optimizer_state="kept", bn_stats="local"),
    dict(model=_frozen_model, optimizer_state="kept"),
], ids=["cnn-uniform", "batchnorm-epochs-adam", "frozen-conv"])
def test_stacked_runs_equal_the_runs_alone(training):
    model = training.pop("model")
    alone = [_simulation(run, model, **training).run() for run in range(3)]
    seen = []
    together = run_stacked([_simulation(run, model, **training) for run in range(3)],
                           on_round=lambda run, record: seen.append((run, record.round)))
    assert seen == [(run, round_) for round_ in (1, 2, 3) for run in range(3)]
    for a, b in zip(alone, together):
        torch.testing.assert_close(b.final_params, a.final_params, rtol=0, atol=1e-5)
        for x, y in zip(_records(a), _records(b)):
            assert x["clients"] == y["clients"] and x["bits"] == y["bits"]
            assert y["test_loss"] == pytest.approx(x["test_loss"], abs=1e-4)
        assert [o.round for o in b.observations] == [2]
    # the runs differ from each other (a stacking bug that mixed them would make them equal or swap them)
    assert not torch.allclose(together[0].final_params, together[1].final_params, atol=1e-3)


def test_stacked_runs_must_agree_on_rounds():
    runs = [_simulation(0, lambda: create_model("cnn")), _simulation(1, lambda: create_model("cnn"), rounds=2)]
    with pytest.raises(ValueError, match="same number of rounds"):
        run_stacked(runs)


def test_stacked_runs_must_hold_the_same_frozen_parameters():
    """The runs train on the first run's model: one whose frozen layer differs would silently train on another's."""
    assert run_stacked([_simulation(0, _frozen_model), _simulation(1, _frozen_model)])[0].num_params == 6422 - 156
    with pytest.raises(ValueError, match=r"^stacked runs must hold the same frozen parameters \(requires_grad=False\)"):
        run_stacked([_simulation(0, _frozen_model), _simulation(1, lambda: _frozen_model(seed=1))])
