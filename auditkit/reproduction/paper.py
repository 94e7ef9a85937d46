"""A paper's reported results, as data: the tables and figures to reproduce, each row's setting and the paper's
number quoted exactly, and the orderings the paper claims.

A paper file (``auditkit/reproduction/papers/<id>.toml``) holds:

* ``id``, ``title``, ``sources`` (the seed papers it quotes), ``data`` (the paper's dataset) and
  ``data_note`` (what it used of it);
* ``[base]``: the raw config tables every setting starts from (the paper's FL training);
* ``[budget.quick]`` / ``[budget.paper]``: ``rounds`` and ``seeds`` (``why`` says where the numbers come from);
* ``[[tables]]``: ``id`` ("003 Table I"), ``caption``, ``metric`` (one of :data:`METRICS`), and ``rows``: each
  with ``method`` (the paper's label), ``column`` (the table's column, e.g. the model), ``config`` (raw tables overlaid on ``base``: model, mechanism, ...),
  ``paper`` (the number verbatim, e.g. "82.06±1.35"), ``line`` (its line in the seed's text), and optionally
  ``comparable = false`` with ``why`` (a setting the paper leaves unstated, an inconsistency);
* ``[[orderings]]``: ``id``, ``quote`` (verbatim), ``table``, and ``above`` / ``below``: method labels of that
  table whose every ``above`` row the paper says beats every ``below`` row of the same column.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

__all__ = ["BUDGETS", "METRICS", "Ordering", "Paper", "PaperError", "Row", "Table", "load_paper", "paper_ids",
           "parse_reported"]

BUDGETS = ("quick", "paper")
METRICS = {"test_accuracy": "final test accuracy (%)"}


class PaperError(ValueError):
    """A paper file that does not say what it must (a bug in the bundled data, not in the user's input)."""


_REPORTED = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:(?:±|\+-|\+/-)\s*(\d+(?:\.\d+)?))?\s*%?\s*$")


def parse_reported(text: str) -> tuple[float, float]:
    """The value and the stated +- half-width (0 when none) of a number as the paper prints it: "82.06±1.35",
    "91.34", ".84" is refused (write it as printed but with its leading zero in ``paper``: "0.84")."""
    found = _REPORTED.match(text)
    if found is None:
        raise PaperError(f"cannot read the reported number {text!r} (expected e.g. '82.06' or '82.06±1.35')")
    return float(found.group(1)), float(found.group(2) or 0.0)


@dataclass(frozen=True)
class Row:
    method: str
    config: dict[str, Any]
    paper: str
    line: int
    column: str = ""
    comparable: bool = True
    why: str = ""

    @property
    def label(self) -> str:
        return f"{self.method} ({self.column})" if self.column else self.method

    @property
    def reported(self) -> tuple[float, float]:
        return parse_reported(self.paper)


@dataclass(frozen=True)
class Table:
    id: str
    caption: str
    metric: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Ordering:
    id: str
    quote: str
    table: str
    above: tuple[str, ...]
    below: tuple[str, ...]


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
    tables = tuple(
        Table(t["id"], t["caption"], t["metric"], tuple(Row(**row) for row in t["rows"])) for t in raw["tables"]
    )
    paper = Paper(
        id=raw["id"], title=raw["title"], sources=tuple(raw["sources"]), data=raw["data"],
        data_note=raw["data_note"], base=raw["base"], budgets=raw["budget"], tables=tables,
        orderings=tuple(Ordering(o["id"], o["quote"], o["table"], tuple(o["above"]), tuple(o["below"]))
                        for o in raw.get("orderings", [])),
    )
    _check(paper)
    return paper


def _check(paper: Paper) -> None:
    if sorted(paper.budgets) != sorted(BUDGETS):
        raise PaperError(f"{paper.id}: budgets must be {', '.join(BUDGETS)}")
    for t in paper.tables:
        if t.metric not in METRICS:
            raise PaperError(f"{paper.id} {t.id}: metric must be one of {', '.join(METRICS)}")
        for row in t.rows:
            row.reported  # noqa: B018 (parses, or raises)
    for o in paper.orderings:
        methods = {row.method for row in paper.table(o.table).rows}
        unknown = sorted(set(o.above + o.below) - methods)
        if unknown:
            raise PaperError(f"{paper.id} ordering {o.id}: {unknown} are not rows of {o.table}")
