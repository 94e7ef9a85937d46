"""A paper's reported results, as data: the tables and figures to reproduce, each row's setting and the paper's
number quoted exactly, and the orderings the paper claims.

A paper file (``auditkit/reproduction/papers/<id>.toml``) holds:

* ``id``, ``title``, ``sources`` (the seed papers it quotes), ``data`` (the paper's dataset) and
  ``data_note`` (what it used of it);
* ``[base]``: the raw config tables every setting starts from (the paper's FL training);
* ``[budget.quick]`` / ``[budget.paper]``: ``rounds`` and ``seeds`` (``why`` says where the numbers come from);
* ``[[tables]]``: ``id`` ("003 Table I", "Fig. 2"), ``caption``, ``metric`` (one of :data:`METRICS`; its kind
  says what a setting runs: FL training, an attack on single-image gradients, an attack on the server's view of
  a real FL round, or the mechanism alone on synthetic inputs), optionally ``base`` (raw tables that replace the paper's ``base`` for this table: an attack's
  or a distortion run's setting), ``rounds`` (a fixed number of rounds for this table whatever the budget, e.g.
  an SNR that needs no converged model), ``scale`` (the paper's unit in ours: 100 for accuracies printed as
  fractions), ``tolerance`` (the default of its rows), ``x_label`` (the figure's x axis, for rows with ``x``),
  ``data`` (the dataset the paper ran this table on when it is not the paper's ``data``, e.g. "cifar10": used when
  ``--data-dir`` holds it, else the run's dataset, said in each row), ``note`` (what the report must say beside
  the table: e.g. the readings a paper's ambiguous setting allows, one per column, and which its own text
  supports), and ``rows``: each with ``method`` (the paper's label), ``column`` (the table's column or the figure's panel),
  ``config`` (raw tables overlaid on the base: model, mechanism, ...), ``paper`` (the number verbatim, e.g.
  "82.06±1.35", "≈70", "∞"; "" for a figure that prints none), ``line`` (the line in the seed's text that
  states it or the setting), optionally ``x`` (the row's point on the figure's x axis), ``tolerance`` (what
  "approximately" or a printed precision allows, in the paper's unit), and ``comparable = false`` with ``why``
  (a setting the paper leaves unstated, an inconsistency);
* ``[[orderings]]``: ``id``, ``quote`` (verbatim), ``table``, and ``above`` / ``below``: method labels of that
  table whose every ``above`` row the paper says beats every ``below`` row of the same column and ``x``;
  optionally ``by`` (the gap the paper claims, in the metric's unit) with ``tolerance``.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from auditkit.results.reproduction import RunKind

__all__ = ["ATTACK", "BUDGETS", "DISTORTION", "METRICS", "ROUND_ATTACK", "TRAIN", "Metric", "Ordering", "Paper", "PaperError", "Row", "Table", "load_paper", "paper_ids",
           "parse_reported"]

BUDGETS = ("quick", "paper")
TRAIN, ATTACK, ROUND_ATTACK, DISTORTION = RunKind  # as the reproduction document's schema knows them


@dataclass(frozen=True)
class Metric:
    description: str
    kind: str  # what a setting of a table with this metric runs: TRAIN, ATTACK, ROUND_ATTACK or DISTORTION


METRICS = {
    "test_accuracy": Metric("final test accuracy (%)", TRAIN),
    "snr_db": Metric("uplink SNR, 10 log10 of mean_k Var(h_k) / Var(h_k - h~_k), mean over the rounds (dB)", TRAIN),
    "ssim": Metric("SSIM of the attack's reconstructions from the server's view (mean over images)", ATTACK),
    "mse": Metric("MSE of the attack's reconstructions from the server's view (pixels in [0, 1], mean over images)",
                  ATTACK),
    "round_mse": Metric("MSE of the attack's reconstructions from the server's view of a real FL round (pixels in "
                        "[0, 1], mean over the attacked clients)", ROUND_ATTACK),
    "distortion": Metric("log10 of the expected squared error per coordinate, E (Q(a) - a)^2", DISTORTION),
}


class PaperError(ValueError):
    """A paper file that does not say what it must (a bug in the bundled data, not in the user's input)."""


_REPORTED = re.compile(r"^\s*(≈)?\s*(-?\d+(?:\.\d+)?|-?∞)\s*(?:(?:±|\+-|\+/-)\s*(\d+(?:\.\d+)?))?\s*%?\s*$")


def parse_reported(text: str) -> tuple[float, float, bool]:
    """The value, the stated +- half-width (0 when none) and whether the paper says "approximately" (≈) of a
    number as the paper prints it: "82.06±1.35", "91.34", "≈70", "∞". ".84" is refused (write it with its
    leading zero: "0.84")."""
    found = _REPORTED.match(text)
    if found is None:
        raise PaperError(f"cannot read the reported number {text!r} (expected e.g. '82.06', '82.06±1.35', '≈70')")
    value = found.group(2).replace("∞", "inf")
    return float(value), float(found.group(3) or 0.0), found.group(1) is not None


@dataclass(frozen=True)
class Row:
    method: str
    config: dict[str, Any]
    paper: str
    line: int
    column: str = ""
    x: float | None = None
    tolerance: float | None = None
    comparable: bool = True
    why: str = ""

    @property
    def label(self) -> str:
        where = ", ".join(part for part in (self.column, "" if self.x is None else f"x = {self.x:g}") if part)
        return f"{self.method} ({where})" if where else self.method

    @property
    def reported(self) -> tuple[float, float, bool] | None:
        """(value, +- half-width, approximate) as printed; None for a figure that prints no number."""
        return parse_reported(self.paper) if self.paper else None


@dataclass(frozen=True)
class Table:
    id: str
    caption: str
    metric: str
    rows: tuple[Row, ...]
    base: dict[str, Any] | None = None
    rounds: int | None = None
    scale: float = 1.0
    x_label: str = ""
    data: str | None = None
    note: str = ""

    @property
    def kind(self) -> str:
        return METRICS[self.metric].kind


@dataclass(frozen=True)
class Ordering:
    id: str
    quote: str
    table: str
    above: tuple[str, ...]
    below: tuple[str, ...]
    by: float | None = None
    tolerance: float = 0.0


@dataclass(frozen=True)
class Paper:
    id: str
    title: str
    sources: tuple[str, ...]
    data: str
    data_note: str
    base: dict[str, Any]
    budgets: dict[str, dict[str, Any]]
    tables: tuple[Table, ...]
    orderings: tuple[Ordering, ...] = field(default=())

    def table(self, table_id: str) -> Table:
        for t in self.tables:
            if t.id == table_id:
                return t
        raise PaperError(f"{self.id}: no table {table_id!r}")


def paper_ids() -> list[str]:
    """The bundled papers, by id."""
    folder = resources.files("auditkit.reproduction").joinpath("papers")
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def load_paper(paper_id: str) -> Paper:
    """The bundled paper ``paper_id`` (one of :func:`paper_ids`), checked."""
    if paper_id not in paper_ids():
        raise ValueError(f"PAPER must be one of {', '.join(paper_ids())}; got {paper_id!r}")
    text = resources.files("auditkit.reproduction").joinpath("papers", f"{paper_id}.toml").read_text("utf-8")
    raw = tomllib.loads(text)
    tables = tuple(_table(t) for t in raw["tables"])
    paper = Paper(
        id=raw["id"], title=raw["title"], sources=tuple(raw["sources"]), data=raw["data"],
        data_note=raw["data_note"], base=raw["base"], budgets=raw["budget"], tables=tables,
        orderings=tuple(Ordering(o["id"], o["quote"], o["table"], tuple(o["above"]), tuple(o["below"]),
                                 o.get("by"), o.get("tolerance", 0.0)) for o in raw.get("orderings", [])),
    )
    _check(paper)
    return paper


def _table(raw: dict[str, Any]) -> Table:
    default = raw.get("tolerance")
    rows = tuple(Row(**{"tolerance": default, **row}) for row in raw["rows"])
    return Table(raw["id"], raw["caption"], raw["metric"], rows, raw.get("base"), raw.get("rounds"),
                 raw.get("scale", 1.0), raw.get("x_label", ""), raw.get("data"), raw.get("note", ""))


def _check(paper: Paper) -> None:
    if sorted(paper.budgets) != sorted(BUDGETS):
        raise PaperError(f"{paper.id}: budgets must be {', '.join(BUDGETS)}")
    for t in paper.tables:
        if t.metric not in METRICS:
            raise PaperError(f"{paper.id} {t.id}: metric must be one of {', '.join(METRICS)}")
        for row in t.rows:
            reported = row.reported  # parses, or raises
            if reported is not None and reported[2] and row.tolerance is None:
                raise PaperError(f"{paper.id} {t.id} {row.label}: an approximate number needs a tolerance")
    for o in paper.orderings:
        methods = {row.method for row in paper.table(o.table).rows}
        unknown = sorted(set(o.above + o.below) - methods)
        if unknown:
            raise PaperError(f"{paper.id} ordering {o.id}: {unknown} are not rows of {o.table}")
