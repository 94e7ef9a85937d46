"""report.html and report.md of a reproduction (``reproduction.json``): per table, the paper's number beside ours
with its interval and the row's verdict; the claimed orderings checked on our runs; a figure per table."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from auditkit.stage_store import replace_atomically
from auditkit.reports.content import number

__all__ = ["render_reproduction"]

_BADGE = {"reproduced": "#2e7d32", "not reproduced": "#c62828", "not comparable": "#757575",
          "holds": "#2e7d32", "reversed": "#c62828", "unresolved": "#757575"}


def _number(value: float | None) -> str:
    return number(value, ".4g")


def ours_text(row: dict[str, Any]) -> str:
    """Our mean with its interval (the document's confidence), 4 significant digits: "70.12 [68.3, 71.9]"."""
    if row["interval"] is None:
        return _number(row["mean"])
    low, high = row["interval"]
    return f"{_number(row['mean'])} [{_number(low)}, {_number(high)}]"


def _difference(row: dict[str, Any]) -> str:
    return "-" if row["difference"] is None else f"{row['difference']:+.3g}"


def _interval(pair: dict[str, Any]) -> str:
    if pair["interval"] is None:
        return f"{pair['difference']:+.3g}"
    low, high = pair["interval"]
    return f"{pair['difference']:+.3g} [{low:+.3g}, {high:+.3g}]"


def _gap(pair: dict[str, Any]) -> str:
    gap = pair.get("gap")
    if gap is None:
        return ""
    return f"claimed {gap['claimed']:g} ± {gap['tolerance']:g}: {gap['verdict']}"


def _column(table: dict[str, Any], row_or_pair: dict[str, Any]) -> str:
    if row_or_pair["x"] is None:
        return row_or_pair["column"]
    return f"{row_or_pair['column']}, {table['x_label'] or 'x'} = {row_or_pair['x']:g}".lstrip(", ")


def _intro(doc: dict[str, Any]) -> list[str]:
    b, paper = doc["budget"], doc["paper"]
    return [
        f"Paper: {paper['title']} (sources: {', '.join(paper['sources'])}).",
        f"Budget: {b['name']}: {b['rounds']} rounds, {len(b['seeds'])} seeds (the paper: {b['paper_rounds']} "
        f"rounds, {b['paper_seeds']} seeds). {b['why']}",
        f"Data: {doc['dataset']} (the paper's: {paper['data_note']}). Wall time {doc['seconds']:.0f} s.",
        f"Ours: the mean over seeds with its {_percent(doc)} Student-t interval. Verdict: reproduced when the paper's number "
        "(widened by the +- it states, or by what its 'approximately' or printed precision allows) meets our "
        "interval; not comparable when this run, or the row's setting, differs from the paper's, or when the paper "
        "only plots the point.",
        *(f"Not comparable, every training row: {reason}." for reason in doc["not_comparable"]),
    ]


def _figure(doc: dict[str, Any], table: dict[str, Any], out: Path, index: int) -> str:
    """One panel per column: ours against x with its interval (rows with ``x``), our mean curve per round
    (training tables), or our means with their intervals (the rest); the paper's numbers as stars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = list(dict.fromkeys(r["column"] for r in table["rows"]))
    fig, axes = plt.subplots(1, len(columns), figsize=(min(6 * len(columns), 18), 4), squeeze=False)
    by_x = any(r["x"] is not None for r in table["rows"])
    for ax, column in zip(axes[0], columns, strict=True):
        rows = [r for r in table["rows"] if r["column"] == column]
        if by_x:
            _against_x(ax, rows, table["x_label"])
        elif table["kind"] == "train":
            _per_round(ax, doc, rows, table["metric"])
        else:
            _means(ax, rows)
        ax.set_title(f"{table['id']}: {column}" if column else table["id"], fontsize=10)
        ax.set_ylabel(table["metric"].replace("_", " "))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    name = f"figures/reproduction-{index}.png"
    replace_atomically(out / name, lambda tmp: fig.savefig(tmp, dpi=110))
    plt.close(fig)
    return name


def _finite(values: list[float | None]) -> list[float]:
    return [float("nan") if v is None or v != v or abs(v) == float("inf") else v for v in values]


def _against_x(ax: Any, rows: list[dict[str, Any]], x_label: str) -> None:
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["x"])
        xs = [r["x"] for r in mine]
        means = _finite([r["mean"] for r in mine])
        low = _finite([r["mean"] if r["interval"] is None else r["interval"][0] for r in mine])
        high = _finite([r["mean"] if r["interval"] is None else r["interval"][1] for r in mine])
        line, = ax.plot(xs, means, marker="o", label=method)
        ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.2)
        stars = [(r["x"], r["paper_value"]) for r in mine if r["paper_value"] is not None]
        if stars:
            ax.plot(*zip(*stars, strict=True), linestyle="none", marker="*", markersize=11, color=line.get_color())
    ax.set_xlabel(x_label or "x")


def _per_round(ax: Any, doc: dict[str, Any], rows: list[dict[str, Any]], metric: str) -> None:
    import numpy as np

    curve_key, scale = ("curve", 100.0) if metric == "test_accuracy" else ("snr_curve", 1.0)
    for row in rows:
        seeds = doc["runs"][row["setting"]]["seeds"]
        curves = [_finite(seeds[str(s)][curve_key]) for s in doc["budget"]["seeds"]]
        curve = scale * np.mean(curves, axis=0)
        line, = ax.plot(np.arange(1, len(curve) + 1), curve, label=row["method"])
        if row["paper_value"] is not None:
            ax.plot([len(curve)], [row["paper_value"]], marker="*", markersize=10, color=line.get_color())
    ax.set_xlabel("round")


def _means(ax: Any, rows: list[dict[str, Any]]) -> None:
    for i, row in enumerate(rows):
        low, high = row["interval"] or (row["mean"], row["mean"])
        bar = ax.errorbar([i], [row["mean"]], yerr=[[row["mean"] - low], [high - row["mean"]]], marker="o",
                          capsize=4, label=row["method"])
        if row["paper_value"] is not None:
            ax.plot([i], [row["paper_value"]], marker="*", markersize=11, color=bar.lines[0].get_color())
    ax.set_xticks(range(len(rows)), [r["method"] for r in rows], rotation=20, ha="right", fontsize=7)


def _metric_line(table: dict[str, Any]) -> str:
    """"Metric: ...; data: cifar10" (the data only for tables that ran on data)."""
    data = f"; data: {table['dataset']}" if table.get("dataset") else ""
    return f"Metric: {table['metric_description']}{data}"


def _percent(doc: dict[str, Any]) -> str:
    """The intervals' confidence as a percentage ("95%"; documents before it was recorded used 95%)."""
    return f"{100 * doc.get('confidence', 0.95):g}%"


def _caption(table: dict[str, Any], percent: str) -> str:
    if any(r["x"] is not None for r in table["rows"]):
        return f"Ours against {table['x_label'] or 'x'}: the mean over seeds and its {percent} band; the paper's numbers (stars)."
    if table["kind"] == "train":
        return f"Our mean {table['metric'].replace('_', ' ')} per round (lines); the paper's final number (stars)."
    return f"Our means over seeds with their {percent} intervals; the paper's numbers (stars)."


def _tables_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["id"]: t for t in doc["tables"]}


def _markdown(doc: dict[str, Any], figures: list[str]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [f"# Reproduction: {doc['paper']['id']}", ""]
    lines += [*(f"- {text}" for text in _intro(doc)), ""]
    for table, figure in zip(doc["tables"], figures, strict=True):
        lines += [f"## {table['id']}: {table['caption']}", "", f"{_metric_line(table)}.", "",
                  *([table["note"], ""] if table.get("note") else []),
                  f"| method | column | paper (line) | ours [{_percent(doc)}] | ours - paper | verdict | why |",
                  "|---|---|---|---|---|---|---|"]
        for row in table["rows"]:
            lines.append(f"| {cell(row['method'])} | {cell(_column(table, row))} | {cell(row['paper'] or '(plot)')} "
                         f"(l. {row['line']}) | {ours_text(row)} | {_difference(row)} | {row['verdict']} | "
                         f"{cell('; '.join(row['why']))} |")
        lines += ["", f"![{table['id']}]({figure})", ""]
    if doc["orderings"]:
        tables = _tables_of(doc)
        lines += ["## Orderings the paper claims", "",
                  f"| claim | column | above | below | above - below [{_percent(doc)}] | verdict | claimed gap |",
                  "|---|---|---|---|---|---|---|"]
        for o in doc["orderings"]:
            for p in o["pairs"]:
                lines.append(f"| {cell(o['id'])} | {cell(_column(tables[o['table']], p))} | {cell(p['above'])} | "
                             f"{cell(p['below'])} | {_interval(p)} | {p['verdict']} | {_gap(p)} |")
        lines += ["", *(f"- {o['id']} ({o['table']}, {o['metric']}): \"{o['quote']}\"" for o in doc["orderings"]), ""]
    return "\n".join(lines)


def _badge(verdict: str) -> str:
    return (f'<span class="badge" style="background:{_BADGE.get(verdict, "#757575")}">'
            f"{html.escape(verdict)}</span>")


def _html(doc: dict[str, Any], figures: list[str]) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>auditkit reproduction: {e(doc['paper']['id'])}</title><style>",
        "body{font-family:sans-serif;margin:2em;max-width:1300px;color:#222}table{border-collapse:collapse;"
        "margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;font-size:14px;vertical-align:top}"
        "th{background:#f3f3f3;text-align:left}.num{text-align:right;white-space:nowrap}"
        ".badge{color:#fff;border-radius:8px;padding:1px 8px;font-size:12px;white-space:nowrap}"
        "img{max-width:100%}.why{color:#555;font-size:12px}.note{background:#f7f7f2;border-left:4px solid #bbb;"
        "padding:6px 10px;max-width:1000px}",
        "</style></head><body>",
        f"<h1>auditkit reproduction: {e(doc['paper']['id'])}</h1>",
        "<ul>", *(f"<li>{e(t)}</li>" for t in _intro(doc)), "</ul>",
    ]
    for table, figure in zip(doc["tables"], figures, strict=True):
        parts += [f"<h2>{e(table['id'])}: {e(table['caption'])}</h2><p>{e(_metric_line(table))}.</p>",
                  *([f"<p class='note'>{e(table['note'])}</p>"] if table.get("note") else []),
                  f"<table><tr><th>method</th><th>column</th><th>paper (line)</th><th>ours [{_percent(doc)}]</th>"
                  "<th>ours - paper</th><th>verdict</th><th>why</th></tr>"]
        for row in table["rows"]:
            why = "<br>".join(e(w) for w in row["why"])
            parts.append(f"<tr><td>{e(row['method'])}</td><td>{e(_column(table, row))}</td>"
                         f"<td class='num'>{e(row['paper'] or '(plot)')} (l. {row['line']})</td>"
                         f"<td class='num'>{e(ours_text(row))}</td><td class='num'>{e(_difference(row))}</td>"
                         f"<td>{_badge(row['verdict'])}</td><td class='why'>{why}</td></tr>")
        parts += ["</table>", f"<img src='{e(figure)}' alt='{e(table['id'])}'>",
                  f"<p class='why'>{e(_caption(table, _percent(doc)))}</p>"]
    if doc["orderings"]:
        tables = _tables_of(doc)
        parts += ["<h2>Orderings the paper claims</h2>",
                  f"<table><tr><th>claim</th><th>column</th><th>above</th><th>below</th><th>above - below [{_percent(doc)}]</th>"
                  "<th>verdict</th><th>claimed gap</th></tr>"]
        for o in doc["orderings"]:
            for p in o["pairs"]:
                parts.append(f"<tr><td>{e(o['id'])}</td><td>{e(_column(tables[o['table']], p))}</td>"
                             f"<td>{e(p['above'])}</td><td>{e(p['below'])}</td><td class='num'>{e(_interval(p))}</td>"
                             f"<td>{_badge(p['verdict'])}</td><td>{e(_gap(p))}</td></tr>")
        parts.append("</table>")
        parts += [f"<p class='why'>{e(o['id'])} ({e(o['table'])}, {e(o['metric'])}): &ldquo;{e(o['quote'])}&rdquo;</p>"
                  for o in doc["orderings"]]
    parts.append("</body></html>")
    return "\n".join(parts)


def render_reproduction(doc: dict[str, Any], out: Path) -> list[Path]:
    """Write report.html, report.md and the figures of a reproduction document into ``out``."""
    figures = [_figure(doc, table, out, i) for i, table in enumerate(doc["tables"])]
    written = []
    for name, text in (("report.html", _html(doc, figures)), ("report.md", _markdown(doc, figures))):
        written.append(replace_atomically(out / name, lambda tmp, text=text: tmp.write_text(text, encoding="utf-8")))
    return written
