"""A reproduction (``command`` "reproduce", ``reproduction.json``): a paper's tables, each row's number beside
ours over seeds, and the orderings the paper claims checked on paired seeds (``auditkit.reproduction``)."""
from __future__ import annotations

import enum

from pydantic import ValidationError, model_validator

from auditkit.results.errors import message
from auditkit.results.model import Header
from auditkit.results.types import Finite, Int, JsonObject, Name, Number, Section, Text, one_of, short

__all__ = ["OrderingVerdict", "Reproduction", "RowVerdict", "RunKind"]


class RunKind(enum.StrEnum):
    """What a reproduction's setting runs."""

    TRAIN = "train"
    ATTACK = "attack"
    ROUND_ATTACK = "round_attack"
    DISTORTION = "distortion"


class RowVerdict(enum.StrEnum):
    """A row of a paper's table against ours."""

    REPRODUCED = "reproduced"
    NOT_REPRODUCED = "not reproduced"
    NOT_COMPARABLE = "not comparable"


class OrderingVerdict(enum.StrEnum):
    """A claimed ordering on our paired seeds."""

    HOLDS = "holds"
    REVERSED = "reversed"
    UNRESOLVED = "unresolved"


class ReproductionProvenance(Section):
    auditkit_version: Text
    code: Text
    plugins: list[Text]
    versions: JsonObject
    platform: Text


class Paper(Section):
    id: Name
    title: Name
    sources: list[Text]
    data: Text
    data_note: Text


class Budget(Section):
    name: Name
    rounds: Int
    seeds: list[Int]
    why: Text
    paper_rounds: Int
    paper_seeds: Int


class Row(Section):
    table: Text
    method: Text
    column: Text
    x: Finite | None
    paper: Text
    line: Int
    paper_value: Number | None
    paper_plus_minus: Finite | None
    per_seed: list[Number]
    mean: Number
    interval: list[Number] | None
    difference: Finite | None
    verdict: one_of(RowVerdict)
    why: list[Text]
    setting: Text


class Table(Section):
    id: Name
    caption: Text
    metric: Text
    metric_description: Text
    kind: one_of(RunKind)
    dataset: Text | None
    rounds: Int | None
    x_label: Text
    note: Text
    rows: list[Row]


class Gap(Section):
    claimed: Finite
    tolerance: Finite
    verdict: one_of(RowVerdict)


class OrderingPair(Section):
    ordering: Text
    column: Text
    x: Finite | None
    above: Text
    below: Text
    difference: Number
    interval: list[Number] | None
    verdict: one_of(OrderingVerdict)
    gap: Gap = None


class Ordering(Section):
    id: Name
    quote: Text
    table: Text
    metric: Text
    pairs: list[OrderingPair]


class TrainMeasurement(Section):
    test_accuracy: Number
    snr_db: Number | None
    curve: list[Number]
    snr_curve: list[Number | None]
    seconds: Finite


class AttackMeasurement(Section):
    ssim: Number
    mse: Number
    psnr: Number
    bits_per_coordinate: Number
    seconds: Finite


class RoundAttackMeasurement(Section):
    round_mse: Number
    ssim: Number
    clean_mse: Number
    test_accuracy: Number
    seconds: Finite


class DistortionMeasurement(Section):
    distortion: Number
    mean_squared_error: Number
    seconds: Finite


MEASUREMENTS: dict[RunKind, type[Section]] = {
    RunKind.TRAIN: TrainMeasurement, RunKind.ATTACK: AttackMeasurement,
    RunKind.ROUND_ATTACK: RoundAttackMeasurement, RunKind.DISTORTION: DistortionMeasurement,
}
"""What a run of each kind measures at each seed (``auditkit.reproduction.runner``)."""


class Run(Section):
    kind: one_of(RunKind)
    config: JsonObject
    seeds: dict[Text, JsonObject]


class Reproduction(Header):
    provenance: ReproductionProvenance
    paper: Paper
    budget: Budget
    dataset: Text
    confidence: Finite
    seconds: Finite
    not_comparable: list[Text]
    tables: list[Table]
    orderings: list[Ordering]
    runs: dict[Text, Run]

    @model_validator(mode="after")
    def _consistent(self) -> Reproduction:
        """What the layout cannot say: the confidence in (0, 1); each run measured at every seed what its kind
        measures; table ids unique; each row in its table, one value per seed, an interval of two numbers, reading
        a run of its table's kind; each ordering on a table of the document."""
        if not 0 < self.confidence < 1:
            raise ValueError(f"reproduction.confidence must be in (0, 1), got {short(self.confidence)}")
        seeds = [str(seed) for seed in self.budget.seeds]
        for key, run in self.runs.items():
            where = f"reproduction.runs[{short(key)}]"
            if sorted(run.seeds) != sorted(seeds):
                raise ValueError(f"{where}.seeds must hold the budget's seeds {', '.join(seeds)}, got "
                                 f"{short(', '.join(run.seeds))}")
            for seed, measured in run.seeds.items():
                run.seeds[seed] = _measured(MEASUREMENTS[run.kind], measured, f"{where}.seeds[{seed!r}]")
        tables: set[str] = set()
        for i, table in enumerate(self.tables):
            where = f"reproduction.tables[{i}]"
            if table.id in tables:
                raise ValueError(f"{where}.id must be unique, got {short(table.id)} twice")
            tables.add(table.id)
            for j, row in enumerate(table.rows):
                _check_row(row, table, self.runs, len(seeds), f"{where}.rows[{j}]")
        for i, ordering in enumerate(self.orderings):
            where = f"reproduction.orderings[{i}]"
            if ordering.table not in tables:
                raise ValueError(f"{where}.table must be the id of one of reproduction.tables, got "
                                 f"{short(ordering.table)}")
            for j, pair in enumerate(ordering.pairs):
                _check_interval(pair.interval, f"{where}.pairs[{j}].interval")
        return self


def _measured(model: type[Section], measured: dict, where: str) -> dict:
    """A seed's measurements checked against its run's kind, its non-finite numbers decoded."""
    try:
        return model.model_validate(measured).model_dump(exclude_unset=True)
    except ValidationError as err:
        raise ValueError(message(err, where)) from None


def _check_interval(interval: list | None, where: str) -> None:
    if interval is not None and len(interval) != 2:
        raise ValueError(f"{where} must be [low, high], got {len(interval)} numbers")


def _check_row(row: Row, table: Table, runs: dict[str, Run], seeds: int, at: str) -> None:
    if row.table != table.id:
        raise ValueError(f"{at}.table must be its table's id {table.id!r}, got {short(row.table)}")
    if len(row.per_seed) != seeds:
        raise ValueError(f"{at}.per_seed must hold one value per seed ({seeds}), got {len(row.per_seed)}")
    _check_interval(row.interval, f"{at}.interval")
    run = runs.get(row.setting)
    if run is None or run.kind != table.kind:
        raise ValueError(f"{at}.setting must be the key of a {table.kind} run in reproduction.runs, got "
                         f"{short(row.setting)}")
