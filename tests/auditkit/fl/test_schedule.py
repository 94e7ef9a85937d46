import pytest

from auditkit.fl.schedule import InverseSchedule, PlateauSchedule


def test_lr_halves_after_patience_rounds_without_improvement():
    schedule = PlateauSchedule(0.01, patience=3, factor=0.5)
    lrs = [schedule.step(loss) for loss in [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.8]]
    assert lrs == [0.01, 0.01, 0.01, 0.01, 0.005, 0.005, 0.005, 0.0025, 0.0025]


def test_zero_patience_disables_the_schedule():
    schedule = PlateauSchedule(0.1, patience=0)
    assert [schedule.step(1.0) for _ in range(20)][-1] == 0.1


def test_inverse_schedule_is_msp_fls_one_over_five_t_plus_one():
    schedule = InverseSchedule(0.2)
    lrs = [schedule.lr] + [schedule.step(1.0) for _ in range(4)]
    assert lrs == pytest.approx([1 / (5 * (t + 1)) for t in range(5)])


def test_a_run_records_the_inverse_schedules_rates_and_a_bad_name_is_refused():
    from auditkit.config import ConfigError, from_dict
    from auditkit.stages.train import Experiment

    config = from_dict({"training": {"clients": 3, "rounds": 3, "tau": 1, "lr": 0.2, "lr_schedule": "inverse"},
                        "mechanism": {"name": "none"}})
    assert [r.lr for r in Experiment(config).train().result.rounds] == pytest.approx([0.2, 0.1, 0.2 / 3])
    with pytest.raises(ConfigError, match="training.lr_schedule must be one of plateau, inverse, got 'cosine'"):
        from_dict({"training": {"lr_schedule": "cosine"}})
