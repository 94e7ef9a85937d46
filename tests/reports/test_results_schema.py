import copy
import json
import math
import re
from importlib import metadata

import pytest

FAMILY = 4  # the test family of the fixture documents' distinguish sections ("tests": 4, conftest)

from auditkit.attacks.headline import overall_verdict
from auditkit.reports import render_report
from auditkit.results import load_results, upgrade_results, validate_results
from auditkit.results import SCHEMA, SCHEMA_VERSION, Command
from auditkit.results.upgrade import V2_CAPABILITIES

VERSION = metadata.version("auditkit")


def _set(doc, path, value):
    """Set (or with value=KeyError, delete) the item at a path of keys and indices."""
    *parents, last = path
    for key in parents:
        doc = doc[key]
    if value is KeyError:
        del doc[last]
    else:
        doc[last] = value


def test_the_schema_is_version_6_of_auditkit_results():
    assert (SCHEMA, SCHEMA_VERSION) == ("auditkit/results", 6)
    assert tuple(Command) == ("train", "audit", "attack", "distinguish", "account", "canary", "membership",
                              "reproduce")


def test_every_commands_sample_document_is_valid(any_document):
    name, document = any_document
    validate_results(document)
    assert document["command"] == name.split("-")[0]


@pytest.mark.parametrize("path, value, message", [
    (("schema",), "auditkit/other", "schema must be 'auditkit/results', got 'auditkit/other'"),
    (("schema_version",), 2, "schema_version must be 6, got 2"),
    (("schema_version",), 3, "schema_version must be 6, got 3"),
    (("schema_version",), KeyError, "schema_version must be 6, got None"),
    (("command",), "report", "results.command must be one of train, audit, attack, distinguish, account, canary, "
                           "membership, reproduce, got 'report'"),
    (("command",), 3, "results.command must be a string, got 3"),
    (("settings", 0, "training"), KeyError, "results.settings[0].training is missing"),
    (("provenance", "data", "dataset"), KeyError, "results.provenance.data.dataset is missing"),
    (("provenance", "data", "source"), KeyError, "results.provenance.data.source is missing"),
    (("provenance", "code"), KeyError, "results.provenance.code is missing"),
    (("provenance", "plugins"), "none", "results.provenance.plugins must be a list, got str"),
    (("provenance", "plugins"), [None], "results.provenance.plugins[0] must be a string, got None"),
    (("settings", 1, "inversion", "defended", "ssim_mean"), KeyError,
     "results.settings[1].inversion.defended.ssim_mean is missing"),
    (("settings", 1, "inversion", "round"), "3", "results.settings[1].inversion.round must be an integer, got '3'"),
    (("settings", 1, "inversion", "label_given"), 1,
     "results.settings[1].inversion.label_given must be a boolean, got 1"),
    (("settings", 1, "inversion", "error_std"), None, "results.settings[1].inversion.error_std must be a number, "
                                                      "got None"),
    (("settings", 1, "inversion", "clean", "label_accuracy"), "62 %",
     "results.settings[1].inversion.clean.label_accuracy must be a number, got '62 %'"),
    (("settings", 1, "distinguish", "epsilon_lower_bound"), "high",
     "results.settings[1].distinguish.epsilon_lower_bound must be a number, got 'high'"),
    (("settings", 1, "distinguish", "p_value"), KeyError, "results.settings[1].distinguish.p_value is missing"),
    (("settings", 1, "distinguish", "sampling"), None,
     "results.settings[1].distinguish.sampling must be a string, got None"),
    (("settings", 1, "distinguish", "estimates", 1, "sampling"), KeyError,
     "results.settings[1].distinguish.estimates[1].sampling is missing"),
    (("settings", 2, "training", "final", "round"), True,
     "results.settings[2].training.final.round must be an integer, got True"),
    (("settings", 2, "training", "protocol"), KeyError, "results.settings[2].training.protocol is missing"),
    (("settings", 0, "training", "rounds"), {}, "results.settings[0].training.rounds must be a list, got dict"),
    (("settings", 0, "mechanism", "guarantee", "flags", 0), 3,
     "results.settings[0].mechanism.guarantee.flags[0] must be a string, got 3"),
    (("settings", 0, "mechanism", "guarantee", "relation"), 1,
     "results.settings[0].mechanism.guarantee.relation must be a string, got 1"),
    (("settings", 0, "mechanism", "origin"), KeyError, "results.settings[0].mechanism.origin is missing"),
    (("settings", 0, "mechanism", "clip_norm"), 2, "results.settings[0].mechanism.clip_norm must be a string, got 2"),
    (("settings", 0, "mechanism", "capabilities", "dp_event"), KeyError,
     "results.settings[0].mechanism.capabilities.dp_event is missing"),
    (("settings", 0, "mechanism", "capabilities", "tiling"), "default",
     "results.settings[0].mechanism.capabilities.tiling must be one of 'declared', 'generic default', 'unknown', "
     "got 'default'"),
    (("settings", 2, "accounting", "composed"), {"epsilon": 1.0},
     "results.settings[2].accounting.composed.delta is missing"),
    (("settings", 1, "accounting", "composed", "rounds"), KeyError,
     "results.settings[1].accounting.composed.rounds is missing"),
    (("settings", 2, "accounting", "composition_delta"), KeyError,
     "results.settings[2].accounting.composition_delta is missing"),
    (("settings", 2, "accounting", "accountant"), KeyError, "results.settings[2].accounting.accountant is missing"),
    (("settings", 2, "accounting", "paper_claim"), {"epsilon": 1.0},
     "results.settings[2].accounting.paper_claim.delta is missing"),
    (("settings", 1, "probe"), KeyError, "results.settings[1].probe is missing"),
    (("settings", 1, "probe", "matched", "defended", 0, "exceeds_bound"), 0,
     "results.settings[1].probe.matched.defended[0].exceeds_bound must be a boolean, got 0"),
    (("settings", 1, "probe", "figure"), "../probe.png",
     "results.settings[1].probe.figure must be a relative path inside the results folder, got '../probe.png'"),
    (("settings", 2, "identification"), KeyError, "results.settings[2].identification is missing"),
    (("settings", 2, "identification", "tests", 1, "bound"), "0.06",
     "results.settings[2].identification.tests[1].bound must be a number, got '0.06'"),
    (("settings", 2, "verdict"), KeyError, "results.settings[2].verdict is missing"),
    (("settings", 1, "verdict", "decided_by"), KeyError, "results.settings[1].verdict.decided_by is missing"),
    (("settings",), [], "results.settings must hold at least one setting"),
    (("settings", 1, "id"), "s00", "results.settings[1].id must be unique and filename-safe, got 's00'"),
    (("settings", 1, "id"), "a/b", "results.settings[1].id must be unique and filename-safe, got 'a/b'"),
    (("settings", 1, "inversion", "figure"), "../secret.png",
     "results.settings[1].inversion.figure must be a relative path inside the results folder, got '../secret.png'"),
    (("settings", 1, "inversion", "figure"), "/etc/passwd",
     "results.settings[1].inversion.figure must be a relative path inside the results folder, got '/etc/passwd'"),
])
def test_validation_names_what_is_wrong_in_one_line(document, path, value, message):
    document["settings"][1]["inversion"]["error_std"] = 0.01  # optional keys, present to be broken
    document["settings"][1]["inversion"]["label_given"] = False
    document["settings"][1]["inversion"]["clean"]["label_accuracy"] = 0.5
    _set(document, path, value)
    with pytest.raises(ValueError) as error:
        validate_results(document)
    assert str(error.value) == message


def test_a_setting_may_say_its_mechanism_is_not_determined_by_its_seeds(document):
    document["settings"][1]["mechanism"]["reproducible"] = False  # optional: absent when it passed or was not checked
    validate_results(document)
    document["settings"][1]["mechanism"]["reproducible"] = "no"
    with pytest.raises(ValueError, match=r"^results.settings\[1\].mechanism.reproducible must be a boolean, got 'no'$"):
        validate_results(document)


def test_a_non_object_is_refused():
    with pytest.raises(ValueError, match=r"^results must be a JSON object, got list$"):
        validate_results([])


def test_nullable_stages_claims_and_provenance_sections_are_valid(document):
    for setting in document["settings"]:
        for stage in ("training", "accounting", "inversion", "probe", "identification", "distinguish", "verdict"):
            setting[stage] = None
        setting["mechanism"]["guarantee"].update(epsilon=None, relation=None)
    document["provenance"].update(data=None, model=None, training=None)
    validate_results(document)


def test_an_attack_inversion_has_no_round_targets_clean_run_or_figure(documents):
    document = documents["attack"]
    inversion = document["settings"][0]["inversion"]
    assert (inversion["round"], inversion["targets"]) == (None, None)
    inversion.update(clean=None, figure=None)
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
    ('{"schema": "auditkit/other", "schema_version": 3}', "schema must be 'auditkit/results', got 'auditkit/other'"),
    ('{"schema": "auditkit/results", "schema_version": "4"}', "schema_version must be 6, got '4'"),
    ('{"schema": "auditkit/results", "schema_version": 2}', "results.command is missing"),  # checked as version 2
    ('{"schema": "auditkit/results", "schema_version": 3}', "results.command is missing"),  # checked as version 3
])
def test_load_results_problems_are_one_line_with_the_path(tmp_path, text, message):
    path = tmp_path / "results.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ValueError) as error:
        load_results(path)
    assert str(error.value) == f"{path}: {message}"


# ---------------------------------------------------------------- older versions

V4_ONLY = ("probe", "identification", "verdict")  # the setting keys version 4 added
# the decisive test of the fixtures' distinguishing tests, as data (version 5)
DISTINGUISHING = {"kind": "distinguishing", "name": "distinguishing test (worst pair: 0 vs clip)", "pair": "0 vs clip", "test": None, "candidates": None, "view": None, "whole_run": False}


def _as_version_3(document):
    """A version 3 document made from a version 5 one (``as_version_5`` of the fixtures' documents): without the probe, the identification tests, the headline
    verdict and the data's source, an adaptive test's claim and the stated one in one text."""
    for setting in document["settings"]:
        for key in V4_ONLY:
            del setting[key]
        for adaptive in [] if setting["distinguish"] is None else setting["distinguish"]["adaptive"]:
            adaptive["claim"] += f"; stated claim: {adaptive.pop('stated_claim')}"
    if document["provenance"]["data"] is not None:
        del document["provenance"]["data"]["source"]
    document["schema_version"] = 3
    return document


def test_a_version_2_document_is_upgraded_to_6_without_touching_the_original(v2_document):
    old = v2_document
    before = copy.deepcopy(old)
    new = upgrade_results(old)
    assert old == before  # pure
    validate_results(new)
    assert new["schema_version"] == 6 and new["command"] == "audit"
    provenance = new["provenance"]
    assert provenance["code"] == "unknown (written by auditkit 0.1.0 as schema v2)"
    assert provenance["plugins"] == []
    assert provenance["neighbouring_relations"] == ["REPLACE_ONE"]
    assert provenance["data"]["source"] == ""  # not recorded before version 4
    none, laplace = new["settings"]
    assert [s["mechanism"]["guarantee"]["relation"] for s in new["settings"]] == [None, "REPLACE_ONE"]
    for setting in new["settings"]:
        assert setting["mechanism"]["origin"] == "built-in" and setting["mechanism"]["clip_norm"] is None
        assert setting["mechanism"]["capabilities"] == dict.fromkeys(V2_CAPABILITIES, "unknown")
        assert setting["training"]["protocol"] == "unknown"
        assert setting["training"]["rounds"] == old["settings"][0]["training"]["rounds"]
        accounting = setting["accounting"]
        assert (accounting["composition_delta"], accounting["accountant"], "delta" in accounting) == (
            1e-5, "opacus-prv", False)
    assert laplace["accounting"]["composed"] == {"epsilon": 3.0, "delta": 0.0, "rounds": 3,
                                                 "accountant": "basic composition", "event": "3 x claim"}
    assert none["accounting"]["composed"] is None and none["distinguish"] is None
    assert {k: laplace["distinguish"][k] for k in ("p_value", "audit_setting", "sampling")} == {
        "p_value": None, "audit_setting": "", "sampling": ""}
    assert laplace["distinguish"]["epsilon_lower_bound"] == 0.7
    inversion = dict(old["settings"][0]["inversion"])
    inversion["targets"] = inversion.pop("clients")  # version 6's name (issue 40)
    assert none["inversion"] == inversion
    for setting in new["settings"]:  # v3 -> v4: no probe or identification test was run
        assert (setting["probe"], setting["identification"]) == (None, None)
    assert none["verdict"] is None  # no test ran
    assert laplace["verdict"] == {"verdict": "consistent", "decided_by": DISTINGUISHING,
                                  "p_value": None, "tests": 1, "family": FAMILY, "adjusted_p_value": None,
                                  "evidence": None}


def test_a_version_3_document_is_upgraded_to_6_without_touching_the_original(document, to_version_5):
    old = _as_version_3(to_version_5(document))
    current = copy.deepcopy(document)
    before = copy.deepcopy(old)
    new = upgrade_results(old)
    assert old == before  # pure
    validate_results(new)
    assert new["schema_version"] == 6
    assert new["provenance"]["data"] == {**old["provenance"]["data"], "source": ""}
    assert {k: v for k, v in new["provenance"].items() if k != "data"} == {
        k: v for k, v in current["provenance"].items() if k != "data"}
    for key in ("schema", "command", "title", "config"):
        assert new[key] == current[key]
    for upgraded, setting, written in zip(new["settings"], old["settings"], current["settings"], strict=True):
        assert {k: v for k, v in upgraded.items() if k not in V4_ONLY} == {  # nothing else changed
            k: v for k, v in written.items() if k not in V4_ONLY}
        assert (upgraded["probe"], upgraded["identification"]) == (None, None)
        assert upgraded["verdict"] == overall_verdict(written["distinguish"], None)
    none, jopeq, gaussian = new["settings"]
    assert none["verdict"] is None  # no distinguishing test
    # the worst verdict of the distinguishing test and its adaptive test; between equals, the one with a p-value
    assert jopeq["verdict"] == {"verdict": "violated", "decided_by": DISTINGUISHING,
                                "p_value": 0.00012, "tests": 2, "family": FAMILY,
                                "adjusted_p_value": pytest.approx(FAMILY * 0.00012), "evidence": "marginal"}
    assert gaussian["verdict"] == {"verdict": "consistent",
                                   "decided_by": DISTINGUISHING, "p_value": 0.91,
                                   "tests": 1, "family": FAMILY, "adjusted_p_value": pytest.approx(min(1, FAMILY * 0.91)),
                                   "evidence": None}
    # the version 4 document itself decided s01 by its identification test, which version 3 did not have
    assert document["settings"][1]["verdict"]["decided_by"]["candidates"] == 10


@pytest.mark.parametrize("name", ["train", "attack", "distinguish", "account"])
def test_every_commands_version_3_document_is_upgraded_to_a_valid_version_6(documents, name, to_version_5):
    old = _as_version_3(to_version_5(documents[name]))
    new = upgrade_results(old)
    validate_results(new)
    assert new["provenance"]["data"] == (None if old["provenance"]["data"] is None else
                                         {**old["provenance"]["data"], "source": ""})
    assert [s["verdict"] for s in new["settings"]] == [overall_verdict(s["distinguish"], None)
                                                       for s in old["settings"]]


def test_load_results_upgrades_a_version_3_file_that_then_renders(tmp_path, grid_png, document, to_version_5):
    old = _as_version_3(to_version_5(document))
    path = tmp_path / "results.json"
    path.write_text(json.dumps(old, allow_nan=True))
    (tmp_path / "figures").mkdir()
    for setting_id in ("s00", "s01"):
        (tmp_path / "figures" / f"reconstruction-{setting_id}.png").write_bytes(grid_png)
    loaded = load_results(path)
    assert json.dumps(loaded, allow_nan=True) == json.dumps(upgrade_results(old), allow_nan=True)
    render_report(loaded, tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "## Reconstruction against the claim" not in text  # neither probe nor identification tests
    assert "- **inversion probe**: not run" in text
    assert "- JoPEQ \\| eps=1: violated (marginal refutation): the one-round claim ε = 1, δ = 0; certified ε ≥ 1.83 " \
           "against the claimed 1 (0 vs clip) (p = 0.00012, 0.00048 adjusted over the audit's 4 tests)." in text


@pytest.mark.parametrize("name", ["train", "audit", "attack", "attack-curve", "distinguish", "account"])
def test_every_commands_version_5_document_is_upgraded_to_the_document_it_was(documents, name, to_version_5):
    """Version 6 only renamed (issue 40): the upgrade gives back every value under its new name, nothing lost."""
    old = to_version_5(documents[name])
    before = copy.deepcopy(old)
    assert upgrade_results(old) == documents[name]
    assert old == before  # pure


def test_a_version_5_file_renders_the_report_of_the_document_it_was(tmp_path, grid_png, document, to_version_5):
    texts = []
    for folder, written in ((tmp_path / "v5", to_version_5(document)), (tmp_path / "v6", document)):
        (folder / "figures").mkdir(parents=True)
        for setting_id in ("s00", "s01", "s02"):
            for kind in ("reconstruction", "probe"):
                (folder / "figures" / f"{kind}-{setting_id}.png").write_bytes(grid_png)
        (folder / "results.json").write_text(json.dumps(written, allow_nan=True))
        render_report(load_results(folder / "results.json"), folder)
        texts.append((folder / "report.md").read_text())
    assert texts[0] == texts[1]
    assert "accountant asked for: " in texts[0] and "- **audit setting**: " in texts[0]


def test_a_version_5_reproduction_is_upgraded_unchanged_but_its_version(reproduction, to_version_5):
    old = to_version_5(reproduction)
    assert old["schema_version"] == 5 and upgrade_results(old) == reproduction


@pytest.mark.parametrize("relation, upgraded", [
    ("replace-one", "REPLACE_ONE"), ("add-remove", "ADD_OR_REMOVE_ONE"), ("REPLACE_ONE", "REPLACE_ONE")])
def test_version_2_relations_become_dp_accounting_names(v2_document, relation, upgraded):
    old = v2_document
    old["settings"][1]["mechanism"]["guarantee"]["relation"] = relation
    old["provenance"]["neighbouring_relations"] = [relation]
    new = upgrade_results(old)
    assert new["settings"][1]["mechanism"]["guarantee"]["relation"] == upgraded
    assert new["provenance"]["neighbouring_relations"] == [upgraded]


@pytest.mark.parametrize("path, value, message", [
    (("schema_version",), 3, "results.provenance.code is missing"),  # a document saying version 3 is checked as such
    (("settings", 1, "accounting", "delta"), KeyError, "results.settings[1].accounting.delta is missing"),
    (("settings", 0, "mechanism", "guarantee", "relation"), None,
     "results.settings[0].mechanism.guarantee.relation must be a string, got None"),
])
def test_upgrade_checks_the_older_document_first(v2_document, path, value, message):
    old = v2_document
    _set(old, path, value)
    with pytest.raises(ValueError) as error:
        upgrade_results(old)
    assert str(error.value) == message


def test_load_results_upgrades_a_version_2_file_that_then_renders(tmp_path, grid_png, v2_document):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(v2_document, allow_nan=True))
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "reconstruction-s00.png").write_bytes(grid_png)
    loaded = load_results(path)
    assert json.dumps(loaded, allow_nan=True) == json.dumps(upgrade_results(v2_document), allow_nan=True)
    written = render_report(loaded, tmp_path)
    assert [p.name for p in written][-2:] == ["report.md", "report.html"]
    text = (tmp_path / "report.md").read_text()
    assert "- **code**: unknown (written by auditkit 0.1.0 as schema v2)" in text
    assert "- **capabilities**: unknown (these results were written before auditkit recorded them, as schema v2)" in text
    assert "- **training**: protocol unknown, 3 rounds, checkpoints at 1, 3" in text
    assert "- **audit setting**: not recorded" in text


def test_a_version_1_file_is_refused_in_one_line_saying_how_to_regenerate_it(tmp_path):
    path = tmp_path / "results.json"  # what `auditkit train` wrote before
    path.write_text(json.dumps({"schema": "auditkit/results", "schema_version": 1, "command": "train",
                                "auditkit_version": "0.0.9", "config": {"seed": 0}, "rounds": []}))
    with pytest.raises(ValueError) as error:
        load_results(path)
    assert str(error.value) == (
        f"{path}: schema version 1 (written by auditkit 0.0.9) cannot be read by this auditkit ({VERSION}), which "
        f"reads versions 2 to 6: regenerate it with `auditkit train` on the config recorded in it (the same config "
        f"and seed give the same numbers)")
    assert "\n" not in str(error.value)


def test_a_newer_file_is_refused_saying_to_upgrade_or_regenerate(tmp_path, documents):
    document = documents["distinguish"]
    document["schema_version"] = 7
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError) as error:
        load_results(path)
    assert str(error.value) == (
        f"{path}: schema version 7 (written by auditkit 0.2.0) cannot be read by this auditkit ({VERSION}), which "
        f"reads versions 2 to 6: regenerate it with `auditkit distinguish` and the options recorded in its config "
        f"(the same config and seed give the same numbers); or upgrade auditkit")



# ---------------------------------------------------------------- a reproduction (command "reproduce")

def _first_run(document):
    return next(iter(document["runs"].values()))


def test_a_reproduction_is_a_document_of_this_schema(reproduction):
    from auditkit.results import file_name

    validate_results(reproduction)
    assert (reproduction["schema"], reproduction["schema_version"], reproduction["command"]) == (SCHEMA, 6, "reproduce")
    assert reproduction["title"] == "dpsq (quick budget)" and reproduction["config"] == {
        "paper": "dpsq", "budget": "quick", "seeds": 3, "data_dir": None, "confidence": 0.95}
    assert reproduction["provenance"]["code"].startswith("sha256:") and reproduction["provenance"]["plugins"] == []
    assert (file_name(reproduction), file_name({"command": "audit"})) == ("reproduction.json", "results.json")
    kinds = {run["kind"] for run in reproduction["runs"].values()}
    assert kinds == {"train", "distortion"}
    snrs = [seed["snr_db"] for run in reproduction["runs"].values() if run["kind"] == "train"
            for seed in run["seeds"].values()]
    assert None in snrs and math.inf in snrs  # what real runs give: no SNR, a lossless uplink's


LONG_KEY = r"reproduction\.runs\['\{\"config\": \{.{24}\.\.\.\]"  # a setting key, cut short


@pytest.mark.parametrize("change, message", [
    (lambda d: d["tables"][0]["rows"][0].pop("mean"), r"reproduction\.tables\[0\]\.rows\[0\]\.mean is missing"),
    (lambda d: d.update(seconds=math.nan), r"reproduction\.seconds must be a finite number, got nan"),
    (lambda d: d["tables"][1]["rows"][2].update(paper_plus_minus=math.inf),
     r"reproduction\.tables\[1\]\.rows\[2\]\.paper_plus_minus must be a finite number, got inf"),
    (lambda d: d["tables"][0]["rows"][1].update(difference=math.nan),
     r"reproduction\.tables\[0\]\.rows\[1\]\.difference must be a finite number, got nan"),
    (lambda d: d["tables"][0]["rows"][0].update(line="431"),
     r"reproduction\.tables\[0\]\.rows\[0\]\.line must be an integer, got '431'"),
    (lambda d: d["tables"][0]["rows"][0].update(per_seed=[70.0, "71", 72.0]),
     r"reproduction\.tables\[0\]\.rows\[0\]\.per_seed\[1\] must be a number, got '71'"),
    (lambda d: d["tables"][0]["rows"][0].update(verdict="close"), r"reproduction\.tables\[0\]\.rows\[0\]\.verdict "
     r"must be one of 'reproduced', 'not reproduced', 'not comparable', got 'close'"),
    (lambda d: d["tables"][0]["rows"][0].update(interval=[1.0]),
     r"reproduction\.tables\[0\]\.rows\[0\]\.interval must be \[low, high\], got 1 numbers"),
    (lambda d: d["tables"][0]["rows"][0].update(per_seed=[70.0]),
     r"reproduction\.tables\[0\]\.rows\[0\]\.per_seed must hold one value per seed \(3\), got 1"),
    (lambda d: d["tables"][0]["rows"][0].update(setting="nope"), r"reproduction\.tables\[0\]\.rows\[0\]\.setting "
     r"must be the key of a train run in reproduction\.runs, got 'nope'"),
    (lambda d: d["tables"][1]["rows"][0].update(setting=d["tables"][0]["rows"][0]["setting"]),
     r"reproduction\.tables\[1\]\.rows\[0\]\.setting must be the key of a distortion run in reproduction\.runs"),
    (lambda d: d["tables"][0].update(kind="fly"), r"reproduction\.tables\[0\]\.kind must be one of 'train', "
     r"'attack', 'round_attack', 'distortion', got 'fly'"),
    (lambda d: d["tables"][1].update(id=d["tables"][0]["id"]), r"reproduction\.tables\[1\]\.id must be unique"),
    (lambda d: d["orderings"][0].update(table="Fig. 9"),
     r"reproduction\.orderings\[0\]\.table must be the id of one of reproduction\.tables, got 'Fig\. 9'"),
    (lambda d: d["orderings"][0]["pairs"][0].update(verdict="maybe"),
     r"reproduction\.orderings\[0\]\.pairs\[0\]\.verdict must be one of 'holds', 'reversed', 'unresolved'"),
    (lambda d: d.update(confidence=1.5), r"reproduction\.confidence must be in \(0, 1\), got 1\.5"),
    (lambda d: d["provenance"].pop("code"), r"reproduction\.provenance\.code is missing"),
    (lambda d: d["paper"].update(sources="001"), r"reproduction\.paper\.sources must be a list, got str"),
    (lambda d: d.update(runs=[]), r"reproduction\.runs must be an object, got list"),
    (lambda d: _first_run(d)["seeds"]["0"].pop("seconds"), LONG_KEY + r"\.seeds\['0'\]\.seconds is missing"),
    (lambda d: _first_run(d)["seeds"]["1"].update(curve=[0.5, None]),
     LONG_KEY + r"\.seeds\['1'\]\.curve\[1\] must be a number, got None"),
    (lambda d: _first_run(d).update(kind="fly"), LONG_KEY + r"\.kind must be one of 'train', 'attack'"),
    (lambda d: _first_run(d)["seeds"].pop("2"), LONG_KEY + r"\.seeds must hold the budget's seeds 0, 1, 2, got '0, 1'"),
])
def test_a_corrupted_reproduction_is_refused_in_one_line_naming_the_field(reproduction, change, message):
    change(reproduction)
    with pytest.raises(ValueError) as error:
        validate_results(reproduction)
    assert re.match(f"^{message}", str(error.value)), str(error.value)
    assert "\n" not in str(error.value)


def test_a_reproduction_loads_back_from_strict_json_with_its_non_finite_numbers(tmp_path, reproduction):
    from auditkit.results import write_results

    row = reproduction["tables"][0]["rows"][0]
    row.update(mean=math.nan, per_seed=[math.nan, 70.0, 71.0], interval=None)  # a metric one seed did not measure
    path = write_results(reproduction, tmp_path)
    assert path == tmp_path / "reproduction.json"
    raw = json.loads(path.read_text(encoding="utf-8"), parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert raw["tables"][0]["rows"][0]["mean"] == "NaN" and raw["tables"][0]["rows"][0]["per_seed"][0] == "NaN"
    assert "Infinity" in {seed["snr_db"] for run in raw["runs"].values() for seed in run["seeds"].values()
                          if "snr_db" in seed}
    loaded = load_results(path)
    assert math.isnan(loaded["tables"][0]["rows"][0]["mean"]) and math.isnan(loaded["tables"][0]["rows"][0]["per_seed"][0])
    snr = [seed["snr_db"] for run in loaded["runs"].values() for seed in run["seeds"].values() if "snr_db" in seed]
    assert math.inf in snr and None in snr
    assert json.dumps(loaded, sort_keys=True) == json.dumps(reproduction, sort_keys=True)  # all else as written


def test_a_string_reading_nan_where_a_finite_number_belongs_is_refused(tmp_path, reproduction):
    reproduction["seconds"] = "NaN"
    path = tmp_path / "reproduction.json"
    path.write_text(json.dumps(reproduction))
    with pytest.raises(ValueError) as error:
        load_results(path)
    assert str(error.value) == f"{path}: reproduction.seconds must be a finite number, got 'NaN'"


def _as_reproduction_v2(document):
    """The reproduction as ``auditkit reproduce`` wrote it before it joined the results schema: its own header
    ("auditkit.reproduction" version 2, the writer's version at the top), no config or provenance, and from before
    the confidence and the tables' note and dataset were recorded."""
    old = {"schema": "auditkit.reproduction", "schema_version": 2, "auditkit": "0.1.0",
           **{key: value for key, value in document.items() if key not in
              ("schema", "schema_version", "command", "title", "config", "provenance", "confidence")}}
    for table in old["tables"]:
        del table["note"], table["dataset"]
    return old


def test_a_reproduction_of_the_old_schema_is_upgraded_and_renders(tmp_path, reproduction):
    from auditkit.strict_json import dumps_strict

    path = tmp_path / "reproduction.json"
    path.write_text(dumps_strict(_as_reproduction_v2(copy.deepcopy(reproduction))))
    loaded = load_results(path)
    assert (loaded["schema"], loaded["schema_version"], loaded["command"]) == (SCHEMA, 6, "reproduce")
    assert loaded["title"] == "dpsq (quick budget)" and loaded["confidence"] == 0.95
    assert loaded["provenance"] == {"auditkit_version": "0.1.0", "plugins": [], "versions": {}, "platform": "unknown",
                                    "code": "unknown (written by auditkit 0.1.0 as auditkit.reproduction v2)"}
    assert [t["dataset"] for t in loaded["tables"]] == ["mnist-5k", None, None]  # training tables: the run's data
    assert all(t["note"] == "" for t in loaded["tables"])
    assert loaded["tables"] == [{**t, "note": "", "dataset": d} for t, d in
                                zip(reproduction["tables"], ["mnist-5k", None, None])]
    written = render_report(loaded, tmp_path)
    assert (tmp_path / "report.html").is_file() and len(written) == len(loaded["tables"]) + 2


def test_an_old_reproduction_of_another_version_is_refused_saying_how_to_regenerate_it(tmp_path):
    path = tmp_path / "reproduction.json"
    path.write_text(json.dumps({"schema": "auditkit.reproduction", "schema_version": 1, "auditkit": "0.0.9"}))
    with pytest.raises(ValueError) as error:
        load_results(path)
    assert str(error.value) == (
        f"{path}: schema version 1 (written by auditkit 0.0.9) cannot be read by this auditkit ({VERSION}), which "
        "reads versions 2 to 6: regenerate it with `auditkit reproduce` on the paper, budget and seeds recorded in "
        "it (the same config and seed give the same numbers)")


def test_a_folder_names_the_document_it_holds(tmp_path):
    from auditkit.results import document_path

    assert document_path(tmp_path / "x.json") == tmp_path / "x.json"
    with pytest.raises(ValueError, match=r": holds no results\.json or reproduction\.json$"):
        document_path(tmp_path)
    (tmp_path / "reproduction.json").write_text("{}")
    assert document_path(tmp_path) == tmp_path / "reproduction.json"
    (tmp_path / "results.json").write_text("{}")
    with pytest.raises(ValueError, match=r": holds both results\.json and reproduction\.json; name the one to render$"):
        document_path(tmp_path)
