"""The results documents every command writes (schema ``auditkit/results``): their typed models
(``model``, ``reproduction``; older versions in ``legacy``, upgraded by ``upgrade``), the builders of their
sections (``build``) and reading and writing them (``documents``)."""
from auditkit.results.build import (FLOAT32_BITS, accounting_entry, canary_entry, canary_view, code_fingerprint,
                                    distinguish_entry, document, mechanism_entry, membership_attack, membership_entry,
                                    provenance, round_snr_db, setting, training_entry)
from auditkit.results.documents import (as_dict, as_model, document_path, file_name, load_results, upgrade_results,
                                        validate_results, write_results)
from auditkit.results.model import SCHEMA, SCHEMA_VERSION, Command, ResultsDocument
from auditkit.results.reproduction import Reproduction

__all__ = [
    "FLOAT32_BITS", "SCHEMA", "SCHEMA_VERSION", "Command", "Reproduction", "ResultsDocument", "accounting_entry",
    "as_dict", "as_model",
    "canary_entry", "canary_view", "code_fingerprint", "distinguish_entry", "document", "document_path",
    "file_name", "load_results", "mechanism_entry", "membership_attack", "membership_entry", "provenance", "round_snr_db", "setting", "training_entry",
    "upgrade_results", "validate_results", "write_results",
]
