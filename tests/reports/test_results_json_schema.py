"""The published JSON Schema (generated from ``auditkit.results``' models) checked by an independent validator,
jsonschema, on the sample documents of every command; and version 4 and 5 files, what auditkit 0.2.0 wrote
before, read through the models."""
import copy
import json

import jsonschema
import pytest

from auditkit.results import Reproduction, ResultsDocument, load_results
from auditkit.strict_json import dumps_strict


def _as_json(document):
    return json.loads(dumps_strict(document))


def test_every_commands_sample_document_follows_the_published_schema(any_document):
    _, document = any_document
    jsonschema.Draft202012Validator(ResultsDocument.model_json_schema(by_alias=True)).validate(_as_json(document))


def test_a_reproduction_follows_its_published_schema(reproduction):
    jsonschema.Draft202012Validator(Reproduction.model_json_schema(by_alias=True)).validate(_as_json(reproduction))


@pytest.mark.parametrize("path, value", [
    (("settings", 1, "verdict", "verdict"), "maybe"),
    (("settings", 1, "verdict", "decided_by", "kind"), "a sentence"),
    (("settings", 0, "mechanism", "capabilities", "tiling"), "default"),
    (("settings", 0, "training", "final", "round"), 1.5),
    (("settings", 0, "unknown_section"), {}),
])
def test_the_published_schema_refuses_what_the_models_refuse(document, path, value):
    broken = _as_json(document)
    *parents, last = path
    target = broken
    for key in parents:
        target = target[key]
    target[last] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(ResultsDocument.model_json_schema(by_alias=True)).validate(broken)


def _as_version_4(document):
    """What auditkit 0.2.0 wrote, from a version 5 document: the decisive test named in words, an adaptive test's
    claims in one text."""
    old = copy.deepcopy(document)
    old["schema_version"] = 4
    for setting in old["settings"]:
        if setting["verdict"] is not None:
            setting["verdict"]["decided_by"] = setting["verdict"]["decided_by"]["name"]
            if setting["verdict"].get("bound") is not None:
                setting["verdict"]["bound"]["test"] = setting["verdict"]["bound"]["test"]["name"]
        for adaptive in [] if setting["distinguish"] is None else setting["distinguish"]["adaptive"]:
            adaptive["claim"] += f"; stated claim: {adaptive.pop('stated_claim')}"
    return old


def test_a_version_4_file_loads_as_the_document_it_was(tmp_path, document, to_version_5):
    path = tmp_path / "results.json"
    path.write_text(dumps_strict(_as_version_4(to_version_5(document))), encoding="utf-8")
    loaded = load_results(path)
    assert json.loads(dumps_strict(loaded)) == _as_json(document)
    decisive = loaded["settings"][1]["verdict"]["decided_by"]
    assert (decisive["kind"], decisive["candidates"], decisive["name"]) == (
        "identification", 10, "identification among 10 candidates")


def test_a_version_5_file_loads_as_the_document_it_was(tmp_path, documents, to_version_5):
    for name, document in documents.items():
        path = tmp_path / f"{name}.json"
        path.write_text(dumps_strict(to_version_5(document)), encoding="utf-8")
        assert json.loads(dumps_strict(load_results(path))) == _as_json(document), name


# version 6's names (issue 40, docs/names.md) in the published schema, the old ones gone
RENAMED = {"Accounting": ("accountant", "backend"), "ComposedRun": ("accountant", "backend"),
           "ExampleLevel": ("accountant", "backend"), "Provenance": ("accountants", "accountant_backends"),
           "Inversion": ("targets", "clients"), "Matched": ("targets", "clients"), "Probe": ("targets", "clients"),
           "ReconstructionSweep": ("targets", "clients"), "Identification": ("statistic", "scoring"),
           "CanaryView": ("statistic", "scoring"), "Distinguish": ("audit_setting", "setting")}


def test_the_published_schema_names_each_field_by_its_one_meaning():
    definitions = ResultsDocument.model_json_schema(by_alias=True)["$defs"]
    for model, (new, old) in RENAMED.items():
        properties = definitions[model]["properties"]
        assert new in properties and old not in properties, model
    assert "backend" in definitions["TrainingInfo"]["properties"]  # the training engine keeps the word
