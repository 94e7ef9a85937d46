"""A reproduction's report (command "reproduce"): the paper's tables beside ours, the orderings it claims,
the settings run."""
from __future__ import annotations

from dataclasses import dataclass
from auditkit.strict_json import dumps_strict
from auditkit.reports.sections.text import number, plural
from auditkit.results.reproduction import OrderingPair, Reproduction, Row, Table

# each verdict of a row or an ordering -> its badge class (the results report's colours: green, red, grey)
REPRODUCTION_CLASSES = {"reproduced": "consistent", "holds": "consistent", "not reproduced": "violated",
                        "reversed": "violated", "not comparable": "inconclusive", "unresolved": "inconclusive"}
REPRODUCTION_SUMMARY_COLUMNS = ("table / figure", "metric", "rows: the paper's number against ours",
                                "claimed orderings, pair by pair")
ORDERING_COLUMNS = ("claim", "column", "above", "below", "above − below", "verdict", "claimed gap")
# "How to read this report" of a reproduction, in the order a reader meets the terms
REPRODUCTION_GLOSSARY = (
    ("paper (line)", "the number as the paper prints it and the line of the seed text that states it; \"compared "
                     "as\": the same number in our unit with the half-width the verdict allows, the ± the paper "
                     "states or what its \"approximately\" or printed precision allows, whichever is wider"),
    ("ours", "the mean over seeds with its two-sided Student-t interval at the confidence in the column's heading; "
             "under it each seed's value and the setting (the configuration run, once per seed) it comes from"),
    ("ours − paper", "our mean minus the paper's number, in our unit; \"-\" where either is missing or infinite"),
    ("reproduced / not reproduced", "the paper's number, widened as above, meets our interval / misses it"),
    ("not comparable", "our run cannot be held to the paper's number: another dataset, fewer rounds than the "
                       "paper's, one seed (no interval), a setting the paper leaves unstated, a point it only "
                       "plots; the row's own reasons are in its \"why\", the whole run's under the intro"),
    ("holds / reversed / unresolved", "a claimed ordering \"A above B\", checked on our runs seed by seed (the same "
                                      "seed gives both settings the same data and initial model): the paired "
                                      "differences' interval is above 0 / below 0 / contains 0"),
    ("claimed gap", "the difference the paper claims between A and B, ± its tolerance: reproduced when it meets "
                    "the paired differences' interval"),
    ("setting", "one configuration (the paper's base overlaid with a row's), run once per seed; rows that share it "
                "share its runs, listed with what each seed measured under \"Settings run\""),
)
CURVES = ("curve", "snr_curve")  # per-round measurements: drawn in the table's figure, not tabulated


def _signed(value: float | None) -> str:
    """``+1.234`` (4 significant digits, with its sign); "-" for None and NaN."""
    return number(value, "+.4g")


def ours(row: Row) -> str:
    """Our mean with its interval, 4 significant digits: "70.12 [68.3, 71.94]" (the mean alone without one)."""
    if row.interval is None:
        return number(row.mean)
    low, high = row.interval
    return f"{number(row.mean)} [{number(low)}, {number(high)}]"


def confidence_heading(document: Reproduction) -> str:
    """"ours [95 % interval]": the ours column's heading, with the document's confidence."""
    return f"ours [{number(100 * document.confidence, 'g')} % interval]"


def _paper_column(table: Table, item: Row | OrderingPair) -> str:
    """A row's or a pair's column of the paper's table, and its point on the figure's x axis: "b = 6, eps1 = 0.1"."""
    if item.x is None:
        return item.column
    return f"{item.column}, {table.x_label or 'x'} = {item.x:g}".lstrip(", ")


def _counts(verdicts: list[str], order: tuple[str, ...]) -> list[tuple[str, str]]:
    """(text, badge class) per verdict present, in ``order``: ("3 reproduced", "consistent")."""
    return [(f"{verdicts.count(v)} {v}", REPRODUCTION_CLASSES[v]) for v in order if verdicts.count(v)]


def setting_labels(document: Reproduction) -> dict[str, str]:
    """Each run's key -> "setting N", numbered in the document's order."""
    return {key: f"setting {i}" for i, key in enumerate(document.runs, start=1)}


def reproduction_intro(document: Reproduction) -> list[str]:
    """The reproduction's opening lines: the verdicts counted, the paper, the budget against the paper's, the data
    and the time, how a verdict is reached, and why no training row of this run can be held to the paper's."""
    b, paper = document.budget, document.paper
    rows = [r.verdict for t in document.tables for r in t.rows]
    pairs = [p.verdict for o in document.orderings for p in o.pairs]
    counted = f"{plural(len(rows), 'row')} of the paper's tables: " + ", ".join(
        text for text, _ in _counts(rows, ("reproduced", "not reproduced", "not comparable")))
    if pairs:
        counted += f"; {plural(len(pairs), 'pair')} of its claimed orderings: " + ", ".join(
            text for text, _ in _counts(pairs, ("holds", "reversed", "unresolved")))
    return [
        counted + ".",
        f"Paper: {paper.title} (sources: {', '.join(paper.sources)}).",
        f"Budget: {b.name}: {plural(b.rounds, 'round')}, {plural(len(b.seeds), 'seed')} (the paper: "
        f"{b.paper_rounds} rounds, {b.paper_seeds} seeds). {b.why}",
        f"Data: {document.dataset} (the paper's: {paper.data_note}). Wall time {number(document.seconds)} s.",
        f"Ours: the mean over seeds with its {number(100 * document.confidence, 'g')} % Student-t interval. "
        "Verdict: reproduced when the paper's number (widened by the ± it states, or by what its 'approximately' "
        "or printed precision allows) meets our interval; not comparable when this run, or the row's setting, "
        "differs from the paper's, or when the paper only plots the point.",
        *(f"Not comparable, every training row: {reason}." for reason in document.not_comparable),
    ]


@dataclass(frozen=True)
class ReproducedRow:
    """One row of a paper's table as the report shows it: the paper's number, ours, the verdict and why."""

    method: str
    column: str
    paper: str
    compared: str
    line: str
    ours: str
    per_seed: str
    difference: str
    verdict: str
    css: str
    why: list[str]


@dataclass(frozen=True)
class PaperTable:
    """One table or figure of the paper: its rows, its note, and the figure we draw of it."""

    id: str
    heading: str
    metric: str
    note: str
    rows: list[ReproducedRow]
    figure: str
    figure_caption: str


def reproduction_figure(index: int) -> str:
    """The name of the figure of the document's ``index``-th table (``figures/<name>.png``)."""
    return f"reproduction-{index}"


def _figure_caption(table: Table, document: Reproduction) -> str:
    percent_ = f"{number(100 * document.confidence, 'g')} %"
    if any(r.x is not None for r in table.rows):
        return (f"{table.id}: ours against {table.x_label or 'x'}, the mean over seeds and its {percent_} band; "
                "the paper's numbers as stars.")
    if table.kind == "train":
        return (f"{table.id}: our mean {table.metric.replace('_', ' ')} per round (lines); the paper's final "
                "number as a star.")
    return f"{table.id}: our means over seeds with their {percent_} intervals; the paper's numbers as stars."


def _why(document: Reproduction, table: Table, row: Row) -> list[str]:
    """The row's own reasons; for a row not comparable without one, the reason that holds for it: the run's (every
    training row's, listed under the intro) or an interval the seeds' values do not give."""
    if row.why or row.verdict != "not comparable":
        return list(row.why)
    if table.kind == "train" and document.not_comparable:
        return ["this run's reasons, for every training row (under the intro)"]
    return ["no interval: the seeds' values are not all finite"]


def _reproduced_row(document: Reproduction, table: Table, row: Row,
                    setting: str) -> ReproducedRow:
    compared = "" if row.paper_value is None else \
        f"compared as {number(row.paper_value)} ± {number(row.paper_plus_minus)}"
    return ReproducedRow(
        method=row.method, column=_paper_column(table, row), paper=row.paper or "(plot)", compared=compared,
        line=f"l. {row.line}", ours=ours(row),
        per_seed=f"per seed: {', '.join(number(v) for v in row.per_seed)}; {setting}",
        difference=_signed(row.difference), verdict=row.verdict, css=REPRODUCTION_CLASSES[row.verdict],
        why=_why(document, table, row))


def paper_tables(document: Reproduction) -> list[PaperTable]:
    """Every table of the paper, in the document's order, with its figure's name and caption."""
    labels = setting_labels(document)
    tables = []
    for i, table in enumerate(document.tables):
        data = f"; data: {table.dataset}" if table.dataset else ""
        rounds = "" if table.rounds is None else f"; {plural(table.rounds, 'round')} (this table's, whatever the budget)"
        tables.append(PaperTable(
            id=table.id, heading=f"{table.id}: {table.caption}",
            metric=f"Metric: {table.metric_description}{data}{rounds}.", note=table.note,
            rows=[_reproduced_row(document, table, row, labels[row.setting]) for row in table.rows],
            figure=reproduction_figure(i), figure_caption=_figure_caption(table, document)))
    return tables


def reproduction_summary(document: Reproduction) -> list[tuple[str, str, list[tuple[str, str]],
                                                                   list[tuple[str, str]]]]:
    """One line per table: (id and caption, metric, its rows' verdicts counted, its orderings' pairs' verdicts
    counted), each count with its badge class."""
    lines = []
    for table in document.tables:
        pairs = [p.verdict for o in document.orderings if o.table == table.id for p in o.pairs]
        lines.append((f"{table.id}: {table.caption}", table.metric.replace("_", " "),
                      _counts([r.verdict for r in table.rows], ("reproduced", "not reproduced", "not comparable")),
                      _counts(pairs, ("holds", "reversed", "unresolved"))))
    return lines


@dataclass(frozen=True)
class OrderingRow:
    """One pair of a claimed ordering, checked on our paired seeds."""

    claim: str
    column: str
    above: str
    below: str
    difference: str
    verdict: str
    css: str
    gap: str
    gap_verdict: str
    gap_css: str


def ordering_rows(document: Reproduction) -> list[OrderingRow]:
    """Every pair of every claimed ordering: above − below with its interval, the verdict, the claimed gap."""
    tables = {t.id: t for t in document.tables}
    rows = []
    for o in document.orderings:
        for p in o.pairs:
            difference = _signed(p.difference)
            if p.interval is not None:
                difference += f" [{_signed(p.interval[0])}, {_signed(p.interval[1])}]"
            gap = p.gap
            rows.append(OrderingRow(
                claim=o.id, column=_paper_column(tables[o.table], p), above=p.above, below=p.below,
                difference=difference, verdict=p.verdict, css=REPRODUCTION_CLASSES[p.verdict],
                gap="" if gap is None else f"claimed {number(gap.claimed, 'g')} ± {number(gap.tolerance, 'g')}",
                gap_verdict="" if gap is None else gap.verdict,
                gap_css="" if gap is None else REPRODUCTION_CLASSES[gap.verdict]))
    return rows


def ordering_quotes(document: Reproduction) -> list[str]:
    """Each claimed ordering as the paper words it: '003 Fig. 2 (003 Fig. 2, test_accuracy): "..."'."""
    return [f"{o.id} ({o.table}, {o.metric}): “{o.quote}”" for o in document.orderings]


@dataclass(frozen=True)
class SettingRun:
    """One setting of a reproduction: the rows that read it, what each seed measured, its config."""

    label: str
    kind: str
    rows: list[str]
    seeds: list[str]
    measured: list[tuple[str, ...]]
    config: str


def settings_run(document: Reproduction) -> list[SettingRun]:
    """Every setting run, in the document's order: the rows that read it ("003 Table I: FL (MLP)"), one line per
    scalar measurement with a value per seed (per-round curves are drawn in the tables' figures), the config as
    strict JSON."""
    labels = setting_labels(document)
    readers: dict[str, list[str]] = {key: [] for key in document.runs}
    for table in document.tables:
        for row in table.rows:
            where = _paper_column(table, row)
            readers[row.setting].append(f"{table.id}: {row.method}" + (f" ({where})" if where else ""))
    runs = []
    for key, run in document.runs.items():
        seeds = list(run.seeds)
        names = [name for name in run.seeds[seeds[0]] if name not in CURVES] if seeds else []
        measured = [(name.replace("_", " "), *(number(run.seeds[s][name]) for s in seeds)) for name in names]
        runs.append(SettingRun(label=labels[key], kind=run.kind.value, rows=readers[key],
                               seeds=[f"seed {s}" for s in seeds], measured=measured,
                               config=dumps_strict(run.config, indent=2, ensure_ascii=False)))
    return runs


def reproduction_provenance(document: Reproduction) -> list[tuple[str, str]]:
    """The reproduction's provenance, one (name, text) pair per fact; the versions are a separate table."""
    p = document.provenance
    return [("auditkit", p.auditkit_version), ("code", p.code), ("plugins", ", ".join(p.plugins) or "none"),
            ("platform", p.platform), ("paper", document.paper.id),
            ("seeds", ", ".join(map(str, document.budget.seeds)))]
