from auditkit.fl.schedule import PlateauSchedule


def test_lr_halves_after_patience_rounds_without_improvement():
    schedule = PlateauSchedule(0.01, patience=3, factor=0.5)
    lrs = [schedule.step(loss) for loss in [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.8]]
    assert lrs == [0.01, 0.01, 0.01, 0.01, 0.005, 0.005, 0.005, 0.0025, 0.0025]


def test_zero_patience_disables_the_schedule():
    schedule = PlateauSchedule(0.1, patience=0)
    assert [schedule.step(1.0) for _ in range(20)][-1] == 0.1
