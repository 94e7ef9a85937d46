"""The results documents auditkit wrote before, checked as what they were before they are upgraded
(``auditkit.results.upgrade``): each version the next one's models less what it added, or with the names it
renamed."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from auditkit.results.model import (Accounting, AdaptiveResult, Canary, CanaryView, ComposedRun, Data, Distinguish,
                                    ExampleLevel, Guarantee, Headline, Identification, Inversion, Matched, MatchedRuns,
                                    ModelInfo, Probe, Provenance, ReconstructionSweep, ResultsDocument, Scores, Setting,
                                    StrongestBound, Training, TrainingInfo)
from auditkit.results.reproduction import Budget, Ordering, Paper, Reproduction, Run, Table
from auditkit.results.types import Finite, Int, JsonObject, Name, Number, Section, Text

__all__ = ["DocumentV2", "DocumentV3", "DocumentV4", "DocumentV5", "ReproductionV2", "ReproductionV4", "ReproductionV5"]


# ---- version 5: the accountant named ``backend``, the attacked targets ``clients``, the identification and canary
# tests' statistic ``scoring``, the distinguishing test's audit setting ``setting`` (a field typed ``None = None``:
# version 5 had no such key)
class ComposedRunV5(ComposedRun):
    accountant: None = None
    backend: Text


class ExampleLevelV5(ExampleLevel):
    accountant: None = None
    backend: Text


class AccountingV5(Accounting):
    accountant: None = None
    backend: Text
    composed: ComposedRunV5 | None
    composed_actual: ComposedRunV5 | None
    example_level: ExampleLevelV5 = None


class ProvenanceV5(Provenance):
    accountants: None = None
    accountant_backends: list[Text]


class InversionV5(Inversion):
    targets: None = None
    clients: list[Int] | None


class MatchedV5(Matched):
    targets: None = None
    clients: Int


class MatchedRunsV5(MatchedRuns):
    clean: list[MatchedV5]
    defended: list[MatchedV5]


class SweepV5(ReconstructionSweep):
    targets: None = None
    clients: Int


class ProbeV5(Probe):
    targets: None = None
    clients: Int
    matched: MatchedRunsV5
    sweep: SweepV5 = None


class IdentificationV5(Identification):
    statistic: None = None
    scoring: Text


class CanaryViewV5(CanaryView):
    statistic: None = None
    scoring: Text


class CanaryV5(Canary):
    views: list[CanaryViewV5]


class DistinguishV5(Distinguish):
    audit_setting: None = None
    setting: Text


class SettingV5(Setting):
    accounting: AccountingV5 | None
    inversion: InversionV5 | None
    probe: ProbeV5 | None
    identification: IdentificationV5 | None
    distinguish: DistinguishV5 | None
    canary: CanaryV5 | None = None


class DocumentV5(ResultsDocument):
    schema_version: Literal[5]
    provenance: ProvenanceV5
    settings: list[SettingV5]


class ReproductionV5(Reproduction):
    schema_version: Literal[5]


# ---- version 4: a headline's decisive test named in words; an adaptive test's claim and the stated one in one text
class StrongestBoundV4(StrongestBound):
    test: Text


class HeadlineV4(Headline):
    decided_by: Text
    bound: StrongestBoundV4 | None = None


class AdaptiveV4(AdaptiveResult):
    stated_claim: Text = None


class DistinguishV4(DistinguishV5):
    adaptive: list[AdaptiveV4]


class SettingV4(SettingV5):
    distinguish: DistinguishV4 | None
    verdict: HeadlineV4 | None


class DocumentV4(DocumentV5):
    schema_version: Literal[4]
    settings: list[SettingV4]


class ReproductionV4(Reproduction):
    schema_version: Literal[4]


# ---- version 3: before the probe, the identification tests, the canary audits, the headline and the data's source
class DataV3(Data):
    source: Text = None


class ProvenanceV3(ProvenanceV5):
    data: DataV3 | None


class SettingV3(SettingV4):
    probe: None = None
    identification: None = None
    verdict: None = None


class DocumentV3(DocumentV4):
    schema_version: Literal[3]
    provenance: ProvenanceV3
    settings: list[SettingV3]


# ---- version 2: ``auditkit audit`` before plugins, capabilities, round protocols and a choice of accountant
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


class RunV2(ComposedRunV5):
    rounds: Int = None


class AccountingV2(Section):
    rounds: Int
    delta: Number
    composed: RunV2 | None
    refusal: Text | None
    composed_actual: RunV2 | None


class InversionV2(InversionV5):
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
