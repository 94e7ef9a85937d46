"""The report's closing sections: the run's provenance, versions and config, and the footer line."""
from __future__ import annotations

from auditkit.results.model import ResultsDocument
from auditkit.results.reproduction import Reproduction
from auditkit.results.types import JsonObject
from auditkit.strict_json import dumps_strict


def provenance(results: ResultsDocument) -> list[tuple[str, str]]:
    """The run's provenance, one (name, text) pair per fact; versions and threat models are separate tables."""
    p = results.provenance
    facts = [
        ("auditkit", p.auditkit_version),
        ("code", p.code),
        ("plugins", ", ".join(p.plugins) or "none"),
        ("seed", str(p.seed)),
        ("device", p.device),
        ("platform", p.platform),
    ]
    if p.data is not None and p.data.source:
        facts.append(("data source", p.data.source))
    if p.data is not None:
        facts.append(("client sizes", ", ".join(f"{size:,}" for size in p.data.client_sizes) + " examples"))
    if p.training is not None:
        facts += [("sampling", p.training.sampling), ("participation", p.training.participation)]
        if p.training.backend:
            facts.append(("training backend", p.training.backend))
    return facts + [
        ("accountants", ", ".join(p.accountants) or "none"),
        ("neighbouring relations", ", ".join(p.neighbouring_relations) or "none"),
    ]


def pairs(mapping: JsonObject) -> list[tuple[str, str]]:
    """A name -> value map as (name, text) rows, in document order."""
    return [(str(key), str(value)) for key, value in mapping.items()]


def config_json(results: ResultsDocument | Reproduction) -> str:
    """The config as pretty, strict JSON: a non-finite number as results.json writes it ("Infinity", "-Infinity",
    "NaN"; ``auditkit.strict_json.dumps_strict``), so the config shown parses as JSON."""
    return dumps_strict(results.config, indent=2, ensure_ascii=False)


def footer(document: ResultsDocument | Reproduction) -> str:
    """The line that closes every report: which auditkit wrote the document, in which schema, for which command."""
    return (f"written by auditkit {document.provenance.auditkit_version} as {document.schema_} version "
            f"{document.schema_version} (command: {document.command.value})")
