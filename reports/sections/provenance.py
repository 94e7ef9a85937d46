"""The report's closing sections: the run's provenance, versions and config, and the footer line."""
from __future__ import annotations

from auditkit.reports.sections.text import number
from auditkit.results.model import ResultsDocument, TrainingInfo
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
        local = local_training(p.training)
        if local is not None:
            facts.append(("local training", local))
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


def local_training(training: TrainingInfo) -> str | None:
    """How the clients trained, in words (None: not recorded): optimiser, mode, BatchNorm statistics, precision."""
    if training.optimizer is None:
        return None
    optimizer = training.optimizer.value
    if training.momentum:
        optimizer += f" with momentum {number(training.momentum, 'g')}"
    if training.weight_decay:
        optimizer += f", weight decay {number(training.weight_decay, 'g')}"
    parts = [f"{optimizer} (state {training.optimizer_state.value} between rounds)",
             f"clients in {training.client_mode.value} mode"]
    if training.bn_stats is not None:
        parts.append("BatchNorm running statistics " + (
            "averaged by the server in the clear, beside the mechanism" if training.bn_stats == "averaged"
            else "kept by each client (FedBN)"))
    parts.append(f"server learning rate {number(training.server_lr, 'g')}")
    parts.append(f"{training.precision.value} arithmetic")
    if training.client_chunk is not None:
        parts.append(f"batched up to {training.client_chunk:,} clients at a time")
    if training.recompute_activations:
        parts.append("activations recomputed in the backward pass (checkpointing)")
    return "; ".join(parts)
