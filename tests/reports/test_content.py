"""Text helpers shared by the HTML and markdown reports."""
from reports.content import _params


def test_parameters_keep_short_values_and_shorten_calibrated_ones():
    assert _params({"sigma": 0.8, "clip": 1.0}, "l2") == "sigma=0.8, clip=1 (l2)"
    assert _params({"sigma": 0.7461263269631851, "clip": 0.1, "n": 2}, "l2") == "sigma=0.7461, clip=0.1 (l2), n=2"
    assert _params({}, None) == "no parameters"
