"""The formatters every report section shares."""
from auditkit.reports.sections.text import parameters


def test_parameters_keep_short_values_and_shorten_calibrated_ones():
    assert parameters({"sigma": 0.8, "clip": 1.0}, "l2") == "sigma=0.8, clip=1 (l2)"
    assert parameters({"sigma": 0.7461263269631851, "clip": 0.1, "n": 2}, "l2") == "sigma=0.7461, clip=0.1 (l2), n=2"
    assert parameters({}, None) == "no parameters"
