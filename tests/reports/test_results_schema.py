import json
import math

import pytest

from reports import load_results, validate_results
from reports.results_schema import SCHEMA, SCHEMA_VERSION


def _set(doc, path, value):
    """Set (or with value=KeyError, delete) the item at a path of keys and indices."""
    *parents, last = path
    for key in parents:
        doc = doc[key]
    if value is KeyError:
        del doc[last]
    else:
        doc[last] = value


def test_the_realistic_document_is_valid(document):
    assert (SCHEMA, SCHEMA_VERSION) == ("auditkit/results", 2)
    validate_results(document)


@pytest.mark.parametrize("path, value, message", [
    (("schema",), "auditkit/other", "schema must be 'auditkit/results', got 'auditkit/other'"),
    (("schema_version",), 1, "schema_version must be 2, got 1"),
    (("schema_version",), KeyError, "schema_version must be 2, got None"),
    (("settings", 0, "training"), KeyError, "results.settings[0].training is missing"),
    (("provenance", "data", "dataset"), KeyError, "results.provenance.data.dataset is missing"),
    (("settings", 1, "inversion", "defended", "ssim_mean"), KeyError,
     "results.settings[1].inversion.defended.ssim_mean is missing"),
    (("settings", 1, "distinguish", "epsilon_lower_bound"), "high",
     "results.settings[1].distinguish.epsilon_lower_bound must be a number, got 'high'"),
    (("settings", 2, "training", "final", "round"), True,
     "results.settings[2].training.final.round must be an integer, got True"),
    (("settings", 0, "training", "rounds"), {}, "results.settings[0].training.rounds must be a list, got dict"),
    (("settings", 0, "mechanism", "guarantee", "flags", 0), 3,
     "results.settings[0].mechanism.guarantee.flags[0] must be a string, got 3"),
    (("settings", 2, "accounting", "composed"), {"epsilon": 1.0},
     "results.settings[2].accounting.composed.delta is missing"),
    (("settings",), [], "results.settings must hold at least one setting"),
    (("settings", 1, "id"), "s00", "results.settings[1].id must be unique and filename-safe, got 's00'"),
    (("settings", 1, "id"), "a/b", "results.settings[1].id must be unique and filename-safe, got 'a/b'"),
    (("settings", 1, "inversion", "figure"), "../secret.png",
     "results.settings[1].inversion.figure must be a relative path inside the results folder, got '../secret.png'"),
    (("settings", 1, "inversion", "figure"), "/etc/passwd",
     "results.settings[1].inversion.figure must be a relative path inside the results folder, got '/etc/passwd'"),
])
def test_validation_names_what_is_wrong_in_one_line(document, path, value, message):
    _set(document, path, value)
    with pytest.raises(ValueError) as error:
        validate_results(document)
    assert str(error.value) == message


def test_a_non_object_is_refused():
    with pytest.raises(ValueError, match=r"^results must be a JSON object, got list$"):
        validate_results([])


def test_nullable_stages_and_claims_are_valid(document):
    for setting in document["settings"]:
        setting["inversion"] = setting["distinguish"] = None
        setting["mechanism"]["guarantee"]["epsilon"] = None
    validate_results(document)


def test_load_results_reads_nan_and_infinity(tmp_path, document):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document, allow_nan=True))
    loaded = load_results(path)
    assert math.isinf(loaded["settings"][0]["inversion"]["clean"]["psnr_mean"])
    assert math.isnan(loaded["settings"][2]["training"]["rounds"][0]["test_loss"])


@pytest.mark.parametrize("text, message", [
    (None, "no such file"),
    ("{not json", "not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2)"),
    ('{"schema": "auditkit/results", "schema_version": 1}', "schema_version must be 2, got 1"),
])
def test_load_results_problems_are_one_line_with_the_path(tmp_path, text, message):
    path = tmp_path / "results.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ValueError) as error:
        load_results(path)
    assert str(error.value) == f"{path}: {message}"
