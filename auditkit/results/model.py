"""The results document every command writes, schema ``auditkit/results`` version 6, as pydantic models: the one
definition of its shape, from which validation and the published JSON Schema (docs/reference/results-schema.md)
follow. ``ResultsDocument``: the settings of ``train``, ``audit``, ``attack``, ``distinguish``, ``account`` and
``canary``; ``Reproduction``: ``auditkit reproduce``'s paper tables beside ours. What each field means is said
once, in the docs (docs/guide/results.md), and where a builder computes it (``auditkit.results.build``)."""
from __future__ import annotations

import enum
import re
from typing import Literal

from pydantic import Field, model_validator

from auditkit.accounting.composition import Fallback
from auditkit.attacks.budget import BudgetTrend
from auditkit.attacks.headline import ClaimScope, TestKind
from auditkit.attacks.membership_game import MembershipAttack, MembershipLevel
from auditkit.attacks.verdicts import Evidence, Verdict
from auditkit.fl.spec import BNStats, ClientMode, Normalisation, Optimizer, OptimizerState, Precision
from auditkit.mechanisms.capabilities import CapabilityState
from auditkit.mechanisms.views import View
from auditkit.results.types import (Bool, Finite, Int, JsonObject, Name, Number, Section, Text, figure_path,
                                    one_of, short)

__all__ = ["SCHEMA", "SCHEMA_VERSION", "Command", "ResultsDocument", "Setting"]

SCHEMA = "auditkit/results"
SCHEMA_VERSION = 6
_FILENAME_SAFE = re.compile(r"[A-Za-z0-9._-]+")


class Command(enum.StrEnum):
    """The commands that write a results document (``reproduce``: a reproduction)."""

    TRAIN = "train"
    AUDIT = "audit"
    ATTACK = "attack"
    DISTINGUISH = "distinguish"
    ACCOUNT = "account"
    CANARY = "canary"
    MEMBERSHIP = "membership"
    REPRODUCE = "reproduce"


class Data(Section):
    dataset: Text
    source: Text
    partition: Text
    train: Int
    validation: Int
    test: Int
    client_sizes: list[Int]
    classes: Int = None
    dirichlet_alpha: Finite = None  # the partition's parameter: dirichlet's alpha, shards' shards per client
    shards_per_client: Int = None


class ModelInfo(Section):
    name: Name
    num_params: Int


class TrainingInfo(Section):
    clients: Int
    rounds: Int
    tau: Int
    batch_size: Int
    lr: Number
    participation: Text
    sampling: Text
    backend: Text = None
    # how the clients trained (absent: a document from before they were recorded, or a recording's app)
    local_epochs: Int = None
    optimizer: one_of(Optimizer) = None
    momentum: Number = None
    weight_decay: Number = None
    optimizer_state: one_of(OptimizerState) = None
    server_lr: Number = None
    client_mode: one_of(ClientMode) = None
    bn_stats: one_of(BNStats) = None  # only for a model with BatchNorm running statistics
    precision: one_of(Precision) = None
    client_chunk: Int = None  # clients trained as one batched program (the built-in backend)
    recompute_activations: Bool = None  # activation checkpointing (the sequential path); absent: off


class Provenance(Section):
    auditkit_version: Text
    code: Text
    plugins: list[Text]
    seed: Int
    device: Text
    versions: JsonObject
    platform: Text
    data: Data | None
    model: ModelInfo | None
    training: TrainingInfo | None
    threat_models: JsonObject
    accountants: list[Text]
    neighbouring_relations: list[Text]


class Guarantee(Section):
    """A one-round claim (``auditkit.mechanisms.PrivacyGuarantee.to_dict``)."""

    epsilon: Number | None
    delta: Number
    relation: Text | None
    unit: Text
    scope: Text
    threat_model: Text
    sensitivity: Text
    assumptions: list[Text]
    caveats: list[Text]
    flags: list[Text]
    summary: Text


_State = one_of(CapabilityState)


class Capabilities(Section):
    """Each capability: declared by the mechanism, or its generic default (``auditkit.mechanisms.capabilities``);
    the later ones are absent from older files."""

    tiling: _State  # in the order of ``Capability``, as the builder writes them
    batch_sampling: _State = None
    side_values: _State = None
    audit_setting: _State
    output_log_density: _State
    dp_event: _State
    true_epsilon: _State
    client_sampling: _State = None
    tradeoff: _State = None


class MechanismEntry(Section):
    name: Name
    params: JsonObject
    origin: Text
    clip_norm: Text | None
    view: one_of(View) = None
    guarantee: Guarantee
    true_epsilon: Number | None = None
    capabilities: Capabilities
    # the std per coordinate of the privacy noise in the view ``view`` (one client's decoded update, or the round's
    # sum for noise the server adds), where the mechanism declares a Gaussian or Laplace output density
    noise_std: Number = None
    reproducible: Bool = None


class RoundMetrics(Section):
    round: Int
    lr: Number
    train_loss: Number
    test_loss: Number
    test_accuracy: Number
    bits_per_coordinate: Number
    snr_db: Number | None = None


class FinalMetrics(Section):
    snr_db: Number | None = None
    round: Int
    test_accuracy: Number
    best_test_accuracy: Number
    test_loss: Number
    bits_per_coordinate: Number
    float32_bits_per_coordinate: Number
    compression_vs_float32: Number | None
    uplink_bits_total: Int
    uploads_per_round: Number = None


class Training(Section):
    protocol: Text
    rounds: list[RoundMetrics]
    final: FinalMetrics
    checkpoints: list[Int]


class ComposedRun(Section):
    epsilon: Number
    delta: Number
    rounds: Int
    accountant: Text
    event: Text
    requested: Text = None  # absent in files from before it, as fallbacks
    fallbacks: list[one_of(Fallback)] = []


class SamplingEntry(Section):
    participation: Text
    sample_rate: Number | None
    amplified: Bool
    note: Text


class AccountingCheck(Section):
    verdict: one_of(Verdict)
    independent_epsilon: Number
    reason: Text


class ExampleLevel(Section):
    epsilon: Number
    delta: Number
    noise_multiplier: Number
    max_grad_norm: Number
    batch_size: Int
    sample_rate: Number
    client: Int
    client_examples: Int
    steps: Int
    accountant: Text
    event: Text
    note: Text


class Accounting(Section):
    rounds: Int
    composition_delta: Number
    accountant: Text
    composed: ComposedRun | None
    refusal: Text | None
    composed_actual: ComposedRun | None
    paper_claim: Guarantee | None = None
    sampling: SamplingEntry | None = None
    check: AccountingCheck | None = None
    example_level: ExampleLevel = None


class Scores(Section):
    ssim_mean: Number
    mse_mean: Number
    psnr_mean: Number
    ssim: list[Number]
    mse: list[Number]
    psnr: list[Number]
    label_accuracy: Number | None = None


class ViewScores(Section):
    name: Name
    observation: Text
    defended: Scores


class AttackBudget(Section):
    iterations: Int | None
    restarts: Int | None
    targets: Int
    estimated_seconds: Number
    clean_ssim_at_half: Number | None
    clean_ssim: Number
    ssim_at_half: Number | None
    ssim: Number
    trend: one_of(BudgetTrend)


class Inversion(Section):
    attack: Text
    view: Text
    round: Int | None
    observation: Text
    targets: list[Int] | None
    model: Text
    ssim_variant: Text
    clean: Scores | None
    defended: Scores
    figure: figure_path
    clean_figure: figure_path = None  # the clean attack's grid, shared by the settings whose clean attack is the same
    views: list[ViewScores] = None
    images: Int = None
    source: Text = None
    label_given: Bool = None
    error_std: Number = None
    bits_per_coordinate: Number = None
    normalisation: one_of(Normalisation) | None = None  # how the attacked model's BatchNorm normalised the dummies
    budget: AttackBudget = None  # what the attack's iterations bought (auditkit.attacks.budget)


class Matched(Section):
    candidates: Int
    successes: Int
    targets: Int
    rate: Number
    interval: list[Number]
    bound: Number
    bound_form: Text
    kappa: Number
    exceeds_bound: Bool


class MatchedRuns(Section):
    clean: list[Matched]
    defended: list[Matched]


class SweepPoint(Section):
    eps: Number
    params: JsonObject
    ssim: Number
    ssim_interval: list[Number]
    mse: Number
    mse_interval: list[Number]
    rero_bound: JsonObject


class ReconstructionSweep(Section):
    group: Text
    attack: Text
    targets: Int
    clean_ssim: Number
    level: Number
    crossing_eps: Number | None
    reaches_clean_eps: Number | None
    stopped: Text | None
    points: list[SweepPoint]


class Probe(Section):
    attack: Text
    round: Int
    targets: Int
    batch_size: Int
    local_steps: Int
    model: Text
    observation: Text
    ssim_variant: Text
    clean: Scores
    defended: Scores
    bits_per_coordinate: Number
    matched: MatchedRuns
    figure: figure_path
    clean_figure: figure_path = None  # as Inversion.clean_figure
    sweep: ReconstructionSweep = None
    normalisation: one_of(Normalisation) | None = None  # as Inversion.normalisation
    budget: AttackBudget = None  # as Inversion.budget


class IdentificationTest(Section):
    candidates: Int
    trials: Int
    successes: Int
    rate: Number
    interval: list[Number]
    kappa: Number
    lower: Number
    bound: Number
    bound_form: Text
    p_value: Number
    verdict: one_of(Verdict)


class Identification(Section):
    statistic: Text
    pool: Int
    confidence: Number
    per_test_confidence: Number
    observed_rounds: Int
    note: Text
    tests: list[IdentificationTest]


class AdaptiveResult(Section):
    test: Text
    claim: Text
    stated_claim: Text
    claimed_epsilon: Number | None
    epsilon_lower_bound: Number
    max_certifiable: Number
    verdict: one_of(Verdict)
    p_value: Number | None = None
    note: Text


class TprAtFpr(Section):
    """``auditkit.attacks.roc.TprAtFpr``: the TPR at empirical FPR <= ``target_fpr``, its Clopper-Pearson
    interval and counts."""

    target_fpr: Number
    threshold: Number
    fpr: Number
    tpr: Number
    tpr_low: Number
    tpr_high: Number
    true_positives: Int
    members: Int
    false_positives: Int
    non_members: Int
    confidence: Number


class RocSummary(Section):
    """``auditkit.attacks.roc.RocSummary``: the AUROC with DeLong's interval and the TPR at low FPRs with
    Clopper-Pearson's, all at ``confidence``, from ``positives`` and ``negatives`` scores."""

    auc: Number
    auc_low: Number
    auc_high: Number
    confidence: Number
    positives: Int
    negatives: Int
    tpr_at: list[TprAtFpr]


class Estimate(Section):
    pair: Text
    statistic: Text
    epsilon_lower_bound: Number
    max_certifiable: Number
    p_value: Number | None
    sampling: Text
    roc_summary: RocSummary = None  # the held-out outputs' ROC (absent: written before it was recorded)


class PairCandidate(Section):
    """``auditkit.attacks.pair_search.PairCandidate``; ``parent``: the pair a proposal was made near (null for a
    pair of the setting)."""

    pair: Text
    statistic: Text
    predicted_bound: Number
    selection_trials: Int
    parent: Text | None = None


class Refinement(Section):
    """``auditkit.attacks.pair_search.Refinement``: the chosen pair's refitted test against its candidate's own."""

    refit_statistic: Text
    refit_bound: Number
    kept_bound: Number
    kept_candidate_test: Bool


class PairSearch(Section):
    candidates: list[PairCandidate]
    chosen: Int
    refinement: Refinement | None = None


class Distinguish(Section):
    trials: Int
    confidence: Number
    tests: Int
    claimed_epsilon: Number | None
    delta: Number
    epsilon_lower_bound: Number
    max_certifiable: Number
    worst_pair: Text
    statistic: Text
    verdict: one_of(Verdict)
    p_value: Number | None
    audit_setting: Text
    sampling: Text
    adaptive: list[AdaptiveResult]
    estimates: list[Estimate] = None
    search: PairSearch | None = None
    roc_summary: RocSummary = None  # the worst pair's held-out ROC (absent: written before it was recorded)


class OneRunResult(Section):
    """``auditkit.attacks.one_run.OneRunBound``; a non-finite bound is written as null."""

    bound: Text
    canaries: Int
    guesses: Int
    correct: Int
    confidence: Number
    per_test_confidence: Number
    delta: Number
    epsilon_lower_bound: Number
    max_certifiable: Number
    claimed_epsilon: Number | None
    curve: Text | None
    verdict: one_of(Verdict)
    guess_rule: Text
    grid: list[Int]
    refuted_curve: Text | None = None
    curve_epsilon: Number | None = None
    curve_max_certifiable: Number | None = None


class Roc(Section):
    fpr: list[Number]
    tpr: list[Number]


class CanaryView(Section):
    view: Text
    statistic: Text
    result: OneRunResult
    roc: Roc
    claim_tpr: list[Number]
    roc_summary: RocSummary = None  # absent: written before it was recorded, or < 2 canaries in or out


class CanaryClaim(Section):
    epsilon: Number | None
    delta: Number
    curve: Text | None
    rounds: Int
    note: Text
    accountant_epsilon: Number = None


class Canary(Section):
    kind: Literal["idealized", "fl"]
    canaries: Int
    bound: Text
    confidence: Number
    seconds: Number
    claim: CanaryClaim
    views: list[CanaryView]
    details: JsonObject


class MembershipAttackResult(Section):
    """One attack of the membership stage: the pooled ROC (``auc``, ``tpr_at``, log-log ``roc``, and the TPR the
    claim's curve allows at its FPRs) and the target run's one-run bound (``result``)."""

    attack: one_of(MembershipAttack)
    auc: Number
    tpr_at: list[TprAtFpr]
    roc: Roc
    claim_tpr: list[Number]
    result: OneRunResult


class Membership(Section):
    level: one_of(MembershipLevel)
    view: one_of(View)
    references: Int
    tested: Int
    population: Int
    confidence: Number
    seconds: Number
    claim: CanaryClaim
    attacks: list[MembershipAttackResult]
    details: JsonObject


class DecisiveTest(Section):
    """The test that decided a headline (``auditkit.attacks.headline.decided_by``)."""

    kind: one_of(TestKind)
    name: Text
    pair: Text | None
    test: Text | None
    candidates: Int | None
    view: Text | None
    whole_run: Bool


class StrongestBound(Section):
    epsilon_lower_bound: Number
    test: DecisiveTest
    max_certifiable: Number
    confidence: Number


class ClaimVerdict(Section):
    """The verdict on one claim a setting states, by the tests of that claim alone
    (``auditkit.attacks.headline.claim_verdicts``); ``verdict`` null: no test judged it ("not tested")."""

    scope: one_of(ClaimScope)
    epsilon: Number
    delta: Number | None
    rounds: Int | None
    verdict: one_of(Verdict) | None
    decided_by: DecisiveTest | None
    p_value: Number | None
    tests: Int
    evidence: one_of(Evidence) | None


class Headline(Section):
    """A setting's headline verdict (``auditkit.attacks.headline.overall_verdict``): the worst over all its tests;
    ``claims``, the verdict on each claim it states (absent: written before they were told apart)."""

    verdict: one_of(Verdict)
    decided_by: DecisiveTest
    p_value: Number | None
    tests: Int
    family: Int = None
    adjusted_p_value: Number | None = None
    evidence: one_of(Evidence) | None = None
    bound: StrongestBound | None = None
    claims: list[ClaimVerdict] = None


class Setting(Section):
    id: Name
    label: Name
    sweep: JsonObject
    mechanism: MechanismEntry
    training: Training | None
    accounting: Accounting | None
    inversion: Inversion | None
    probe: Probe | None
    identification: Identification | None
    distinguish: Distinguish | None
    canary: Canary | None = None
    membership: Membership | None = None
    verdict: Headline | None


class Header(Section):
    schema_: Literal["auditkit/results"] = Field(alias="schema")
    schema_version: Literal[6]
    command: one_of(Command)
    title: Name
    config: JsonObject


class ResultsDocument(Header):
    """``results.json``: one or more settings, each a mechanism setting (a grid point of a sweep)."""

    provenance: Provenance
    settings: list[Setting]

    @model_validator(mode="after")
    def _settings_are_named_apart(self) -> ResultsDocument:
        if not self.settings:
            raise ValueError("results.settings must hold at least one setting")
        seen: set[str] = set()
        for i, setting in enumerate(self.settings):
            if not _FILENAME_SAFE.fullmatch(setting.id) or setting.id in seen:
                raise ValueError(f"results.settings[{i}].id must be unique and filename-safe, got {short(setting.id)}")
            seen.add(setting.id)
        return self
