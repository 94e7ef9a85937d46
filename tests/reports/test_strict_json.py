"""results.json is strict JSON (RFC 8259): non-finite numbers are the strings "NaN", "Infinity" and "-Infinity"
(the proto3 JSON mapping), read back as floats only where the schema has a number; older files with bare
NaN / Infinity still load."""
import copy
import json
import enum
import math

import numpy as np
import pytest

from auditkit.results import write_results
from auditkit.results import as_model, load_results, validate_results
from auditkit.strict_json import decode_non_finite, dumps_strict
from auditkit.reports.sections.provenance import config_json


def strict_loads(text):
    """json.loads refusing NaN / Infinity / -Infinity, as RFC 8259 (and JavaScript's JSON.parse) does."""
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def same(a, b):
    """Equal, with NaN equal to NaN and a float never equal to a string."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    a, b = (x.value if isinstance(x, enum.Enum) else x for x in (a, b))  # a vocabulary's member as its string
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def test_write_results_writes_strict_json_that_loads_back_the_same_floats(tmp_path, document):
    jopeq = document["settings"][1]
    jopeq["training"]["rounds"][0]["snr_db"] = -math.inf  # an _Optional(_Nullable(number))
    jopeq["probe"]["matched"]["defended"][1]["interval"] = [-math.inf, math.nan]  # numbers in a list
    jopeq["distinguish"]["p_value"] = math.nan  # a _Nullable(number)
    validate_results(document)  # real infinities and NaN are valid in memory
    path = write_results(copy.deepcopy(document), tmp_path)
    raw = strict_loads(path.read_text(encoding="utf-8"))
    none = raw["settings"][0]
    assert none["training"]["final"]["snr_db"] == "Infinity"
    assert none["inversion"]["clean"]["psnr_mean"] == "Infinity" and none["inversion"]["clean"]["psnr"] == ["Infinity"]
    assert raw["settings"][2]["training"]["rounds"][0]["test_loss"] == "NaN"
    assert raw["settings"][1]["training"]["rounds"][0]["snr_db"] == "-Infinity"
    assert raw["settings"][1]["probe"]["matched"]["defended"][1]["interval"] == ["-Infinity", "NaN"]
    loaded = load_results(path)
    assert same(loaded, document)
    assert loaded["settings"][0]["training"]["final"]["snr_db"] == math.inf
    assert math.isnan(loaded["settings"][1]["distinguish"]["p_value"])


def test_strings_that_read_nan_or_infinity_stay_strings(tmp_path, document):
    document["title"] = "NaN"
    document["config"].update(note="Infinity", nested={"values": ["NaN", "-Infinity"]}, limit=math.inf)
    gaussian = document["settings"][2]
    gaussian["label"] = "Infinity"
    gaussian["mechanism"]["params"]["note"] = "NaN"
    gaussian["mechanism"]["guarantee"]["flags"] = ["-Infinity"]
    gaussian["sweep"] = {"sigma": "NaN"}
    gaussian["distinguish"]["worst_pair"] = "Infinity"
    document["provenance"]["versions"]["odd"] = "NaN"
    loaded = load_results(write_results(document, tmp_path))
    assert loaded["title"] == "NaN" and loaded["settings"][2]["label"] == "Infinity"
    assert loaded["settings"][2]["mechanism"]["params"]["note"] == "NaN" and loaded["settings"][2]["sweep"] == {"sigma": "NaN"}
    assert loaded["config"]["nested"] == {"values": ["NaN", "-Infinity"]}
    assert loaded["config"]["limit"] == "Infinity"  # config is free-form: never decoded, shown as written
    assert same({**loaded, "config": document["config"]}, document)


def test_a_file_written_before_with_bare_nan_and_infinity_still_loads(tmp_path, document):
    old = json.dumps(document, indent=2, allow_nan=True)
    with pytest.raises(ValueError, match="not strict JSON: Infinity"):
        strict_loads(old)  # what auditkit wrote before
    path = tmp_path / "results.json"
    path.write_text(old, encoding="utf-8")
    assert same(load_results(path), document)
    assert same(load_results(write_results(document, tmp_path / "new")), document)


def test_a_version_3_file_in_strict_json_is_decoded_with_its_own_schema_and_upgraded(tmp_path, document,
                                                                                     to_version_5):
    document = to_version_5(document)
    for setting in document["settings"]:
        for key in ("probe", "identification", "verdict"):
            del setting[key]
    del document["provenance"]["data"]["source"]
    document["schema_version"] = 3
    path = tmp_path / "results.json"
    path.write_text(dumps_strict(document), encoding="utf-8")
    loaded = load_results(path)
    assert loaded["schema_version"] == 6 and loaded["settings"][0]["inversion"]["clean"]["psnr_mean"] == math.inf
    assert math.isnan(loaded["settings"][2]["training"]["rounds"][0]["test_loss"])


@pytest.mark.parametrize(("where", "value", "message"), [
    (("training", "rounds", 0, "round"), "NaN",
     "results.settings[0].training.rounds[0].round must be an integer, got 'NaN'"),
    (("training", "final", "test_loss"), "Inf", "results.settings[0].training.final.test_loss must be a number, got 'Inf'"),
])
def test_only_the_three_strings_and_only_in_number_fields_are_read_as_numbers(tmp_path, document, where, value,
                                                                              message):
    section, *keys, last = where
    target = document["settings"][0][section]
    for key in keys:
        target = target[key]
    target[last] = value
    path = tmp_path / "results.json"
    path.write_text(dumps_strict(document), encoding="utf-8")
    with pytest.raises(ValueError) as error:
        load_results(path)
    assert str(error.value) == f"{path}: {message}"


def test_dumps_strict_writes_every_non_finite_float_as_its_string():
    value = {"a": (math.inf, -math.inf), "b": [np.float32("nan"), np.float64("-inf"), np.float64(1.5)],
             math.inf: 1, "c": {"d": [math.nan, 2, "x", None, True]}}
    text = dumps_strict(value, sort_keys=True)
    assert strict_loads(text) == {"Infinity": 1, "a": ["Infinity", "-Infinity"], "b": ["NaN", "-Infinity", 1.5],
                                  "c": {"d": ["NaN", 2, "x", None, True]}}
    decoded = decode_non_finite(strict_loads(text))
    assert decoded["a"] == [math.inf, -math.inf] and math.isnan(decoded["c"]["d"][0]) and decoded["b"][1:] == [-math.inf, 1.5]
    # a non-finite number the walk cannot see (here made by ``default``) raises instead of writing bare NaN
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        dumps_strict({"x": object()}, default=lambda o: math.nan)


def test_the_config_shown_in_reports_is_strict_json(document):
    document["config"].update(limit=-math.inf, label="NaN")
    shown = strict_loads(config_json(as_model(document)))
    assert shown["limit"] == "-Infinity" and shown["label"] == "NaN" and shown["seed"] == 4
