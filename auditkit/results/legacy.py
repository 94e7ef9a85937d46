"""The results documents auditkit wrote before, checked as what they were before they are upgraded
(``auditkit.results.upgrade``): each version the current models less what it added."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from auditkit.results.model import (AdaptiveResult, ComposedRun, Data, Distinguish, Guarantee, Headline, Inversion,
                                    ModelInfo, Provenance, ResultsDocument, Scores, Setting, StrongestBound, Training,
                                    TrainingInfo)
from auditkit.results.reproduction import Budget, Ordering, Paper, Reproduction, Run, Table
from auditkit.results.types import Finite, Int, JsonObject, Name, Number, Section, Text

__all__ = ["DocumentV2", "DocumentV3", "DocumentV4", "ReproductionV2", "ReproductionV4"]


# ---- version 4: a headline's decisive test named in words; an adaptive test's claim and the stated one in one text
class StrongestBoundV4(StrongestBound):
    test: Text


class HeadlineV4(Headline):
    decided_by: Text
    bound: StrongestBoundV4 | None = None


class AdaptiveV4(AdaptiveResult):
    stated_claim: Text = None


class DistinguishV4(Distinguish):
    adaptive: list[AdaptiveV4]


class SettingV4(Setting):
    distinguish: DistinguishV4 | None
    verdict: HeadlineV4 | None


class DocumentV4(ResultsDocument):
    schema_version: Literal[4]
    settings: list[SettingV4]


class ReproductionV4(Reproduction):
    schema_version: Literal[4]


# ---- version 3: before the probe, the identification tests, the canary audits, the headline and the data's source
class DataV3(Data):
    source: Text = None


class ProvenanceV3(Provenance):
    data: DataV3 | None


class SettingV3(SettingV4):
    probe: None = None
    identification: None = None
    verdict: None = None


class DocumentV3(DocumentV4):
    schema_version: Literal[3]
    provenance: ProvenanceV3
    settings: list[SettingV3]


# ---- version 2: ``auditkit audit`` before plugins, capabilities, round protocols and accountant backends
class ProvenanceV2(ProvenanceV3):
    code: Text = None
    plugins: list[Text] = None
    data: DataV3
    model: ModelInfo
    training: TrainingInfo


class GuaranteeV2(Guarantee):
    relation: Text


class MechanismV2(Section):
    name: Name
    params: JsonObject
    guarantee: GuaranteeV2


class TrainingV2(Training):
    protocol: Text = None


class RunV2(ComposedRun):
    rounds: Int = None


class AccountingV2(Section):
    rounds: Int
    delta: Number
    composed: RunV2 | None
    refusal: Text | None
    composed_actual: RunV2 | None


class InversionV2(Inversion):
    round: Int
    clients: list[Int]
    clean: Scores


class DistinguishV2(DistinguishV4):
    p_value: Number | None = None
    setting: Text = None
    sampling: Text = None


class SettingV2(SettingV3):
    mechanism: MechanismV2
    training: TrainingV2
    accounting: AccountingV2
    inversion: InversionV2 | None
    distinguish: DistinguishV2 | None


class DocumentV2(DocumentV3):
    schema_version: Literal[2]
    provenance: ProvenanceV2
    settings: list[SettingV2]


# ---- a reproduction as ``auditkit reproduce`` wrote it before it joined this schema ("auditkit.reproduction" 2)
class TableV2(Table):
    note: Text = None
    dataset: Text | None = None


class ReproductionV2(Section):
    schema_: Literal["auditkit.reproduction"] = Field(alias="schema")
    schema_version: Literal[2]
    auditkit: Text
    paper: Paper
    budget: Budget
    dataset: Text
    confidence: Finite = None
    seconds: Finite
    not_comparable: list[Text]
    tables: list[TableV2]
    orderings: list[Ordering]
    runs: dict[Text, Run]
