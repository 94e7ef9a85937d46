"""Older results documents as the current version: each upgrade takes a document checked as its own version
(``auditkit.results.legacy``) one version up, as a new document; what the older version did not record is said
to be unknown."""
from __future__ import annotations

import copy
from typing import Any

from auditkit.attacks.headline import TestKind, decided_by, overall_verdict
from auditkit.mechanisms.capabilities import CapabilityState
from auditkit.results.model import SCHEMA, SCHEMA_VERSION, Command

__all__ = ["REPRODUCTION_V2_SCHEMA", "V2_RELATIONS", "upgrade"]

REPRODUCTION_V2_SCHEMA = "auditkit.reproduction"
# version 2's neighbouring relations -> dp_accounting's NeighboringRelation names (None: no claim)
V2_RELATIONS = {"replace-one": "REPLACE_ONE", "add-remove": "ADD_OR_REMOVE_ONE", "none": None}
V2_CAPABILITIES = ("tiling", "audit_setting", "output_log_density", "dp_event", "true_epsilon")  # what v2 lacked
_STATED = "; stated claim: "  # how version 4 joined an adaptive test's claim and the mechanism's own


def _run(run: dict[str, Any] | None, rounds: int) -> dict[str, Any] | None:
    return None if run is None else {**run, "rounds": rounds}


def v2_to_v3(doc: dict[str, Any]) -> dict[str, Any]:
    """Provenance ``code`` "unknown (written by auditkit X as schema v2)", ``plugins`` [], every mechanism
    ``origin`` "built-in" (version 2 had no plugins), ``clip_norm`` null, every capability "unknown", training
    ``protocol`` "unknown", the distinguishing ``setting`` and ``sampling`` "" and ``p_value`` null; accounting
    ``delta`` -> ``composition_delta`` (``backend`` "opacus-prv", version 2's only one; ``composed`` gains its
    ``rounds``), relations "replace-one" / "add-remove" / "none" -> "REPLACE_ONE" / "ADD_OR_REMOVE_ONE" / null."""
    doc = copy.deepcopy(doc)
    provenance = doc["provenance"]
    provenance["code"] = f"unknown (written by auditkit {provenance['auditkit_version']} as schema v2)"
    provenance["plugins"] = []
    provenance["neighbouring_relations"] = [V2_RELATIONS.get(r, r) for r in provenance["neighbouring_relations"]
                                            if V2_RELATIONS.get(r, r) is not None]
    for setting in doc["settings"]:
        mechanism = setting["mechanism"]
        relation = mechanism["guarantee"]["relation"]
        mechanism["guarantee"]["relation"] = V2_RELATIONS.get(relation, relation)
        mechanism.update(origin="built-in", clip_norm=None,
                         capabilities=dict.fromkeys(V2_CAPABILITIES, CapabilityState.UNKNOWN))
        setting["training"] = {"protocol": "unknown", **setting["training"]}
        accounting = setting["accounting"]
        setting["accounting"] = {
            "rounds": accounting["rounds"], "composition_delta": accounting["delta"], "backend": "opacus-prv",
            "composed": _run(accounting["composed"], accounting["rounds"]), "refusal": accounting["refusal"],
            "composed_actual": _run(accounting["composed_actual"], accounting["rounds"]),
        }
        if setting["distinguish"] is not None:
            setting["distinguish"].update(p_value=None, setting="", sampling="")
    doc["schema_version"] = 3
    return doc


def v3_to_v4(doc: dict[str, Any]) -> dict[str, Any]:
    """No probe and no identification tests were run (null), the data's ``source`` is "" (not recorded), and the
    headline ``verdict`` is computed from the distinguishing and adaptive tests it holds (in version 4's words)."""
    doc = copy.deepcopy(doc)
    if doc["provenance"]["data"] is not None:
        doc["provenance"]["data"]["source"] = ""
    for setting in doc["settings"]:
        headline = overall_verdict(setting["distinguish"], None)
        if headline is not None:
            headline["decided_by"] = headline["decided_by"]["name"]
        setting.update(probe=None, identification=None, verdict=headline)
    doc["schema_version"] = 4
    return doc


def _decisive(name: str) -> dict[str, Any]:
    """Version 4's name of a decisive test as data: its kind and what it was run on, read once, here."""
    if name.startswith("distinguishing test (worst pair: "):
        return decided_by(TestKind.DISTINGUISHING, name, pair=name.removeprefix("distinguishing test (worst pair: ")
                          .removesuffix(")"))
    if name.startswith("adaptive test "):
        return decided_by(TestKind.ADAPTIVE, name, test=name.removeprefix("adaptive test "))
    if name.startswith("identification among "):
        return decided_by(TestKind.IDENTIFICATION, name, candidates=int(name.split()[2]))
    if name.startswith("one-run canary audit (idealized"):
        return decided_by(TestKind.CANARY, name)
    if name.startswith("one-run canary audit ("):
        view = name.removeprefix("one-run canary audit (").split(" view)")[0]
        return decided_by(TestKind.CANARY, name, view=view, whole_run=True)
    if name.startswith("accounting: "):
        return decided_by(TestKind.ANALYTIC, name, whole_run="composed claim" in name)
    return decided_by(TestKind.NO_CLAIM, name)


def v4_to_v5(doc: dict[str, Any]) -> dict[str, Any]:
    """A headline's decisive test and the test of its strongest bound as data (kind, name and what it was run
    on), and an adaptive
    test's ``claim`` apart from the mechanism's ``stated_claim``."""
    doc = copy.deepcopy(doc)
    for setting in doc.get("settings", ()):
        headline = setting["verdict"]
        if headline is not None:
            headline["decided_by"] = _decisive(headline["decided_by"])
            if headline.get("bound") is not None:
                headline["bound"]["test"] = _decisive(headline["bound"]["test"])
        for adaptive in [] if setting["distinguish"] is None else setting["distinguish"]["adaptive"]:
            claim, _, stated = adaptive["claim"].partition(_STATED)
            adaptive.update(claim=claim, stated_claim=stated)
    doc["schema_version"] = 5
    return doc


def _rename(section: dict[str, Any] | None, old: str, new: str) -> None:
    if section is not None and old in section:
        section[new] = section.pop(old)


def v5_to_v6(doc: dict[str, Any]) -> dict[str, Any]:
    """One word, one meaning (docs/names.md): the accountant ``backend`` -> ``accountant`` (provenance
    ``accountant_backends`` -> ``accountants``; the config's ``[accounting] backend`` and ``account``'s ``backend``
    too), the attacked ``clients`` -> ``targets``, the identification and canary tests' ``scoring`` -> ``statistic``
    and the distinguishing test's ``setting`` -> ``audit_setting``; a reproduction is unchanged."""
    doc = copy.deepcopy(doc)
    doc["schema_version"] = 6
    if doc["command"] == Command.REPRODUCE:
        return doc
    _rename(doc["provenance"], "accountant_backends", "accountants")
    config = doc["config"]
    _rename(config.get("accounting") if isinstance(config.get("accounting"), dict) else None, "backend", "accountant")
    if doc["command"] == Command.ACCOUNT:
        _rename(config, "backend", "accountant")
    for setting in doc["settings"]:
        accounting = setting["accounting"]
        for run in () if accounting is None else (accounting, accounting["composed"], accounting["composed_actual"],
                                                  accounting.get("example_level")):
            _rename(run, "backend", "accountant")
        _rename(setting["inversion"], "clients", "targets")
        probe = setting["probe"]
        if probe is not None:
            for part in (probe, probe.get("sweep"), *probe["matched"]["clean"], *probe["matched"]["defended"]):
                _rename(part, "clients", "targets")
        _rename(setting["identification"], "scoring", "statistic")
        canary = setting.get("canary")
        if canary is not None:
            for part in (*canary["views"], canary["details"]):  # details: the idealized audit's
                _rename(part, "scoring", "statistic")
        _rename(setting["distinguish"], "setting", "audit_setting")
    return doc


def reproduction_v2_to_v4(doc: dict[str, Any]) -> dict[str, Any]:
    """The header of this schema (command "reproduce", the title, the config the budget and paper record), a
    provenance saying what was not recorded (``code`` "unknown (written by auditkit X as auditkit.reproduction
    v2)", no versions, platform "unknown"), and what version 2 files could lack: the confidence (95 %, the only
    one then), each table's ``note`` ("") and ``dataset`` (the run's for tables that train, else null)."""
    body = copy.deepcopy({key: value for key, value in doc.items() if key not in ("schema", "schema_version")})
    body.setdefault("confidence", 0.95)
    for table in body["tables"]:
        table.setdefault("note", "")
        table.setdefault("dataset", body["dataset"] if table["kind"] in ("train", "round_attack") else None)
    paper, budget, writer = body["paper"], body["budget"], body.pop("auditkit")
    return {"schema": SCHEMA, "schema_version": 4, "command": Command.REPRODUCE,
            "title": f"{paper['id']} ({budget['name']} budget)",
            "config": {"paper": paper["id"], "budget": budget["name"], "seeds": len(budget["seeds"]),
                       "confidence": body["confidence"]},
            "provenance": {"auditkit_version": writer, "plugins": [], "versions": {}, "platform": "unknown",
                           "code": f"unknown (written by auditkit {writer} as {REPRODUCTION_V2_SCHEMA} v2)"},
            **body}


_STEPS = {2: v2_to_v3, 3: v3_to_v4, 4: v4_to_v5, 5: v5_to_v6}


def upgrade(doc: dict[str, Any]) -> dict[str, Any]:
    """A checked document of an older version (or an "auditkit.reproduction" version 2) as the current version."""
    if doc.get("schema") == REPRODUCTION_V2_SCHEMA:
        doc = reproduction_v2_to_v4(doc)
    while doc["schema_version"] != SCHEMA_VERSION:
        doc = _STEPS[doc["schema_version"]](doc)
    return doc
